import { pyFloat } from '@flexhelm/python-compat';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { request, requestResult, type Request } from '@flexhelm/core';
import { Engine } from '@flexhelm/engine';
import { requestKey } from '@flexhelm/request-cache';
import { EngineExecutor, type RequestExecutor } from '@flexhelm/runner';
import { loadOptTokenizer, } from '@flexhelm/tokenizer';
import { formatQueueStatus, queueStatus, retryFailedShards } from './queue-status.js';
import { LocalRedis } from './redis-server.js';
import { parseRedisUrl } from './redis-url.js';
import { requestFromJson, requestToJson } from './request-json.js';
import { ResultStore } from './result-store.js';
import { runOnQueue, ShardFailedError } from './run-on-queue.js';
import { ShardWorker } from './shard-worker.js';
import { makeTinyOptModel } from '@flexhelm/runner/testing';
import { OrtBackend } from '@flexhelm/ort-backend';

const root = mkdtempSync(join(tmpdir(), 'flexhelm-distributed-'));
let redis: LocalRedis;
let engine: Engine;
let executor: EngineExecutor;

beforeAll(async () => {
  // A missing redis-server fails here with a message saying how to install it (never a silent skip).
  redis = await LocalRedis.start({ dir: join(root, 'redis') });
  const modelDir = join(root, 'tiny');
  makeTinyOptModel(modelDir, 5);
  engine = await Engine.load(modelDir, { backend: new OrtBackend() });
  executor = new EngineExecutor(engine, loadOptTokenizer(modelDir), { modelId: 'tiny@seed5', maxBatchSize: 4 });
}, 120_000);

afterAll(async () => {
  await engine?.close();
  await redis?.stop();
});

const prompts = ['The cat', 'A B C D', 'One two three', 'Hello', 'The dog', 'Paris is', 'x y z', '1 2 3 4 5', 'Once upon a time', 'The end'];
const requests: Request[] = prompts.map((prompt, i) => request({ model: 'local/tiny', prompt, max_tokens: 3, temperature: pyFloat(0), echo_prompt: i === 3, num_completions: 1, stop_sequences: ['\n'] }));

describe('request JSON', () => {
  it('round-trips HELM requests exactly, ints and floats apart', () => {
    for (const r of [...requests, request({ prompt: 'p', temperature: 0.7, top_p: pyFloat(1), random: 'r1' })]) {
      expect(requestToJson(requestFromJson(requestToJson(r)))).toBe(requestToJson(r));
    }
    expect(() => requestFromJson('{"prompt": 3}', 'job j')).toThrow(/job j: not a HELM request.*prompt/);
    expect(() => requestFromJson('[1]', 'job j')).toThrow(/expected a JSON object/);
  });
});

describe('ResultStore', () => {
  it('keeps the first value of a request written twice and counts the duplicate', async () => {
    const client = new Redis({ ...parseRedisUrl(redis.url), lazyConnect: true });
    await client.connect();
    const store = new ResultStore(client);
    const a = requestResult({ success: true, completions: [{ text: 'a', logprob: -1.5, tokens: [] }], cached: false });
    const b = requestResult({ success: true, completions: [{ text: 'b', logprob: -2.5, tokens: [] }], cached: false });
    expect(await store.putMany([{ key: 'k-store-1', result: a }])).toBe(1);
    expect(await store.putMany([{ key: 'k-store-1', result: b }, { key: 'k-store-2', result: b }])).toBe(1);
    const [first, second, missing] = await store.getMany(['k-store-1', 'k-store-2', 'k-store-3']);
    expect(first!.completions[0]!.text).toBe('a');
    expect(second!.completions[0]!.text).toBe('b');
    expect(missing).toBeUndefined();
    expect(await store.has(['k-store-1', 'k-store-3'])).toEqual([true, false]);
    expect(await store.duplicateWrites()).toBe(1);
    await client.flushdb();
    client.disconnect();
  });
});

