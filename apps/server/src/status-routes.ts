import type { FastifyInstance } from 'fastify';
import { ApiError } from './api-error.js';
import type { CompletionBatcher } from './completion-batcher.js';
import { endpoint } from './endpoint.js';
import { JSON_TYPE } from './http-io.js';
import type { RequestState } from './request-state.js';

export interface StatusRoutesContext {
  /** Read for `closing`: both health checks say stopping once shutdown starts. */
  state: RequestState;
  served: string;
  batcher: CompletionBatcher;
  maxBatchSize: number;
}

/** Liveness (`/healthz`), readiness (`/health`) and the batcher's counters (`/v1/stats`). */
export function registerStatusRoutes(app: FastifyInstance, ctx: StatusRoutesContext): void {
  const { state, served, batcher, maxBatchSize } = ctx;
  app.get('/healthz', async (_req, reply) => reply.type(JSON_TYPE).send({ status: state.closing ? 'stopping' : 'ok' }));
  // Readiness (vLLM's /health): 200 while the model serves; 503 once shutting down (and, from `flexhelm-server`'s
  // loading responder, while the model loads).
  app.get('/health', async (_req, reply) => {
    if (!state.closing) return reply.type(JSON_TYPE).send({ status: 'ok', model: served });
    return reply.code(503).type(JSON_TYPE).send({ status: 'stopping', ...new ApiError(503, 'the server is shutting down', 'server_error', null, 'shutting_down').toJSON() });
  });
  endpoint(app, '/v1/stats', { GET: () => ({ ...batcher.stats, maxBatchSize }) });
}
