import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from './api-error.js';
import { bodyTooLarge, JSON_TYPE } from './http-io.js';
import { missingHost, shownPath } from './protocol-errors.js';
import { pathOf } from './request-path.js';
import type { RequestState } from './request-state.js';
import { watchHalfClose } from './watch-half-close.js';

export interface RequestLifecycleContext {
  state: RequestState;
  /** Throws 401 unless the request's Authorization header carries the API key. */
  checkKey: (authorization: string | undefined) => void;
  /** Named in the 413 for a body over it. */
  maxBodyBytes: number;
  log: (message: string) => void;
  accessLog?: (line: string) => void;
}

/**
 * What every request goes through around its route: refusals while shutting down or without a Host header, the
 * in-flight count, the access log, half-close probes and the API key; then errors and unknown paths in OpenAI's shape.
 */
export function registerRequestLifecycle(app: FastifyInstance, ctx: RequestLifecycleContext): void {
  const { state, log } = ctx;

  /** One line per request once its answer is over: method, path, status, prompt/completion tokens, milliseconds. */
  function logAccess(req: FastifyRequest, reply: FastifyReply, startedAtMs: number): void {
    if (!ctx.accessLog) return;
    const u = state.usage.get(req);
    const tokens = u ? `prompt_tokens=${u.prompt_tokens} completion_tokens=${u.completion_tokens}` : 'prompt_tokens=- completion_tokens=-';
    const status = reply.raw.writableFinished || reply.raw.headersSent ? reply.raw.statusCode : 499; // 499: the client left first (nginx's code)
    ctx.accessLog(`${req.method} ${pathOf(req)} ${status} ${tokens} ${Math.round(performance.now() - startedAtMs)} ms`);
  }

  app.addHook('onRequest', async (req, reply) => {
    if (state.closing) {
      reply.code(503).header('connection', 'close').type(JSON_TYPE);
      return reply.send(new ApiError(503, 'the server is shutting down; retry against its replacement', 'server_error').toJSON());
    }
    const noHost = missingHost(req.raw);
    if (noHost) {
      reply.code(noHost.status).header('connection', 'close').type(JSON_TYPE);
      return reply.send(noHost.toJSON());
    }
    state.inFlight++;
    const t0 = performance.now();
    reply.raw.once('close', () => {
      state.inFlight--;
      logAccess(req, reply, t0);
    });
    watchHalfClose(req, reply, state.eventStreams);
    const path = pathOf(req);
    if (path.startsWith('/v1/') || path === '/tokenize' || path === '/detokenize') ctx.checkKey(req.headers.authorization);
    return undefined;
  });

  app.setErrorHandler((err: Error & { code?: string; statusCode?: number }, req, reply) => {
    if (state.abandoned.has(req)) {
      log(`client closed the connection: ${req.method} ${pathOf(req)} (${err.message})`);
      return reply.raw.destroyed ? undefined : reply.raw.end();
    }
    let apiError: ApiError;
    if (err instanceof ApiError) apiError = err;
    else if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') apiError = bodyTooLarge(ctx.maxBodyBytes, Number(req.headers['content-length']));
    else if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) apiError = new ApiError(err.statusCode, err.message, 'invalid_request_error');
    else {
      apiError = new ApiError(500, `internal error: ${err.message ?? String(err)}`, 'server_error');
      log(`internal error on ${req.method} ${req.url}: ${err.stack ?? String(err)}`);
    }
    if (reply.sent || reply.raw.headersSent) return reply.raw.end();
    // A body we refused to read must not be parsed as the next request on this connection.
    if (apiError.status === 413) reply.header('connection', 'close');
    return reply.code(apiError.status).type(JSON_TYPE).send(apiError.toJSON());
  });

  app.setNotFoundHandler(async (req) => {
    const path = shownPath(pathOf(req));
    if (!path.startsWith('/v1/')) throw new ApiError(404, `no such page ${path}: the API lives under /v1 and the viewer at /`, 'invalid_request_error', null, 'not_found');
    throw new ApiError(404, `no endpoint ${req.method} ${path}`, 'invalid_request_error', null, 'not_found');
  });
}
