import { dequantize, quantize } from '@flexhelm/gguf';
import { describe, expect, it } from 'vitest';
import { oneDnnStatus, type NativeBinding, type NativeQuantLinear, type QuantKernel, type QuantType } from './native-addon.js';
import { outputsPerThreadCount, quantReference, relErr, wave } from './test-signals.js';

// The tiled GEMM's interleaved layout is the default with VNNI: every layer of this file is built with it (the addon
// reads the variable per layer built), except the row-order ones (FLEXHELM_QUANT_GEMM=0) of the layout tests.
delete process.env.FLEXHELM_QUANT_GEMM;
const status = oneDnnStatus();
const native = status.available ? status.binding : (undefined as unknown as NativeBinding);
// The kernels this CPU runs: every AVX-512 VNNI host has AVX2 too.
const best = status.available ? status.features.quantKernel : 'scalar';
const bf16Path = status.available && /avx512/.test(status.features.isa);
const kernels: QuantKernel[] = best === 'avx512vnni' ? ['scalar', 'avx2', 'avx512vnni', 'vnni-gemm'] : best === 'avx2' ? ['scalar', 'avx2'] : ['scalar'];
// What `best` runs above 8 rows for these types: the tiled VNNI GEMM where the layer is interleaved (AVX-512 VNNI;
// its int8 activations as llama.cpp's, within INT8_ACTIVATION_GATE), else the widened bf16 matmul on AVX-512.
const manyRows: QuantKernel | undefined = best === 'avx512vnni' && process.env.FLEXHELM_QUANT_GEMM !== '0' && process.env.FLEXHELM_QUANT_INT8_PREFILL !== '0' ? 'vnni-gemm' : bf16Path ? 'bf16' : undefined;

/** Pseudo-random values in (−amp, amp): unlike a sine, blocks get different scales and sign patterns. */
function noise(n: number, seed: number, amp: number): Float32Array {
  let s = seed >>> 0;
  return Float32Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return ((s / 2 ** 32) * 2 - 1) * amp;
  });
}

/** A layer built with FLEXHELM_QUANT_GEMM=0: its blocks in GGUF's row order (the addon reads the variable per layer). */
async function rowOrderLayer(type: QuantType, blocks: Uint8Array, K: number, N: number): Promise<NativeQuantLinear> {
  process.env.FLEXHELM_QUANT_GEMM = '0';
  try {
    return await native.createQuantLinear(type, blocks, K, N);
  } finally {
    delete process.env.FLEXHELM_QUANT_GEMM;
  }
}

// The activations are rounded as ggml's q8_0: one scale per 32 values.
const reference = (w: Float32Array, x: Float32Array, M: number, K: number, N: number) => quantReference(w, x, M, K, N, 32);

