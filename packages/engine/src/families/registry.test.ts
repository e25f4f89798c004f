import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LlamaCheckpoint } from '../llama-checkpoint.js';
import { modelKinds } from '@flexhelm/contract';
import { ModelFileError } from '../model-file-error.js';
import { openTensorSource } from '../open-tensor-source.js';
import { describeHfConfig, FAMILY_REGISTRY, familyEntry, readModelDescription } from './registry.js';

const GOLDEN = join(import.meta.dirname, '../../../../../shared/conformance/families');
const have = existsSync(GOLDEN);
const config = (model: string): Record<string, unknown> => JSON.parse(readFileSync(join(GOLDEN, model, 'f32', 'config.json'), 'utf8'));

describe('family registry', () => {
  it('knows every family by model_type and refuses others naming them', () => {
    expect([...FAMILY_REGISTRY.keys()]).toEqual(['opt', 'llama', 'mistral', 'qwen2', 'gemma2', 'phi3', 'olmo2', 'mixtral', 'qwen2_moe']);
    expect(() => familyEntry('deepseek_v2', 'x/config.json')).toThrow('x/config.json: model_type is "deepseek_v2"; supported: opt, llama, mistral, qwen2, gemma2, phi3, olmo2, mixtral, qwen2_moe');
    expect(() => describeHfConfig([1])).toThrow(ModelFileError);
    expect(() => describeHfConfig(null)).toThrow('config.json: is not a JSON object');
  });
});

