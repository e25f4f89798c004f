import { pyFloat } from '@flexhelm/python-compat';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request, type Request } from '@flexhelm/core';
import { Engine } from '@flexhelm/engine';
import { EngineExecutor, type RequestExecutor } from '@flexhelm/runner';
import { loadOptTokenizer } from '@flexhelm/tokenizer';
import { makeTinyOptModel } from '@flexhelm/runner/testing';
import { enqueueShardJobs } from './enqueue-shards.js';
import { queueNameFor } from './queue-names.js';
import { QueueUnavailableError } from './redis-health.js';
import { LocalRedis } from './redis-server.js';
import { parseRedisUrl } from './redis-url.js';
import { requestToJson } from './request-json.js';
import { runOnQueue } from './run-on-queue.js';
import type { ShardJobData } from './shard-job.js';
import { DEFAULT_SHARD_LIMITS, shardLimitProblem } from './shard-limits.js';
import { ShardWorker, type ShardWorkerEvent } from './shard-worker.js';
import { OrtBackend } from '@flexhelm/ort-backend';

const root = mkdtempSync(join(tmpdir(), 'flexhelm-distributed-faults-'));
let redis: LocalRedis;
let engine: Engine;
let executor: EngineExecutor;
const MODEL = 'tiny@faults';

beforeAll(async () => {
  redis = await LocalRedis.start({ dir: join(root, 'redis') });
  const modelDir = join(root, 'tiny');
  makeTinyOptModel(modelDir, 5);
  engine = await Engine.load(modelDir, { backend: new OrtBackend() });
  executor = new EngineExecutor(engine, loadOptTokenizer(modelDir), { modelId: MODEL, maxBatchSize: 4 });
}, 120_000);

afterAll(async () => {
  await engine?.close();
  await redis?.stop();
});

const good = (i: number, fields: Partial<Request> = {}) => request({ model: 'local/tiny', prompt: `Hello ${i}`, max_tokens: 2, temperature: pyFloat(0), num_completions: 1, ...fields });
const shard = (runName: string, requests: Request[], shardIndex = 0): { jobId: string; data: ShardJobData } => ({
  jobId: `shard-${runName}-${shardIndex}`,
  data: { version: 1, modelId: MODEL, runName, shardIndex, shardCount: 1, requests: requests.map(requestToJson) },
});

async function jobOf(id: string) {
  const queue = new Queue(queueNameFor(MODEL), { connection: parseRedisUrl(redis.url) });
  try {
    // The state first: a job read before it is then at least as new (read the other way round, a job that completes
    // in between reads as completed with no return value yet).
    const state = await queue.getJobState(id);
    const job = await queue.getJob(id);
    return { state, attemptsMade: job?.attemptsMade, failedReason: job?.failedReason, returnvalue: job?.returnvalue };
  } finally {
    await queue.close();
  }
}

