import type { TierSummary } from './weight-tier-store.js';

const MiB = 1024 * 1024;

/**
 * One line saying which tier holds how much of the weights (decoder layers, the input embedding and the output head,
 * which all follow the weight percents), e.g. for `flexhelm run`'s log.
 */
export function formatTierSummary(s: TierSummary): string {
  const part = (tier: 'compute' | 'host' | 'disk', what: string) => `${tier} ${(s.bytes[tier] / MiB).toFixed(2)} MiB (${s.tensors[tier]} tensors, ${what})`;
  return [
    `layer weights: ${part('compute', 'fp32 resident')}, ${part('host', 'f16/4-bit in pinned RAM')}, ${part('disk', 'f16/4-bit files')}`,
    `${s.streamedLayers} streamed and ${s.residentLayers} resident layers; the input embedding and the output head (${s.headStreamed ? 'streamed' : 'resident'}) are counted with them`,
  ].join('; ');
}
