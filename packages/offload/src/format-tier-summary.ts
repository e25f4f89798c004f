import type { TierSummary } from './weight-tier-store.js';

const MiB = 1024 * 1024;

/**
 * One line saying which tier holds how much of the weights (decoder layers, the input embedding and the output head,
 * which all follow the weight percents), e.g. for `flexhelm run`'s log.
 */
export function formatTierSummary(s: TierSummary): string {
  const part = (tier: 'compute' | 'host' | 'disk', what: string) => `${tier} ${(s.bytes[tier] / MiB).toFixed(2)} MiB (${s.tensors[tier]} tensors, ${what})`;
  // A GGUF file's blocks keep their own form on every tier.
  const blocks = s.ownTensors > 0 ? ' or ggml blocks' : '';
  const ends = s.endsInBackend
    ? 'the token table and the output head stay in the compute backend as stored in the file (not counted)'
    : `the input embedding and the output head (${s.headStreamed ? 'streamed' : 'resident'}) are counted with them`;
  return [
    `layer weights: ${part('compute', `fp32${blocks} resident`)}, ${part('host', `f16/4-bit${blocks} in pinned RAM`)}, ${part('disk', `f16/4-bit${blocks} files`)}`,
    `${s.streamedLayers} streamed and ${s.residentLayers} resident layers; ${ends}`,
  ].join('; ');
}
