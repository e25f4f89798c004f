import { describe, expect, it } from 'vitest';
import { layerObjects, type ModelShape } from './model-shape.js';
import { placeWeights, splitCacheSequences } from './placement.js';

const opt30b: ModelShape = { numLayers: 48, hiddenSize: 7168, ffnDim: 28672, numHeads: 56, vocabSize: 50272, maxPositions: 2048 };

function placementOf(objectName: string, wg: number, wc: number): Record<string, string> {
  const obj = layerObjects(opt30b).find((o) => o.name === objectName)!;
  const tiers = placeWeights(obj.tensors, wg, wc);
  return Object.fromEntries(obj.tensors.map((t, i) => [t.name.split('.').slice(-2).join('.'), tiers[i]!]));
}

describe('placeWeights (FlexLLMGen init_weight_list)', () => {
  it('30B at 20/80: q, k, v on host, out_proj on the compute device; MLP matrices on host', () => {
    const attn = placementOf('attention_0', 20, 80);
    expect([attn['q_proj.weight'], attn['k_proj.weight'], attn['v_proj.weight'], attn['out_proj.weight']]).toEqual(['host', 'host', 'host', 'compute']);
    expect(attn['self_attn_layer_norm.bias']).toBe('compute');
    const mlp = placementOf('mlp_0', 20, 80);
    expect([mlp['fc1.weight'], mlp['fc2.weight']]).toEqual(['host', 'host']);
  });

  it('30B at 0/50: q, k and fc1 on disk; v, out_proj and fc2 on host', () => {
    const attn = placementOf('attention_0', 0, 50);
    expect([attn['q_proj.weight'], attn['k_proj.weight'], attn['v_proj.weight'], attn['out_proj.weight']]).toEqual(['disk', 'disk', 'host', 'host']);
    const mlp = placementOf('mlp_0', 0, 50);
    expect([mlp['fc1.weight'], mlp['fc2.weight']]).toEqual(['disk', 'host']);
  });

  it('puts everything on one tier at 100%', () => {
    for (const [wg, wc, tier] of [[100, 0, 'compute'], [0, 100, 'host'], [0, 0, 'disk']] as const) {
      expect(new Set(Object.values(placementOf('mlp_3', wg, wc)))).toEqual(new Set([tier]));
    }
  });
});

describe('splitCacheSequences', () => {
  it('follows FlexLLMGen rounding down to whole sequences', () => {
    expect(splitCacheSequences({ gpuBatchSize: 8, cacheGpuPercent: 100, cacheCpuPercent: 0 })).toEqual({ compute: 8, host: 0, disk: 0 });
    expect(splitCacheSequences({ gpuBatchSize: 8, cacheGpuPercent: 30, cacheCpuPercent: 70 })).toEqual({ compute: 2, host: 6, disk: 0 });
    expect(splitCacheSequences({ gpuBatchSize: 8, cacheGpuPercent: 30, cacheCpuPercent: 30 })).toEqual({ compute: 2, host: 2, disk: 4 });
    expect(splitCacheSequences({ gpuBatchSize: 5, cacheGpuPercent: 0, cacheCpuPercent: 0 })).toEqual({ compute: 0, host: 0, disk: 5 });
  });
});
