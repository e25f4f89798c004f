import { llamaDescriptionFromHf, MASK_BIAS, descriptionByName, stepInvFreq, type ModelDescription } from '@flexhelm/engine';
import { describe, expect, it } from 'vitest';
import type { NativeBinding } from './native-addon.js';
import { NativeDecoder } from './native-decoder.js';

const llama = llamaDescriptionFromHf({
  model_type: 'llama', vocab_size: 100, hidden_size: 48, num_hidden_layers: 3, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 96,
  max_position_embeddings: 64, rms_norm_eps: 1e-6, rope_theta: 10000,
});
/** Gemma 2's kinds on those sizes: window 3 on even layers, soft-caps, embedding × sqrt(48). */
const gemma: ModelDescription = {
  ...llama,
  family: 'gemma2',
  norm: { ...llama.norm, kind: 'rmsnorm-plus-one', placement: 'pre-and-post-branch' },
  attention: { ...llama.attention, scale: 0.25, logitSoftcap: 4, slidingWindow: 3, slidingWindowLayers: 'even' },
  mlp: { ...llama.mlp, kind: 'geglu-tanh' },
  embedding: { ...llama.embedding, scale: Math.sqrt(48) },
  finalLogitSoftcap: 3,
};
// The methods under test do not reach the addon.
const noNative = {} as NativeBinding;

describe('NativeDecoder: the kinds on the host side of the native layer', () => {
  it('maps the kinds to the native shape (Gemma 2, OLMo 2, Phi-3 longrope, Llama)', () => {
    expect(new NativeDecoder(gemma, noNative).shape).toEqual({
      hidden: 48, heads: 4, kvHeads: 2, headDim: 12, ffn: 96, eps: 1e-6, placement: 'pre-and-post-branch', qkNorm: false, activation: 'gelu-tanh', attnScale: 0.25, logitSoftcap: 4,
    });
    const olmo = new NativeDecoder({ ...llama, norm: { ...llama.norm, placement: 'post-branch' }, attention: { ...llama.attention, qkNorm: 'projection' } }, noNative);
    expect(olmo.shape).toMatchObject({ placement: 'post-branch', qkNorm: true, activation: 'silu' });
    const longrope = { kind: 'longrope' as const, shortFactor: Array(6).fill(1), longFactor: Array(6).fill(4), originalMaxPositions: 8, cosSinScale: 1.19 };
    const phi = new NativeDecoder({ ...llama, positions: { kind: 'rope', theta: 10000, scaling: longrope } }, noNative);
    expect(phi.shape.ropeScale).toBe(1.19);
    expect(new NativeDecoder(llama, noNative).shape).toEqual({ hidden: 48, heads: 4, kvHeads: 2, headDim: 12, ffn: 96, eps: 1e-6, placement: 'pre', qkNorm: false, activation: 'silu' });
  });

  it("maps OPT's kinds (LayerNorm with bias, learned positions, ReLU) to the same layer, its tensors under the layer's keys", () => {
    const opt = new NativeDecoder(descriptionByName('opt-1.3b'), noNative);
    expect(opt.shape).toEqual({ hidden: 2048, heads: 32, kvHeads: 32, headDim: 64, ffn: 8192, eps: 1e-5, placement: 'pre', norm: 'layernorm', rope: false, qkNorm: false, activation: 'relu' });
    // fc1 is the ungated MLP's up projection, ln1 the input norm: the backend splits streamed layers by these.
    expect(opt.partTable.gateUp).toEqual(['gateW', 'gateB', 'upW', 'upB', 'fc1W', 'fc1B']);
    expect(opt.partTable.norm).toContain('ln2B');
    // q/k/v, o: 4·E², fc1 and fc2: 2·E·F, fp32.
    expect(opt.layerWeightBytes).toBe(4 * (4 * 2048 ** 2 + 2 * 2048 * 8192));
    expect(new NativeDecoder(descriptionByName('opt-350m'), noNative).shape).toMatchObject({ placement: 'post', norm: 'layernorm' });
  });

  it("longrope's frequencies follow the call's key count (short up to 8 keys, long past), as the reference's", () => {
    const longrope = { kind: 'longrope' as const, shortFactor: Array(6).fill(1), longFactor: Array(6).fill(4), originalMaxPositions: 8, cosSinScale: 1.19 };
    const d: ModelDescription = { ...llama, positions: { kind: 'rope', theta: 10000, scaling: longrope } };
    const r = new NativeDecoder(d, noNative);
    const positions = Int32Array.of(0, 1, 2);
    // A prompt padded to 9 slots with only 3 real positions is past the original context: long factors.
    expect(Array.from(r.invFreq(positions, 8))).toEqual(Array.from(stepInvFreq(d, positions, 8)));
    expect(Array.from(r.invFreq(positions, 9))).toEqual(Array.from(stepInvFreq(d, positions, 9)));
    expect(r.invFreq(positions, 9)[1]).toBeCloseTo(r.invFreq(positions, 8)[1]! / 4, 9);
  });

  it("Gemma 2's window masks keys i − j ≥ 3 on even layers only, once per step", () => {
    const r = new NativeDecoder(gemma, noNative);
    const B = 1;
    const S = 2;
    const P = 4;
    const T = P + S;
    const maskBias = new Float32Array(B * S * T); // nothing masked by the step itself
    const step = { batch: B, seq: S, pastLen: P, maskBias };
    expect(r.maskFor(1, step)).toBe(maskBias);
    const even = r.maskFor(0, step);
    expect(r.maskFor(2, step)).toBe(even);
    // Query slot 4 sees keys 2..4, query slot 5 keys 3..5.
    const m = Math.fround(MASK_BIAS);
    expect(Array.from(even)).toEqual([m, m, 0, 0, 0, 0, m, m, m, 0, 0, 0]);
    expect(Array.from(maskBias).every((v) => v === 0)).toBe(true);
    // The next step's mask is another array: made again.
    expect(r.maskFor(0, { ...step, maskBias: new Float32Array(B * S * T) })).not.toBe(even);
  });

  it('scales the embedding by the float32 factor and soft-caps the logits', () => {
    const r = new NativeDecoder(gemma, noNative);
    const rows = Float32Array.of(1, -0.5);
    r.scaleEmbedding(rows);
    expect(Array.from(rows)).toEqual([Math.fround(Math.sqrt(48)), Math.fround(-0.5 * Math.fround(Math.sqrt(48)))]);
    const logits = Float32Array.of(0, 3, -30);
    r.capLogits(logits);
    expect(logits[0]).toBe(0);
    expect(logits[1]).toBeCloseTo(3 * Math.tanh(1), 6);
    expect(logits[2]).toBeCloseTo(-3, 4);
    const plain = Float32Array.of(5);
    new NativeDecoder(llama, noNative).capLogits(plain);
    expect(plain[0]).toBe(5);
  });

  it('refuses kinds the native layer does not compute, naming them', () => {
    expect(() => new NativeDecoder({ ...llama, mlp: { ...llama.mlp, kind: 'gelu' } }, noNative)).toThrow('the oneDNN backend does not compute mlp:gelu yet');
    expect(() => new NativeDecoder({ ...llama, norm: { ...llama.norm, kind: 'layernorm', placement: 'post-branch' } }, noNative)).toThrow(/LayerNorm.*post-branch/);
  });
});
