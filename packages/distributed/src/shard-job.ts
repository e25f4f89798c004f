import { z } from 'zod';

/** What a BullMQ job carries: one shard of one run's requests, for one model. */
export interface ShardJobData {
  version: 1;
  modelId: string;
  runName: string;
  shardIndex: number;
  shardCount: number;
  /** Each request as `requestToJson` writes it. */
  requests: string[];
}

/** What a worker reports back when a shard is done. */
export interface ShardJobResult {
  worker: string;
  /** Requests this attempt computed (or took from the worker's local cache). */
  computed: number;
  /** Requests found already recorded (an earlier attempt or another shard did them). */
  skipped: number;
  /** Results this attempt added to the store (the rest were recorded by someone else first). */
  recorded: number;
}

/** Progress a worker publishes while it works on a shard. */
export interface ShardProgress {
  worker: string;
  done: number;
  total: number;
  generatedTokens: number;
}

const shardJobData = z.object({
  version: z.literal(1),
  modelId: z.string().min(1),
  runName: z.string().min(1),
  shardIndex: z.number().int().min(0),
  shardCount: z.number().int().min(1),
  requests: z.array(z.string()),
});

/** Checks job data read from Redis (another flexhelm version, or a hand-made job, may have put it there). */
export function parseShardJobData(data: unknown, jobId: string): ShardJobData {
  const r = shardJobData.safeParse(data);
  if (!r.success) {
    throw new Error(
      `job ${jobId} is not a flexhelm shard (${r.error.issues.map((i) => `${i.path.join('.') || 'data'}: ${i.message}`).join('; ')}); ` +
        'was it queued by another flexhelm version? Remove it, or re-run the coordinator with this version.',
    );
  }
  return r.data as ShardJobData;
}

export function isShardProgress(value: unknown): value is ShardProgress {
  return typeof value === 'object' && value !== null && typeof (value as ShardProgress).done === 'number' && typeof (value as ShardProgress).total === 'number';
}
