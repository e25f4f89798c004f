import { applyRope, linear, llamaDescriptionFromHf, llamaLayer, MASK_BIAS, rmsNorm, ropeInvFreq, stepInvFreq, type KvPair, type LayerTensors, type ModelDescription, type StepShape } from '@flexhelm/engine';
import { describe, expect, it } from 'vitest';
import { logitError, passesGate } from './logit-error.js';
import { oneDnnStatus, type KvBuffer, type NativeBinding } from './native-addon.js';
import type { NativeDecoderBinding, NativeDecoderLayer } from './native-decoder-layer.js';
import { NativeDecoder } from './native-decoder.js';

const status = oneDnnStatus();
const native = (status.available ? status.binding : undefined) as unknown as NativeBinding & NativeDecoderBinding;

/** A deterministic pseudo-random stream (LCG), values in offset ± scale/2. */
function values(n: number, seed: number, scale: number, offset = 0): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = offset + scale * (s / 2 ** 32 - 0.5);
  }
  return out;
}

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

/** `[out, in]` → `[in, out]` (the layout the backends compute with). */
function transpose(w: Float32Array, out: number, inDim: number): Float32Array {
  const t = new Float32Array(w.length);
  for (let o = 0; o < out; o++) for (let i = 0; i < inDim; i++) t[i * out + o] = w[o * inDim + i]!;
  return t;
}

describe.skipIf(!status.available)('Llama-family native kernels', () => {
  it('rmsNorm matches the reference (fp32; bf16 within its rounding)', async () => {
    for (const dim of [64, 40]) {
      const rows = 5;
      const x = values(rows * dim, 3, 4, 0.3);
      const w = values(dim, 4, 0.5, 1);
      const ref = rmsNorm(x, rows, dim, w, 1e-5);
      const y = new Float32Array(rows * dim);
      await native.rmsNorm(x, rows, dim, w, 1e-5, y);
      expect(maxAbsDiff(y, ref)).toBeLessThan(2e-6);
      await native.rmsNorm(x, rows, dim, w, 1e-5, y, true);
      for (let i = 0; i < y.length; i++) expect(Math.abs(y[i]! - ref[i]!)).toBeLessThanOrEqual(Math.abs(ref[i]!) * 2 ** -8 + 1e-7);
    }
  });

  it('rope rotates the first heads of strided rows like the reference (rotate-half, llama3-scaled frequencies)', async () => {
    const heads = 3;
    const hd = 16;
    const ld = heads * hd + 5;
    const rows = 4;
    const positions = Int32Array.from([0, 1, 37, 1000]);
    const invFreq = ropeInvFreq(hd, 500000, { kind: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 256 });
    const x = values(rows * ld, 5, 2);
    const ref = new Float32Array(rows * heads * hd);
    for (let r = 0; r < rows; r++) ref.set(x.subarray(r * ld, r * ld + heads * hd), r * heads * hd);
    applyRope(ref, positions, heads, hd, invFreq);
    const y = x.slice();
    await native.rope(y, rows, ld, heads, hd, positions, invFreq);
    for (let r = 0; r < rows; r++) {
      expect(maxAbsDiff(y.subarray(r * ld, r * ld + heads * hd), ref.subarray(r * heads * hd, (r + 1) * heads * hd))).toBeLessThan(1e-6);
      // The columns past the rotated heads are untouched.
      expect(Array.from(y.subarray(r * ld + heads * hd, (r + 1) * ld))).toEqual(Array.from(x.subarray(r * ld + heads * hd, (r + 1) * ld)));
    }
  });

  it("rope's scale multiplies cos and sin as longrope's cos/sin scale does in the reference", async () => {
    const heads = 2;
    const hd = 16;
    const rows = 3;
    const positions = Int32Array.from([0, 9, 40]);
    const invFreq = ropeInvFreq(hd, 10000, { kind: 'longrope', shortFactor: Array(8).fill(1), longFactor: Array.from({ length: 8 }, (_, i) => 1 + i), originalMaxPositions: 8, cosSinScale: 1.19 }, 41);
    const x = values(rows * heads * hd, 6, 2);
    const ref = x.slice();
    applyRope(ref, positions, heads, hd, invFreq, 1.19);
    const y = x.slice();
    await native.rope(y, rows, heads * hd, heads, hd, positions, invFreq, 1.19);
    expect(maxAbsDiff(y, ref)).toBeLessThan(1e-6);
    await expect(async () => native.rope(y, rows, heads * hd, heads, hd, positions, invFreq, Number.NaN)).rejects.toThrow('rope: scale must be a finite number');
  });

  it('gated with gelu-tanh is GeGLU: gelu_pytorch_tanh(gate) · up (bf16 rounded); an unknown activation is refused', async () => {
    const geluTanh = (z: number) => 0.5 * z * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (z + 0.044715 * z * z * z)));
    for (const I of [48, 13]) {
      const rows = 3;
      const gu = values(rows * 2 * I, 10, 12);
      const ref = new Float32Array(rows * I);
      for (let r = 0; r < rows; r++) for (let i = 0; i < I; i++) ref[r * I + i] = geluTanh(gu[r * 2 * I + i]!) * gu[r * 2 * I + I + i]!;
      const y = new Float32Array(rows * I);
      await native.gated(gu, rows, I, y, false, 'gelu-tanh');
      for (let i = 0; i < y.length; i++) expect(Math.abs(y[i]! - ref[i]!)).toBeLessThanOrEqual(Math.abs(ref[i]!) * 1e-6 + 1e-6);
      await native.gated(gu, rows, I, y, true, 'gelu-tanh');
      for (let i = 0; i < y.length; i++) expect(Math.abs(y[i]! - ref[i]!)).toBeLessThanOrEqual(Math.abs(ref[i]!) * 2 ** -8 + 1e-6);
    }
    expect(() => native.gated(new Float32Array(2), 1, 1, new Float32Array(1), false, 'gelu' as never)).toThrow("activation must be 'silu' or 'gelu-tanh'");
  });

  it('swiglu is silu(gate) · up over rows of [gate | up] (vector and scalar widths; bf16 rounded)', async () => {
    for (const I of [48, 13]) {
      const rows = 3;
      const gu = values(rows * 2 * I, 9, 16);
      const ref = new Float32Array(rows * I);
      for (let r = 0; r < rows; r++) {
        for (let i = 0; i < I; i++) {
          const g = gu[r * 2 * I + i]!;
          ref[r * I + i] = (g / (1 + Math.exp(-g))) * gu[r * 2 * I + I + i]!;
        }
      }
      const y = new Float32Array(rows * I);
      await native.swiglu(gu, rows, I, y);
      for (let i = 0; i < y.length; i++) expect(Math.abs(y[i]! - ref[i]!)).toBeLessThanOrEqual(Math.abs(ref[i]!) * 1e-6 + 1e-6);
      await native.swiglu(gu, rows, I, y, true);
      for (let i = 0; i < y.length; i++) expect(Math.abs(y[i]! - ref[i]!)).toBeLessThanOrEqual(Math.abs(ref[i]!) * 2 ** -8 + 1e-6);
    }
  });
});

