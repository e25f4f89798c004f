import { Worker, UnrecoverableError, WaitingError, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import type { Request } from '@flexhelm/core';
import { requestKey } from '@flexhelm/request-cache';
import type { RequestExecutor } from '@flexhelm/runner';
import { MODELS_KEY, queueNameFor } from './queue-names.js';
import { closeWithin, isConnectionError, RedisHealth } from './redis-health.js';
import type { RedisConnection } from './redis-url.js';
import { requestFromJson } from './request-json.js';
import { ResultStore } from './result-store.js';
import { parseShardJobData, type ShardJobData, type ShardJobResult, type ShardProgress } from './shard-job.js';
import { DEFAULT_SHARD_LIMITS, maxRequestJsonChars, shardLimitProblem, type ShardLimits } from './shard-limits.js';

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
  /** What a shard may ask (default `DEFAULT_SHARD_LIMITS`, the server's limits); a shard over them fails as unrecoverable. */
  limits?: Partial<ShardLimits>;
  /** How long Redis may stay unreachable before `onEvent` hears `redis-lost` (ms, default 60 000). */
  redisTimeoutMs?: number;
  onEvent?: (event: ShardWorkerEvent) => void;
}

export type ShardWorkerEvent =
  | { type: 'ready'; queue: string }
  | { type: 'shard-start'; runName: string; shardIndex: number; shardCount: number; requests: number; attempt: number }
  | { type: 'chunk-done'; runName: string; shardIndex: number; done: number; total: number }
  | { type: 'shard-done'; runName: string; shardIndex: number; shardCount: number; result: ShardJobResult; seconds: number }
  | { type: 'shard-failed'; runName?: string; shardIndex?: number; error: string; unrecoverable: boolean }
  /** A stop cancelled the shard in hand: `returned` tells whether it went back to the queue now (else after its lock expires). */
  | { type: 'shard-returned'; runName: string; shardIndex: number; done: number; total: number; returned: boolean }
  | { type: 'redis-down'; error: string }
  | { type: 'redis-up'; downMs: number }
  /** Redis stayed unreachable for `redisTimeoutMs`: the caller should stop (its shard is redelivered after the lock expires). */
  | { type: 'redis-lost'; error: string; seconds: number }
  | { type: 'error'; error: string };

/** `cancelAllJobs` reasons: a stop gives the shard back; a disconnect leaves it to its lock's expiry (Redis may be gone). */
const STOPPING = 'the worker is stopping';
const DISCONNECTING = 'the worker is disconnecting';

/** Thrown into a shard's run when the worker stops: the shard goes back to the queue, it has not failed. */
class ShardCancelled extends Error {
  override name = 'ShardCancelled';
}

/**
 * A worker process's side of the queue: takes shards of its model's queue one at a time, checks them against the
 * server's limits (a shard over them fails at once, unrecoverable), skips requests the result store already has, runs
 * the rest through `executor` chunk by chunk and records each chunk (HSETNX) as soon as it completes, so a worker
 * killed mid-shard loses only the chunk in flight. BullMQ renews the shard's lock while it runs; a stale worker's late
 * completion is rejected by BullMQ. `stop()` gives the shard in hand back to the queue at once.
 */
export class ShardWorker {
  private stopping: Promise<void> | undefined;

  private constructor(
    private readonly worker: Worker,
    private readonly redis: Redis,
    private readonly health: RedisHealth,
    readonly queueName: string,
  ) {}

