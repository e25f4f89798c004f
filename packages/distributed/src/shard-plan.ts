import { createHash } from 'node:crypto';

/** A piece of a run's requests: indices `[start, end)` of its request states. */
export interface Shard {
  index: number;
  start: number;
  end: number;
  /** Deterministic BullMQ job id: the same run re-submitted maps to the same jobs. */
  jobId: string;
}

/** The shard size actually used: `requested` rounded up to a whole number of engine batches. */
export function alignedShardSize(requested: number, batch: number): number {
  if (!Number.isInteger(requested) || requested < 1) throw new Error(`shard size must be a positive integer, got ${requested}`);
  if (!Number.isInteger(batch) || batch < 1) throw new Error(`batch must be a positive integer, got ${batch}`);
  return Math.ceil(requested / batch) * batch;
}

/**
 * Cuts a run's requests into shards of `shardSize` (already aligned with the engine's batch, so a worker's batches
 * are the ones a single-machine run would form). Job ids hash the model, the run and the shard's request keys:
 * ids cannot contain `:` (HELM run names do) and must change when the requests change.
 */
export function planShards(modelId: string, runName: string, requestKeys: readonly string[], shardSize: number): Shard[] {
  if (!Number.isInteger(shardSize) || shardSize < 1) throw new Error(`shard size must be a positive integer, got ${shardSize}`);
  const shards: Shard[] = [];
  for (let start = 0, index = 0; start < requestKeys.length; start += shardSize, index += 1) {
    const end = Math.min(requestKeys.length, start + shardSize);
    const hash = createHash('sha256').update(modelId).update('\0').update(runName).update('\0').update(String(index));
    for (let i = start; i < end; i += 1) hash.update('\0').update(requestKeys[i]!);
    shards.push({ index, start, end, jobId: `shard-${hash.digest('hex').slice(0, 40)}` });
  }
  return shards;
}
