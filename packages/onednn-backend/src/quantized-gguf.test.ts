import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ggufQuantizedWeights } from '@flexhelm/gguf';
import { afterAll, describe, expect, it } from 'vitest';
import { INT8_ACTIVATION_GATE, passesGate, Q8K_ACTIVATION_GATE, quantizedTypeGate } from './logit-error.js';
import { measureAccuracy } from './measure-accuracy.js';
import { oneDnnStatus } from './native-addon.js';
import { OneDnnBackend } from './onednn-backend.js';
import { quantizedParts } from './quantized-parts.js';
import { makeGguf, type MadeGguf, type MadeGgufType } from './test-made-gguf.js';

const available = oneDnnStatus().available;
const root = mkdtempSync(join(tmpdir(), 'quantized-gguf-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const H = 64, Q = 64, KV = 32, I = 96, LAYERS = 2;
const layerWeights = LAYERS * (H * (Q + 2 * KV) + Q * H + 3 * H * I);

const made = new Map<MadeGgufType, MadeGguf>();

/** A made model exported as `type`, made once per type. */
function madeGguf(type: MadeGgufType) {
  if (!made.has(type)) made.set(type, makeGguf(root, type));
  return made.get(type)!;
}

const prompts = [
  [1, 17, 250, 33, 4, 99, 7, 8, 9, 10, 11, 12, 13],
  [1, 150, 151, 3, 299],
  [1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23],
];

describe('quantizedParts', () => {
  const table = { qkv: ['qW', 'qB', 'kW', 'kB', 'vW', 'vB'], out: ['oW', 'oB'], gateUp: ['gateW', 'upW'], down: ['downW'], norm: ['inNormW'] };
  const q4 = { type: 'Q4_0' as const, blocks: new Uint8Array(18) };
  const q8 = { type: 'Q8_0' as const, blocks: new Uint8Array(34) };
  it('keeps a fused GEMM only when all its matrices are blocks (of any types)', () => {
    expect(Object.keys(quantizedParts(table, { qW: q4, kW: q4, vW: q4, oW: q8, gateW: q4, upW: q8, downW: q4 }))).toEqual(['qW', 'kW', 'vW', 'oW', 'gateW', 'upW', 'downW']);
    // v_proj in another type (llama.cpp's mixed files keep some matrices wider): one QuantLinear per matrix.
    expect(Object.keys(quantizedParts(table, { qW: q4, kW: q4, vW: q8 }))).toEqual(['qW', 'kW', 'vW']);
    // One of a fused GEMM's matrices widened: the whole GEMM widens.
    expect(Object.keys(quantizedParts(table, { gateW: q4 }))).toEqual([]);
  });
});

describe.skipIf(!available)('GGUF Q8_0 / Q4_0 / K-quant weights multiplied as blocks in the oneDNN rotary layer', () => {
  it.each(['Q8_0', 'Q4_0'] as const)('%s: holds only the blocks; logits within its type\'s gate of the reference on the dequantized weights; greedy tokens follow', { timeout: 180_000 }, async (type) => {
    const { file, description, load, reads } = madeGguf(type);
    const quantized = ggufQuantizedWeights(file, description);
    // Every layer matrix and the tied head (token_embd) are stored in the type.
    expect(quantized.counts).toEqual({ [type]: LAYERS * 7 + 1 });
    const ref = await load('reference');
    const backend = new OneDnnBackend({ dtype: 'fp32', quantized });
    reads.length = 0;
    const quant = await load(backend);
    // Nothing it holds as blocks is read widened (the layers' matrices, the tied head, the token table whose rows are
    // widened on use): only the norms.
    expect(reads.sort()).toEqual(['model.norm.weight', ...[0, 1].flatMap((i) => [`model.layers.${i}.input_layernorm.weight`, `model.layers.${i}.post_attention_layernorm.weight`])].sort());
    const widened = new OneDnnBackend({ dtype: 'bf16' });
    const bf16 = await load(widened);
    try {
      // 34 or 18 bytes per 32 weights held by the native layers, against bf16's 2 bytes per weight (1.5 in the blocks
      // held compact, compact-bf16.h).
      expect(backend.layerWeightBytes).toBe((layerWeights / 32) * (type === 'Q8_0' ? 34 : 18));
      expect(widened.layerWeightBytes).toBeGreaterThanOrEqual(layerWeights * 1.5);
      const report = await measureAccuracy(ref, quant, prompts, { newTokens: 8 });
      const e = report.logits;
      // README's gate for these types: INT8_ACTIVATION_GATE (max 12%, mean 2% of the logits' rms): every row runs on
      // 8-bit activations, as llama.cpp computes them (measured max 0.090 / 0.078, mean 0.013 of the rms, Q8_0 / Q4_0).
      expect(quantizedTypeGate(type)).toBe(INT8_ACTIVATION_GATE);
      expect(passesGate(e, quantizedTypeGate(type))).toBe(true);
      expect(e.maxAbs).toBeGreaterThan(0); // really the integer / widened kernels, not the fp32 weights
      expect(e.argmaxClearMisses).toBe(0);
      // Greedy tokens: Q8_0's 24 all equal; Q4_0's run apart after a flip inside the error (measured 19 of 24 equal,
      // 59 of 62 argmaxes: every flip where the reference's top two are closer than twice the max error).
      if (type === 'Q8_0') expect(report.greedy.freeRunningAgree).toBe(report.greedy.tokens);
      else expect(report.greedy.teacherForcedAgree).toBeGreaterThanOrEqual(report.greedy.tokens - 3);
      // A bf16 layer around the blocks (its rows widened back for QuantLinear; the KV cache in bf16): both roundings
      // together, measured max 0.214 / mean 0.028 (Q8_0) on these logits of rms ~2 — past llama/check.md's 0.1 for
      // bf16 alone, which is why `auto` computes in fp32 around blocks; within the 8-bit activations' gate.
      const inBf16 = await load(new OneDnnBackend({ dtype: 'bf16', quantized }));
      try {
        const b = (await measureAccuracy(ref, inBf16, prompts, { newTokens: 4 })).logits;
        expect(passesGate(b, INT8_ACTIVATION_GATE)).toBe(true);
      } finally {
        await inBf16.close();
      }
    } finally {
      await Promise.all([ref.close(), quant.close(), bf16.close()]);
    }
  });

  // llama.cpp's K-quant mixes: Q4_K (Q5_K) for most matrices, Q6_K for the tied head and, in layer 1 of 2, v_proj
  // (beside Q4_K q/k: that fused GEMM runs one QuantLinear per matrix) and down_proj.
  it.each(['Q4_K_M', 'Q5_K_M'] as const)('%s: holds only the super-blocks; logits within the gate of the reference on the dequantized weights; same greedy tokens', { timeout: 180_000 }, async (mix) => {
    const { file, description, load } = madeGguf(mix);
    const quantized = ggufQuantizedWeights(file, description);
    const base = mix === 'Q4_K_M' ? 'Q4_K' : 'Q5_K';
    expect(quantized.counts).toEqual({ [base]: LAYERS * 7 - 2, Q6_K: 3 });
    expect(Object.fromEntries(Object.entries(quantized.layer(1)).map(([k, m]) => [k, m!.type]))).toEqual({ qW: base, kW: base, vW: 'Q6_K', oW: base, gateW: base, upW: base, downW: 'Q6_K' });
    const ref = await load('reference');
    const backend = new OneDnnBackend({ dtype: 'fp32', quantized });
    const quant = await load(backend);
    try {
      // Bytes as stored: 144 / 176 bytes per 256 weights, 210 for the Q6_K matrices; nothing widened.
      const h = 256, q = 256, kv = 128, ffn = 512;
      const perLayer = h * (q + 2 * kv) + q * h + 3 * h * ffn;
      const baseBytes = mix === 'Q4_K_M' ? 144 : 176;
      const q6 = h * kv + ffn * h; // layer 1's v_proj and down_proj
      expect(backend.layerWeightBytes).toBe(((LAYERS * perLayer - q6) / 256) * baseBytes + (q6 / 256) * 210);
      const report = await measureAccuracy(ref, quant, prompts, { newTokens: 8 });
      // Q8K_ACTIVATION_GATE (max 18%, mean 3% of the rms): prompt rows on q8_K activations as llama.cpp computes them
      // (measured max 0.135 / 0.125, mean 0.020 / 0.020, Q4_K_M / Q5_K_M).
      expect(quantizedTypeGate(mix)).toBe(Q8K_ACTIVATION_GATE);
      expect(passesGate(report.logits, quantizedTypeGate(mix))).toBe(true);
      expect(report.logits.maxAbs).toBeGreaterThan(0);
      expect(report.logits.argmaxClearMisses).toBe(0);
      // Greedy tokens: Q4_K_M's 24 all equal; Q5_K_M's run apart after a flip inside the error (measured 22 of 24).
      expect(report.greedy.teacherForcedAgree).toBeGreaterThanOrEqual(report.greedy.tokens - 3);
    } finally {
      await Promise.all([ref.close(), quant.close()]);
    }
  });

  // A prompt long enough for the many-row GEMMs' own paths: on AMX hosts the tile GEMM on blocks widened in cache
  // (amx-bf16, from 64 rows for Q8_0 / Q4_0 and 128 for K-quants), elsewhere the integer GEMMs as above.
  it.each(['Q4_0', 'Q4_K_M'] as const)('%s: a 300-token prompt stays within the type\'s gate', { timeout: 180_000 }, async (type) => {
    const { file, description, load } = madeGguf(type);
    const quantized = ggufQuantizedWeights(file, description);
    const ref = await load('reference');
    const quant = await load(new OneDnnBackend({ dtype: 'fp32', quantized }));
    try {
      const long = Array.from({ length: 300 }, (_, i) => 1 + ((i * 37 + 11) % 690));
      const report = await measureAccuracy(ref, quant, [long], { newTokens: 2 });
      expect(passesGate(report.logits, quantizedTypeGate(type))).toBe(true);
      expect(report.logits.maxAbs).toBeGreaterThan(0);
      expect(report.logits.argmaxClearMisses).toBe(0);
    } finally {
      await Promise.all([ref.close(), quant.close()]);
    }
  });

  it('an F16 file lists no quantized matrices (computed from its widened values)', () => {
    const { file, description } = madeGguf('F16');
    const quantized = ggufQuantizedWeights(file, description);
    expect(quantized.counts).toEqual({});
    expect(quantized.layer(0)).toEqual({});
    expect(quantized.head()).toBeUndefined();
  });
});
