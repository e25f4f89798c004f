import type { Request, RequestResult } from '@flexhelm/core';
import { requestKey, type RequestCache } from '@flexhelm/request-cache';
import type { ExecutionProgress, RequestExecutor } from './request-executor.js';

/**
 * Serves requests from the on-disk cache and sends only the misses to the inner executor, in chunks, writing each
 * chunk to the cache as soon as it completes. A run killed at any point loses at most the chunk in flight.
 */
export class CachingExecutor implements RequestExecutor {
  readonly modelId: string;

  constructor(
    private readonly inner: RequestExecutor,
    private readonly cache: RequestCache,
    private readonly chunkSize = 32,
  ) {
    this.modelId = inner.modelId;
  }

  /**
   * The cache is this run's resume journal: a result computed by an earlier, interrupted attempt is reported as it
   * was computed (`cached: false`), so a resumed run writes the same files as an uninterrupted one.
   */
  private lookup(request: Request): RequestResult | undefined {
    const hit = this.cache.get(this.modelId, request);
    return hit && { ...hit, cached: false };
  }

  async execute(requests: readonly Request[], onProgress?: (p: ExecutionProgress) => void): Promise<RequestResult[]> {
    const results: (RequestResult | undefined)[] = requests.map((r) => this.lookup(r));
    const missing = requests.map((_, i) => i).filter((i) => results[i] === undefined);
    const cachedHits = requests.length - missing.length;
    let generatedTokens = 0;
    onProgress?.({ done: cachedHits, total: requests.length, generatedTokens, cachedHits });
    // Distinct requests only: HELM runs often repeat a request (same prompt in several trials).
    for (let start = 0; start < missing.length; start += this.chunkSize) {
      const indices = missing.slice(start, start + this.chunkSize).filter((i) => results[i] === undefined);
      const unique = new Map<string, number[]>();
      for (const i of indices) {
        const hit = this.lookup(requests[i]);
        if (hit) {
          results[i] = hit;
          continue;
        }
        const key = requestKey(this.modelId, requests[i]);
        unique.set(key, [...(unique.get(key) ?? []), i]);
      }
      const groups = [...unique.values()];
      const fresh = await this.inner.execute(groups.map((g) => requests[g[0]]));
      this.cache.putMany(groups.map((g, k) => ({ modelId: this.modelId, request: requests[g[0]], result: fresh[k] })));
      groups.forEach((g, k) => {
        for (const i of g) results[i] = fresh[k];
        generatedTokens += fresh[k].completions.reduce((s, c) => s + c.tokens.length, 0);
      });
      const done = results.filter((r) => r !== undefined).length;
      onProgress?.({ done, total: requests.length, generatedTokens, cachedHits });
    }
    return results as RequestResult[];
  }
}
