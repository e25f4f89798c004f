import { Queue, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import type { Request, RequestResult } from '@flexhelm/core';
import { requestKey } from '@flexhelm/request-cache';
import type { ExecutionProgress } from '@flexhelm/runner';
import { shardJobOptions } from './enqueue-shards.js';
import { MODELS_KEY, queueNameFor } from './queue-names.js';
import { closeWithin, isConnectionError, QueueUnavailableError, RedisHealth } from './redis-health.js';
import type { RedisConnection } from './redis-url.js';
import { requestToJson } from './request-json.js';
import { ResultStore } from './result-store.js';
import { isShardProgress, type ShardJobData, type ShardJobResult } from './shard-job.js';
import { DEFAULT_SHARD_LIMITS, shardLimitProblem } from './shard-limits.js';
import { planShards, type Shard } from './shard-plan.js';

export interface RunOnQueueOptions {
  connection: RedisConnection;
  /** `<model>@<fingerprint>`: only workers with the same id serve these shards. */
  modelId: string;
  runName: string;
  /** Requests per shard, already aligned with the engine batch (`alignedShardSize`). */
  shardSize: number;
  /** Tries per shard before it counts as failed (default 3). */
  attempts?: number;
  /** Reconciliation poll of the open shards' states after this long without an event (ms, default 1000). */
  pollIntervalMs?: number;
  /** How long Redis may stay unreachable before the run stops with `QueueUnavailableError` (ms, default 60 000). */
  redisTimeoutMs?: number;
  onProgress?: (progress: ExecutionProgress & { workers: number }) => void;
  signal?: AbortSignal;
}

/** Timings of one shard as BullMQ recorded them (ms since the epoch → durations). */
export interface ShardTiming {
  jobId: string;
  shardIndex: number;
  worker?: string;
  /** From enqueue (or the retry) to a worker taking it. */
  queuedMs: number;
  /** From a worker taking it to its completion. */
  processMs: number;
  attempts: number;
}

export interface RunOnQueueResult {
  results: RequestResult[];
  shards: number;
  /** Shards that had nothing left to do when the run was submitted. */
  shardsAlreadyDone: number;
  /** Requests already in the result store at submission. */
  alreadyRecorded: number;
  /** Coordinator-side time: planning + enqueueing, and fetching the results (ms). */
  enqueueMs: number;
  fetchMs: number;
  timings: ShardTiming[];
}

export class ShardFailedError extends Error {
  override name = 'ShardFailedError';
  constructor(
    readonly runName: string,
    readonly failures: { shardIndex: number; attempts: number; error: string }[],
  ) {
    super(
      `${failures.length} shard(s) of ${runName} failed: ` +
        failures.map((f) => `shard ${f.shardIndex} after ${f.attempts} attempt(s): ${f.error}`).join('; ') +
        '. Fix the cause, then run `flexhelm queue retry --queue URL` and this command again (recorded requests are kept).',
    );
  }
}

/**
 * The coordinator's side: cuts a run's requests into shards, enqueues those with unrecorded requests as BullMQ jobs
 * with deterministic ids (re-submitting the same run adds nothing), follows the workers' progress events, and once
 * every shard is done returns each request's result from the shared result store, in order.
 */
export async function runOnQueue(requests: readonly Request[], options: RunOnQueueOptions): Promise<RunOnQueueResult> {
  // What every worker refuses is refused here, before anything is queued (max_tokens aside: workers may take more).
  if (options.shardSize > DEFAULT_SHARD_LIMITS.maxRequests) {
    throw new RangeError(`shards of ${options.shardSize} requests are above the workers' limit of ${DEFAULT_SHARD_LIMITS.maxRequests}: give a smaller shard size`);
  }
  const problem = shardLimitProblem(requests, { ...DEFAULT_SHARD_LIMITS, maxTokens: Infinity, maxRequests: Infinity });
  if (problem) throw new RangeError(`${options.runName}: ${problem}; workers refuse such requests (the server's limits)`);
  const queueName = queueNameFor(options.modelId);
  const redis = new Redis({ ...options.connection, lazyConnect: true });
  redis.on('error', () => undefined);
  const health = new RedisHealth(redis, options.redisTimeoutMs ?? 60_000);
  // Connected first: BullMQ's clients cannot be closed before their first connection, and would retry forever.
  try {
    await redis.connect();
  } catch (err) {
    health.dispose();
    redis.disconnect();
    throw isConnectionError(err) ? health.unavailable(err) : err;
  }
  const queue = new Queue<ShardJobData, ShardJobResult>(queueName, { connection: options.connection });
  queue.on('error', () => undefined);
  const events = new QueueEvents(queueName, { connection: options.connection });
  events.on('error', () => undefined);
  const work = coordinate(requests, options, queueName, redis, queue, events);
  work.catch(() => undefined); // abandoned when Redis is lost: its commands fail once the clients disconnect
  try {
    // ioredis and BullMQ wait for Redis to come back, without end: a run stops once it has been gone too long.
    return await Promise.race([work, health.lost]);
  } catch (err) {
    if (err instanceof QueueUnavailableError) throw err;
    if (isConnectionError(err)) throw health.unavailable(err);
    throw err;
  } finally {
    health.dispose();
    const reachable = health.downMs === 0;
    // Closing politely needs Redis; when it is gone, drop the connections.
    if (!reachable || !(await closeWithin(() => events.close(), 3000))) await closeWithin(() => events.disconnect(), 1000);
    if (!reachable || !(await closeWithin(() => queue.close(), 3000))) await closeWithin(() => queue.disconnect(), 1000);
    redis.disconnect();
  }
}

async function coordinate(
  requests: readonly Request[],
  options: RunOnQueueOptions,
  queueName: string,
  redis: Redis,
  queue: Queue<ShardJobData, ShardJobResult>,
  events: QueueEvents,
): Promise<RunOnQueueResult> {
  // Listen before anything is enqueued: the event stream is read from "now".
  await events.waitUntilReady();
  await redis.hset(MODELS_KEY, queueName, options.modelId);
  const store = new ResultStore(redis);
  const keys = requests.map((r) => requestKey(options.modelId, r));
  const shards = planShards(options.modelId, options.runName, keys, options.shardSize);
  const out: Omit<RunOnQueueResult, 'results'> = { shards: shards.length, shardsAlreadyDone: 0, alreadyRecorded: 0, enqueueMs: 0, fetchMs: 0, timings: [] };
  for (let round = 0; ; round += 1) {
    const began = performance.now();
    const recorded = await store.has(keys);
    if (round === 0) out.alreadyRecorded = recorded.filter(Boolean).length;
    const pending = shards.filter((s) => recorded.slice(s.start, s.end).some((r) => !r));
    if (round === 0) out.shardsAlreadyDone = shards.length - pending.length;
    if (pending.length > 0) {
      if (round >= 3) throw new Error(`${options.runName}: ${pending.length} shard(s) completed three times without their results reaching Redis; is the Redis server evicting keys (set maxmemory-policy noeviction)?`);
      await enqueue(queue, pending, requests, options, shards.length);
    }
    out.enqueueMs += performance.now() - began;
    if (pending.length > 0) await waitForShards(queue, events, pending, recorded, keys.length, options);
    const fetchBegan = performance.now();
    const results = await store.getMany(keys);
    out.fetchMs += performance.now() - fetchBegan;
    if (results.every((r) => r !== undefined)) {
      out.timings = await shardTimings(redis, queue, shards);
      return { ...out, results: results as RequestResult[] };
    }
    // A completion survived a Redis restart but some results did not (AOF fsync window): run those shards again.
  }
}

async function enqueue(queue: Queue<ShardJobData, ShardJobResult>, pending: Shard[], requests: readonly Request[], options: RunOnQueueOptions, shardCount: number) {
  // A completed job whose results are missing would block the deterministic id: remove it first. The state checks
  // go out together (ioredis writes them back to back), one small script each, no job data fetched.
  const states = await Promise.all(pending.map((shard) => queue.getJobState(shard.jobId)));
  await Promise.all(pending.filter((_, i) => states[i] === 'completed').map((shard) => queue.remove(shard.jobId)));
  await queue.addBulk(
    pending.map((shard) => ({
      name: options.runName,
      data: {
        version: 1 as const,
        modelId: options.modelId,
        runName: options.runName,
        shardIndex: shard.index,
        shardCount,
        requests: requests.slice(shard.start, shard.end).map(requestToJson),
      },
      opts: shardJobOptions(shard.jobId, options.attempts),
    })),
  );
}

async function waitForShards(
  queue: Queue<ShardJobData, ShardJobResult>,
  events: QueueEvents,
  pending: Shard[],
  recorded: boolean[],
  total: number,
  options: RunOnQueueOptions,
): Promise<void> {
  const byId = new Map(pending.map((s) => [s.jobId, s]));
  const inFlight = new Map<string, { done: number; generatedTokens: number; worker: string }>();
  const finished = new Set<string>();
  /** Shards whose state must be read from Redis (a failure event, or none at all for a while). */
  const toCheck = new Set<string>();
  const alreadyDone = recorded.filter(Boolean).length;
  const outstandingAtStart = (s: Shard) => recorded.slice(s.start, s.end).filter((r) => !r).length;
  let generatedTokens = 0;
  let wake: (() => void) | undefined;
  let eventsSincePoll = 0;
  const report = () => {
    let done = alreadyDone;
    let tokens = generatedTokens;
    for (const s of pending) {
      if (finished.has(s.jobId)) done += outstandingAtStart(s);
      else {
        const p = inFlight.get(s.jobId);
        // A shard's progress counts requests it found recorded too; only the newly done ones add here.
        if (p) done += Math.max(0, Math.min(outstandingAtStart(s), p.done - (s.end - s.start - outstandingAtStart(s))));
        if (p) tokens += p.generatedTokens;
      }
    }
    const workers = new Set([...inFlight.entries()].filter(([id]) => !finished.has(id)).map(([, p]) => p.worker)).size;
    options.onProgress?.({ done, total, generatedTokens: tokens, cachedHits: alreadyDone, workers });
  };
  const finish = (jobId: string) => {
    finished.add(jobId);
    toCheck.delete(jobId);
    generatedTokens += inFlight.get(jobId)?.generatedTokens ?? 0;
  };
  const onProgress = ({ jobId, data }: { jobId: string; data: unknown }) => {
    if (!byId.has(jobId) || finished.has(jobId) || !isShardProgress(data)) return;
    eventsSincePoll += 1;
    inFlight.set(jobId, { done: data.done, generatedTokens: data.generatedTokens, worker: data.worker });
    report();
  };
  // A completion event needs no round trip: BullMQ emits it only once the job is in the completed set, and the
  // result store is checked after the last shard anyway (a shard whose results are missing is run again).
  const onCompleted = ({ jobId }: { jobId: string }) => {
    if (!byId.has(jobId) || finished.has(jobId)) return;
    eventsSincePoll += 1;
    finish(jobId);
    report();
    wake?.();
  };
  // A failed attempt may be retried: its state decides.
  const onFailed = ({ jobId }: { jobId: string }) => {
    if (!byId.has(jobId) || finished.has(jobId)) return;
    eventsSincePoll += 1;
    toCheck.add(jobId);
    wake?.();
  };
  events.on('progress', onProgress as never);
  events.on('completed', onCompleted as never);
  events.on('failed', onFailed as never);
  const abort = () => wake?.();
  options.signal?.addEventListener('abort', abort);
  try {
    report();
    // The first pass reads every shard's state (a shard may have finished before the listener saw it).
    let checkAll = true;
    for (;;) {
      if (options.signal?.aborted) throw options.signal.reason ?? new Error('aborted');
      const open = pending.filter((s) => !finished.has(s.jobId));
      const checking = checkAll ? open : open.filter((s) => toCheck.has(s.jobId));
      const failures: { shardIndex: number; attempts: number; error: string }[] = [];
      if (checking.length > 0) {
        const states = await Promise.all(checking.map((s) => queue.getJobState(s.jobId)));
        for (const [k, shard] of checking.entries()) {
          const state = states[k];
          toCheck.delete(shard.jobId);
          if (state === 'completed') finish(shard.jobId);
          else if (state === 'failed') {
            // Only a failed shard's job (with its prompts) is fetched, for its error.
            const job = await queue.getJob(shard.jobId);
            failures.push({ shardIndex: shard.index, attempts: job?.attemptsMade ?? 0, error: job?.failedReason ?? 'unknown error' });
            toCheck.add(shard.jobId); // `flexhelm queue retry` may put it back while we wait for the others
          } else if (state === 'unknown') {
            throw new Error(`shard ${shard.index} of ${options.runName} (job ${shard.jobId}) vanished from the queue: was it removed by hand, or was Redis restarted without persistence? Run this command again.`);
          }
        }
        report();
      }
      const stillOpen = pending.filter((s) => !finished.has(s.jobId));
      if (stillOpen.length === 0) return;
      if (failures.length > 0 && failures.length === stillOpen.length) throw new ShardFailedError(options.runName, failures);
      // Sleep until an event or the poll interval. Events are telemetry (a Redis restart can lose them), so a quiet
      // interval — no event for our shards — reads every open shard's state; while events flow, nothing is polled.
      eventsSincePoll = 0;
      const timedOut = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(true), options.pollIntervalMs ?? 1000);
        wake = () => {
          clearTimeout(timer);
          resolve(false);
        };
      });
      wake = undefined;
      checkAll = timedOut && eventsSincePoll === 0;
    }
  } finally {
    options.signal?.removeEventListener('abort', abort);
    events.off('progress', onProgress as never);
    events.off('completed', onCompleted as never);
    events.off('failed', onFailed as never);
  }
}

