import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FAMILY_BASES } from './registry.js';
import { LlamaCheckpoint } from '../llama-checkpoint.js';
import { resolveHubConfig } from '../make-hub-model.js';
import { isSparseLayer, layerTensorsOf, modelKinds } from '@flexhelm/contract';
import { ModelFileError } from '../model-file-error.js';
import { openTensorSource } from '../open-tensor-source.js';
import { parameterCounts } from '../parameter-counts.js';
import { QWEN2_MOE_A } from '../test-moe-configs.js';
import { describeHfConfig, readModelDescription } from './registry.js';

const GOLDEN = join(import.meta.dirname, '../../../../../shared/conformance/families');
const have = existsSync(GOLDEN);


const refusal = (json: Record<string, unknown>): string => {
  try {
    describeHfConfig(json, 'm/config.json');
  } catch (e) {
    expect(e).toBeInstanceOf(ModelFileError);
    return (e as Error).message;
  }
  throw new Error('not refused');
};

describe('qwen2_moe config', () => {
  it('qwen2moe-a: sparse layer 1 only (decoder_sparse_step 2), shared expert, raw top-k weights', () => {
    const d = describeHfConfig(QWEN2_MOE_A);
    expect(d.family).toBe('qwen2_moe');
    expect(d.moe).toMatchObject({ experts: 6, topK: 2, renormalize: false, expertIntermediateSize: 32, sharedExpertIntermediateSize: 48, sparseLayers: [1] });
    expect([0, 1, 2].map((i) => isSparseLayer(d, i))).toEqual([false, true, false]);
    expect(modelKinds(d)).toEqual(expect.arrayContaining(['mlp:swiglu', 'mlp:moe', 'mlp:moe-shared-expert', 'mlp:moe-dense-layers']));
    expect(d.attention).toMatchObject({ heads: 4, kvHeads: 2, headDim: 8, bias: true });
    const sparse = layerTensorsOf(d, 1).map((t) => `${t.key}:${t.shape.join('x')}:${t.checkpointSuffix}`);
    expect(sparse.slice(0, 9)).toEqual([
      'inNormW:32:input_layernorm.weight', 'qW:32x32:self_attn.q_proj.weight', 'qB:32:self_attn.q_proj.bias', 'kW:32x16:self_attn.k_proj.weight', 'kB:16:self_attn.k_proj.bias',
      'vW:32x16:self_attn.v_proj.weight', 'vB:16:self_attn.v_proj.bias', 'oW:32x32:self_attn.o_proj.weight', 'postNormW:32:post_attention_layernorm.weight',
    ]);
    expect(sparse.slice(9, 13)).toEqual(['routerW:32x6:mlp.gate.weight', 'expert.0.gateW:32x32:mlp.experts.0.gate_proj.weight', 'expert.0.upW:32x32:mlp.experts.0.up_proj.weight', 'expert.0.downW:32x32:mlp.experts.0.down_proj.weight']);
    expect(sparse.slice(-4)).toEqual([
      'sharedGateW:32x48:mlp.shared_expert.gate_proj.weight', 'sharedUpW:32x48:mlp.shared_expert.up_proj.weight', 'sharedDownW:48x32:mlp.shared_expert.down_proj.weight', 'sharedExpertGateW:32x1:mlp.shared_expert_gate.weight',
    ]);
    expect(sparse.length).toBe(9 + 1 + 18 + 4);
    expect(layerTensorsOf(d, 0).filter((t) => t.group === 'mlp').map((t) => `${t.key}:${t.shape.join('x')}`)).toEqual(['postNormW:32', 'gateW:32x96', 'upW:32x96', 'downW:96x32']);
    // check.md: 59 tensors (2 dense layers of 12, the sparse one of 32, embedding, final norm, head).
    expect(2 * layerTensorsOf(d, 0).length + sparse.length + 3).toBe(59);
  });

  it('mlp_only_layers makes sparse layers dense; num_experts 0 or a step past the last layer is a dense model', () => {
    expect(describeHfConfig({ ...QWEN2_MOE_A, decoder_sparse_step: 1, mlp_only_layers: [0, 2] }).moe!.sparseLayers).toEqual([1]);
    const all = describeHfConfig({ ...QWEN2_MOE_A, decoder_sparse_step: 1 });
    expect(all.moe!.sparseLayers).toEqual([0, 1, 2]);
    expect(all.moe!.denseLayerTensors).toBeUndefined();
    expect(modelKinds(all)).not.toContain('mlp:moe-dense-layers');
    for (const dense of [describeHfConfig({ ...QWEN2_MOE_A, num_experts: 0 }), describeHfConfig({ ...QWEN2_MOE_A, decoder_sparse_step: 4 })]) {
      expect(dense.moe).toBeUndefined();
      expect(modelKinds(dense).filter((k) => k.startsWith('mlp:'))).toEqual(['mlp:swiglu']);
      expect(dense.layerTensors.map((t) => t.key)).toContain('gateW');
    }
    expect(describeHfConfig({ ...QWEN2_MOE_A, norm_topk_prob: true }).moe!.renormalize).toBe(true);
  });

  it.each([
    [{ num_experts: -1 }, 'num_experts is -1; it must be an integer from 0 to 1024'],
    [{ num_experts: 2000 }, 'num_experts is 2000; it must be an integer from 0 to 1024'],
    [{ num_experts_per_tok: 7 }, 'num_experts_per_tok is 7; it must be an integer from 1 to 6'],
    [{ num_experts_per_tok: 0 }, 'num_experts_per_tok is 0; it must be an integer from 1 to 6'],
    [{ decoder_sparse_step: 0 }, 'decoder_sparse_step is 0; it must be an integer from 1 to 1000000'],
    [{ mlp_only_layers: [3] }, 'mlp_only_layers is [3]; it must be a list of layer indices from 0 to 2'],
    [{ mlp_only_layers: 'all' }, 'mlp_only_layers is "all"; it must be a list of layer indices from 0 to 2'],
    [{ moe_intermediate_size: 0 }, 'moe_intermediate_size is 0; it must be an integer from 1 to 262144'],
    [{ shared_expert_intermediate_size: 1.5 }, 'shared_expert_intermediate_size is 1.5; it must be an integer from 1 to 262144'],
    [{ norm_topk_prob: 'yes' }, 'norm_topk_prob is "yes"; it must be true or false'],
    [{ use_sliding_window: true }, 'use_sliding_window true is not implemented for qwen2_moe'],
    [{ hidden_act: 'gelu' }, 'hidden_act is "gelu"; only "silu"'],
  ])('%j is refused in one line', (over, message) => {
    const m = refusal({ ...QWEN2_MOE_A, ...over });
    expect(m).toContain(`m/config.json: ${message}`);
    expect(m).not.toContain('\n');
  });
});

