import { createHash } from 'node:crypto';

/** Every Redis key flexhelm writes outside BullMQ's own starts with this. */
export const KEY_PREFIX = 'flexhelm:';
/** Hash: queue name → the model id it serves (`queue status` lists queues from here). */
export const MODELS_KEY = `${KEY_PREFIX}models`;

/**
 * One BullMQ queue per model identity (`<model>@<fingerprint>`): a worker listens only on its own model's queue,
 * so it can never serve a run of other weights. Queue names avoid `:` (BullMQ's key separator).
 */
export function queueNameFor(modelId: string): string {
  return `flexhelm-shards-${createHash('sha256').update(modelId).digest('hex').slice(0, 16)}`;
}
