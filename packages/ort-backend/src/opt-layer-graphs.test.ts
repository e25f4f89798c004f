import { createHash } from 'node:crypto';
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { MASK_BIAS, type LayerTensors, type StepShape } from '@flexhelm/contract';
import { DummyTensorSource, makeModelDescription, OptWeights, referenceHead, referenceLayer, SeededUniform, transposeLayerTensors, type ModelDescription, type OptLayerTensorKey, type OptMakeConfig } from '@flexhelm/engine';
import { LLAMA_TENSOR_NAME, llamaHeadGraph, llamaLayerGraph, llamaLayerStageGraphs, llamaStreamedHeadGraph, llamaStreamedLayerGraph } from './llama-graphs.js';
import { layerDims } from './ort-decoder-layer.js';

// OPT through the one layer builder (ort-decoder-layer.ts): pre-norm, and post-norm with project_in/out (opt-350m).
const base: OptMakeConfig = { base: 'opt-125m', name: 'tiny-opt', hiddenSize: 96, numAttentionHeads: 4, ffnDim: 200, numHiddenLayers: 1, vocabSize: 300, wordEmbedProjDim: 96, maxPositionEmbeddings: 64 };
const CONFIGS: Record<string, ModelDescription<OptLayerTensorKey>> = { pre: makeModelDescription(base), post: makeModelDescription({ ...base, name: 'tiny-opt-post', doLayerNormBefore: false, wordEmbedProjDim: 48 }) };
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex').slice(0, 16);
const B = 2;
const S = 3;
const P = 4;
const T = P + S;
const H = 4;
const D = 24;

/** A step whose row 1 has a pad at key 1 and whose queries see keys up to their own position. */
function step(): StepShape {
  const maskBias = new Float32Array(B * S * T);
  for (let b = 0; b < B; b++) for (let s = 0; s < S; s++) for (let t = 0; t < T; t++) maskBias[(b * S + s) * T + t] = t > P + s || (b === 1 && t === 1) ? MASK_BIAS : 0;
  return { batch: B, seq: S, pastLen: P, maskBias };
}

const diff = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
};
const f32 = (data: Float32Array, dims: number[]) => new ort.Tensor('float32', data, dims);

async function run(bytes: Uint8Array, feeds: Record<string, ort.Tensor>): Promise<Record<string, Float32Array>> {
  const session = await ort.InferenceSession.create(bytes);
  try {
    const out = await session.run(feeds);
    return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, v.data as Float32Array]));
  } finally {
    await session.release();
  }
}