  static async start(options: ShardWorkerOptions): Promise<ShardWorker> {
    const queueName = queueNameFor(options.executor.modelId);
    const emit = (e: ShardWorkerEvent) => options.onEvent?.(e);
    const redis = new Redis({ ...options.connection, lazyConnect: true });
    redis.on('error', () => undefined); // reconnects on its own; commands wait (maxRetriesPerRequest: null)
    const timeoutMs = options.redisTimeoutMs ?? 60_000;
    const health: RedisHealth = new RedisHealth(redis, timeoutMs, (e) => emit(e.type === 'down' ? { type: 'redis-down', error: e.error } : { type: 'redis-up', downMs: e.downMs }));
    health.lost.catch(() => emit({ type: 'redis-lost', error: health.error, seconds: Math.round(timeoutMs / 1000) }));
    try {
      await redis.connect();
      await redis.hset(MODELS_KEY, queueName, options.executor.modelId);
    } catch (err) {
      health.dispose();
      redis.disconnect();
      throw isConnectionError(err) ? health.unavailable(err) : err;
    }
    const store = new ResultStore(redis);
    const limits = { ...DEFAULT_SHARD_LIMITS, ...options.limits };
    const lockDuration = options.lockDuration ?? 30_000;
    // Three parameters: BullMQ then hands the processor an AbortSignal (cancelAllJobs fires it).
    const processor = (job: Job<ShardJobData, ShardJobResult>, token: string | undefined, signal: AbortSignal | undefined) =>
      processShard(job, token, signal, options, limits, store, emit);
    const worker = new Worker<ShardJobData, ShardJobResult>(queueName, processor, {
      connection: options.connection,
      name: options.name,
      concurrency: 1,
      lockDuration,
      stalledInterval: options.stalledInterval ?? lockDuration,
      maxStalledCount: options.maxStalledCount ?? 2,
      autorun: false,
    });
    // While Redis is down, BullMQ reports every reconnection attempt: the health events say it once instead.
    worker.on('error', (err) => {
      if (!isConnectionError(err)) emit({ type: 'error', error: err.message });
    });
    worker.on('failed', (job, err) =>
      emit({ type: 'shard-failed', runName: job?.data?.runName, shardIndex: job?.data?.shardIndex, error: err.message, unrecoverable: err instanceof UnrecoverableError }),
    );
    void worker.run().catch((err: Error) => emit({ type: 'error', error: err.message }));
    await worker.waitUntilReady();
    emit({ type: 'ready', queue: queueName });
    return new ShardWorker(worker, redis, health, queueName);
  }

  /**
   * Takes no more shards and gives the one in hand back to the queue (waiting, not failed; the requests it recorded
   * stay recorded), then disconnects. Each Redis step waits at most `stepMs` (Redis may be down: the shard then goes
   * back when its lock expires). The executor may still be busy with the cancelled chunk: close it afterwards.
   */
  stop(stepMs = 3000): Promise<void> {
    this.stopping ??= (async () => {
      this.worker.cancelAllJobs(STOPPING);
      if (!(await closeWithin(() => this.worker.close(), stepMs))) await closeWithin(() => this.worker.close(true), stepMs);
      this.disconnect();
    })();
    return this.stopping;
  }

  /** Drops every connection now, without waiting for anything (a second signal, or Redis gone). */
  disconnect(): void {
    this.health.dispose();
    this.worker.cancelAllJobs(DISCONNECTING);
    void this.worker.close(true).catch(() => undefined);
    this.redis.disconnect();
  }

  /** Finishes the shard in hand (unless `force`), then disconnects. */
  async close(force = false): Promise<void> {
    await this.worker.close(force);
    this.health.dispose();
    this.redis.disconnect();
  }
}

/** `promise`, or a rejection with `ShardCancelled` as soon as `signal` fires. */
function unlessCancelled<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.reject(new ShardCancelled('cancelled'));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new ShardCancelled('cancelled'));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (err) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

