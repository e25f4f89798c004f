import type { Request, RequestResult } from '@flexhelm/core';
import { requestKey, type RequestCache } from '@flexhelm/request-cache';
import type { ExecutionProgress, RequestExecutor } from '@flexhelm/runner';

/**
 * Reports a job's generated tokens as the whole run's, not only this attempt's: a run resumed after a restart finds
 * part of its requests in the cache, and the tokens of those results count as generated (they were, before the
 * restart). Wraps the job's CachingExecutor over the same cache.
 */
export class CacheCountingExecutor implements RequestExecutor {
  readonly modelId: string;

  constructor(
    private readonly inner: RequestExecutor,
    private readonly cache: RequestCache,
  ) {
    this.modelId = inner.modelId;
  }

  /** Tokens of the distinct requests already in the cache. */
  private cachedTokens(requests: readonly Request[]): number {
    const seen = new Set<string>();
    let tokens = 0;
    for (const r of requests) {
      const key = requestKey(this.modelId, r);
      if (seen.has(key)) continue;
      seen.add(key);
      const hit = this.cache.get(this.modelId, r);
      if (hit) tokens += hit.completions.reduce((s, c) => s + c.tokens.length, 0);
    }
    return tokens;
  }

  execute(requests: readonly Request[], onProgress?: (p: ExecutionProgress) => void): Promise<RequestResult[]> {
    const before = onProgress ? this.cachedTokens(requests) : 0;
    return this.inner.execute(requests, onProgress && ((p) => onProgress({ ...p, generatedTokens: before + p.generatedTokens })));
  }
}
