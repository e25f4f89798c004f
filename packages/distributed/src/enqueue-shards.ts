import { Queue, type JobsOptions } from 'bullmq';
import { queueNameFor } from './queue-names.js';
import type { RedisConnection } from './redis-url.js';
import type { ShardJobData, ShardJobResult } from './shard-job.js';

/** How every shard job is queued: a deterministic id, `attempts` tries with backoff, kept after it ends (ids stay taken). */
export function shardJobOptions(jobId: string, attempts = 3): JobsOptions {
  return { jobId, attempts, backoff: { type: 'exponential', delay: 2000 }, removeOnComplete: false, removeOnFail: false };
}

/**
 * Queues shard jobs as they are, on their model's queue: for tools and tests that make jobs by hand (the coordinator,
 * `runOnQueue`, plans and checks its own). Workers check every job they take, so a bad one fails there.
 */
export async function enqueueShardJobs(connection: RedisConnection, jobs: readonly { jobId: string; data: ShardJobData }[], attempts = 3): Promise<void> {
  const byQueue = new Map<string, { jobId: string; data: ShardJobData }[]>();
  for (const job of jobs) {
    const name = queueNameFor(job.data.modelId);
    byQueue.set(name, [...(byQueue.get(name) ?? []), job]);
  }
  for (const [name, list] of byQueue) {
    const queue = new Queue<ShardJobData, ShardJobResult>(name, { connection });
    queue.on('error', () => undefined);
    try {
      await queue.addBulk(list.map((j) => ({ name: j.data.runName, data: j.data, opts: shardJobOptions(j.jobId, attempts) })));
    } finally {
      await queue.close();
    }
  }
}