/** The timing fields of every shard's job hash, in one pipeline (no job data: the prompts stay in Redis). */
async function shardTimings(redis: Redis, queue: Queue<ShardJobData, ShardJobResult>, shards: Shard[]): Promise<ShardTiming[]> {
  const pipeline = redis.pipeline();
  for (const s of shards) pipeline.hmget(queue.toKey(s.jobId), 'timestamp', 'processedOn', 'finishedOn', 'atm', 'returnvalue');
  const replies = (await pipeline.exec()) ?? [];
  const out: ShardTiming[] = [];
  shards.forEach((s, i) => {
    const [err, fields] = replies[i] ?? [];
    if (err || !Array.isArray(fields)) return;
    const [timestamp, processedOn, finishedOn, attempts, returnvalue] = fields as (string | null)[];
    if (timestamp === null || processedOn === null || finishedOn === null) return;
    let worker: string | undefined;
    try {
      worker = returnvalue ? (JSON.parse(returnvalue) as ShardJobResult | null)?.worker : undefined;
    } catch {
      worker = undefined;
    }
    out.push({
      jobId: s.jobId,
      shardIndex: s.index,
      worker,
      queuedMs: Number(processedOn) - Number(timestamp),
      processMs: Number(finishedOn) - Number(processedOn),
      attempts: Number(attempts ?? 0),
    });
  });
  return out;
}