/** The job's requests, checked: anything malformed or over the limits can never succeed, so it fails unrecoverable. */
function shardRequests(job: Job<ShardJobData, ShardJobResult>, modelId: string, limits: ShardLimits): { data: ShardJobData; requests: Request[] } {
  const where = (d: { runName: string; shardIndex: number; shardCount: number }) => `shard ${d.shardIndex + 1}/${d.shardCount} of ${d.runName} (job ${job.id})`;
  let data: ShardJobData;
  try {
    data = parseShardJobData(job.data, job.id ?? '?');
  } catch (err) {
    throw new UnrecoverableError((err as Error).message);
  }
  if (data.modelId !== modelId) {
    throw new UnrecoverableError(`shard of run ${data.runName} is for model ${data.modelId}; this worker serves ${modelId}. Start a worker with that model.`);
  }
  const refuse = (problem: string) =>
    new UnrecoverableError(`${where(data)} refused: ${problem} (the server's limits; flexhelm's coordinator never makes such a shard, so it was queued by hand or by another version)`);
  // Counted before anything is parsed: a shard of a million requests is refused without reading them.
  if (data.requests.length > limits.maxRequests) throw refuse(`${data.requests.length} requests in one shard, above the limit of ${limits.maxRequests}`);
  const longest = maxRequestJsonChars(limits);
  const requests = data.requests.map((text, i) => {
    if (text.length > longest) throw refuse(`request ${i} is ${text.length} characters of JSON, above the limit of ${longest}`);
    try {
      return requestFromJson(text, `request ${i}`);
    } catch (err) {
      throw refuse((err as Error).message);
    }
  });
  const problem = shardLimitProblem(requests, limits);
  if (problem) throw refuse(problem);
  return { data, requests };
}

async function processShard(
  job: Job<ShardJobData, ShardJobResult>,
  token: string | undefined,
  signal: AbortSignal | undefined,
  options: ShardWorkerOptions,
  limits: ShardLimits,
  store: ResultStore,
  emit: (e: ShardWorkerEvent) => void,
): Promise<ShardJobResult> {
  const began = performance.now();
  const modelId = options.executor.modelId;
  const { data, requests } = shardRequests(job, modelId, limits);
  const keys = requests.map((r) => requestKey(modelId, r));
  emit({ type: 'shard-start', runName: data.runName, shardIndex: data.shardIndex, shardCount: data.shardCount, requests: requests.length, attempt: job.attemptsStarted });

  const progress: ShardProgress = { worker: options.name, done: 0, total: requests.length, generatedTokens: 0 };
  try {
    // Distinct requests not yet recorded: a redelivered shard resumes where its dead worker stopped.
    const recorded = await unlessCancelled(store.has(keys), signal);
    const todo = new Map<string, number>();
    keys.forEach((k, i) => {
      if (!recorded[i] && !todo.has(k)) todo.set(k, i);
    });
    const skipped = requests.length - todo.size;
    progress.done = skipped;
    await unlessCancelled(job.updateProgress({ ...progress }), signal);

    let fresh = 0;
    const pending = [...todo.values()];
    const chunk = Math.max(1, options.chunkSize);
    for (let start = 0; start < pending.length; start += chunk) {
      const indices = pending.slice(start, start + chunk);
      // A stop does not wait for the chunk: its rows are dropped (the caller closes the engine under them).
      const results = await unlessCancelled(options.executor.execute(indices.map((i) => requests[i]!)), signal);
      if (results.length !== indices.length) throw new Error(`executor ${options.executor.modelId} returned ${results.length} results for ${indices.length} requests`);
      fresh += await store.putMany(indices.map((i, k) => ({ key: keys[i]!, result: results[k]! })));
      progress.done += indices.length;
      progress.generatedTokens += results.reduce((s, r) => s + r.completions.reduce((t, c) => t + c.tokens.length, 0), 0);
      await unlessCancelled(job.updateProgress({ ...progress }), signal);
      emit({ type: 'chunk-done', runName: data.runName, shardIndex: data.shardIndex, done: progress.done, total: progress.total });
    }
    const result: ShardJobResult = { worker: options.name, computed: todo.size, skipped, recorded: fresh };
    emit({ type: 'shard-done', runName: data.runName, shardIndex: data.shardIndex, shardCount: data.shardCount, result, seconds: (performance.now() - began) / 1000 });
    return result;
  } catch (err) {
    if (!(err instanceof ShardCancelled)) throw err;
    // Back to waiting, its attempt not counted as a failure; if Redis cannot be reached in time the lock expires
    // and another worker's stalled check puts it back.
    let returned = false;
    if (signal?.reason !== DISCONNECTING) {
      await closeWithin(async () => {
        await job.moveToWait(token);
        returned = true;
      }, 3000);
    }
    emit({ type: 'shard-returned', runName: data.runName, shardIndex: data.shardIndex, done: progress.done, total: progress.total, returned });
    throw new WaitingError();
  }
}
