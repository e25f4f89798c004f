import type { Policy } from './policy.js';
import { numel, type TensorSpec } from './model-shape.js';

/** The three tiers: FlexLLMGen's "gpu" (the compute backend's working form), "cpu" (host memory) and disk. */
export type Tier = 'compute' | 'host' | 'disk';

/**
 * FlexLLMGen's `init_weight_list` rule (spec §3.1), applied to one layer object's tensor list: each tensor goes to
 * the tier whose cumulative percent range holds the midpoint of the tensor's span in the list, disk first. So the
 * first (largest) tensors go to disk and the last (biases, layer norms) to the compute device. Tensors sharing a
 * `unit` (a sparse layer's expert: its gate, up and down) are one item of the list, at the first one's place, so they
 * share a tier and the percents count units.
 */
export function placeWeights(tensors: readonly TensorSpec[], wGpuPercent: number, wCpuPercent: number): Tier[] {
  const items: number[] = [];
  const itemOf: number[] = [];
  const unitItem = new Map<number, number>();
  for (const t of tensors) {
    const known = t.unit === undefined ? undefined : unitItem.get(t.unit);
    if (known !== undefined) {
      items[known]! += numel(t.shape);
      itemOf.push(known);
      continue;
    }
    if (t.unit !== undefined) unitItem.set(t.unit, items.length);
    itemOf.push(items.length);
    items.push(numel(t.shape));
  }
  const total = items.reduce((a, b) => a + b, 0);
  const disk = 100 - wGpuPercent - wCpuPercent;
  const thresholds: [number, Tier][] = [
    [disk, 'disk'],
    [disk + wCpuPercent, 'host'],
    [100, 'compute'],
  ];
  let cum = 0;
  const tiers = items.map((size): Tier => {
    cum += size;
    const mid = ((cum - size / 2) / total) * 100;
    for (const [limit, tier] of thresholds) if (mid < limit) return tier;
    return 'compute';
  });
  return itemOf.map((i) => tiers[i]!);
}

/** How many of a micro-batch's sequences keep their KV cache on each tier (FlexLLMGen's mixed-device split, §3.2). */
export function splitCacheSequences(policy: Pick<Policy, 'gpuBatchSize' | 'cacheGpuPercent' | 'cacheCpuPercent'>): Record<Tier, number> {
  const n = policy.gpuBatchSize;
  const diskPercent = 100 - policy.cacheGpuPercent - policy.cacheCpuPercent;
  if (policy.cacheGpuPercent === 100) return { compute: n, host: 0, disk: 0 };
  if (policy.cacheCpuPercent === 100) return { compute: 0, host: n, disk: 0 };
  if (diskPercent === 100) return { compute: 0, host: 0, disk: n };
  // FlexLLMGen rounds segment lengths down to whole sequences (multiples of num_heads along its b*nh dim).
  const compute = Math.floor((n * policy.cacheGpuPercent) / 100);
  if (diskPercent === 0) return { compute, host: n - compute, disk: 0 };
  const host = Math.floor((n * policy.cacheCpuPercent) / 100);
  return { compute, host, disk: n - compute - host };
}