async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('shard limits', () => {
  it('names the first field over the server limits, with its value and the limit', () => {
    const L = DEFAULT_SHARD_LIMITS;
    expect(L).toEqual({ maxTokens: 512, maxN: 16, maxTopK: 20, maxPromptBytes: 1024 * 1024, maxRequests: 1024 });
    expect(shardLimitProblem([good(0), good(1, { num_completions: 1_000_000 })], L)).toBe('request 1: num_completions is 1000000, above the limit of 16');
    expect(shardLimitProblem([good(0, { num_completions: 0 })], L)).toBe('request 0: num_completions is 0, below 1');
    expect(shardLimitProblem([good(0, { top_k_per_token: 21 })], L)).toBe('request 0: top_k_per_token is 21, above the limit of 20');
    expect(shardLimitProblem([good(0, { max_tokens: 513 })], L)).toMatch(/^request 0: max_tokens is 513, above the limit of 512 \(a worker takes more with --max-tokens N\)$/);
    expect(shardLimitProblem([good(0, { max_tokens: 600 })], { ...L, maxTokens: 600 })).toBeUndefined();
    // 'é' is 2 UTF-8 bytes: 600 000 of them are over 1 MiB although the string has fewer characters.
    expect(shardLimitProblem([good(0, { prompt: 'é'.repeat(600_000) })], L)).toBe('request 0: prompt is 1200000 bytes, above the limit of 1048576');
    expect(shardLimitProblem(Array.from({ length: 1025 }, (_, i) => good(i)), L)).toBe('1025 requests in one shard, above the limit of 1024');
    expect(shardLimitProblem([good(0, { num_completions: 16, top_k_per_token: 20, max_tokens: 512 })], L)).toBeUndefined();
  });

  it('makes the coordinator refuse such a run before queueing anything', async () => {
    const connection = parseRedisUrl(redis.url);
    await expect(runOnQueue([good(0), good(1, { num_completions: 17 })], { connection, modelId: MODEL, runName: 'refused', shardSize: 4 })).rejects.toThrow(
      /refused: request 1: num_completions is 17, above the limit of 16; workers refuse such requests/,
    );
    await expect(runOnQueue([good(0)], { connection, modelId: MODEL, runName: 'refused', shardSize: 2048 })).rejects.toThrow(/above the workers' limit of 1024/);
    expect((await jobOf('shard-refused-0')).state).toBe('unknown');
  });
});

describe('a worker given a poison shard', () => {
  it('fails it at once as unrecoverable (no retries), naming the field and the limit, and serves the next shard', async () => {
    const connection = parseRedisUrl(redis.url);
    const events: ShardWorkerEvent[] = [];
    const worker = await ShardWorker.start({ connection, executor, name: 'p', chunkSize: 4, lockDuration: 5000, onEvent: (e) => events.push(e) });
    try {
      const began = Date.now();
      await enqueueShardJobs(connection, [shard('poison', [good(0), good(1, { num_completions: 1_000_000 })]), shard('after', [good(2), good(3)])]);
      const poison = await until('poison failed', async () => {
        const j = await jobOf('shard-poison-0');
        return j.state === 'failed' ? j : undefined;
      });
      expect(Date.now() - began).toBeLessThan(15_000);
      // attempts: 3 were allowed, one was made: unrecoverable.
      expect(poison.attemptsMade).toBe(1);
      expect(poison.failedReason).toMatch(/^shard 1\/1 of poison \(job shard-poison-0\) refused: request 1: num_completions is 1000000, above the limit of 16/);
      const after = await until('next shard done', async () => {
        const j = await jobOf('shard-after-0');
        return j.state === 'completed' ? j : undefined;
      });
      expect(after.returnvalue).toMatchObject({ computed: 2, skipped: 0, recorded: 2 });
      expect(events).toContainEqual(expect.objectContaining({ type: 'shard-failed', unrecoverable: true }));
      // Jobs that are not flexhelm shards at all fail the same way.
      await enqueueShardJobs(connection, [{ jobId: 'shard-garbage-0', data: { ...shard('garbage', []).data, requests: ['{"prompt": 3}'] } }]);
      const garbage = await until('garbage failed', async () => {
        const j = await jobOf('shard-garbage-0');
        return j.state === 'failed' ? j : undefined;
      });
      expect(garbage.attemptsMade).toBe(1);
      expect(garbage.failedReason).toMatch(/refused: request 0: not a HELM request/);
    } finally {
      await worker.close();
    }
  }, 60_000);
});

describe('stopping a worker in the middle of a shard', () => {
  it('gives the shard back (waiting, not failed) with its finished chunks recorded, and another worker completes it', async () => {
    const connection = parseRedisUrl(redis.url);
    // The second chunk never finishes on this worker (as a long batch would not within the stop bound).
    let calls = 0;
    const stuck: RequestExecutor = {
      modelId: MODEL,
      execute: (rs) => (++calls === 1 ? executor.execute(rs) : new Promise(() => {})),
    };
    const events: ShardWorkerEvent[] = [];
    const first = await ShardWorker.start({ connection, executor: stuck, name: 'first', chunkSize: 2, lockDuration: 30_000, onEvent: (e) => events.push(e) });
    const requests = [0, 1, 2, 3].map((i) => good(100 + i));
    await enqueueShardJobs(connection, [shard('stopped', requests)]);
    await until('first chunk recorded', async () => (events.some((e) => e.type === 'chunk-done') ? true : undefined));
    const began = Date.now();
    await first.stop();
    expect(Date.now() - began).toBeLessThan(5000);
    expect(events).toContainEqual({ type: 'shard-returned', runName: 'stopped', shardIndex: 0, done: 2, total: 4, returned: true });
    const back = await jobOf('shard-stopped-0');
    expect(back.state).toBe('waiting');
    expect(back.attemptsMade).toBe(0);

    const second = await ShardWorker.start({ connection, executor, name: 'second', chunkSize: 2 });
    try {
      const done = await until('completed by the second worker', async () => {
        const j = await jobOf('shard-stopped-0');
        return j.state === 'completed' ? j : undefined;
      });
      expect(done.returnvalue).toMatchObject({ worker: 'second', computed: 2, skipped: 2 });
    } finally {
      await second.close();
    }
  }, 60_000);
});

describe('the coordinator when Redis goes away', () => {
  it('stops with QueueUnavailableError once Redis has been gone longer than redisTimeoutMs', async () => {
    const dead = await LocalRedis.start({ dir: join(root, 'redis-dead') });
    const connection = parseRedisUrl(dead.url);
    // No worker: the run waits for its shard, and Redis dies under it.
    const run = runOnQueue([good(500)], { connection, modelId: MODEL, runName: 'orphan', shardSize: 4, redisTimeoutMs: 1500, pollIntervalMs: 200 });
    await new Promise((r) => setTimeout(r, 500));
    await dead.kill();
    const began = Date.now();
    await expect(run).rejects.toThrow(QueueUnavailableError);
    await expect(run).rejects.toThrow(/lost the connection to Redis \(ECONNREFUSED\) and it did not come back within 2 s/);
    expect(Date.now() - began).toBeLessThan(10_000);
  }, 30_000);
});
