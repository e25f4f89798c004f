import { dequantize, GGML_TYPES, quantize } from '@flexhelm/gguf';
import { describe, expect, it } from 'vitest';
import { oneDnnStatus, type NativeBinding, type QuantKernel, type QuantType } from './native-addon.js';
import { quantReference, relErr } from './test-signals.js';

const status = oneDnnStatus();
const native = status.available ? status.binding : (undefined as unknown as NativeBinding);
// K-quants have the VNNI row kernel, the tiled VNNI GEMM (prompt rows) and the scalar reference (no AVX2 kernel).
const vnni = status.available && status.features.quantKernel === 'avx512vnni';
const kernels: QuantKernel[] = vnni ? ['scalar', 'avx512vnni', 'vnni-gemm'] : ['scalar'];
const bf16Path = status.available && /avx512/.test(status.features.isa);

/** Pseudo-random values in (−amp, amp) with a per-32 envelope, so sub-blocks get different scales and mins. */
function noise(n: number, seed: number, amp: number): Float32Array {
  let s = seed >>> 0;
  const next = () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
  let envelope = 1;
  return Float32Array.from({ length: n }, (_, i) => {
    if (i % 32 === 0) envelope = 0.2 + next();
    return (next() * 2 - 1) * amp * envelope;
  });
}

// The activations are rounded as ggml's q8_K: one scale per 256 values.
const reference = (w: Float32Array, x: Float32Array, M: number, K: number, N: number) => quantReference(w, x, M, K, N, 256);

