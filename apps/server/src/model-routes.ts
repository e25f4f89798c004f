import type { FastifyInstance } from 'fastify';
import { ApiError } from './api-error.js';
import { endpoint } from './endpoint.js';

export interface ModelRoutesContext {
  /** The model name clients send as `model`. */
  served: string;
  /** Unix seconds the server started, OpenAI's `created`. */
  startedAt: number;
  maxPositions: number;
}

/** `GET /v1/models` and `GET /v1/models/<id>`: the one model this server serves. */
export function registerModelRoutes(app: FastifyInstance, ctx: ModelRoutesContext): void {
  const { served } = ctx;
  const model = () => ({ id: served, object: 'model', created: ctx.startedAt, owned_by: 'flexhelm', max_context_length: ctx.maxPositions });
  endpoint(app, '/v1/models', { GET: () => ({ object: 'list', data: [model()] }) });
  // Model names hold a "/" (facebook/opt-125m): the id is the rest of the path.
  endpoint(app, '/v1/models/*', {
    GET: (req) => {
      const id = (req.params as { '*': string })['*'].replace(/\/+$/, '');
      if (id !== served) {
        throw new ApiError(404, `The model '${id}' does not exist on this server; it serves '${served}'`, 'invalid_request_error', 'model', 'model_not_found');
      }
      return model();
    },
  });
}
