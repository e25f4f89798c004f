import type { FastifyReply, FastifyRequest } from 'fastify';
import { pathOf } from './request-path.js';

/** Aborted when the client closes the connection before its response is complete; the request is then `abandoned`. */
export function disconnectSignal(req: FastifyRequest, reply: FastifyReply, abandoned: WeakSet<FastifyRequest>): AbortSignal {
  const controller = new AbortController();
  reply.raw.once('close', () => {
    if (reply.raw.writableFinished) return;
    abandoned.add(req);
    controller.abort(new Error(`client closed the connection: ${req.method} ${pathOf(req)}`));
  });
  return controller.signal;
}
