import { describe, expect, it } from 'vitest';
import { oneDnnStatus, type NativeBinding } from './native-addon.js';
import { wave } from './test-signals.js';

const status = oneDnnStatus();
const native = status.available ? status.binding : (undefined as unknown as NativeBinding);
const bf16Cpu = status.available && /bf16|amx/.test(status.features.isa);

/** A float whose bf16 rounding has exponent field `e` (1–254) and the given sign / mantissa. */
function bf16Float(e: number, mantissa: number, negative: boolean): number {
  const bits = ((negative ? 1 : 0) << 31) | (e << 23) | (mantissa << 16);
  return new Float32Array(new Uint32Array([bits >>> 0]).buffer)[0]!;
}

/**
 * Resident bf16 blocks held in 12 bits a weight (compact-bf16.h): a sign-mantissa byte and a 4-bit code into the
 * block's most frequent exponents, the rare others ("escapes") listed apart. Lossless: prompt rows (widened back for
 * oneDNN) give bit for bit the 16-bit layer's outputs; decode rows multiply the same products in the same order as the
 * packed-panel kernel, so without escapes they too are bit for bit its outputs.
 */
describe.skipIf(!bf16Cpu)('compact bf16 blocks (12 bits a weight) against the 16-bit packed layer', () => {
  async function pair(w: Float32Array, bias: Float32Array | null, K: number, N: number, extra: { relu?: boolean; chunkBytes?: number } = {}) {
    const options = { dtype: 'bf16' as const, transposed: true, ...extra };
    const compact = await native.createLinear(w, bias, K, N, { ...options, compact: true });
    const plain = await native.createLinear(w, bias, K, N, { ...options, compact: false });
    return { compact, plain };
  }

  async function outputs(l: { run: (x: Float32Array, m: number, y: Float32Array, acc?: boolean) => Promise<void> }, x: Float32Array, M: number, N: number, start: Float32Array | null) {
    const y = start ? Float32Array.from(start) : new Float32Array(M * N);
    await l.run(x, M, y, start !== null);
    return y;
  }

  it.each([
    [64, 64],
    [96, 100],
    [2048, 2048],
    [300, 1000],
  ])('K %i × N %i without escapes: bit for bit at 1–4 rows and at 16 / 40, a quarter fewer bytes', async (K, N) => {
    // Magnitudes within 2^-15 … 2^-4 (12 exponents, each with a code), zeros and bf16 subnormals (exponent field 0,
    // code 0) among them: no escapes.
    const w = wave(K * N, 0.37, 0.05).map((v) => (Math.abs(v) < 2 ** -15 ? 0 : v));
    for (let i = 0; i < w.length; i += 97) w[i] = 0;
    for (let i = 5; i < w.length; i += 211) w[i] = bf16Float(0, 0x55, i % 2 === 0);
    const bias = wave(N, 1.1, 0.1);
    for (const relu of [false, true]) {
      const { compact, plain } = await pair(w, bias, K, N, { relu, chunkBytes: 64 * K * 2 });
      expect(compact.compactChunks).toBe(compact.chunks);
      expect(plain.compactChunks).toBe(0);
      // 12 bits a weight of the padded blocks instead of 16.
      expect(compact.packedBytes / plain.packedBytes).toBeCloseTo(0.75, 2);
      for (const M of [1, 2, 3, 4, 16, 40]) {
        const x = wave(M * K, 1.3, 1);
        for (const start of [null, wave(M * N, 0.7, 0.5)]) {
          expect(await outputs(compact, x, M, N, start), `M ${M} relu ${relu} accumulate ${start !== null}`).toEqual(await outputs(plain, x, M, N, start));
        }
      }
    }
  });

  it('5–8 rows: the compact kernel in two passes, each row bit for bit what it gives alone', async () => {
    const K = 512;
    const N = 384;
    const { compact } = await pair(wave(K * N, 0.23, 0.04), null, K, N);
    for (const M of [5, 8]) {
      const x = wave(M * K, 0.9, 1);
      const all = await outputs(compact, x, M, N, null);
      for (let m = 0; m < M; m++) {
        const one = await outputs(compact, x.slice(m * K, (m + 1) * K), 1, N, null);
        expect(all.slice(m * N, (m + 1) * N), `M ${M} row ${m}`).toEqual(one);
      }
    }
  });

  it('weights outside the code table are listed apart: prompt rows bit for bit, decode rows within roundings of the sum', async () => {
    const K = 1024;
    const N = 256;
    const w = wave(K * N, 0.37, 0.05);
    // 1 in ~2000 weights with exponents far from the rest (huge, tiny, both signs): escapes.
    const odd = [bf16Float(200, 0x11, false), bf16Float(30, 0x7f, true), bf16Float(140, 0, true), bf16Float(60, 0x40, false)];
    for (let i = 13, j = 0; i < w.length; i += 1999, j++) w[i] = odd[j % odd.length]!;
    const { compact, plain } = await pair(w, null, K, N);
    expect(compact.compactChunks).toBe(compact.chunks);
    for (const M of [16, 33]) {
      const x = wave(M * K, 1.3, 1);
      expect(await outputs(compact, x, M, N, null), `M ${M}`).toEqual(await outputs(plain, x, M, N, null));
    }
    for (const M of [1, 3, 6]) {
      const x = wave(M * K, 1.3, 1e-3);
      const a = await outputs(compact, x, M, N, null);
      const b = await outputs(plain, x, M, N, null);
      for (let m = 0; m < M; m++) {
        for (let n = 0; n < N; n++) {
          let scale = 0;
          for (let k = 0; k < K; k++) scale += Math.abs(x[m * K + k]! * w[k * N + n]!);
          // As packed-gemv.test.ts bounds another summation order (6 rows: oneDNN's, in the 16-bit layer).
          expect(Math.abs(a[m * N + n]! - b[m * N + n]!), `M ${M} row ${m} col ${n}`).toBeLessThanOrEqual(scale * 2 ** -20 * (K / 8 + 4));
        }
      }
    }
  });

  it('a block whose exponents are too many for 15 codes stays at 16 bits', async () => {
    const K = 256;
    const N = 128;
    // Magnitudes spread evenly over 2^-60 … 2^60: most weights would be escapes.
    const w = Float32Array.from({ length: K * N }, (_, i) => bf16Float(67 + (i % 121), (i * 37) % 128, i % 3 === 0));
    const { compact, plain } = await pair(w, null, K, N);
    expect(compact.compactChunks).toBe(0);
    expect(compact.packedBytes).toBe(plain.packedBytes);
    const x = wave(K, 1.3, 1e-3);
    expect(await outputs(compact, x, 1, N, null)).toEqual(await outputs(plain, x, 1, N, null));
  });
});