describe('mixtral config', () => {
  const tiny = { model_type: 'mixtral', vocab_size: 100, hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4, intermediate_size: 48, max_position_embeddings: 64 };
  it('transformers defaults: 8 experts, top 2, theta 1e6, eps 1e-5, no window, untied, every layer sparse and renormalised', () => {
    const d = describeHfConfig(tiny);
    expect(d.moe).toEqual({ experts: 8, topK: 2, renormalize: true, expertIntermediateSize: 48, sparseLayers: [0, 1] });
    expect(d.positions).toEqual({ kind: 'rope', theta: 1e6 });
    expect(d.norm.eps).toBe(1e-5);
    expect(d.attention.slidingWindow).toBeUndefined();
    expect(d.embedding.tiedHead).toBe(false);
    expect(modelKinds(d).filter((k) => k.startsWith('mlp:'))).toEqual(['mlp:swiglu', 'mlp:moe']);
    const expert = d.layerTensors.filter((t) => t.key.startsWith('expert.3.')).map((t) => `${t.key}:${t.checkpointSuffix}`);
    expect(expert).toEqual(['expert.3.gateW:block_sparse_moe.experts.3.w1.weight', 'expert.3.upW:block_sparse_moe.experts.3.w3.weight', 'expert.3.downW:block_sparse_moe.experts.3.w2.weight']);
  });

  it.each([
    [{ num_local_experts: 0 }, 'num_local_experts is 0; it must be an integer from 1 to 1024'],
    [{ num_local_experts: 4, num_experts_per_tok: 5 }, 'num_experts_per_tok is 5; it must be an integer from 1 to 4'],
    [{ num_experts_per_tok: null, num_local_experts: 'eight' }, 'num_local_experts is "eight"'],
    [{ sliding_window: -4 }, 'sliding_window is -4; it must be a positive integer or null'],
  ])('%j is refused in one line', (over, message) => {
    expect(refusal({ ...tiny, ...over })).toContain(`m/config.json: ${message}`);
  });
});

describe('parameter counts of the published MoE shapes', () => {
  const counts = (base: string) => parameterCounts(describeHfConfig(resolveHubConfig(base).hf));
  it('Mixtral-8x7B holds 46.7 B parameters and uses 12.9 B per token', () => {
    const { total, active } = counts('mixtral-8x7b');
    expect(total / 1e9).toBeCloseTo(46.70, 2);
    expect(active / 1e9).toBeCloseTo(12.88, 2);
  });
  it('Qwen1.5-MoE-A2.7B: 14.3 B total, 2.7 B active; Qwen2-57B-A14B: 57 B, 14 B', () => {
    const a = counts('qwen1.5-moe-a2.7b');
    expect(a.total / 1e9).toBeCloseTo(14.32, 1);
    expect(a.active / 1e9).toBeCloseTo(2.69, 1);
    const b = counts('qwen2-57b-a14b');
    expect(b.total / 1e9).toBeCloseTo(57.4, 0);
    expect(b.active / 1e9).toBeCloseTo(14.2, 0);
  });
  it('a dense model is all active', () => {
    const d = describeHfConfig(resolveHubConfig('qwen2-0.5b').hf);
    const { total, active } = parameterCounts(d);
    expect(active).toBe(total);
    expect(FAMILY_BASES['qwen2-0.5b']).toBeDefined();
  });
});

describe.skipIf(!have)('mixtral-a (golden)', () => {
  it('reads config.json: 4 experts, top 2, expert intermediate 96, every tensor of the checkpoint used', () => {
    const dir = join(GOLDEN, 'mixtral-a', 'f32');
    const d = readModelDescription(dir);
    expect(d.moe).toEqual({ experts: 4, topK: 2, renormalize: true, expertIntermediateSize: 96, sparseLayers: [0, 1] });
    // check.md: 41 tensors.
    expect(2 * d.layerTensors.length + 3).toBe(41);
    const golden = JSON.parse(readFileSync(join(GOLDEN, 'mixtral-a', 'golden.json'), 'utf8'));
    expect(golden.derived.output_projection).toBe(d.checkpointNames!.head);
    const ck = new LlamaCheckpoint(d, openTensorSource(dir));
    const w = ck.layer(1);
    expect(w['expert.3.downW']!.length).toBe(96 * 64);
    expect(w.routerW!.length).toBe(64 * 4);
    ck.close();
  });
});