const V = 300;
const H = 64;
const I = 96;
const LAYERS = 2;

/** A model's weights: layers `[in, out]` by the description's keys (as backends get them). */
interface Weights {
  embedding: Float32Array;
  layers: LayerTensors[];
  finalNorm: Float32Array;
  head: Float32Array;
}

/**
 * A random model of the family with these config overrides; `kinds` then changes the description (other families'
 * kinds on the same sizes), the weights following its layer tensors.
 */
function randomModel(over: Record<string, unknown>, kinds: (d: ModelDescription) => ModelDescription = (d) => d): { d: ModelDescription; weights: Weights } {
  const d = kinds(llamaDescriptionFromHf({
    model_type: 'llama', vocab_size: V, hidden_size: H, num_hidden_layers: LAYERS, num_attention_heads: 4, intermediate_size: I,
    max_position_embeddings: 128, rms_norm_eps: 1e-5, rope_theta: 10000, ...over,
  }));
  let seed = 11;
  const layers: LayerTensors[] = [];
  for (let l = 0; l < LAYERS; l++) {
    const w: LayerTensors = {};
    for (const t of d.layerTensors) {
      const n = t.shape.reduce((a, b) => a * b, 1);
      // Norm weights near 1, Linear weights ~ fan-in scaled, biases small.
      w[t.key] = t.key.endsWith('NormW') ? values(n, seed++, 0.4, 1) : t.shape.length === 2 ? values(n, seed++, 3 / Math.sqrt(t.shape[0]!)) : values(n, seed++, 0.2);
    }
    layers.push(w);
  }
  const embedding = values(V * H, 1, 2);
  return { d, weights: { embedding, layers, finalNorm: values(H, 2, 0.4, 1), head: d.embedding.tiedHead ? embedding : values(V * H, 3, 0.5) } };
}

/** One layer of one step: hidden in, hidden out (the runner keeps its own KV cache). */
type LayerRunner = (l: number, h: Float32Array, step: StepShape, invFreq: Float32Array) => Promise<Float32Array>;

/** The engine's reference layer (`llamaLayer`, weights `[out, in]`), the past passed in and the present kept. */
function referenceLayers(d: ModelDescription, weights: Weights): LayerRunner {
  const layers = weights.layers.map((w) => {
    const r: LayerTensors = {};
    for (const t of d.layerTensors) r[t.key] = t.shape.length === 2 ? transpose(w[t.key]!, t.shape[0]!, t.shape[1]!) : w[t.key]!;
    return r;
  });
  const past: KvPair[] = layers.map(() => ({ k: new Float32Array(0), v: new Float32Array(0) }));
  return async (l, h, step, invFreq) => {
    const { hidden, present } = llamaLayer(d, layers[l]!, step, invFreq, h, past[l]!);
    past[l] = present;
    return hidden;
  };
}