describe('runOnQueue with in-process workers', () => {
  it('returns the results a direct execution gives, records each request once, and re-submission adds no work', async () => {
    const connection = parseRedisUrl(redis.url);
    // Batches as the workers form them (shards of 4 = one engine chunk): float sums depend on the batch's padding.
    const direct = [];
    for (let start = 0; start < requests.length; start += 4) direct.push(...(await executor.execute(requests.slice(start, start + 4))));
    const workers = await Promise.all(['w1', 'w2'].map((name) => ShardWorker.start({ connection, executor, name, chunkSize: 4 })));
    const progress: number[] = [];
    try {
      const out = await runOnQueue(requests, { connection, modelId: executor.modelId, runName: 'toy:a=1', shardSize: 4, pollIntervalMs: 200, onProgress: (p) => progress.push(p.done) });
      expect(out.shards).toBe(3);
      expect(out.results.map((r) => r.completions.map((c) => [c.text, c.logprob, c.tokens.map((t) => t.text)]))).toEqual(
        direct.map((r) => r.completions.map((c) => [c.text, c.logprob, c.tokens.map((t) => t.text)])),
      );
      expect(progress.at(-1)).toBe(requests.length);
      expect(out.timings).toHaveLength(3);
      for (const t of out.timings) expect(t.queuedMs).toBeGreaterThanOrEqual(0);

      const client = new Redis({ ...connection, lazyConnect: true });
      await client.connect();
      const store = new ResultStore(client);
      expect(await store.count()).toBe(new Set(requests.map((r) => requestKey(executor.modelId, r))).size);
      expect(await store.duplicateWrites()).toBe(0);
      client.disconnect();

      const again = await runOnQueue(requests, { connection, modelId: executor.modelId, runName: 'toy:a=1', shardSize: 4, pollIntervalMs: 200 });
      expect(again.shardsAlreadyDone).toBe(3);
      expect(again.alreadyRecorded).toBe(requests.length);
      const status = await queueStatus(connection);
      const q = status.queues.find((x) => x.modelId === executor.modelId)!;
      expect(q.runs.get('toy:a=1')).toEqual({ waiting: 0, active: 0, done: 3, failed: 0 });
      expect([...q.workers.values()].reduce((s, c) => s + c.done, 0)).toBe(3);
      expect(q.connectedWorkers).toEqual(['w1', 'w2']);
      expect(formatQueueStatus(status)).toMatch(/toy:a=1\s+0\s+0\s+3\s+0/);
    } finally {
      await Promise.all(workers.map((w) => w.close()));
    }
  }, 60_000);

  it('reports shards that failed every attempt with their error, and `retryFailedShards` runs them again', async () => {
    const connection = parseRedisUrl(redis.url);
    const broken: RequestExecutor = {
      modelId: 'tiny@broken',
      execute: async () => {
        throw new Error('out of memory while allocating the KV cache');
      },
    };
    const bad = await ShardWorker.start({ connection, executor: broken, name: 'bad', chunkSize: 4 });
    const run = () => runOnQueue(requests.slice(0, 4), { connection, modelId: 'tiny@broken', runName: 'toy:b=1', shardSize: 4, attempts: 1, pollIntervalMs: 200 });
    await expect(run()).rejects.toThrow(ShardFailedError);
    await expect(run()).rejects.toThrow(/shard 0 after 1 attempt\(s\): out of memory.*flexhelm queue retry/);
    await bad.close();
    const status = await queueStatus(connection);
    const q = status.queues.find((x) => x.modelId === 'tiny@broken')!;
    expect(q.failures).toEqual([expect.objectContaining({ runName: 'toy:b=1', shardIndex: 0, attempts: 1, error: 'out of memory while allocating the KV cache' })]);
    expect(formatQueueStatus(status)).toMatch(/FAILED toy:b=1 shard 0 after 1 attempt\(s\): out of memory/);

    // The cause is fixed (a working worker of the same model id), the shard retried: the run completes.
    const fixed: RequestExecutor = { modelId: 'tiny@broken', execute: (rs) => executor.execute(rs) };
    const good = await ShardWorker.start({ connection, executor: fixed, name: 'good', chunkSize: 4 });
    try {
      expect(await retryFailedShards(connection, 'toy:b=1')).toBe(1);
      const out = await run();
      expect(out.results).toHaveLength(4);
      expect((await queueStatus(connection)).queues.find((x) => x.modelId === 'tiny@broken')!.failures).toEqual([]);
    } finally {
      await good.close();
    }
  }, 60_000);

  it('fails a shard whose executor returns fewer results than requests, saying so', async () => {
    const connection = parseRedisUrl(redis.url);
    const short: RequestExecutor = { modelId: 'tiny@short', execute: async (rs) => (await executor.execute(rs)).slice(1) };
    const worker = await ShardWorker.start({ connection, executor: short, name: 'short', chunkSize: 4 });
    try {
      const run = runOnQueue(requests.slice(0, 4), { connection, modelId: 'tiny@short', runName: 'toy:c=1', shardSize: 4, attempts: 1, pollIntervalMs: 200 });
      await expect(run).rejects.toThrow(/executor tiny@short returned 3 results for 4 requests/);
    } finally {
      await worker.close();
    }
  }, 60_000);
});
