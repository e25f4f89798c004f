import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LlamaCheckpoint } from './llama-checkpoint.js';
import { makeHubModel } from './make-hub-model.js';
import { openTensorSource } from './open-tensor-source.js';
import { Engine } from './engine.js';
import { describeHfConfig } from './families/registry.js';
import { routeTokens } from './moe-reference.js';
import { expectMatchesNaive } from './test-matches-naive.js';
import { QWEN2_MOE_A } from './test-moe-configs.js';
import { naiveLlamaLogits } from './test-naive-llama.js';

describe('routeTokens', () => {
  // Logits ln(1), ln(3), ln(3), ln(2): p = 1/9, 3/9, 3/9, 2/9; experts 1 and 2 tie for first place.
  const logits = Float32Array.from([0, Math.log(3), Math.log(3), Math.log(2)]);

  it('softmax first, then the top k, best first, the lower expert index first on an exact tie', () => {
    const r = routeTokens({ experts: 4, topK: 3, renormalize: false }, logits, 1);
    expect(Array.from(r.experts)).toEqual([1, 2, 3]);
    // Not renormalised (Qwen2-MoE's norm_topk_prob false): the raw probabilities, summing to 8/9.
    expect(Array.from(r.weights)).toEqual([3 / 9, 3 / 9, 2 / 9].map(Math.fround));
  });

  it('renormalised (Mixtral): p_k / Σ p_top, i.e. a softmax over the chosen logits', () => {
    const r = routeTokens({ experts: 4, topK: 2, renormalize: true }, Float32Array.from([...logits, 5, 1, 1, 2]), 2);
    expect(Array.from(r.experts)).toEqual([1, 2, 0, 3]);
    expect(r.weights[0]).toBeCloseTo(0.5, 7);
    expect(r.weights[1]).toBeCloseTo(0.5, 7);
    // Row 1: e^5 and e^2 chosen → weights e^3/(e^3 + 1) and 1/(e^3 + 1).
    expect(r.weights[2]).toBeCloseTo(Math.exp(3) / (Math.exp(3) + 1), 6);
    expect(r.weights[3]).toBeCloseTo(1 / (Math.exp(3) + 1), 6);
  });
});

describe('the reference mixture of experts against a naive forward (random weights)', () => {
  const small = { vocab_size: 97, max_position_embeddings: 64 };
  const rows = [[3, 50, 96, 7, 7, 12, 40], [5, 9, 81]];

  it('qwen2_moe like qwen2moe-a: dense layers 0 and 2 (decoder_sparse_step 2), shared expert, norm_topk_prob false', async () => {
    const d = describeHfConfig({ ...QWEN2_MOE_A, ...small });
    expect(d.moe!.sparseLayers).toEqual([1]);
    await expectMatchesNaive(d, rows, 7);
  });

  it('qwen2_moe: mlp_only_layers [0, 2] of 4 dense, 5 experts top 3 renormalised (norm_topk_prob true)', async () => {
    const d = describeHfConfig({ ...QWEN2_MOE_A, ...small, num_hidden_layers: 4, decoder_sparse_step: 1, mlp_only_layers: [0, 2], num_experts: 5, num_experts_per_tok: 3, norm_topk_prob: true });
    expect(d.moe!.sparseLayers).toEqual([1, 3]);
    await expectMatchesNaive(d, rows, 3);
  });

  it('mixtral: every layer sparse, 4 experts top 2, renormalised', async () => {
    const d = describeHfConfig({ model_type: 'mixtral', ...small, hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 40, num_local_experts: 4 });
    await expectMatchesNaive(d, rows, 5);
  });

  it('the shared expert and the raw weights matter: a renormalised variant of the same weights differs', async () => {
    const d = describeHfConfig({ ...QWEN2_MOE_A, ...small });
    const renorm = { ...d, moe: { ...d.moe!, renormalize: true } };
    const a = await Engine.dummy(d, { backend: 'reference', seed: 7 });
    const b = await Engine.dummy(renorm, { backend: 'reference', seed: 7 });
    try {
      const x = await a.forwardLogits([rows[0]!], [rows[0]!.map(() => 1)]);
      const y = await b.forwardLogits([rows[0]!], [rows[0]!.map(() => 1)]);
      let diff = 0;
      for (let i = 0; i < x.length; i++) diff = Math.max(diff, Math.abs(x[i]! - y[i]!));
      expect(diff).toBeGreaterThan(1e-2);
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe('a Qwen2-MoE folder written by makeHubModel (dense and sparse layers)', () => {
  const root = mkdtempSync(join(tmpdir(), 'moe-hub-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const config = { base: 'qwen1.5-moe-a2.7b', hidden_size: 32, num_attention_heads: 4, num_key_value_heads: 4, num_hidden_layers: 3, intermediate_size: 64, vocab_size: 120, num_experts: 5, num_experts_per_tok: 2, moe_intermediate_size: 16, shared_expert_intermediate_size: 24, mlp_only_layers: [1] };

  it('loads on the reference and matches the naive forward of its own safetensors', async () => {
    const dir = join(root, 'qwen-moe');
    const made = makeHubModel({ config, outDir: dir, seed: 2, dtype: 'f32' });
    expect(made.description.moe!.sparseLayers).toEqual([0, 2]);
    const source = openTensorSource(dir);
    expect(source.tensors.has('model.layers.1.mlp.gate_proj.weight')).toBe(true);
    expect(source.tensors.has('model.layers.1.mlp.gate.weight')).toBe(false);
    expect(source.tensors.get('model.layers.2.mlp.experts.4.down_proj.weight')!.shape).toEqual([32, 16]);
    const engine = await Engine.load(dir, { backend: 'reference' });
    try {
      const ids = [4, 99, 17, 17, 60];
      const logits = await engine.forwardLogits([ids], [ids.map(() => 1)]);
      const naive = naiveLlamaLogits(engine.description, source, ids);
      let diff = 0;
      for (const [j, row] of naive.entries()) for (const [k, v] of row.entries()) diff = Math.max(diff, Math.abs(v - logits[j * 120 + k]!));
      expect(diff).toBeLessThan(1e-4);
    } finally {
      await engine.close();
      source.close();
    }
  });

  it('a checkpoint whose dense layer lacks the router the config implies is refused naming the tensor', () => {
    const dir = join(root, 'qwen-moe-dense-1');
    makeHubModel({ config, outDir: dir, seed: 2, dtype: 'bf16' });
    const d = describeHfConfig({ ...config, model_type: 'qwen2_moe', mlp_only_layers: [], max_position_embeddings: 64 });
    expect(() => new LlamaCheckpoint(d, openTensorSource(dir))).toThrow('the checkpoint has no tensor model.layers.1.mlp.gate.weight (a qwen2_moe model with this config.json needs it)');
  });
});