/**
 * The native layers with the KV cache in place (`runCached`, capacity 64; floats, or bf16 bits with `bf16Cache`), or
 * the past passed in and out (`run`).
 */
function nativeLayers(d: ModelDescription, layers: NativeDecoderLayer[], batch: number, cached = true, bf16Cache = false): LayerRunner {
  const capacity = 64;
  const kvRow = d.attention.kvHeads * d.attention.headDim;
  const n = cached ? batch * kvRow * capacity : 0;
  const k: KvBuffer[] = layers.map(() => (bf16Cache ? new Uint16Array(n) : new Float32Array(n)));
  const v: KvBuffer[] = layers.map(() => (bf16Cache ? new Uint16Array(n) : new Float32Array(n)));
  return async (l, h, s, invFreq) => {
    const y = new Float32Array(s.batch * s.seq * H);
    if (cached) await layers[l]!.runCached(h, s.maskBias, s.positions!, invFreq, s.batch, s.seq, s.pastLen, y, k[l]!, v[l]!, capacity);
    else {
      const T = s.pastLen + s.seq;
      const pk = new Float32Array(s.batch * kvRow * T);
      const pv = new Float32Array(s.batch * kvRow * T);
      await layers[l]!.run(h, k[l] as Float32Array, v[l] as Float32Array, s.maskBias, s.positions!, invFreq, s.batch, s.seq, s.pastLen, y, pk, pv);
      k[l] = pk;
      v[l] = pv;
    }
    return y;
  };
}

/**
 * A model driven as the engine drives a backend: embedding, positions (cumsum(mask) − 1, pads 1), the additive mask
 * with the causal, padding and sliding-window masks, the layers, then the final norm and the head in plain TS.
 */
class Driver {
  private readonly mask: number[][];
  private tokens = 0;

  constructor(
    private readonly d: ModelDescription,
    private readonly weights: Weights,
    private readonly layer: LayerRunner,
    private readonly batch: number,
  ) {
    this.mask = Array.from({ length: batch }, () => []);
  }

  async forward(ids: number[][], mask: number[][]): Promise<Float32Array> {
    const { d, batch: B } = this;
    const S = ids[0]!.length;
    const P = this.tokens;
    const T = P + S;
    const positions = new Int32Array(B * S);
    for (let b = 0; b < B; b++) {
      let seen = this.mask[b]!.reduce((a, m) => a + m, 0);
      for (let s = 0; s < S; s++) {
        this.mask[b]!.push(mask[b]![s]!);
        seen += mask[b]![s]!;
        positions[b * S + s] = mask[b]![s] ? seen - 1 : 1;
      }
    }
    const window = d.attention.slidingWindow ?? Infinity;
    const maskBias = new Float32Array(B * S * T);
    for (let b = 0; b < B; b++) {
      for (let s = 0; s < S; s++) {
        const i = P + s;
        for (let t = 0; t < T; t++) maskBias[(b * S + s) * T + t] = t <= i && this.mask[b]![t] && i - t < window ? 0 : MASK_BIAS;
      }
    }
    const step: StepShape = { batch: B, seq: S, pastLen: P, maskBias, positions };
    const invFreq = stepInvFreq(d, positions);
    let h: Float32Array = new Float32Array(B * S * H);
    ids.flat().forEach((id, r) => {
      h.set(this.weights.embedding.subarray(id * H, (id + 1) * H), r * H);
    });
    for (let l = 0; l < LAYERS; l++) h = await this.layer(l, h, step, invFreq);
    this.tokens = T;
    return linear(rmsNorm(h, B * S, H, this.weights.finalNorm, d.norm.eps), B * S, H, this.weights.head, V);
  }
}

const prompts = [
  [1, 17, 250, 33, 4, 99, 7, 8, 9, 10, 11, 12, 13],
  [1, 150, 151, 3, 299],
  [1, ...Array.from({ length: 19 }, (_, i) => 20 + ((i * 37) % 270))],
];

/** Prompt logits, then four greedy steps through the cache, from the reference and the native layers side by side. */
async function compare(d: ModelDescription, weights: Weights, native: LayerRunner): Promise<{ ref: Float32Array[]; got: Float32Array[] }> {
  const L = Math.max(...prompts.map((p) => p.length));
  const ids = prompts.map((p) => [...Array<number>(L - p.length).fill(0), ...p]);
  const mask = prompts.map((p) => [...Array<number>(L - p.length).fill(0), ...p.map(() => 1)]);
  const ref = new Driver(d, weights, referenceLayers(d, weights), prompts.length);
  const driver = new Driver(d, weights, native, prompts.length);
  // Only real positions are compared: pad queries have no visible key (implementation-defined).
  const keep = (x: Float32Array) => Float32Array.from(mask.flatMap((row, b) => row.flatMap((m, s) => (m ? Array.from(x.subarray((b * L + s) * V, (b * L + s + 1) * V)) : []))));
  const refOut: Float32Array[] = [keep(await ref.forward(ids, mask))];
  const got: Float32Array[] = [keep(await driver.forward(ids, mask))];
  for (let step = 0; step < 4; step++) {
    const last = refOut[refOut.length - 1]!;
    // Next token: the reference's greedy choice for every row (both sides are fed the same ids).
    const next = prompts.map((_, b) => {
      const row = step === 0 ? last.subarray((prompts.slice(0, b + 1).reduce((a, p) => a + p.length, 0) - 1) * V) : last.subarray(b * V);
      let best = 0;
      for (let t = 1; t < V; t++) if (row[t]! > row[best]!) best = t;
      return [best];
    });
    const ones = prompts.map(() => [1]);
    refOut.push(await ref.forward(next, ones));
    got.push(await driver.forward(next, ones));
  }
  return { ref: refOut, got };
}

