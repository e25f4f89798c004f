import { Queue, type Job, type JobType } from 'bullmq';
import { Redis } from 'ioredis';
import { MODELS_KEY } from './queue-names.js';
import { isConnectionError, QueueUnavailableError } from './redis-health.js';
import type { RedisConnection } from './redis-url.js';
import { ResultStore } from './result-store.js';
import type { ShardJobData, ShardJobResult } from './shard-job.js';

export interface ShardCounts {
  waiting: number;
  active: number;
  done: number;
  failed: number;
}

export interface FailedShard {
  runName: string;
  shardIndex: number;
  jobId: string;
  attempts: number;
  error: string;
}

export interface ModelQueueStatus {
  queue: string;
  modelId: string;
  runs: Map<string, ShardCounts>;
  /** Per worker name: shards it holds now (active) and shards it completed or failed last. */
  workers: Map<string, ShardCounts>;
  /** Worker connections Redis sees right now. */
  connectedWorkers: string[];
  failures: FailedShard[];
}

export interface QueueStatus {
  queues: ModelQueueStatus[];
  recordedResults: number;
  duplicateWrites: number;
}

const STATE_GROUPS: [keyof ShardCounts, JobType[]][] = [
  ['waiting', ['waiting', 'delayed', 'prioritized', 'waiting-children']],
  ['active', ['active']],
  ['done', ['completed']],
  ['failed', ['failed']],
];

function bump(map: Map<string, ShardCounts>, key: string, field: keyof ShardCounts): void {
  const counts = map.get(key) ?? { waiting: 0, active: 0, done: 0, failed: 0 };
  counts[field] += 1;
  map.set(key, counts);
}

async function withQueues<T>(connection: RedisConnection, body: (redis: Redis, queues: { queue: Queue<ShardJobData, ShardJobResult>; modelId: string }[]) => Promise<T>): Promise<T> {
  const redis = new Redis({ ...connection, lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  let socketError: string | undefined;
  redis.on('error', (err: NodeJS.ErrnoException) => {
    socketError ??= err.code ?? err.message;
  });
  const queues: { queue: Queue<ShardJobData, ShardJobResult>; modelId: string }[] = [];
  try {
    try {
      await redis.connect();
    } catch (err) {
      throw isConnectionError(err) ? new QueueUnavailableError(`cannot reach Redis (${socketError ?? (err as Error).message})`) : err;
    }
    const models = await redis.hgetall(MODELS_KEY);
    for (const [name, modelId] of Object.entries(models).sort()) {
      const queue = new Queue<ShardJobData, ShardJobResult>(name, { connection });
      queue.on('error', () => undefined);
      queues.push({ queue, modelId });
    }
    return await body(redis, queues);
  } finally {
    for (const q of queues) await q.queue.close();
    redis.disconnect();
  }
}

/** Shards waiting/active/done/failed per run and per worker, for every model queue flexhelm has used on this Redis. */
export async function queueStatus(connection: RedisConnection): Promise<QueueStatus> {
  return withQueues(connection, async (redis, queues) => {
    const out: QueueStatus = { queues: [], recordedResults: 0, duplicateWrites: 0 };
    for (const { queue, modelId } of queues) {
      const status: ModelQueueStatus = { queue: queue.name, modelId, runs: new Map(), workers: new Map(), connectedWorkers: [], failures: [] };
      for (const [field, states] of STATE_GROUPS) {
        const jobs = (await queue.getJobs(states, 0, -1)) as Job<ShardJobData, ShardJobResult>[];
        for (const job of jobs) {
          if (!job) continue;
          bump(status.runs, job.name, field);
          const worker = job.returnvalue?.worker ?? job.processedBy;
          if (worker && field !== 'waiting') bump(status.workers, worker, field);
          if (field === 'failed') {
            status.failures.push({ runName: job.name, shardIndex: job.data?.shardIndex ?? -1, jobId: job.id ?? '?', attempts: job.attemptsMade, error: job.failedReason ?? '' });
          }
        }
      }
      // BullMQ names a worker's connection `bull:<base64 queue>:w:<worker name>`.
      status.connectedWorkers = (await queue.getWorkers()).map((w) => (w.rawname ?? '').split(':w:')[1] ?? w.addr ?? '?').sort();
      status.failures.sort((a, b) => a.runName.localeCompare(b.runName) || a.shardIndex - b.shardIndex);
      out.queues.push(status);
    }
    const store = new ResultStore(redis);
    out.recordedResults = await store.count();
    out.duplicateWrites = await store.duplicateWrites();
    return out;
  });
}

/** Puts failed shards back in the queue (all, or one run's); returns how many. Their recorded requests are kept. */
export async function retryFailedShards(connection: RedisConnection, runName?: string): Promise<number> {
  return withQueues(connection, async (_redis, queues) => {
    let n = 0;
    for (const { queue } of queues) {
      const failed = (await queue.getJobs(['failed'], 0, -1)) as Job<ShardJobData, ShardJobResult>[];
      for (const job of failed) {
        if (!job || (runName !== undefined && job.name !== runName)) continue;
        await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
        n += 1;
      }
    }
    return n;
  });
}

/** `queue status` as text: one block per model queue. */
export function formatQueueStatus(status: QueueStatus): string {
  if (status.queues.length === 0) return 'no flexhelm queues on this Redis yet\n';
  const lines: string[] = [];
  const row = (label: string, c: ShardCounts) => `  ${label.padEnd(60)} ${String(c.waiting).padStart(8)} ${String(c.active).padStart(7)} ${String(c.done).padStart(6)} ${String(c.failed).padStart(7)}`;
  const header = (label: string) => `  ${label.padEnd(60)} ${'waiting'.padStart(8)} ${'active'.padStart(7)} ${'done'.padStart(6)} ${'failed'.padStart(7)}`;
  for (const q of status.queues) {
    lines.push(`model ${q.modelId} (queue ${q.queue})`);
    lines.push(header('run'));
    for (const [run, c] of [...q.runs].sort(([a], [b]) => a.localeCompare(b))) lines.push(row(run, c));
    if (q.workers.size > 0) {
      lines.push(header('worker'));
      for (const [w, c] of [...q.workers].sort(([a], [b]) => a.localeCompare(b))) lines.push(row(w, c));
    }
    lines.push(`  connected workers: ${q.connectedWorkers.length === 0 ? 'none' : q.connectedWorkers.join(', ')}`);
    for (const f of q.failures) lines.push(`  FAILED ${f.runName} shard ${f.shardIndex} after ${f.attempts} attempt(s): ${f.error}`);
    if (q.failures.length > 0) lines.push('  retry them with: flexhelm queue retry --queue URL [--run NAME]');
  }
  lines.push(`results recorded: ${status.recordedResults}; duplicate writes ignored: ${status.duplicateWrites}`);
  return `${lines.join('\n')}\n`;
}
