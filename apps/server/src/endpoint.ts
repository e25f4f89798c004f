import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from './api-error.js';
import { pathOf } from './request-path.js';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
export type Method = 'GET' | 'POST' | 'DELETE';
export type Handler = (req: FastifyRequest, reply: FastifyReply) => unknown;

/** One path, every method: those without a handler are 405 naming the allowed ones. */
export function endpoint(app: FastifyInstance, url: string, handlers: Partial<Record<Method, Handler>>): void {
  app.route({
    method: METHODS,
    url,
    handler: async (req, reply) => {
      const handler = handlers[req.method as Method];
      if (!handler) {
        const allowed = Object.keys(handlers).join(' or ');
        throw new ApiError(405, `${req.method} is not allowed on ${pathOf(req)}; use ${allowed}`, 'invalid_request_error', null, 'method_not_allowed');
      }
      return handler(req, reply);
    },
  });
}
