import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from './api-error.js';
import { parseCompletionRequest, type CompletionLimits, type CompletionParams } from './completion-request.js';
import type { CompletionResponse } from './completion-service.js';
import { disconnectSignal } from './disconnect-signal.js';
import { endpoint } from './endpoint.js';
import { JSON_TYPE, jsonChunks, parseJsonText } from './http-io.js';
import { usageForLog } from './request-state.js';
import { sendEventStream, type EventStreamContext } from './send-event-stream.js';

/**
 * What the routes need from the completions service. `signal` fires when the client goes away before its answer;
 * `stream` yields OpenAI `text_completion` chunks for `stream: true` (absent until the service provides it).
 */
interface Completions {
  complete(params: CompletionParams, options?: { signal?: AbortSignal }): Promise<CompletionResponse>;
  stream?(params: CompletionParams, options: { signal: AbortSignal }): AsyncIterable<object>;
}

export interface CompletionRoutesContext {
  completions: Completions;
  limits: CompletionLimits;
  /** Shared request state, stream limits and log, for `stream: true`. */
  events: EventStreamContext;
}

/** `POST /v1/completions`: one JSON answer, or server-sent events with `stream: true`. */
export function registerCompletionRoutes(app: FastifyInstance, ctx: CompletionRoutesContext): void {
  const { completions, limits, events } = ctx;
  const { state } = events;

  endpoint(app, '/v1/completions', {
    POST: async (req, reply) => {
      const body = parseJsonText(req.body as string | undefined);
      const params = parseCompletionRequest(body, limits);
      const signal = disconnectSignal(req, reply, state.abandoned);
      const stream = (params as { stream?: boolean | null }).stream ?? (body as { stream?: unknown }).stream === true;
      if (stream) return streamCompletion(req, reply, usageForLog(state, req, params), signal);
      const response = await completions.complete(params, { signal });
      state.usage.set(req, response.usage);
      // Choice by choice: echo + top logprobs on many prompts makes megabytes that need not exist as one string.
      return reply.code(200).type(JSON_TYPE).send(Readable.from(jsonChunks(response as unknown as Record<string, unknown>, 'choices')));
    },
  });

  async function streamCompletion(req: FastifyRequest, reply: FastifyReply, params: CompletionParams, signal: AbortSignal): Promise<void> {
    if (!completions.stream) throw new ApiError(400, 'stream=true is not supported: send stream=false (or leave it out) and read the whole response', 'invalid_request_error', 'stream');
    return sendEventStream(events, req, reply, completions.stream(params, { signal }), signal);
  }
}
