import { MAX_TOP_LOGPROBS } from '@flexhelm/core';
import { z } from 'zod';
import { ApiError } from './api-error.js';
import type { TemplateMessage } from './text-worker-protocol.js';
import { parseRequestBody, stopSequences, type CompletionLimits } from './completion-request.js';

const textPart = z.object({ type: z.literal('text'), text: z.string() });
const content = z.union([z.string(), z.array(textPart).min(1)], 'content must be a string or a list of {"type": "text", "text": …} parts');

/** OpenAI's `POST /v1/chat/completions` body (the parts flexhelm serves; unknown keys are ignored as clients add many). */
export const ChatRequestSchema = z.object({
  model: z.string().optional(),
  messages: z
    .array(
      z.object({
        role: z.enum(['system', 'developer', 'user', 'assistant'], 'role must be one of system, developer, user, assistant'),
        content,
        name: z.string().max(256).optional(),
      }),
    )
    .min(1, 'messages must hold at least one message'),
  max_tokens: z.number().int().nonnegative().nullish(),
  max_completion_tokens: z.number().int().nonnegative().nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).lte(1).nullish(),
  n: z.number().int().positive().nullish(),
  stop: z.union([z.string(), z.array(z.string())]).nullish(), // counted by stopSequences, as for completions
  seed: z.number().int().nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).max(MAX_TOP_LOGPROBS).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).nullish(),
  logit_bias: z.record(z.string(), z.number()).nullish(),
  presence_penalty: z.number().nullish(),
  frequency_penalty: z.number().nullish(),
  tools: z.array(z.unknown()).nullish(),
  tool_choice: z.unknown().optional(),
  response_format: z.object({ type: z.string() }).nullish(),
  user: z.string().nullish(),
  skip_special_tokens: z.boolean().nullish(),
});

export interface ChatParams {
  model: string | undefined;
  messages: TemplateMessage[];
  /** Undefined: as many as the window leaves after the prompt, up to the server's `max_tokens` limit. */
  maxTokens: number | undefined;
  temperature: number;
  topP: number;
  n: number;
  stop: string[];
  seed: number | undefined;
  /** Top alternatives per token when `logprobs` is true (0 = the chosen token's logprob only); undefined = no logprobs. */
  topLogprobs: number | undefined;
  stream: boolean;
  includeUsage: boolean;
  /** vLLM's `skip_special_tokens` (default true): special tokens are left out of the answer's text and logprobs. */
  skipSpecialTokens: boolean;
}

/** Validates a chat completions body; every problem is a 400 naming the parameter. */
export function parseChatRequest(body: unknown, limits: CompletionLimits): ChatParams {
  const b = parseRequestBody(ChatRequestSchema, body);
  const refuse = (param: string, message: string): never => {
    throw new ApiError(400, message, 'invalid_request_error', param);
  };
  if (b.stream_options && !b.stream) refuse('stream_options', 'stream_options is only allowed with stream=true');
  if (b.tools && b.tools.length > 0) refuse('tools', 'tools (function calling) are not supported: leave them out');
  if (b.response_format && b.response_format.type !== 'text') refuse('response_format', `response_format ${JSON.stringify(b.response_format.type)} is not supported: leave it out or send {"type": "text"}`);
  if (b.logit_bias && Object.keys(b.logit_bias).length > 0) refuse('logit_bias', 'logit_bias is not supported: leave it out');
  for (const p of ['presence_penalty', 'frequency_penalty'] as const) if (b[p]) refuse(p, `${p} is not supported: leave it out or send 0`);
  if (b.top_logprobs != null && !b.logprobs) refuse('top_logprobs', 'top_logprobs needs logprobs=true');
  const n = b.n ?? 1;
  if (n > limits.maxN) refuse('n', `n is ${n}, above this server's limit of ${limits.maxN}`);
  if (b.max_tokens != null && b.max_completion_tokens != null && b.max_tokens !== b.max_completion_tokens) {
    refuse('max_completion_tokens', `max_tokens (${b.max_tokens}) and max_completion_tokens (${b.max_completion_tokens}) differ: send one of them`);
  }
  const maxTokens = b.max_completion_tokens ?? b.max_tokens ?? undefined;
  const param = b.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens';
  if (maxTokens !== undefined && maxTokens > limits.maxTokens) refuse(param, `${param} is ${maxTokens}, above this server's limit of ${limits.maxTokens}; ask for fewer tokens`);
  const stop = stopSequences(b.stop);
  const messages = b.messages.map((m): TemplateMessage => {
    const text = typeof m.content === 'string' ? m.content : m.content.map((p) => p.text).join('');
    return m.name === undefined ? { role: m.role, content: text } : { role: m.role, content: text, name: m.name };
  });
  return {
    model: b.model,
    messages,
    maxTokens,
    temperature: b.temperature ?? 1,
    topP: b.top_p ?? 1,
    n,
    stop,
    seed: b.seed ?? undefined,
    topLogprobs: b.logprobs ? (b.top_logprobs ?? 0) : undefined,
    stream: b.stream ?? false,
    includeUsage: Boolean(b.stream_options?.include_usage),
    skipSpecialTokens: b.skip_special_tokens ?? true,
  };
}
