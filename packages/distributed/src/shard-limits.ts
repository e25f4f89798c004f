import { DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_N, DEFAULT_MAX_ROWS_PER_REQUEST, DEFAULT_MAX_TOKENS, MAX_TOP_LOGPROBS, type Request } from '@flexhelm/core';

/**
 * What one shard may ask of a worker: the server's request limits (`@flexhelm/core`), so a job can never make a
 * worker do more than one server request could. A shard over them fails at once as unrecoverable.
 */
export interface ShardLimits {
  /** Largest `max_tokens` (worker `--max-tokens`; the server's default). */
  maxTokens: number;
  /** Largest `num_completions` (the server's `n`). */
  maxN: number;
  /** Largest `top_k_per_token` (the server's `logprobs`). */
  maxTopK: number;
  /** Longest prompt in UTF-8 bytes (the server's largest body). */
  maxPromptBytes: number;
  /** Most requests in one shard (the server's rows per request). */
  maxRequests: number;
}

export const DEFAULT_SHARD_LIMITS: Readonly<ShardLimits> = {
  maxTokens: DEFAULT_MAX_TOKENS,
  maxN: DEFAULT_MAX_N,
  maxTopK: MAX_TOP_LOGPROBS,
  maxPromptBytes: DEFAULT_MAX_BODY_BYTES,
  maxRequests: DEFAULT_MAX_ROWS_PER_REQUEST,
};

/** Longest request JSON read from a job: the longest prompt, every character escaped (`\uXXXX`), plus the other fields. */
export function maxRequestJsonChars(limits: ShardLimits): number {
  return limits.maxPromptBytes * 6 + 65_536;
}

/** The first field of `requests` over `limits`, as a sentence naming the field, its value and the limit; else undefined. */
export function shardLimitProblem(requests: readonly Request[], limits: ShardLimits): string | undefined {
  if (requests.length > limits.maxRequests) return `${requests.length} requests in one shard, above the limit of ${limits.maxRequests}`;
  for (const [i, r] of requests.entries()) {
    const range = (field: string, value: number, min: number, max: number, flag = '') =>
      value < min ? `request ${i}: ${field} is ${value}, below ${min}` : value > max ? `request ${i}: ${field} is ${value}, above the limit of ${max}${flag}` : undefined;
    const problem =
      range('num_completions', r.num_completions, 1, limits.maxN) ??
      range('top_k_per_token', r.top_k_per_token, 0, limits.maxTopK) ??
      range('max_tokens', r.max_tokens, 0, limits.maxTokens, ' (a worker takes more with --max-tokens N)');
    if (problem) return problem;
    // Bytes only when the characters could exceed the limit (a character is at most 3 UTF-8 bytes per UTF-16 unit).
    if (r.prompt.length * 3 > limits.maxPromptBytes) {
      const bytes = Buffer.byteLength(r.prompt, 'utf8');
      if (bytes > limits.maxPromptBytes) return `request ${i}: prompt is ${bytes} bytes, above the limit of ${limits.maxPromptBytes}`;
    }
  }
  return undefined;
}
