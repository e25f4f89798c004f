import { describe, expect, it } from 'vitest';
import { describeHfConfig } from '@flexhelm/engine';
import { modelShapeOfDescription, parsePolicy, percentsFromArgs } from '@flexhelm/offload/plan';
import { layerPlacement } from './predict-cost.js';

// A Qwen1.5-MoE-like layer: 60 experts of 8 · 16 · 3 values, top 4, a shared expert; every weight on disk.
const d = describeHfConfig({ model_type: 'qwen2_moe', vocab_size: 100, hidden_size: 16, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 4, intermediate_size: 40, num_experts: 60, num_experts_per_tok: 4, moe_intermediate_size: 8, shared_expert_intermediate_size: 32, max_position_embeddings: 64 });
const shape = modelShapeOfDescription(d);
const policy = parsePolicy({ gpuBatchSize: 1, numGpuBatches: 1, ...percentsFromArgs([0, 0, 100, 0, 100, 0]) });
const expertFileBytes = 3 * 4096; // three f16 matrices of 128 values, each at a 4 KiB boundary

describe('a mixture of experts in the cost model', () => {
  it('a decode load reads the dense part and the experts its tokens are expected to choose; prefill reads whole layers', () => {
    const whole = layerPlacement(shape, policy);
    const dense = whole.diskBytes - 60 * expertFileBytes;
    expect(dense).toBeGreaterThan(0);
    // One token picks 4 experts; 8 tokens 60·(1 − (56/60)^8) ≈ 25.9 of 60 (uniform routing).
    expect(layerPlacement(shape, policy, 1).diskBytes).toBeCloseTo(dense + 4 * expertFileBytes, 6);
    expect(layerPlacement(shape, policy, 8).diskBytes).toBeCloseTo(dense + 60 * (1 - (56 / 60) ** 8) * expertFileBytes, 6);
    // 512 tokens choose nearly all: the whole layer streams.
    expect(layerPlacement(shape, policy, 512).diskBytes).toBe(whole.diskBytes);
  });
});
