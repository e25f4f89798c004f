import { Worker, UnrecoverableError, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { requestKey } from '@flexhelm/request-cache';
import type { RequestExecutor } from '@flexhelm/runner';
import { MODELS_KEY, queueNameFor } from './queue-names.js';
import type { RedisConnection } from './redis-url.js';
import { requestFromJson } from './request-json.js';
import { ResultStore } from './result-store.js';
import { parseShardJobData, type ShardJobData, type ShardJobResult, type ShardProgress } from './shard-job.js';

export interface ShardWorkerOptions {
  connection: RedisConnection;
  /** Runs the requests; normally a CachingExecutor (local request cache) over the EngineExecutor. */
  executor: RequestExecutor;
  /** Shown in `queue status`; default `<hostname>:<pid>` is the caller's to build. */
  name: string;
  /** Requests handed to the executor at once: the engine's effective batch. Each chunk is recorded when it completes. */
  chunkSize: number;
  /** How long a shard stays locked without renewal (ms, default 30 000); a killed worker's shard is redelivered after it. */
  lockDuration?: number;
  /** How often workers look for shards whose lock expired (ms, default = lockDuration). */
  stalledInterval?: number;
  /** Redeliveries after lock loss before a shard counts as failed (default 2). */
  maxStalledCount?: number;
  onEvent?: (event: ShardWorkerEvent) => void;
}

export type ShardWorkerEvent =
  | { type: 'ready'; queue: string }
  | { type: 'shard-start'; runName: string; shardIndex: number; shardCount: number; requests: number; attempt: number }
  | { type: 'chunk-done'; runName: string; shardIndex: number; done: number; total: number }
  | { type: 'shard-done'; runName: string; shardIndex: number; shardCount: number; result: ShardJobResult; seconds: number }
  | { type: 'shard-failed'; runName?: string; shardIndex?: number; error: string }
  | { type: 'error'; error: string };

/**
 * A worker process's side of the queue: takes shards of its model's queue one at a time, skips requests the result
 * store already has, runs the rest through `executor` chunk by chunk and records each chunk (HSETNX) as soon as it
 * completes, so a worker killed mid-shard loses only the chunk in flight. BullMQ renews the shard's lock while it
 * runs; a stale worker's late completion is rejected by BullMQ.
 */
export class ShardWorker {
  private constructor(
    private readonly worker: Worker,
    private readonly redis: Redis,
    readonly queueName: string,
  ) {}

  static async start(options: ShardWorkerOptions): Promise<ShardWorker> {
    const queueName = queueNameFor(options.executor.modelId);
    const redis = new Redis({ ...options.connection, lazyConnect: true });
    redis.on('error', () => undefined); // reconnects on its own; commands wait (maxRetriesPerRequest: null)
    await redis.connect();
    await redis.hset(MODELS_KEY, queueName, options.executor.modelId);
    const store = new ResultStore(redis);
    const emit = (e: ShardWorkerEvent) => options.onEvent?.(e);
    const lockDuration = options.lockDuration ?? 30_000;
    const worker = new Worker<ShardJobData, ShardJobResult>(queueName, (job) => processShard(job, options, store, emit), {
      connection: options.connection,
      name: options.name,
      concurrency: 1,
      lockDuration,
      stalledInterval: options.stalledInterval ?? lockDuration,
      maxStalledCount: options.maxStalledCount ?? 2,
      autorun: false,
    });
    worker.on('error', (err) => emit({ type: 'error', error: err.message }));
    worker.on('failed', (job, err) => emit({ type: 'shard-failed', runName: job?.data?.runName, shardIndex: job?.data?.shardIndex, error: err.message }));
    void worker.run();
    await worker.waitUntilReady();
    emit({ type: 'ready', queue: queueName });
    return new ShardWorker(worker, redis, queueName);
  }

  /** Finishes the shard in hand (unless `force`), then disconnects. */
  async close(force = false): Promise<void> {
    await this.worker.close(force);
    this.redis.disconnect();
  }
}

async function processShard(
  job: Job<ShardJobData, ShardJobResult>,
  options: ShardWorkerOptions,
  store: ResultStore,
  emit: (e: ShardWorkerEvent) => void,
): Promise<ShardJobResult> {
  const began = performance.now();
  const data = parseShardJobData(job.data, job.id ?? '?');
  const modelId = options.executor.modelId;
  if (data.modelId !== modelId) {
    throw new UnrecoverableError(`shard of run ${data.runName} is for model ${data.modelId}; this worker serves ${modelId}. Start a worker with that model.`);
  }
  const requests = data.requests.map((text, i) => requestFromJson(text, `job ${job.id} request ${i}`));
  const keys = requests.map((r) => requestKey(modelId, r));
  emit({ type: 'shard-start', runName: data.runName, shardIndex: data.shardIndex, shardCount: data.shardCount, requests: requests.length, attempt: job.attemptsStarted });

  // Distinct requests not yet recorded: a redelivered shard resumes where its dead worker stopped.
  const recorded = await store.has(keys);
  const todo = new Map<string, number>();
  keys.forEach((k, i) => {
    if (!recorded[i] && !todo.has(k)) todo.set(k, i);
  });
  const skipped = requests.length - todo.size;
  const progress: ShardProgress = { worker: options.name, done: skipped, total: requests.length, generatedTokens: 0 };
  await job.updateProgress({ ...progress });

  let fresh = 0;
  const pending = [...todo.values()];
  const chunk = Math.max(1, options.chunkSize);
  for (let start = 0; start < pending.length; start += chunk) {
    const indices = pending.slice(start, start + chunk);
    const results = await options.executor.execute(indices.map((i) => requests[i]!));
    if (results.length !== indices.length) throw new Error(`executor ${options.executor.modelId} returned ${results.length} results for ${indices.length} requests`);
    fresh += await store.putMany(indices.map((i, k) => ({ key: keys[i]!, result: results[k]! })));
    progress.done += indices.length;
    progress.generatedTokens += results.reduce((s, r) => s + r.completions.reduce((t, c) => t + c.tokens.length, 0), 0);
    await job.updateProgress({ ...progress });
    emit({ type: 'chunk-done', runName: data.runName, shardIndex: data.shardIndex, done: progress.done, total: progress.total });
  }
  const result: ShardJobResult = { worker: options.name, computed: todo.size, skipped, recorded: fresh };
  emit({ type: 'shard-done', runName: data.runName, shardIndex: data.shardIndex, shardCount: data.shardCount, result, seconds: (performance.now() - began) / 1000 });
  return result;
}
