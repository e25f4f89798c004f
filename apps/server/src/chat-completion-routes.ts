import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { ApiError } from './api-error.js';
import { parseChatRequest } from './chat-request.js';
import type { ChatService } from './chat-service.js';
import type { CompletionLimits } from './completion-request.js';
import { disconnectSignal } from './disconnect-signal.js';
import { endpoint } from './endpoint.js';
import { JSON_TYPE, jsonChunks, parseJsonText } from './http-io.js';
import { usageForLog } from './request-state.js';
import { sendEventStream, type EventStreamContext } from './send-event-stream.js';

export interface ChatCompletionRoutesContext {
  /** Absent when the model has no chat template: the route then refuses every request saying so. */
  chat: ChatService | undefined;
  /** The model name clients send, named in the refusal. */
  served: string;
  limits: CompletionLimits;
  /** Shared request state, stream limits and log, for `stream: true`. */
  events: EventStreamContext;
}

/** `POST /v1/chat/completions`: one JSON answer, or server-sent events with `stream: true`. */
export function registerChatCompletionRoutes(app: FastifyInstance, ctx: ChatCompletionRoutesContext): void {
  const { chat, served, limits, events } = ctx;
  const { state } = events;
  endpoint(app, '/v1/chat/completions', {
    POST: async (req, reply) => {
      const body = parseJsonText(req.body as string | undefined);
      if (!chat) {
        throw new ApiError(400, `the model '${served}' has no chat template (no chat_template in its tokenizer_config.json), so it serves /v1/completions only`, 'invalid_request_error', 'model', 'model_not_chat');
      }
      const params = parseChatRequest(body, limits);
      const signal = disconnectSignal(req, reply, state.abandoned);
      if (params.stream) return sendEventStream(events, req, reply, await chat.stream(usageForLog(state, req, params), { signal }), signal);
      const response = await chat.complete(params, { signal });
      state.usage.set(req, response.usage);
      return reply.code(200).type(JSON_TYPE).send(Readable.from(jsonChunks(response as unknown as Record<string, unknown>, 'choices')));
    },
  });
}
