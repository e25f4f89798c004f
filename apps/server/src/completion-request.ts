import { DEFAULT_MAX_ROWS_PER_REQUEST, MAX_TOP_LOGPROBS } from '@flexhelm/core';
import { z } from 'zod';
import { ApiError } from './api-error.js';

const tokenIds = z.array(z.number().int().nonnegative(), 'token ids must be non-negative integers');

/** OpenAI's `POST /v1/completions` body (the parts flexhelm serves; unknown keys are ignored as OpenAI clients add many). */
export const CompletionRequestSchema = z.object({
  model: z.string().optional(),
  prompt: z.union(
    [z.string(), z.array(z.string()).min(1), tokenIds.min(1), z.array(tokenIds.min(1, 'a token-id prompt must hold at least one id')).min(1)],
    'prompt must be a string, a list of strings, a list of token ids, or a list of token-id lists',
  ),
  max_tokens: z.number().int().nonnegative().nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).lte(1).nullish(),
  n: z.number().int().positive().nullish(),
  stop: z.union([z.string(), z.array(z.string())]).nullish(),
  logprobs: z.number().int().min(0).max(MAX_TOP_LOGPROBS).nullish(),
  echo: z.boolean().nullish(),
  seed: z.number().int().nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).nullish(),
  best_of: z.number().int().positive().nullish(),
  suffix: z.string().nullish(),
  logit_bias: z.record(z.string(), z.number()).nullish(),
  presence_penalty: z.number().nullish(),
  frequency_penalty: z.number().nullish(),
  user: z.string().nullish(),
  skip_special_tokens: z.boolean().nullish(),
});

export interface CompletionLimits {
  /** Largest `max_tokens` accepted. */
  maxTokens: number;
  /** Largest `n`. */
  maxN: number;
  /** Most prompts in one request. */
  maxPrompts: number;
  /** Most rows (prompts × n) in one request. Default `DEFAULT_MAX_ROWS_PER_REQUEST`. */
  maxRowsPerRequest?: number;
}

/** 64 prompts × n 16: the largest request the other default limits allow (shared with distributed workers). */
export { DEFAULT_MAX_ROWS_PER_REQUEST };

/** A prompt as text or as token ids (lm-evaluation-harness sends ids). */
export type PromptInput = { text: string } | { ids: number[] };

export interface CompletionParams {
  model: string | undefined;
  prompts: PromptInput[];
  maxTokens: number;
  temperature: number;
  topP: number;
  n: number;
  stop: string[];
  logprobs: number | undefined;
  echo: boolean;
  seed: number | undefined;
  /** Answer as server-sent events (`CompletionService.stream`). */
  stream: boolean;
  /** With `stream`: a last chunk with `usage` and no choices (OpenAI's `stream_options.include_usage`). */
  includeUsage: boolean;
  /**
   * Token ids that end a completion and are left out of its text and logprobs: a chat model's end-of-turn and eos
   * tokens (chat completions set them; plain completions keep the model's eos as they always have).
   */
  endTokenIds?: readonly number[];
  /** Leave the model's special tokens out of the generated text and its logprobs (vLLM's `skip_special_tokens`, default true). */
  skipSpecialTokens: boolean;
}

/** A body checked against `schema`; the first problem is a 400 naming the parameter (the top-level key). */
export function parseRequestBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!; // a failed parse has at least one issue
  const param = issue.path.length ? String(issue.path[0]) : null;
  throw new ApiError(400, `${issue.path.length ? `${issue.path.join('.')}: ` : ''}${issue.message}`, 'invalid_request_error', param);
}

/**
 * Most `stop` entries one completions or chat request may give, and the longest entry (characters): each is matched
 * against every new piece of text, so they are bounded as the rest of a request is. HELM asks for a few; OpenAI allows 4.
 */
export const MAX_STOP_SEQUENCES = 16;
export const MAX_STOP_CHARS = 1000;

