/**
 * What one completion request may ask of the engine, by default. The server refuses more with a 400 (its `--max-tokens`
 * and `--max-rows-per-request` can change two of them); a distributed worker fails a shard that asks more as
 * unrecoverable. They live here so that both enforce the same numbers.
 */
/** Largest `max_tokens` (server `--max-tokens`, worker `--max-tokens`). */
export const DEFAULT_MAX_TOKENS = 512;
/** Largest `n` / HELM's `num_completions`. */
export const DEFAULT_MAX_N = 16;
/** Largest `logprobs` / `top_logprobs` / HELM's `top_k_per_token` (OpenAI's own cap). */
export const MAX_TOP_LOGPROBS = 20;
/** Most prompts in one completions request. */
export const DEFAULT_MAX_PROMPTS = 64;
/** Most rows (prompts × n) in one completions request; also the most requests in one distributed shard. */
export const DEFAULT_MAX_ROWS_PER_REQUEST = 1024;
/** Largest request body (bytes); no prompt the server accepts is longer, so a worker refuses a longer one too. */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
