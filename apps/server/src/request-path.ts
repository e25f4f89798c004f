import type { FastifyRequest } from 'fastify';

/** The request's path without its query or trailing slashes (`/` for the root), as errors and the access log show it. */
export const pathOf = (req: FastifyRequest): string => new URL(req.url, 'http://localhost').pathname.replace(/\/+$/, '') || '/';