describe.skipIf(!have)('family configs (goldens)', () => {
  it('gemma2-a: (1 + w) sandwich norms, query scalar, soft-caps, even-layer window, GeGLU-tanh, sqrt(hidden), tied', () => {
    const d = readModelDescription(join(GOLDEN, 'gemma2-a', 'f32'));
    expect(d.family).toBe('gemma2');
    expect(d.norm).toEqual({ kind: 'rmsnorm-plus-one', placement: 'pre-and-post-branch', eps: 1e-6, final: true });
    expect(d.attention).toEqual({ heads: 4, kvHeads: 2, headDim: 12, bias: false, scale: 0.25, logitSoftcap: 4, slidingWindow: 8, slidingWindowLayers: 'even' });
    expect(d.mlp).toEqual({ kind: 'geglu-tanh', intermediateSize: 96, bias: false });
    expect(d.embedding).toEqual({ dim: 48, tiedHead: true, scale: Math.sqrt(48) });
    expect(Math.fround(d.embedding.scale!)).toBeCloseTo(6.92820311, 7);
    expect(d.finalLogitSoftcap).toBe(3);
    expect(d.checkpointNames?.head).toBeUndefined();
    expect(d.layerTensors.map((t) => t.key)).toEqual(['inNormW', 'qW', 'kW', 'vW', 'oW', 'attnOutNormW', 'postNormW', 'gateW', 'upW', 'downW', 'mlpOutNormW']);
    expect(d.layerTensors.find((t) => t.key === 'qW')!.shape).toEqual([48, 48]);
    expect(modelKinds(d)).toEqual(expect.arrayContaining(['norm:rmsnorm-plus-one', 'attention:scale', 'attention:logit-softcap', 'attention:window-even-layers', 'embedding:scale', 'head:logit-softcap', 'mlp:geglu-tanh']));
    expect([d.bosTokenId, d.eosTokenId, d.padTokenId]).toEqual([1, 2, 0]);
  });

  it('gemma2: transformers defaults when keys are absent, null turns soft-caps and the window off', () => {
    const base = { model_type: 'gemma2', vocab_size: 100, hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 2, intermediate_size: 64, max_position_embeddings: 64 };
    const d = describeHfConfig(base);
    expect(d.attention).toMatchObject({ headDim: 256, kvHeads: 2, scale: 1 / 16, logitSoftcap: 50, slidingWindow: 4096, slidingWindowLayers: 'even' });
    expect(d.finalLogitSoftcap).toBe(30);
    expect(d.embedding.tiedHead).toBe(true);
    const off = describeHfConfig({ ...base, head_dim: 16, attn_logit_softcapping: null, final_logit_softcapping: null, sliding_window: null, tie_word_embeddings: false });
    expect(off.attention.logitSoftcap).toBeUndefined();
    expect(off.attention.slidingWindow).toBeUndefined();
    expect(off.finalLogitSoftcap).toBeUndefined();
    expect(off.checkpointNames?.head).toBe('lm_head.weight');
  });

  it('phi3-a: fused qkv/gate_up row blocks and longrope with both factor sets and the cos/sin scale', () => {
    const d = readModelDescription(join(GOLDEN, 'phi3-a', 'f32'));
    expect(d.positions).toEqual({
      kind: 'rope',
      theta: 10000,
      scaling: {
        kind: 'longrope',
        shortFactor: [1, 1, 1.03125, 1.0625, 1.125, 1.25, 1.5, 2],
        longFactor: [1, 1.25, 2, 3, 5, 8, 16, 32],
        originalMaxPositions: 8,
        cosSinScale: Math.SQRT2,
      },
    });
    const rows = Object.fromEntries(d.layerTensors.map((t) => [t.key, [t.checkpointSuffix, t.checkpointRows]]));
    expect(rows.qW).toEqual(['self_attn.qkv_proj.weight', [0, 64]]);
    expect(rows.kW).toEqual(['self_attn.qkv_proj.weight', [64, 96]]);
    expect(rows.vW).toEqual(['self_attn.qkv_proj.weight', [96, 128]]);
    expect(rows.gateW).toEqual(['mlp.gate_up_proj.weight', [0, 128]]);
    expect(rows.upW).toEqual(['mlp.gate_up_proj.weight', [128, 256]]);
    expect(d.attention.slidingWindow).toBeUndefined();
    expect(d.norm.placement).toBe('pre');
  });

  it('olmo2-a: q/k projection norms, post-branch norms, no input norm', () => {
    const d = readModelDescription(join(GOLDEN, 'olmo2-a', 'f32'));
    expect(d.norm).toEqual({ kind: 'rmsnorm', placement: 'post-branch', eps: 1e-6, final: true });
    expect(d.attention.qkNorm).toBe('projection');
    expect(d.layerTensors.map((t) => `${t.key}:${t.shape.join('x')}`)).toEqual(['qW:64x64', 'kW:64x32', 'vW:64x32', 'qNormW:64', 'kNormW:32', 'oW:64x64', 'attnOutNormW:64', 'gateW:64x128', 'upW:64x128', 'downW:128x64', 'mlpOutNormW:64']);
    expect(d.positions).toEqual({ kind: 'rope', theta: 500000 });
  });

  it.each([
    ['gemma2-a', { hidden_activation: 'gelu' }, 'hidden_activation is "gelu"; only "gelu_pytorch_tanh"'],
    ['gemma2-a', { query_pre_attn_scalar: 0 }, 'query_pre_attn_scalar is 0; it must be a number above 0'],
    ['gemma2-a', { attn_logit_softcapping: 'big' }, 'attn_logit_softcapping is "big"; it must be a number above 0 or null'],
    ['gemma2-a', { final_logit_softcapping: -1 }, 'final_logit_softcapping is -1'],
    ['gemma2-a', { sliding_window: 2.5 }, 'sliding_window is 2.5; it must be a positive integer or null'],
    ['gemma2-a', { head_dim: 7 }, 'head_dim 7 is odd'],
    ['gemma2-a', { num_key_value_heads: 3 }, 'num_attention_heads 4 is not a multiple of num_key_value_heads 3'],
    ['phi3-a', { partial_rotary_factor: 0.5 }, 'partial_rotary_factor 0.5 is not supported; only 1'],
    ['phi3-a', { rope_scaling: { type: 'linear', factor: 2 } }, 'rope_scaling is {"type":"linear","factor":2}; Phi-3 takes null or {"type": "longrope"'],
    ['phi3-a', { rope_scaling: { type: 'longrope', short_factor: [1, 2], long_factor: [1, 2] } }, 'rope_scaling.short_factor must be a list of head_dim/2 = 8 numbers above 0'],
    ['phi3-a', { original_max_position_embeddings: 0 }, 'original_max_position_embeddings is 0; it must be an integer from 1'],
    ['phi3-a', { original_max_position_embeddings: 1 }, 'original_max_position_embeddings is 1; with a longer max_position_embeddings it must be at least 2'],
    ['phi3-a', { hidden_act: 'gelu' }, 'hidden_act is "gelu"; only "silu"'],
    ['olmo2-a', { rms_norm_eps: 0 }, 'rms_norm_eps is 0; it must be a number above 0'],
    ['olmo2-a', { vocab_size: 1e9 }, 'vocab_size is 1000000000; it must be an integer from 1 to 1048576'],
    ['olmo2-a', { eos_token_id: 5000 }, 'eos_token_id is 5000; it must be a token id from 0 to 999'],
  ])('%s with %j is refused in one line', (model, over, message) => {
    const json = { ...config(model), ...over };
    let err: unknown;
    try {
      describeHfConfig(json, `${model}/config.json`);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ModelFileError);
    expect((err as Error).message).toContain(`${model}/config.json: ${message}`);
    expect((err as Error).message).not.toContain('\n');
  });
});