const cases: [string, Record<string, unknown>][] = [
  ['llama, MHA (kv heads = heads), no biases', {}],
  ['llama, GQA 4/2, attention and MLP biases, llama3 rope scaling', { num_key_value_heads: 2, attention_bias: true, mlp_bias: true, rope_theta: 500000, rope_scaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 16 } }],
  ['qwen2, one kv head, q/k/v biases, tied head', { model_type: 'qwen2', num_key_value_heads: 1, rope_theta: 1e6 }],
  ['mistral, GQA 4/2, sliding window 5', { model_type: 'mistral', num_key_value_heads: 2, sliding_window: 5 }],
  ['llama, head dim 8 (the plain attention loop), GQA 8/2', { num_attention_heads: 8, num_key_value_heads: 2 }],
  ['mistral, head dim 32 (the decode kernel), GQA 2/1, sliding window 5', { model_type: 'mistral', num_attention_heads: 2, num_key_value_heads: 1, sliding_window: 5 }],
  ['llama, head dim 64 (the decode kernel, two 32-value blocks), one head', { num_attention_heads: 1 }],
  ['llama, 16 query heads of 32 on one kv head (the decode kernel in two turns of 8)', { num_attention_heads: 16, num_key_value_heads: 1, head_dim: 32 }],
  ['llama, head dim 256 (Gemma 2\'s size: the vector blocks and one-row kernel), GQA 2/1', { num_attention_heads: 2, num_key_value_heads: 1, head_dim: 256 }],
];

/** The layers packed as the backend packs them: shape and norm weights from the description's kinds (NativeDecoder). */
async function packLayers(d: ModelDescription, weights: Weights, dtype: 'fp32' | 'bf16'): Promise<NativeDecoderLayer[]> {
  const decoder = new NativeDecoder(d, native);
  return Promise.all(weights.layers.map((w) => decoder.createLayer(w, { dtype })));
}

/** The layer tensors `keys` (vectors of `width`) added to a description's list. */
function withNorms(d: ModelDescription, norms: Record<string, number>): ModelDescription['layerTensors'] {
  return [...d.layerTensors, ...Object.entries(norms).map(([key, width]) => ({ key, shape: [width], group: 'attention' as const, checkpointSuffix: key }))];
}

/** Gemma 2's layer kinds on a Llama description: (1 + w) norms on both sides of each branch, scale, soft-cap, GeGLU. */
const gemmaKinds = (d: ModelDescription): ModelDescription => ({
  ...d,
  norm: { ...d.norm, kind: 'rmsnorm-plus-one', placement: 'pre-and-post-branch' },
  attention: { ...d.attention, scale: 0.3, logitSoftcap: 1.5 },
  mlp: { ...d.mlp, kind: 'geglu-tanh' },
  layerTensors: withNorms(d, { attnOutNormW: H, mlpOutNormW: H }),
});

/** OLMo 2's: norms on the branch outputs only, q and k normed over their whole projections. */
const olmoKinds = (d: ModelDescription): ModelDescription => ({
  ...d,
  norm: { ...d.norm, placement: 'post-branch' },
  attention: { ...d.attention, qkNorm: 'projection' },
  layerTensors: withNorms(d, { attnOutNormW: H, mlpOutNormW: H, qNormW: d.attention.heads * d.attention.headDim, kNormW: d.attention.kvHeads * d.attention.headDim }).filter((t) => t.key !== 'inNormW' && t.key !== 'postNormW'),
});

/** Phi-3's longrope: factors per frequency and cos/sin scaled (here 1.19). */
const longropeKinds = (d: ModelDescription): ModelDescription => {
  const half = d.attention.headDim / 2;
  const factors = (base: number) => Array.from({ length: half }, (_, i) => base + i * 0.25);
  if (d.positions.kind !== 'rope') throw new Error('rotary');
  return { ...d, positions: { ...d.positions, scaling: { kind: 'longrope', shortFactor: factors(1), longFactor: factors(2), originalMaxPositions: 8, cosSinScale: 1.19 } } };
};

