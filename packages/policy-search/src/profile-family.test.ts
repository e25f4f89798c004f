import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { describeHfConfig, makeModelDescription, resolveHubConfig, type ModelDescription } from '@flexhelm/engine';
import { OrtBackend } from '@flexhelm/ort-backend';
import { measured, shapeId, type BackendProfile } from '@flexhelm/cost-model';
import { autoPolicy } from './auto-policy.js';
import { profileBackend, profileShape, scaleHeadCosts } from './profile-machine.js';
import { profileDescription, profileVocab, toShapeKey } from './profiled-model.js';

const root = mkdtempSync(join(tmpdir(), 'flexhelm-profile-family-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

// A Llama-3-shaped model (GQA 4/2, SwiGLU, RMSNorm, untied head), tiny.
const llama: ModelDescription = describeHfConfig(
  resolveHubConfig({ base: 'llama-3.1-8b', hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 2, num_hidden_layers: 3, intermediate_size: 160, vocab_size: 700, max_position_embeddings: 512 }).hf,
);

describe('profiling a Llama-family model', () => {
  it("times the model's own layer (RMSNorm, SwiGLU, GQA KV heads), not an OPT layer of its width", async () => {
    const seen: ModelDescription[] = [];
    const make = () => {
      const b = new OrtBackend();
      const init = b.init.bind(b);
      b.init = async (d) => {
        seen.push(d);
        return init(d);
      };
      return b;
    };
    const p = await profileBackend(llama, make, { quick: true });
    expect(seen.length).toBeGreaterThanOrEqual(2);
    for (const d of seen) {
      expect([d.family, d.norm.kind, d.mlp.kind, d.mlp.intermediateSize, d.attention.kvHeads, d.attention.headDim, d.embedding.tiedHead, d.layers]).toEqual(['llama', 'rmsnorm', 'swiglu', 160, 2, 16, false, 2]);
    }
    // Linear FLOPs of the Llama layer: q and o 64×64, k and v 64×32, gate, up and down 64×160 (an OPT layer: 4·64² + 2·64·160).
    const flops = 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 160);
    expect(p.linearGflops[0]).toBeCloseTo((flops * p.rows[0]!) / (p.residentMs[0]!.median / 1000) / 1e9, 6);
    expect(p.profileVocab).toBeUndefined();
  }, 300_000);

  it('keys its profile by the family layer, apart from an OPT shape of the same widths', () => {
    const key = toShapeKey(llama);
    expect(key.family).toEqual({ kvHeads: 2, headDim: 16, gatedMlp: true, norm: 'rmsnorm', attentionBias: false });
    expect(shapeId(key)).toBe('h64-f160-n4-v700-kv2x16-swiglu-rms');
    const opt = makeModelDescription({ base: 'opt-125m', hiddenSize: 64, wordEmbedProjDim: 64, numAttentionHeads: 4, ffnDim: 160, vocabSize: 700 });
    expect(shapeId(toShapeKey(opt))).toBe('h64-f160-n4-v700');
    const qwen = describeHfConfig(resolveHubConfig({ base: 'qwen2-0.5b', hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 2, num_hidden_layers: 2, intermediate_size: 160, vocab_size: 700 }).hf);
    expect(shapeId(toShapeKey(qwen))).toBe('h64-f160-n4-v700-kv2x16-swiglu-rms-qkvb');
  });

  it("keys a layer with kinds beyond Llama's apart: Gemma 2's and OLMo 2's layers of the same widths are timed themselves", () => {
    const norm = (key: string, suffix: string) => ({ key, shape: [64], group: 'mlp' as const, checkpointSuffix: suffix });
    const gemma: ModelDescription = {
      ...llama,
      family: 'gemma2',
      norm: { ...llama.norm, kind: 'rmsnorm-plus-one', placement: 'pre-and-post-branch' },
      attention: { ...llama.attention, scale: 0.25 /* = 16^-0.5: no kind of its own */, logitSoftcap: 50, slidingWindow: 8, slidingWindowLayers: 'even' },
      mlp: { ...llama.mlp, kind: 'geglu-tanh' },
      embedding: { ...llama.embedding, scale: 8, tiedHead: true },
      finalLogitSoftcap: 30,
      layerTensors: [...llama.layerTensors, norm('attnOutNormW', 'post_attention_layernorm.weight'), norm('mlpOutNormW', 'post_feedforward_layernorm.weight')],
    };
    expect(toShapeKey(gemma).family).toEqual({
      kvHeads: 2, headDim: 16, gatedMlp: true, norm: 'rmsnorm', attentionBias: false,
      kinds: ['norm:rmsnorm-plus-one', 'placement:pre-and-post-branch', 'mlp:geglu-tanh', 'attention:logit-softcap', 'attention:window-even-layers', 'embedding:scale', 'head:logit-softcap'],
    });
    expect(shapeId(toShapeKey(gemma))).toBe(
      'h64-f160-n4-v700-kv2x16-swiglu-rms-norm.rmsnorm-plus-one-placement.pre-and-post-branch-mlp.geglu-tanh-attention.logit-softcap-attention.window-even-layers-embedding.scale-head.logit-softcap',
    );
    const olmo: ModelDescription = { ...llama, family: 'olmo2', norm: { ...llama.norm, placement: 'post-branch' }, attention: { ...llama.attention, qkNorm: 'projection' } };
    expect(shapeId(toShapeKey(olmo))).toBe('h64-f160-n4-v700-kv2x16-swiglu-rms-placement.post-branch-attention.qk-norm');
  });

  it("profiles an 8B shape with a cut token table (16,384 rows, not 128,256) and scales the head's costs back", () => {
    const d8b = describeHfConfig(resolveHubConfig('llama-3.1-8b').hf);
    expect(profileVocab(d8b)).toBe(16_384);
    const p = profileDescription(d8b, 2);
    expect([p.vocabSize, p.layers, p.bosTokenId, p.hiddenSize, p.attention.kvHeads]).toEqual([16_384, 2, undefined, 4096, 8]);
    // Small tables are profiled whole.
    expect(profileVocab(llama)).toBe(700);
    const m = (x: number) => measured([x]);
    const b = { roundTripMs: m(1), headRows: [1], headMs: [m(3)], decode: { logitsMs: [m(5)], sampleMsPerRow: 0.5 } } as unknown as BackendProfile;
    const scaled = scaleHeadCosts(b, 16_384, 128_256);
    const k = 128_256 / 16_384;
    expect(scaled.headMs[0]!.median).toBeCloseTo(1 + 2 * k, 9);
    expect(scaled.decode!.logitsMs[0]!.median).toBeCloseTo(1 + 4 * k, 9);
    expect(scaled.decode!.sampleMsPerRow).toBeCloseTo(0.5 * k, 9);
    expect(scaled.profileVocab).toBe(16_384);
    expect(scaleHeadCosts(scaled, 128_256, 16_384).headMs[0]!.median).toBeCloseTo(3, 9);
  });

  it('--percent auto on a made Llama-shaped model: a policy, from a profile that records the Llama layer', async () => {
    const { result, profile, profiled } = await autoPolicy({
      description: llama, workload: { promptLen: 32, genLen: 4, numSequences: 4 },
      dataDir: join(root, 'data'), offloadDir: join(root, 'offload'), maxRam: 4 * 1024 ** 3,
    });
    expect(profiled).toBe(true);
    expect(result.best.policy.gpuBatchSize).toBeGreaterThanOrEqual(1);
    expect(result.best.prediction.throughput).toBeGreaterThan(0);
    const entry = profile.shapes[shapeId(toShapeKey(llama))]!;
    expect(Object.keys(profile.shapes)).toEqual(['h64-f160-n4-v700-kv2x16-swiglu-rms']);
    expect(entry.shape.family).toEqual({ kvHeads: 2, headDim: 16, gatedMlp: true, norm: 'rmsnorm', attentionBias: false });
    expect(entry.backends['onnxruntime-fp32']!.fit!.runs.length).toBeGreaterThan(0);
  }, 600_000);
});

describe('profiling a family onnxruntime or oneDNN does not compute yet', () => {
  it('times the backend the run falls back to (the reference) under the fp32 path, and never stops there', async () => {
    const gemma = describeHfConfig(resolveHubConfig({ base: 'gemma-2-2b', hidden_size: 32, num_attention_heads: 2, num_key_value_heads: 1, num_hidden_layers: 2, intermediate_size: 64, vocab_size: 500, max_position_embeddings: 512 }).hf);
    const log: string[] = [];
    const shape = await profileShape(gemma, { quick: true, log: (l) => log.push(l) });
    const fp32 = shape.backends['onnxruntime-fp32']!;
    expect(fp32.residentMs.length).toBeGreaterThan(0);
    for (const m of fp32.residentMs) expect(m.median).toBeGreaterThan(0);
    // Whichever backend refused (while the fast backends lack Gemma 2's kinds), the log names it and what was timed.
    for (const line of log.filter((l) => / does not compute /.test(l))) {
      expect(line).toMatch(/^profile: (onnxruntime|the oneDNN backend) does not compute .*norm:rmsnorm-plus-one.*; (timing the reference backend, which computes it, instead…|no oneDNN timings for this shape)$/);
    }
  }, 300_000);
});