describe.skipIf(!status.available)('quantized linears on ggml K-quant super-blocks (Q4_K, Q5_K, Q6_K)', () => {
  const types: ('Q4_K' | 'Q5_K' | 'Q6_K')[] = ['Q4_K', 'Q5_K', 'Q6_K'];
  // K of 1, 3 and 8 super-blocks; rows past 8 take a second row group.
  const shapes: [number, number][] = [
    [256, 5],
    [768, 17],
    [2048, 19],
  ];
  describe.each(types)('%s', (type) => {
    it.each(shapes)('K %i × N %i: the VNNI kernel within fp32 reordering of the scalar reference, the scalar reference within the activation rounding of the float64 product', async (K, N) => {
      const w = noise(N * K, K + N + type.charCodeAt(1), 0.08);
      const blocks = quantize(type, w);
      const wq = dequantize(type, blocks, N * K);
      const lin = await native.createQuantLinear(type, blocks, K, N);
      // Memory as stored: 144 / 176 / 210 bytes per 256 weights, nothing widened.
      expect(lin.bytes).toBe(blocks.length);
      expect(lin.bytes).toBe((N * K * GGML_TYPES[type].blockBytes) / 256);
      // 8, 9 and 13 rows: the tiled GEMM's row tiles spread evenly (4 + 4, 5 + 4, 5 + 5 + 3).
      for (const M of [1, 3, 8, 9, 13]) {
        const x = noise(M * K, 7 * M + K, 1.5);
        const ref = reference(wq, x, M, K, N);
        const scalar = new Float32Array(M * N);
        await lin.run(x, M, scalar, false, 'scalar');
        for (let i = 0; i < M * N; i++) expect(Math.abs(scalar[i]! - ref.y[i]!)).toBeLessThanOrEqual(ref.roundBound[i]! * 1.0001 + 1e-5 * ref.abs[i]!);
        for (const kernel of kernels.slice(1)) {
          const y = new Float32Array(M * N);
          await lin.run(x, M, y, false, kernel);
          let worst = 0;
          for (let i = 0; i < M * N; i++) worst = Math.max(worst, Math.abs(y[i]! - scalar[i]!) / ref.abs[i]!);
          expect(worst, `${kernel} vs scalar, ${M} rows`).toBeLessThan(2e-6);
          if (kernel === (M >= 8 ? 'vnni-gemm' : 'avx512vnni')) {
            // What `best` runs: the row kernel below 8 rows, the tiled GEMM from 8 (kKQuantGemmRows).
            const b = new Float32Array(M * N);
            await lin.run(x, M, b);
            expect(b).toEqual(y);
          }
        }
        if (bf16Path) {
          // The many-row path: the super-blocks widened to bf16 for the call (weights and activations 2^-9 each).
          const y = new Float32Array(M * N);
          await lin.run(x, M, y, false, 'bf16');
          for (let i = 0; i < M * N; i++) expect(Math.abs(y[i]! - ref.y[i]!)).toBeLessThanOrEqual(5e-3 * ref.abs[i]! + 1e-6);
          if (M > 8 && !vnni) {
            const b = new Float32Array(M * N);
            await lin.run(x, M, b);
            expect(b).toEqual(y);
          }
        }
      }
    });
  });

  // The accuracy gate, as for Q8_0/Q4_0: relative L2 of `best` against the float64 product of the dequantized weights
  // at decode and prefill row counts; the activations' q8_K rounding (per 256 values) is the integer path's only error.
  it.each(types)('%s: within 1%% relative L2 of the dequantized product (accuracy gate) at 1 to 64 rows', async (type) => {
    const K = 2048;
    const N = 64;
    const w = noise(N * K, 11, 0.05);
    const blocks = quantize(type, w);
    const wq = dequantize(type, blocks, N * K);
    const lin = await native.createQuantLinear(type, blocks, K, N);
    for (const M of [1, 4, 8, 64]) {
      const x = noise(M * K, 3, 2);
      const y = new Float32Array(M * N);
      await lin.run(x, M, y);
      expect(relErr(reference(wq, x, M, K, N).y, y), `${M} rows`).toBeLessThan(0.01);
    }
  });

  it('accumulate adds to y; zero super-blocks give zeros', async () => {
    const K = 512;
    const N = 3;
    const lin = await native.createQuantLinear('Q6_K', quantize('Q6_K', noise(N * K, 5, 0.3)), K, N);
    const x = noise(K, 9, 1);
    const fresh = new Float32Array(N);
    await lin.run(x, 1, fresh);
    const added = Float32Array.from([1, 2, 3]);
    await lin.run(x, 1, added, true);
    for (let n = 0; n < N; n++) expect(added[n]).toBeCloseTo(fresh[n]! + n + 1, 4);
    if (kernels.includes('vnni-gemm')) {
      // The tiled GEMM adds its rows' products too (9 rows, 3 columns: one partial column group).
      const rows = 9;
      const xs = noise(rows * K, 4, 1);
      const base = new Float32Array(rows * N);
      await lin.run(xs, rows, base, false, 'vnni-gemm');
      const sum = Float32Array.from({ length: rows * N }, (_, i) => i - 7);
      await lin.run(xs, rows, sum, true, 'vnni-gemm');
      for (let i = 0; i < rows * N; i++) expect(sum[i]).toBeCloseTo(base[i]! + i - 7, 4);
    }
    const zero = await native.createQuantLinear('Q4_K', quantize('Q4_K', new Float32Array(2 * 256)), 256, 2);
    const y = new Float32Array(2).fill(5);
    await zero.run(x.subarray(0, 256), 1, y);
    expect([...y]).toEqual([0, 0]);
    if (kernels.includes('vnni-gemm')) {
      const y8 = new Float32Array(16).fill(5);
      await zero.run(noise(8 * 256, 2, 1), 8, y8, false, 'vnni-gemm');
      expect([...y8]).toEqual(new Array(16).fill(0));
    }
  });

  // With VNNI, Q4_K / Q6_K layers are stored column-interleaved (kquant-interleave.h) and decode rows run their own
  // kernel: it adds the same integers in the same float steps as the tiled GEMM, so its outputs are the GEMM's bits;
  // a layer kept in GGUF's rows (FLEXHELM_QUANT_GEMM=0) runs the row kernel on the same blocks.
  describe.skipIf(!vnni).each(['Q4_K', 'Q6_K'] as const)('%s interleaved', (type) => {
    // N 37: two whole groups of 16 and a partial one of 5; K 768: 3 super-blocks (Q6_K groups then start 32 bytes
    // into a cache line every other super-block).
    const K = 768;
    const N = 37;
    it('decode rows: the tiled GEMM bits at 1 to 17 rows, the row-order kernel within fp32 reordering; `best` runs it; accumulate adds', async () => {
      const w = noise(N * K, 31 + type.charCodeAt(1), 0.08);
      const blocks = quantize(type, w);
      const wq = dequantize(type, blocks, N * K);
      const lin = await native.createQuantLinear(type, blocks, K, N);
      process.env.FLEXHELM_QUANT_GEMM = '0';
      const rows = await native.createQuantLinear(type, blocks, K, N).finally(() => delete process.env.FLEXHELM_QUANT_GEMM);
      expect(lin.bytes).toBe(blocks.length);
      for (const M of [1, 2, 3, 5, 7, 17]) {
        const x = noise(M * K, 5 * M + 1, 1.5);
        const y = new Float32Array(M * N);
        await lin.run(x, M, y, false, 'avx512vnni');
        const gemm = new Float32Array(M * N);
        await lin.run(x, M, gemm, false, 'vnni-gemm');
        expect(y, `${M} rows`).toEqual(gemm);
        const rowKernel = new Float32Array(M * N);
        await rows.run(x, M, rowKernel, false, 'avx512vnni');
        const scalar = new Float32Array(M * N);
        await lin.run(x, M, scalar, false, 'scalar');
        // Relative to Σ|w·x| (as above): the float steps' reordering only.
        const { abs } = reference(wq, x, M, K, N);
        for (let i = 0; i < M * N; i++) {
          expect(Math.abs(y[i]! - scalar[i]!) / abs[i]!, `${M} rows, output ${i}`).toBeLessThan(2e-6);
          expect(Math.abs(rowKernel[i]! - scalar[i]!) / abs[i]!).toBeLessThan(2e-6);
        }
        const best = new Float32Array(M * N);
        await lin.run(x, M, best);
        expect(best).toEqual(y);
        const added = Float32Array.from({ length: M * N }, (_, i) => (i % 7) - 3);
        await lin.run(x, M, added, true, 'avx512vnni');
        for (let i = 0; i < M * N; i++) expect(added[i]).toBe(Math.fround(y[i]! + ((i % 7) - 3)));
      }
    });
  });

  it('refuses hostile arguments with a clear error', async () => {
    const good = quantize('Q4_K', new Float32Array(256 * 2));
    expect(() => native.createQuantLinear('Q2_K' as QuantType, good, 256, 2)).toThrow(/quantized type 'Q2_K': one of Q8_0, Q4_0, Q4_K, Q5_K, Q6_K/);
    expect(() => native.createQuantLinear('Q4_K', good, 128, 2)).toThrow(/not a multiple of 256 \(Q4_K blocks hold 256 values\)/);
    expect(() => native.createQuantLinear('Q4_K', good.subarray(1), 256, 2)).toThrow(/is 288 bytes, got 287/);
    const lin = await native.createQuantLinear('Q4_K', good, 256, 2);
    if (kernels.includes('avx512vnni')) await expect(async () => lin.run(new Float32Array(256), 1, new Float32Array(2), false, 'avx2')).rejects.toThrow(/avx2 does not multiply K-quant blocks/);
  });
});