describe.skipIf(!have)('family checkpoints (goldens)', () => {
  it.each(['gemma2-a', 'phi3-a', 'olmo2-a', 'mixtral-a'])('%s loads from f32, f16 and bf16 with identical values; every tensor is used', (model) => {
    const layers: Record<string, Float32Array>[] = [];
    for (const dtype of ['f32', 'f16', 'bf16']) {
      const dir = join(GOLDEN, model, dtype);
      const ck = new LlamaCheckpoint(readModelDescription(dir), openTensorSource(dir));
      layers.push(ck.layer(1));
      const head = ck.head(ck.embedding().tokens);
      expect(head.lmHead.length).toBe(ck.description.vocabSize * ck.description.hiddenSize);
      ck.close();
    }
    for (const key of Object.keys(layers[0]!)) {
      expect(layers[1]![key]).toEqual(layers[0]![key]);
      expect(layers[2]![key]).toEqual(layers[0]![key]);
    }
  });

  it('phi3-a: qkv_proj and gate_up_proj split into their row blocks ([in, out] after the transpose)', () => {
    const dir = join(GOLDEN, 'phi3-a', 'f32');
    const source = openTensorSource(dir);
    const qkv = source.read('model.layers.0.self_attn.qkv_proj.weight');
    const gateUp = source.read('model.layers.0.mlp.gate_up_proj.weight');
    const ck = new LlamaCheckpoint(readModelDescription(dir), openTensorSource(dir));
    const w = ck.layer(0);
    // [in, out] element (i, o) is checkpoint row o, column i; k starts at row 64, up at row 128.
    expect(w.qW![3 * 64 + 5]).toBe(qkv[5 * 64 + 3]);
    expect(w.kW![7 * 32 + 2]).toBe(qkv[(64 + 2) * 64 + 7]);
    expect(w.vW![0 * 32 + 31]).toBe(qkv[(96 + 31) * 64]);
    expect(w.gateW![9 * 128 + 127]).toBe(gateUp[127 * 64 + 9]);
    expect(w.upW![1 * 128]).toBe(gateUp[128 * 64 + 1]);
    ck.close();
    source.close();
  });

  it('a missing or extra tensor is refused naming it', () => {
    const dir = join(GOLDEN, 'olmo2-a', 'f32');
    const d = readModelDescription(dir);
    const noQNorm = { ...d, layerTensors: d.layerTensors.filter((t) => t.key !== 'qNormW') };
    expect(() => new LlamaCheckpoint(noQNorm, openTensorSource(dir))).toThrow('tensor model.layers.0.self_attn.q_norm.weight is not part of a olmo2 model');
    const phi = readModelDescription(join(GOLDEN, 'phi3-a', 'f32'));
    expect(() => new LlamaCheckpoint({ ...phi, hiddenSize: 64, layers: 3 }, openTensorSource(join(GOLDEN, 'phi3-a', 'f32')))).toThrow('the checkpoint has no tensor model.layers.2.input_layernorm.weight');
  });
});
