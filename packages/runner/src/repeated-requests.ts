import type { Request, RequestResult } from '@flexhelm/core';
import { requestKey } from '@flexhelm/request-cache';

/**
 * HELM serves a request that a run repeats (dyck_language's later trials repeat earlier prompts; instances can share
 * a prompt) from its request cache: the first occurrence is computed, every later one is the cached response with
 * `cached: true`. This gives each repetition the result of the request's first occurrence, marked cached, whatever
 * the executor did with it (a queue of workers or a resumed run may have computed a repetition again).
 */
export function serveRepeatedRequestsFromCache(requests: readonly Request[], results: readonly RequestResult[]): RequestResult[] {
  if (results.length !== requests.length) throw new Error(`serveRepeatedRequestsFromCache: ${results.length} results for ${requests.length} requests`);
  const first = new Map<string, RequestResult>();
  return requests.map((request, i) => {
    // The model is the same for every request of a run, so the request alone identifies the cache entry.
    const key = requestKey('', request);
    const earlier = first.get(key);
    if (earlier) return { ...earlier, cached: true };
    first.set(key, results[i]!);
    return results[i]!;
  });
}