/** Other families' kinds on the Llama layer, at head sizes that take each attention kernel (16: blocks and one row; 32: decode). */
const kindCases: [string, Record<string, unknown>, (d: ModelDescription) => ModelDescription][] = [
  ['Gemma 2 kinds, head dim 16, GQA 4/2', { num_key_value_heads: 2 }, gemmaKinds],
  ['Gemma 2 kinds, head dim 32 (the decode kernel), GQA 2/1', { num_attention_heads: 2, num_key_value_heads: 1 }, gemmaKinds],
  ['Gemma 2 kinds, head dim 8 (the plain loop)', { num_attention_heads: 8, num_key_value_heads: 2 }, gemmaKinds],
  ['Gemma 2 kinds, head dim 256 (its checkpoints\' size), GQA 2/1', { num_attention_heads: 2, num_key_value_heads: 1, head_dim: 256 }, gemmaKinds],
  ['OLMo 2 kinds, head dim 16, GQA 4/2', { num_key_value_heads: 2 }, olmoKinds],
  ['OLMo 2 kinds, head dim 32 (the decode kernel)', { num_attention_heads: 2 }, olmoKinds],
  ['Phi-3 longrope, head dim 16', { num_key_value_heads: 2 }, longropeKinds],
];

describe.skipIf(!status.available)('native Llama-family layers against LlamaReference', () => {
  it.each(cases)('%s: fp32 within 1e-4 of the reference, bf16 within the accuracy gate', { timeout: 60_000 }, async (_, over) => {
    const { d, weights } = randomModel(over);
    const fp32 = await compare(d, weights, nativeLayers(d, await packLayers(d, weights, 'fp32'), prompts.length));
    fp32.ref.forEach((r, i) => {
      expect(maxAbsDiff(fp32.got[i]!, r)).toBeLessThan(1e-4);
    });
    const bf16 = await compare(d, weights, nativeLayers(d, await packLayers(d, weights, 'bf16'), prompts.length));
    bf16.ref.forEach((r, i) => {
      const e = logitError(r, bf16.got[i]!, r.length / V, V);
      expect(passesGate(e)).toBe(true);
      expect(e.maxAbs).toBeGreaterThan(0); // really computed in bf16
    });
  });

  it.each(kindCases)('%s: fp32 within 1e-4 of the reference decoder layer, bf16 within the accuracy gate (bit-equal with a bf16 cache)', { timeout: 60_000 }, async (_, over, kinds) => {
    const { d, weights } = randomModel(over, kinds);
    const fp32 = await compare(d, weights, nativeLayers(d, await packLayers(d, weights, 'fp32'), prompts.length));
    fp32.ref.forEach((r, i) => {
      expect(maxAbsDiff(fp32.got[i]!, r)).toBeLessThan(1e-4);
    });
    const bf16Layers = await packLayers(d, weights, 'bf16');
    const bf16 = await compare(d, weights, nativeLayers(d, bf16Layers, prompts.length));
    // A norm on a branch's output scales its bf16 rounding error up with it (the output is normed to unit RMS, however
    // small): Gemma's sandwich norms reach 0.09 here against ~0.04 for Llama's, also with the soft-cap off, and the
    // mean error stays as low. Hence twice the gate's largest error, the same mean, and no clear argmax miss.
    bf16.ref.forEach((r, i) => {
      const e = logitError(r, bf16.got[i]!, r.length / V, V);
      expect(passesGate(e, { maxRelative: 0.1, meanRelative: 0.01 })).toBe(true);
      expect(e.maxAbs).toBeGreaterThan(0);
    });
    const bits = await compare(d, weights, nativeLayers(d, bf16Layers, prompts.length, true, true));
    bits.got.forEach((g, i) => {
      expect(Array.from(g)).toEqual(Array.from(bf16.got[i]!));
    });
  });

  it('the kinds change the result: without the soft-cap or the q/k norm the layer is off the reference', async () => {
    for (const [kinds, strip] of [
      [gemmaKinds, (d: ModelDescription) => ({ ...d, attention: { ...d.attention, logitSoftcap: undefined } })],
      [olmoKinds, (d: ModelDescription) => ({ ...d, attention: { ...d.attention, qkNorm: undefined } })],
    ] as const) {
      const { d, weights } = randomModel({ num_key_value_heads: 2 }, kinds);
      const wrong = await compare(d, weights, nativeLayers(d, await packLayers(strip(d), weights, 'fp32'), prompts.length));
      expect(maxAbsDiff(wrong.got[0]!, wrong.ref[0]!)).toBeGreaterThan(1e-2);
    }
  });

  it.each(['fp32', 'bf16'] as const)('%s: a GQA layer computes exactly what its MHA expansion (repeat_kv) computes', async (dtype) => {
    const { d, weights } = randomModel({ num_key_value_heads: 2 });
    const group = 2;
    // [in, out] k/v weights: kv head g's 16 columns repeated for query heads 2g and 2g + 1.
    const expand = (w: Float32Array) => {
      const out = new Float32Array(H * 4 * 16);
      for (let r = 0; r < H; r++) for (let h = 0; h < 4; h++) out.set(w.subarray(r * 32 + Math.floor(h / group) * 16, r * 32 + Math.floor(h / group) * 16 + 16), r * 64 + h * 16);
      return out;
    };
    const mha = randomModel({}).d;
    const expanded = { ...weights, layers: weights.layers.map((w) => ({ ...w, kW: expand(w.kW!), vW: expand(w.vW!) })) };
    const gqa = await compare(d, weights, nativeLayers(d, await packLayers(d, weights, dtype), prompts.length));
    const full = await compare(mha, expanded, nativeLayers(mha, await packLayers(mha, expanded, dtype), prompts.length));
    gqa.got.forEach((g, i) => {
      expect(Array.from(g)).toEqual(Array.from(full.got[i]!));
    });
  });

  it.each([cases[1]!, cases[3]!, cases[4]!, cases[5]!, cases[6]!, cases[7]!, cases[8]!])('%s: a bf16 layer computes the same with a bf16 cache as with a float cache, to the bit', { timeout: 60_000 }, async (_, over) => {
    const { d, weights } = randomModel(over);
    const layers = await packLayers(d, weights, 'bf16');
    // The float cache holds the keys and values rounded to bf16, the bf16 cache their bits: prompt and decode steps
    // (GQA, sliding window) read the same values.
    const floats = await compare(d, weights, nativeLayers(d, layers, prompts.length));
    const bits = await compare(d, weights, nativeLayers(d, layers, prompts.length, true, true));
    bits.got.forEach((g, i) => {
      expect(Array.from(g)).toEqual(Array.from(floats.got[i]!));
    });
  });

  it('the per-layer path (past in, present out) gives what the in-place cache gives', { timeout: 60_000 }, async () => {
    const { d, weights } = randomModel(cases[3]![1]);
    const layers = await packLayers(d, weights, 'fp32');
    const inPlace = await compare(d, weights, nativeLayers(d, layers, prompts.length));
    const copied = await compare(d, weights, nativeLayers(d, layers, prompts.length, false));
    copied.got.forEach((g, i) => {
      expect(Array.from(g)).toEqual(Array.from(inPlace.got[i]!));
    });
  });

  it('a streamed layer: resident parts packed once, the rest lazily on its base, computes the same', { timeout: 60_000 }, async () => {
    const { d, weights } = randomModel(cases[1]![1]);
    const shape = { hidden: H, heads: 4, kvHeads: 2, headDim: 16, ffn: I, eps: d.norm.eps };
    const full = await packLayers(d, weights, 'bf16');
    const streamed = await Promise.all(
      weights.layers.map(async (w) => {
        const base = await native.createDecoderLayer(shape, w, { dtype: 'bf16', parts: ['qkv', 'norm'] });
        return native.createDecoderLayer(shape, w, { dtype: 'bf16', transposed: true, packAtRows: 8, parts: ['out', 'gateUp', 'down'] }, base);
      }),
    );
    const a = await compare(d, weights, nativeLayers(d, full, prompts.length));
    const b = await compare(d, weights, nativeLayers(d, streamed, prompts.length));
    // The prompt step packs (≥ 8 rows): bit-identical. Decode steps multiply the fp32 weights unpacked: closer still.
    expect(Array.from(b.got[0]!)).toEqual(Array.from(a.got[0]!));
    b.ref.forEach((r, i) => {
      expect(passesGate(logitError(r, b.got[i]!, r.length / V, V))).toBe(true);
    });
  });

  it('runDecoderStack: every layer in one call gives the layer-by-layer results bit for bit (1 to 4 layers, per-layer masks), and refuses bad arguments', { timeout: 60_000 }, async () => {
    const { d, weights } = randomModel(cases[3]![1]);
    const packed = await packLayers(d, weights, 'bf16');
    const kvRow = d.attention.kvHeads * d.attention.headDim;
    const B = 2;
    const capacity = 16;
    for (const count of [1, 2, 3, 4]) {
      const layers = Array.from({ length: count }, (_, i) => packed[i % packed.length]!);
      const caches = () => layers.map(() => new Uint16Array(B * kvRow * capacity));
      const [k1, v1, k2, v2] = [caches(), caches(), caches(), caches()];
      let pastLen = 0;
      for (const S of [5, 1, 1]) {
        const T = pastLen + S;
        const positions = Int32Array.from({ length: B * S }, (_, i) => pastLen + (i % S));
        const invFreq = ropeInvFreq(d.attention.headDim, 10000);
        // Each layer its own mask (layer i hides key i of every row), as Gemma 2's windowed layers have theirs.
        const masks = layers.map((_, l) => Float32Array.from({ length: B * S * T }, (_, j) => (j % T > pastLen + Math.floor(j / T) % S || j % T === l % T ? MASK_BIAS : 0)));
        const x = values(B * S * H, 40 + S + pastLen, 1);
        let h = x;
        for (let l = 0; l < count; l++) {
          const y = new Float32Array(B * S * H);
          await layers[l]!.runCached(h, masks[l]!, positions, invFreq, B, S, pastLen, y, k1[l]!, v1[l]!, capacity);
          h = y;
        }
        const y = new Float32Array(B * S * H);
        const spare = new Float32Array(B * S * H);
        await native.runDecoderStack(layers, x, masks, positions, invFreq, B, S, pastLen, y, spare, k2, v2, capacity);
        expect(Array.from(y)).toEqual(Array.from(h));
        k2.forEach((k, l) => {
          expect(Array.from(k)).toEqual(Array.from(k1[l]!));
          expect(Array.from(v2[l]!)).toEqual(Array.from(v1[l]!));
        });
        pastLen = T;
      }
    }
    const x = new Float32Array(H);
    const y = new Float32Array(H);
    const spare = new Float32Array(H);
    const mask = new Float32Array(1);
    const kv = [new Uint16Array(kvRow * 4)];
    const run = (over: Partial<Record<'layers' | 'x' | 'masks' | 'y' | 'spare' | 'k', unknown>>) =>
      native.runDecoderStack(
        (over.layers ?? [packed[0]]) as NativeDecoderLayer[], (over.x ?? x) as Float32Array, (over.masks ?? [mask]) as Float32Array[], Int32Array.of(0), new Float32Array(8), 1, 1, 0,
        (over.y ?? y) as Float32Array, (over.spare ?? spare) as Float32Array, (over.k ?? kv) as Uint16Array[], kv, 4,
      );
    await run({});
    expect(() => run({ layers: [] })).toThrow('layers must be a non-empty array of DecoderLayer');
    expect(() => run({ layers: [{}] })).toThrow('layers[0] is not a DecoderLayer');
    expect(() => run({ masks: [mask, mask] })).toThrow('masks has 2 entries, expected 1');
    expect(() => run({ k: kv[0] })).toThrow('cacheK must be an array');
    expect(() => run({ spare: y })).toThrow('hidden, output hidden and spare hidden must be three arrays that share no memory');
    // Different arrays over overlapping memory are refused too.
    const shared = new Float32Array(2 * H);
    expect(() => run({ y: shared.subarray(0, H), spare: shared.subarray(H - 1, 2 * H - 1) })).toThrow('hidden, output hidden and spare hidden must be three arrays that share no memory');
    await run({ y: shared.subarray(0, H), spare: shared.subarray(H, 2 * H) });
    expect(() => run({ x: new Float32Array(3) })).toThrow(`hidden has 3 elements, expected ${H}`);
    expect(() => run({ k: [new Uint16Array(5)] })).toThrow(`layer 0's cache.k has 5 elements, expected ${kvRow * 4}`);
    const released = (await packLayers(d, weights, 'bf16'))[0]!;
    released.release();
    expect(() => run({ layers: [released] })).toThrow('this DecoderLayer was released; create it again with createDecoderLayer()');
  });

  it('refuses bad shapes, missing tensors, a partial layer and a released one with a clear error', async () => {
    const { d, weights } = randomModel(cases[1]![1]);
    const w = weights.layers[0]!;
    const shape = { hidden: H, heads: 4, kvHeads: 2, headDim: 16, ffn: I, eps: 1e-5 };
    expect(() => native.createDecoderLayer({ ...shape, kvHeads: 3 }, w, { dtype: 'fp32' })).toThrow('heads (4) must be a multiple of kvHeads (3)');
    expect(() => native.createDecoderLayer({ ...shape, headDim: 15 }, w, { dtype: 'fp32' })).toThrow(/headDim must be even/);
    expect(() => native.createDecoderLayer(shape, { ...w, upW: undefined }, { dtype: 'fp32' })).toThrow('weights.upW must be a Float32Array');
    expect(() => native.createDecoderLayer(shape, { ...w, kW: new Float32Array(3) }, { dtype: 'fp32' })).toThrow(`weights.kW has 3 elements, expected ${H * 32}`);
    expect(() => native.createDecoderLayer(shape, w, { dtype: 'fp32', parts: ['fc1' as never] })).toThrow(/unknown part 'fc1'/);
    expect(() => native.createDecoderLayer({ ...shape, placement: 'after' as never }, w, { dtype: 'fp32' })).toThrow("shape.placement must be one of 'pre', 'post-branch', 'pre-and-post-branch', 'post'");
    expect(() => native.createDecoderLayer({ ...shape, norm: 'layernorm', placement: 'post-branch' }, w, { dtype: 'fp32' })).toThrow("a layernorm layer's norms are 'pre' or 'post'");
    // A LayerNorm layer needs its biases; a relu MLP reads no gate.
    expect(() => native.createDecoderLayer({ ...shape, norm: 'layernorm' }, w, { dtype: 'fp32' })).toThrow('weights.inNormB must be a Float32Array');
    expect(() => native.createDecoderLayer({ ...shape, norm: 'layernorm', activation: 'relu' }, { ...w, inNormB: new Float32Array(H), postNormB: new Float32Array(H), gateW: undefined, upW: new Float32Array(3) }, { dtype: 'fp32' })).toThrow(`weights.upW has 3 elements, expected ${H * I}`);
    expect(() => native.createDecoderLayer({ ...shape, logitSoftcap: -1 }, w, { dtype: 'fp32' })).toThrow('shape.logitSoftcap must be a finite number of at least 0');
    // OLMo 2's placement needs the branch-output norms, its q/k norm the projection norms.
    expect(() => native.createDecoderLayer({ ...shape, placement: 'post-branch' }, w, { dtype: 'fp32' })).toThrow('weights.attnOutNormW must be a Float32Array');
    expect(() => native.createDecoderLayer({ ...shape, qkNorm: true }, { ...w, qNormW: new Float32Array(64), kNormW: new Float32Array(3) }, { dtype: 'fp32' })).toThrow('weights.kNormW has 3 elements, expected 32');
    // 4-bit codes (quantize4's object of the [in, out] = [64, 64] o_proj, groups of 64 along out): each field checked.
    const codes = { packed: new Uint8Array(64 * 32), scale: new Uint16Array(64 * 2), shape: [64, 64], groupSize: 64, groupDim: 1 };
    expect(() => native.createDecoderLayer(shape, { ...w, oW: codes }, { dtype: 'fp32' })).not.toThrow();
    expect(() => native.createDecoderLayer(shape, { ...w, oW: { ...codes, groupDim: 0 } }, { dtype: 'fp32' })).toThrow('weights.oW.groupDim must be 1 (groups along the output features)');
    expect(() => native.createDecoderLayer(shape, { ...w, oW: { ...codes, shape: [64, 32] } }, { dtype: 'fp32' })).toThrow('weights.oW.shape must be [64, 64]');
    expect(() => native.createDecoderLayer(shape, { ...w, oW: { ...codes, packed: new Uint8Array(10) } }, { dtype: 'fp32' })).toThrow('weights.oW.packed holds 10 bytes, expected 2048');
    expect(() => native.createDecoderLayer(shape, { ...w, oW: { ...codes, scale: new Float32Array(128) as never } }, { dtype: 'fp32' })).toThrow('weights.oW.scale must be a Uint16Array of f16 bits');
    expect(() => native.createDecoderLayer(shape, { ...w, oW: { ...codes, groupSize: 7 } }, { dtype: 'fp32' })).toThrow('weights.oW.groupSize must be an even integer from 2 to 65536');
    const x = new Float32Array(H);
    const kv = new Float32Array(2 * 16 * 4);
    const args = [x, new Float32Array(1), Int32Array.of(0), new Float32Array(8), 1, 1, 0, new Float32Array(H), kv, kv, 4] as const;
    const partial = await native.createDecoderLayer(shape, w, { dtype: 'fp32', parts: ['qkv'] });
    await expect(partial.runCached(...args)).rejects.toThrow(/holds only some of its parts/);
    const layer = (await packLayers(d, weights, 'fp32'))[0]!;
    expect(() => layer.runCached(x, new Float32Array(1), Int32Array.of(0), new Float32Array(8), 1, 1, 4, new Float32Array(H), kv, kv, 4)).toThrow(
      'cache capacity 4 is below pastLen + seq = 5; grow the cache first',
    );
    expect(() => layer.runCached(x, new Float32Array(1), new Float32Array(1) as never, new Float32Array(8), 1, 1, 0, new Float32Array(H), kv, kv, 4)).toThrow('positions must be an Int32Array');
    expect(() => layer.runCached(x, new Float32Array(1), Int32Array.of(0), new Float32Array(3), 1, 1, 0, new Float32Array(H), kv, kv, 4)).toThrow('invFreq has 3 elements, expected 8');
    const k16 = new Uint16Array(kv.length);
    await expect(layer.runCached(x, new Float32Array(1), Int32Array.of(0), new Float32Array(8), 1, 1, 0, new Float32Array(H), k16, k16, 4)).rejects.toThrow(
      /a bf16 KV cache \(Uint16Array\) needs a bf16 layer; this one computes in fp32/,
    );
    expect(() => layer.runCached(x, new Float32Array(1), Int32Array.of(0), new Float32Array(8), 1, 1, 0, new Float32Array(H), k16, kv, 4)).toThrow(
      'cache.k and cache.v must both be Float32Array (fp32 cache) or both Uint16Array (bf16 cache)',
    );
    expect(() => layer.runCached(x, new Float32Array(1), Int32Array.of(0), new Float32Array(8), 1, 1, 0, new Float32Array(H), k16.subarray(1), k16, 4)).toThrow(
      `cache.k has ${kv.length - 1} elements, expected ${kv.length}`,
    );
    await layer.runCached(...args);
    layer.release();
    expect(() => layer.runCached(...args)).toThrow('this DecoderLayer was released; create it again with createDecoderLayer()');
  });
});