describe.each(Object.keys(CONFIGS))('OPT %s-norm through the shared layer builder', (name) => {
  const c = CONFIGS[name]!;
  const d = c;
  const weights = new OptWeights(c, new DummyTensorSource(c, 3));
  const w = weights.layer(0);
  const inOut = transposeLayerTensors(d, w as unknown as LayerTensors);
  const rand = new SeededUniform(11);
  const x = Float32Array.from({ length: B * S * c.hiddenSize }, () => rand.next() * 2 - 1);
  const past = { k: Float32Array.from({ length: B * H * P * D }, () => rand.next() - 0.5), v: Float32Array.from({ length: B * H * P * D }, () => rand.next() - 0.5) };
  const st = step();
  const want = referenceLayer(c, w, st, x, past);
  const mask = f32(st.maskBias, [B, 1, S, T]);

  it('the layer with a past (MultiHeadAttention) computes what referenceLayer does', async () => {
    const out = await run(llamaLayerGraph(d, inOut), { x: f32(x, [B, S, c.hiddenSize]), mask, past_k: f32(past.k, [B, H, P, D]), past_v: f32(past.v, [B, H, P, D]) });
    expect(diff(out.y!, want.hidden)).toBeLessThan(2e-5);
    expect(diff(out.present_k!, want.present.k)).toBeLessThan(2e-6);
    expect(diff(out.present_v!, want.present.v)).toBeLessThan(2e-6);
  });

  it('the two resident stages around a cache compute what the streamed layer does (its new k/v bit for bit)', async () => {
    const stages = llamaLayerStageGraphs(d, inOut);
    const qkv = await run(stages.qkv, { x: f32(x, [B, S, c.hiddenSize]) });
    const feeds: Record<string, ort.Tensor> = { x: f32(x, [B, S, c.hiddenSize]), mask, past_k: f32(past.k, [B, H, P, D]), past_v: f32(past.v, [B, H, P, D]) };
    for (const spec of d.layerTensors) feeds[LLAMA_TENSOR_NAME[spec.key]] = f32(inOut[spec.key]!, spec.shape);
    const streamed = await run(llamaStreamedLayerGraph(d), feeds);
    expect(Buffer.from(qkv.k!.buffer).equals(Buffer.from(streamed.new_k!.buffer))).toBe(true);
    expect(Buffer.from(qkv.v!.buffer).equals(Buffer.from(streamed.new_v!.buffer))).toBe(true);
    const rest = await run(stages.rest, {
      x: f32(x, [B, S, c.hiddenSize]),
      q: f32(qkv.q!, [B, S, c.hiddenSize]),
      cache_k: f32(streamed.present_k!, [B, H, T, D]),
      cache_v: f32(streamed.present_v!, [B, H, T, D]),
      mask,
    });
    // MultiHeadAttention over a whole per-head cache and over past + new sums in another order: rounding apart.
    expect(diff(rest.y!, streamed.y!)).toBeLessThan(2e-6);
    expect(diff(rest.y!, want.hidden)).toBeLessThan(2e-5);
  });

  it('the head (final LayerNorm when pre-norm, project_out when projected) computes what referenceHead does', async () => {
    const head = weights.head(weights.embedding().tokens);
    const rows = Float32Array.from({ length: 5 * c.hiddenSize }, () => rand.next() * 2 - 1);
    const out = await run(llamaHeadGraph(d, { finalNorm: head.finalLnW, finalNormB: head.finalLnB, projectOut: head.projectOut, head: head.lmHead }), { x: f32(rows, [5, c.hiddenSize]) });
    expect(diff(out.logits!, referenceHead(c, head, rows, 5))).toBeLessThan(2e-5);
  });
});

describe('OPT graphs', () => {
  it('are the bytes whose onnxruntime outputs matched the former OPT-only builder bit for bit (opt-graphs.ts)', () => {
    // Checked against that builder's graphs (embedding, stages, streamed layer, heads, export) when it was retired:
    // a change of these digests is a change of what onnxruntime computes for OPT; check it against the goldens.
    const d = CONFIGS.pre!;
    const w = transposeLayerTensors(d, new OptWeights(CONFIGS.pre!, new DummyTensorSource(CONFIGS.pre!, 3)).layer(0) as unknown as LayerTensors);
    const stages = llamaLayerStageGraphs(d, w);
    expect([sha(stages.qkv), sha(stages.rest), sha(llamaStreamedLayerGraph(d)), sha(llamaStreamedHeadGraph(d))]).toEqual(['aa9823bbc03be3a4', '67eef2eb3d6cd88a', 'add9f8d728a052e2', '8f5a986b7fe2de54']);
  });

  it('refuses what the fused form cannot compute, and a projected head streamed', () => {
    const d = CONFIGS.pre!;
    expect(() => layerDims({ ...d, attention: { ...d.attention, kvHeads: 2 } })).toThrow(/4 query heads share 2 kv heads \(MultiHeadAttention needs one kv head per query head\)/);
    expect(() => llamaStreamedHeadGraph(CONFIGS.post!)).toThrow(/tiny-opt-post projects its output \(project_out\); its head is not streamed/);
    expect(() => llamaHeadGraph(d, { finalNorm: new Float32Array(96), head: new Float32Array(300 * 96) })).toThrow(/the final LayerNorm's bias is missing/);
  });
});
