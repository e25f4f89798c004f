import type { Request, RequestResult } from '@flexhelm/core';
import { requestKey, type RequestCache } from '@flexhelm/request-cache';
import type { ExecutionProgress, RequestExecutor } from './request-executor.js';

/** The distinct requests of a call in order of first appearance, and where each original request lands. */
function deduplicate(modelId: string, requests: readonly Request[]): { unique: Request[]; slot: number[] } {
  const index = new Map<string, number>();
  const unique: Request[] = [];
  const slot = requests.map((r) => {
    const key = requestKey(modelId, r);
    let i = index.get(key);
    if (i === undefined) {
      i = unique.length;
      index.set(key, i);
      unique.push(r);
    }
    return i;
  });
  return { unique, slot };
}

/**
 * Serves requests from the on-disk cache and sends the rest to the inner executor in chunks, writing each chunk to the
 * cache in one transaction as soon as it completes. A run killed at any point loses at most the chunk in flight.
 *
 * Chunks are cut from the call's full (deduplicated) request list in its order, never from the cache misses: a chunk
 * whose requests are all cached is skipped whole, any other chunk is sent whole. So a recomputed chunk always has the
 * composition it had the first time, and a backend whose numbers depend on the batch (oneDNN's bf16 GEMMs pick their
 * blocking by row count) gives a resumed run the same results as an uninterrupted one. Results already in the cache
 * win over the recomputed ones, so the files never depend on which run computed them.
 */
export class CachingExecutor implements RequestExecutor {
  readonly modelId: string;

  constructor(
    private readonly inner: RequestExecutor,
    private readonly cache: RequestCache,
    private readonly chunkSize = 32,
  ) {
    if (!Number.isInteger(chunkSize) || chunkSize < 1) throw new Error(`CachingExecutor: chunkSize must be a positive integer, got ${chunkSize}`);
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
    // Distinct requests only: HELM runs often repeat a request (same prompt in several trials).
    const { unique, slot } = deduplicate(this.modelId, requests);
    const results: (RequestResult | undefined)[] = unique.map((r) => this.lookup(r));
    const countDone = () => slot.filter((i) => results[i] !== undefined).length;
    const cachedHits = countDone();
    let generatedTokens = 0;
    onProgress?.({ done: cachedHits, total: requests.length, generatedTokens, cachedHits });
    for (let start = 0; start < unique.length; start += this.chunkSize) {
      const end = Math.min(unique.length, start + this.chunkSize);
      const chunk = unique.slice(start, end);
      const misses = chunk.map((_, k) => start + k).filter((i) => results[i] === undefined);
      if (misses.length === 0) continue;
      const fresh = await this.inner.execute(chunk);
      if (fresh.length !== chunk.length) throw new Error(`CachingExecutor: the executor returned ${fresh.length} results for ${chunk.length} requests`);
      this.cache.putMany(misses.map((i) => ({ modelId: this.modelId, request: unique[i]!, result: fresh[i - start]! })));
      for (const i of misses) {
        results[i] = fresh[i - start];
        generatedTokens += fresh[i - start]!.completions.reduce((s, c) => s + c.tokens.length, 0);
      }
      onProgress?.({ done: countDone(), total: requests.length, generatedTokens, cachedHits });
    }
    return slot.map((i) => results[i]!);
  }
}
