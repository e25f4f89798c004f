import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { request, requestResult, type Request, type RequestResult } from '@flexhelm/core';
import { RequestCache } from '@flexhelm/request-cache';
import { CachingExecutor } from './caching-executor.js';
import type { RequestExecutor } from './request-executor.js';

const dir = mkdtempSync(join(tmpdir(), 'flexhelm-caching-executor-'));

/**
 * An executor whose every result depends on the whole batch it rode in, like a backend whose GEMM blocking follows the
 * row count: the completion names the request and its batch. It records each batch and can fail on the n-th call
 * (a run killed mid-way).
 */
class BatchDependentExecutor implements RequestExecutor {
  readonly modelId = 'batch-dependent';
  readonly batches: string[][] = [];
  constructor(private readonly failOnCall?: number) {}
  async execute(requests: readonly Request[]): Promise<RequestResult[]> {
    const prompts = requests.map((r) => r.prompt);
    if (this.batches.length + 1 === this.failOnCall) throw new Error('killed');
    this.batches.push(prompts);
    const text = (p: string) => `${p} in [${prompts.join(',')}]`;
    return prompts.map((p) => requestResult({ success: true, completions: [{ text: text(p), logprob: -1, tokens: [] }] }));
  }
}

// 10 requests, 3 of them repeated: 7 distinct.
const prompts = ['a', 'b', 'a', 'c', 'd', 'e', 'b', 'f', 'g', 'a'];
const requests = prompts.map((prompt) => request({ prompt }));
const texts = (results: RequestResult[]) => results.map((r) => r.completions[0]!.text);

describe('CachingExecutor', () => {
  it('cuts chunks from the distinct requests in order, whatever the cache holds', async () => {
    const cache = RequestCache.open(join(dir, 'plain.sqlite'));
    const inner = new BatchDependentExecutor();
    const results = await new CachingExecutor(inner, cache, 3).execute(requests);
    expect(inner.batches).toEqual([['a', 'b', 'c'], ['d', 'e', 'f'], ['g']]);
    expect(texts(results)[0]).toBe('a in [a,b,c]');
    // repeats share their first occurrence's result
    expect(texts(results)[2]).toBe(texts(results)[0]);
    expect(texts(results)[9]).toBe(texts(results)[0]);
    expect(cache.count()).toBe(7);
    cache.close();
  });

  it('a run killed mid-way and resumed gives what an uninterrupted run gives, recomputing only unfinished chunks whole', async () => {
    const uninterrupted = RequestCache.open(join(dir, 'fresh.sqlite'));
    const expected = texts(await new CachingExecutor(new BatchDependentExecutor(), uninterrupted, 3).execute(requests));
    uninterrupted.close();

    const path = join(dir, 'resume.sqlite');
    const killed = RequestCache.open(path);
    await expect(new CachingExecutor(new BatchDependentExecutor(2), killed, 3).execute(requests)).rejects.toThrow('killed');
    expect(killed.count()).toBe(3); // the first chunk committed, nothing of the second
    killed.close();

    const resumedCache = RequestCache.open(path);
    const inner = new BatchDependentExecutor();
    const progress: number[] = [];
    const resumed = await new CachingExecutor(inner, resumedCache, 3).execute(requests, (p) => progress.push(p.cachedHits));
    resumedCache.close();
    expect(inner.batches).toEqual([['d', 'e', 'f'], ['g']]);
    expect(texts(resumed)).toEqual(expected);
    // a, b, a, c, b, a: the original requests served from the cache
    expect(progress[0]).toBe(6);
  });

  it('sends a partly cached chunk whole, keeping the cached results', async () => {
    const cache = RequestCache.open(join(dir, 'partial.sqlite'));
    // Another run cached 'e' alone (as part of some other batch).
    cache.putMany([{ modelId: 'batch-dependent', request: request({ prompt: 'e' }), result: requestResult({ success: true, completions: [{ text: 'e from elsewhere', logprob: -1, tokens: [] }] }) }]);
    const inner = new BatchDependentExecutor();
    const results = texts(await new CachingExecutor(inner, cache, 3).execute(requests));
    expect(inner.batches).toEqual([['a', 'b', 'c'], ['d', 'e', 'f'], ['g']]);
    expect(results[4]).toBe('d in [d,e,f]');
    expect(results[5]).toBe('e from elsewhere');
    expect(cache.count()).toBe(7);
    cache.close();
  });

  it('refuses a chunk size that is not a positive integer', () => {
    const cache = RequestCache.open(join(dir, 'bad.sqlite'));
    expect(() => new CachingExecutor(new BatchDependentExecutor(), cache, 0)).toThrow(/chunkSize must be a positive integer, got 0/);
    cache.close();
  });
});