describe.skipIf(!status.available)('quantized linears on ggml Q8_0 / Q4_0 blocks (createQuantLinear)', () => {
  const types: QuantType[] = ['Q8_0', 'Q4_0'];
  // K of an odd number of blocks (96) exercises the VNNI kernel's single last block; rows past 4 the row groups; N
  // past 64 and off a multiple of 16 the tiled GEMM's column panels and its masked last group; 13 rows its 6-row
  // tiles and a 1-row tail. One row reads 4 groups a task: N = 112 and 96 end on 3 and 2 full groups, 33 and 130 on
  // partial ones.
  const shapes: [number, number][] = [
    [64, 5],
    [96, 7],
    [512, 33],
    [2048, 19],
    [256, 130],
    [160, 112],
    [64, 96],
  ];
  describe.each(types)('%s', (type) => {
    it.each(shapes)('K %i × N %i: every kernel within fp32 reordering of the scalar reference, and within the activation rounding of the fp32 product', async (K, N) => {
      const w = noise(N * K, K + N, 0.08);
      const blocks = quantize(type, w);
      const wq = dequantize(type, blocks, N * K);
      const lin = await native.createQuantLinear(type, blocks, K, N);
      expect(lin.bytes).toBe(blocks.length);
      for (const M of [1, 3, 4, 9, 13]) {
        const x = noise(M * K, 7 * M + K, 1.5);
        const ref = reference(wq, x, M, K, N);
        const scalar = new Float32Array(M * N);
        await lin.run(x, M, scalar, false, 'scalar');
        for (let i = 0; i < M * N; i++) {
          // The integer sums are exact: only the activations' q8 rounding separates the scalar kernel from the
          // float64 product of the same (dequantized) weights, and it is bounded per output.
          expect(Math.abs(scalar[i]! - ref.y[i]!)).toBeLessThanOrEqual(ref.roundBound[i]! * 1.0001 + 1e-5 * ref.abs[i]!);
        }
        if (bf16Path) {
          // Weights and activations rounded to bf16 (2^-9 relative each), summed in fp32 by oneDNN.
          const y = new Float32Array(M * N);
          await lin.run(x, M, y, false, 'bf16');
          for (let i = 0; i < M * N; i++) expect(Math.abs(y[i]! - ref.y[i]!)).toBeLessThanOrEqual(5e-3 * ref.abs[i]! + 1e-6);
        }
        if (manyRows && M > 8) {
          // What `best` picks above 8 rows.
          const b = new Float32Array(M * N);
          const y = new Float32Array(M * N);
          await lin.run(x, M, b);
          await lin.run(x, M, y, false, manyRows);
          expect(b).toEqual(y);
        }
        for (const kernel of kernels.slice(1)) {
          const y = new Float32Array(M * N);
          await lin.run(x, M, y, false, kernel);
          let worst = 0;
          for (let i = 0; i < M * N; i++) worst = Math.max(worst, Math.abs(y[i]! - scalar[i]!) / ref.abs[i]!);
          expect(worst, `${kernel} vs scalar, ${M} rows`).toBeLessThan(2e-6);
        }
      }
    });
  });

  // The accuracy gate per type: relative L2 error of the quantized linear against the fp32 product of the dequantized
  // weights (the same weights the engine computes with today) on Llama-3.2-1B's widest shapes' rows. The activations'
  // q8_0 rounding is the only error source, ~0.3% measured on noise inputs; the gate is 1%.
  it.each(types)('%s: within 1%% relative L2 of the dequantized fp32 product (accuracy gate), decode and prefill rows', async (type) => {
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

  it('accumulate adds to y', async () => {
    const K = 64;
    const N = 3;
    const blocks = quantize('Q8_0', wave(N * K, 0.3, 0.5));
    const lin = await native.createQuantLinear('Q8_0', blocks, K, N);
    const x = wave(K, 0.7, 1);
    const fresh = new Float32Array(N);
    await lin.run(x, 1, fresh);
    const added = Float32Array.from([1, 2, 3]);
    await lin.run(x, 1, added, true);
    for (let n = 0; n < N; n++) expect(added[n]).toBeCloseTo(fresh[n]! + n + 1, 5);
  });

  it.each(kernels)('accumulate adds to y (%s, 13 rows × 37 columns)', async (kernel) => {
    const K = 96;
    const N = 37;
    const M = 13;
    const lin = await native.createQuantLinear('Q4_0', quantize('Q4_0', noise(N * K, 5, 0.1)), K, N);
    const x = noise(M * K, 9, 1);
    const fresh = new Float32Array(M * N);
    await lin.run(x, M, fresh, false, kernel);
    const prior = noise(M * N, 2, 3);
    const added = prior.slice();
    await lin.run(x, M, added, true, kernel);
    for (let i = 0; i < M * N; i++) expect(added[i]).toBe(Math.fround(prior[i]! + fresh[i]!));
  });

  // With one block per row there is no summation order left: dw · dx · (exact integer dot) rounds once in both, so the
  // tiled GEMM (its vectorized activation quantizer, the unsigned-weight seeds) must match the scalar kernel's bits.
  it.skipIf(best !== 'avx512vnni').each(types)('%s: vnni-gemm equals the scalar kernel bit for bit at K = 32', async (type) => {
    const K = 32;
    const N = 37;
    const M = 9;
    const lin = await native.createQuantLinear(type, quantize(type, noise(N * K, 6, 0.2)), K, N);
    const x = noise(M * K, 10, 3);
    const a = new Float32Array(M * N);
    const b = new Float32Array(M * N);
    await lin.run(x, M, a, false, 'scalar');
    await lin.run(x, M, b, false, 'vnni-gemm');
    expect(b).toEqual(a);
  });

  // Each output is its row's block terms in ascending order whatever tile computes it, so a many-row call (six-row
  // tiles; from 64 rows Q4_0's nibbles widened to bytes per task first; past 4 MiB of int8 activations, chunks of rows:
  // 600 × 8192 is two) gives every row the bits of that row run alone.
  const manyRowShapes = types.flatMap((type) => [[type, 320, 70, 70] as const, [type, 8192, 20, 600] as const]);
  it.skipIf(best !== 'avx512vnni').each(manyRowShapes)('%s: vnni-gemm at K %i × N %i gives each of %i rows the bits of that row alone', async (type, K, N, M) => {
    const lin = await native.createQuantLinear(type, quantize(type, noise(N * K, 12, 0.2)), K, N);
    const x = noise(M * K, 13, 2);
    const all = new Float32Array(M * N);
    await lin.run(x, M, all, false, 'vnni-gemm');
    for (let m = 0; m < M; m++) {
      const one = new Float32Array(N);
      await lin.run(x.subarray(m * K, (m + 1) * K), 1, one, false, 'vnni-gemm');
      expect(all.subarray(m * N, (m + 1) * N), `row ${m}`).toEqual(one);
    }
  });

  // A bf16 layer hands its rows over as bf16 bits: the tiled GEMM quantizes them as it loads them, the row kernels
  // (few rows) and K-quants take them widened in scratch. Either way the bits of the same rows widened first. Two
  // layers of different K alternate so that each call finds the other's activations in the shared per-thread scratch.
  const bf16Layers: [QuantType, number][] = [
    ['Q8_0', 320],
    ['Q4_0', 2048],
    ['Q4_K', 512],
  ];
  it.each(bf16Layers)('%s at K %i: bf16 rows give the bits of their widened floats (1 to 600 rows, accumulate too)', async (type, K) => {
    const N = 37;
    const lin = await native.createQuantLinear(type, quantize(type, noise(N * K, 14, 0.2)), K, N);
    const other = await native.createQuantLinear('Q8_0', quantize('Q8_0', noise(N * 64, 15, 0.2)), 64, N);
    for (const M of [1, 3, 13, 70, 600]) {
      const bits = new Uint16Array(Uint32Array.from(new Uint32Array(noise(M * K, 16 + M, 2).buffer), (b) => b >>> 16));
      const widened = new Float32Array(Uint32Array.from(bits, (b) => b << 16).buffer);
      const want = new Float32Array(M * N);
      await lin.run(widened, M, want);
      await other.run(noise(M * 64, 17, 1), M, new Float32Array(M * N));
      const got = new Float32Array(M * N);
      await lin.run(bits, M, got);
      expect(got, `${M} rows`).toEqual(want);
      const prior = noise(M * N, 18, 1);
      const added = prior.slice();
      await lin.run(bits, M, added, true);
      expect(added, `${M} rows, accumulate`).toEqual(prior.map((p, i) => Math.fround(p + want[i]!)));
    }
    await expect(async () => lin.run(new Uint16Array(K), 1, new Float32Array(N), false, 'scalar')).rejects.toThrow(/best kernel/);
    await expect(async () => lin.run(new Uint16Array(K - 1), 1, new Float32Array(N))).rejects.toThrow(/x has \d+ elements, expected \d+/);
    await expect(async () => lin.run(new Int16Array(K) as unknown as Uint16Array, 1, new Float32Array(N))).rejects.toThrow(/x must be a Float32Array, or a Uint16Array of bf16 bits/);
  });

  // Prompt rows widen the blocks to bf16 for oneDNN's matmul: from the interleaved layout 16 columns at a time (AVX-512),
  // from GGUF's rows block by block. The widened weights, and so the products, must be the same bits; N = 70 leaves a
  // partial last group (6 columns, widened column by column), K = 2048 many blocks.
  it.skipIf(best !== 'avx512vnni' || !bf16Path).each(types)('%s: the bf16 path gives the same bits from the interleaved layout as from rows', async (type) => {
    const K = 2048;
    const N = 70;
    const M = 12;
    const blocks = quantize(type, noise(N * K, 11, 0.3));
    const interleaved = await native.createQuantLinear(type, blocks, K, N);
    const rows = await rowOrderLayer(type, blocks, K, N);
    const x = noise(M * K, 12, 2);
    const a = new Float32Array(M * N);
    const b = new Float32Array(M * N);
    await rows.run(x, M, a, false, 'bf16');
    await interleaved.run(x, M, b, false, 'bf16');
    expect(b).toEqual(a);
    // And the row layout's own kernel is not the tiled one (the layer really kept GGUF's rows).
    await expect(async () => rows.run(x.subarray(0, K), 1, new Float32Array(N), false, 'vnni-gemm')).rejects.toThrow(/keeps GGUF's row order/);
  });

  // Each output of the tiled GEMM is one thread's, its block terms in a fixed order: a fresh process per OpenMP thread
  // count (libgomp reads OMP_NUM_THREADS once) must give the same bits.
  it.skipIf(best !== 'avx512vnni')('vnni-gemm gives the same bits with 1, 2 and 3 threads', () => {
    const outputs = outputsPerThreadCount('Q8_0', 320, 200, 23, 'vnni-gemm');
    expect(outputs[0]!.length).toBeGreaterThan(1000);
    expect(outputs[1]).toBe(outputs[0]);
    expect(outputs[2]).toBe(outputs[0]);
  });

  it.skipIf(best !== 'avx512vnni')('with FLEXHELM_QUANT_GEMM=0 a layer keeps GGUF row order: same bytes, the same bits from each row kernel, vnni-gemm refused', async () => {
    const K = 96;
    const N = 37;
    const M = 5;
    const blocks = quantize('Q8_0', noise(N * K, 4, 0.1));
    const interleaved = await native.createQuantLinear('Q8_0', blocks, K, N);
    const rows = await rowOrderLayer('Q8_0', blocks, K, N);
    expect(rows.bytes).toBe(interleaved.bytes);
    const x = noise(M * K, 8, 1);
    for (const kernel of kernels.filter((k) => k !== 'vnni-gemm')) {
      const a = new Float32Array(M * N);
      const b = new Float32Array(M * N);
      await interleaved.run(x, M, a, false, kernel);
      await rows.run(x, M, b, false, kernel);
      expect(a, kernel).toEqual(b);
    }
    await expect(async () => rows.run(x, M, new Float32Array(M * N), false, 'vnni-gemm')).rejects.toThrow(/row order/);
  });

  it('a zero block (scale 0) gives zeros, not NaN', async () => {
    const lin = await native.createQuantLinear('Q4_0', quantize('Q4_0', new Float32Array(2 * 64)), 64, 2);
    const y = new Float32Array(2).fill(5);
    await lin.run(new Float32Array(64), 1, y);
    expect([...y]).toEqual([0, 0]);
  });

  it('refuses hostile arguments with a clear error', async () => {
    const good = quantize('Q8_0', new Float32Array(64 * 2));
    expect(() => native.createQuantLinear('Q2_K' as QuantType, good, 64, 2)).toThrow(/quantized type 'Q2_K': one of Q8_0, Q4_0/);
    expect(() => native.createQuantLinear('Q8_0', good, 48, 2)).toThrow(/not a multiple of 32/);
    expect(() => native.createQuantLinear('Q8_0', good.subarray(1), 64, 2)).toThrow(/is 136 bytes, got 135/);
    expect(() => native.createQuantLinear('Q8_0', new Float32Array(4) as unknown as Uint8Array, 64, 2)).toThrow(/Uint8Array/);
    // quantStore checks its arguments the same way (one helper for both).
    expect(() => native.quantStore('Q2_K' as QuantType, good, 64, 2)).toThrow(/quantized type 'Q2_K': one of Q8_0, Q4_0/);
    expect(() => native.quantStore('Q8_0', good, 48, 2)).toThrow(/not a multiple of 32/);
    expect(() => native.quantStore('Q8_0', good.subarray(1), 64, 2)).toThrow(/is 136 bytes, got 135/);
    const lin = await native.createQuantLinear('Q8_0', good, 64, 2);
    await expect(async () => lin.run(new Float32Array(64), 1, new Float32Array(2), false, 'avx9' as QuantKernel)).rejects.toThrow(/one of best, avx512vnni, avx2, scalar, bf16, vnni-gemm/);
    await expect(async () => lin.run(new Float32Array(63), 1, new Float32Array(2))).rejects.toThrow(/x/);
  });
});