/** OpenAI's `stop` (absent, one string or a list) as a list; an empty, too long or one too many stop sequence is a 400. */
export function stopSequences(stop: string | string[] | null | undefined): string[] {
  const list = stop == null ? [] : typeof stop === 'string' ? [stop] : stop;
  if (list.length > MAX_STOP_SEQUENCES) {
    throw new ApiError(400, `stop has ${list.length} entries, above this server's limit of ${MAX_STOP_SEQUENCES} stop sequences; send fewer`, 'invalid_request_error', 'stop');
  }
  if (list.some((s) => s.length === 0)) throw new ApiError(400, 'stop sequences must not be empty strings', 'invalid_request_error', 'stop');
  const long = list.find((s) => s.length > MAX_STOP_CHARS);
  if (long !== undefined) throw new ApiError(400, `a stop sequence has ${long.length} characters, above this server's limit of ${MAX_STOP_CHARS}; send shorter ones`, 'invalid_request_error', 'stop');
  return list;
}

/** Validates a completions body into plain parameters; every problem is a 400 naming the parameter. */
export function parseCompletionRequest(body: unknown, limits: CompletionLimits): CompletionParams {
  const b = parseRequestBody(CompletionRequestSchema, body);
  if (b.stream_options && !b.stream) throw new ApiError(400, 'stream_options is only allowed with stream=true', 'invalid_request_error', 'stream_options');
  if (b.suffix) throw new ApiError(400, 'suffix is not supported by OPT models: leave it out', 'invalid_request_error', 'suffix');
  if (b.logit_bias && Object.keys(b.logit_bias).length > 0) throw new ApiError(400, 'logit_bias is not supported: leave it out', 'invalid_request_error', 'logit_bias');
  for (const p of ['presence_penalty', 'frequency_penalty'] as const) {
    if (b[p]) throw new ApiError(400, `${p} is not supported: leave it out or send 0`, 'invalid_request_error', p);
  }
  const n = b.n ?? 1;
  if (n > limits.maxN) throw new ApiError(400, `n is ${n}, above this server's limit of ${limits.maxN}`, 'invalid_request_error', 'n');
  if (b.best_of != null && b.best_of !== n) throw new ApiError(400, `best_of (${b.best_of}) must equal n (${n}): ranking extra completions is not supported`, 'invalid_request_error', 'best_of');
  const maxTokens = b.max_tokens ?? 16;
  if (maxTokens > limits.maxTokens) {
    throw new ApiError(400, `max_tokens is ${maxTokens}, above this server's limit of ${limits.maxTokens}; ask for fewer tokens`, 'invalid_request_error', 'max_tokens');
  }
  const stop = stopSequences(b.stop);
  const p = b.prompt;
  let prompts: PromptInput[];
  if (typeof p === 'string') prompts = [{ text: p }];
  else if (typeof p[0] === 'string') prompts = (p as string[]).map((text) => ({ text }));
  else if (typeof p[0] === 'number') prompts = [{ ids: p as number[] }];
  else prompts = (p as number[][]).map((ids) => ({ ids }));
  if (prompts.length > limits.maxPrompts) {
    throw new ApiError(400, `${prompts.length} prompts in one request, above this server's limit of ${limits.maxPrompts}; split the request`, 'invalid_request_error', 'prompt');
  }
  const maxRows = limits.maxRowsPerRequest ?? DEFAULT_MAX_ROWS_PER_REQUEST;
  if (prompts.length * n > maxRows) {
    throw new ApiError(
      400,
      `${prompts.length} prompts × n ${n} = ${prompts.length * n} rows in one request, above this server's limit of ${maxRows} rows ` +
        '(--max-rows-per-request); split the request or ask for a smaller n',
      'invalid_request_error',
      'n',
    );
  }
  return {
    model: b.model,
    prompts,
    maxTokens,
    temperature: b.temperature ?? 1,
    topP: b.top_p ?? 1,
    n,
    stop,
    logprobs: b.logprobs ?? undefined,
    echo: b.echo ?? false,
    seed: b.seed ?? undefined,
    stream: b.stream ?? false,
    includeUsage: Boolean(b.stream_options?.include_usage),
    skipSpecialTokens: b.skip_special_tokens ?? true,
  };
}
