import { describe, expect, it } from 'vitest';
import { oneDnnStatus, type ComputeDtype, type NativeBinding } from './native-addon.js';
import { createOptLayer } from './opt-shaped-layer.js';
import { relErr, wave } from './test-signals.js';

const status = oneDnnStatus();
const native = status.available ? status.binding : (undefined as unknown as NativeBinding);

// CI installs libdnnl-dev and a compiler (.ci/system-deps), so an addon that did not build there is a failure, not a
// skip: a build killed by its own compiler output once left every test below skipped and CI green.
const ciExpectsAddon = process.env.CI === 'true' && !process.env.FLEXHELM_ONEDNN_DISABLE && process.env.FLEXHELM_NATIVE_BUILD !== '0';
describe.runIf(ciExpectsAddon)('the addon in CI', () => {
  it('is built and loads', () => {
    expect(status.available ? 'available' : status.reason).toBe('available');
  });
});

/** y = act(x Wᵀ + b) (+ y0) in float64. */
function linearRef(x: Float32Array, M: number, K: number, w: Float32Array, N: number, b: Float32Array, relu: boolean, y0?: Float32Array): Float64Array {
  const y = new Float64Array(M * N);
  for (let m = 0; m < M; m++) {
    for (let n = 0; n < N; n++) {
      let s = b[n]!;
      for (let k = 0; k < K; k++) s += x[m * K + k]! * w[n * K + k]!;
      if (y0) s += y0[m * N + n]!;
      y[m * N + n] = relu && s < 0 ? 0 : s;
    }
  }
  return y;
}

/** float → bf16 bits, rounded to nearest even (as the native conversion). */
function bf16Bits(x: number): number {
  const u = new Uint32Array(Float32Array.of(x).buffer)[0]!;
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}

describe.skipIf(!status.available)('native oneDNN linear', () => {
  const K = 200;
  const N = 300;
  const w = wave(N * K, 0.37, 0.05);
  const b = wave(N, 1.1, 0.1);

  it.each(['fp32', 'bf16', 'int8'] as const)('%s packs [in, out] weights (transposed) to exactly the same results, column blocks too', async (dtype) => {
    const wt = new Float32Array(K * N);
    for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) wt[k * N + n] = w[n * K + k]!;
    const M = 9;
    const x = wave(M * K, 1.3, 1);
    for (const chunkBytes of [0, 64 * K * 4]) {
      const y = native.allocFloat32(M * N);
      const yt = native.allocFloat32(M * N);
      await (await native.createLinear(w, b, K, N, { dtype, chunkBytes })).run(x, M, y);
      await (await native.createLinear(wt, b, K, N, { dtype, chunkBytes, transposed: true })).run(x, M, yt);
      expect(Array.from(yt)).toEqual(Array.from(y));
    }
  });

  it.each([
    ['fp32', 1e-6],
    ['bf16', 8e-3],
    ['int8', 3e-2],
  ] as const)('%s matches a float64 reference (bias, ReLU, residual accumulation, column blocks)', async (dtype: ComputeDtype, tolerance: number) => {
    for (const M of [1, 7, 64]) {
      const x = wave(M * K, 1.3, 1);
      for (const chunkBytes of [0, 64 * K * 4]) {
        const relu = await native.createLinear(w, b, K, N, { dtype, relu: true, chunkBytes });
        const y = native.allocFloat32(M * N);
        await relu.run(x, M, y);
        expect(relErr(linearRef(x, M, K, w, N, b, true), y)).toBeLessThan(tolerance);
        const plain = await native.createLinear(w, b, K, N, { dtype, chunkBytes });
        if (chunkBytes > 0) expect(plain.chunks).toBeGreaterThan(1);
        const y0 = wave(M * N, 0.7, 0.5);
        const acc = Float32Array.from(y0);
        await plain.run(x, M, acc, true);
        expect(relErr(linearRef(x, M, K, w, N, b, false, y0), acc)).toBeLessThan(tolerance);
      }
    }
  });

  it.each([true, false])('a lazily packed [in, out] linear multiplies unpacked below packAtRows, 1 to 9 rows (skinnyGemm %s), as the reference', async (skinnyGemm) => {
    const wt = new Float32Array(K * N);
    for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) wt[k * N + n] = w[n * K + k]!;
    for (const relu of [false, true]) {
      const lazy = await native.createLinear(wt, b, K, N, { dtype: 'bf16', transposed: true, packAtRows: 64, relu, skinnyGemm });
      for (let M = 1; M <= 9; M++) {
        const x = wave(M * K, 1.3 + M / 10, 1);
        const y0 = wave(M * N, 0.7, 0.5);
        const acc = Float32Array.from(y0);
        await lazy.run(x, M, acc, true);
        // Unpacked means fp32 arithmetic: fp32-level agreement with the float64 reference.
        expect(relErr(linearRef(x, M, K, w, N, b, relu, y0), acc)).toBeLessThan(1e-6);
      }
      expect(lazy.packedBytes).toBe(0);
    }
  });

  it('streamRead reads every byte (XOR of the 64-bit words, low 16 bits)', async () => {
    const words = new BigUint64Array(1000);
    words[3] = 0x1234n;
    words[999] = 0x10001n;
    expect(await native.streamRead(words)).toBe(0x1235);
    // Every length around the wide loop's 256-byte steps and the threads' shares: each word counts once.
    for (const n of [1, 31, 32, 33, 64, 95, 4099]) {
      const w = BigUint64Array.from({ length: n }, (_, i) => (BigInt(i + 1) * 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn);
      const expected = Number(w.reduce((a, v) => a ^ v, 0n) & 0xffffn);
      expect(await native.streamRead(w)).toBe(expected);
    }
  });

  it('packs bf16 weights in half (12 bits a weight compact) and int8 in about a quarter of the fp32 bytes (plus compensation)', async () => {
    const sizes: Record<string, number> = {};
    for (const dtype of ['fp32', 'bf16', 'int8'] as const) sizes[dtype] = (await native.createLinear(w, b, K, N, { dtype, compact: false })).packedBytes;
    expect(sizes.bf16! / sizes.fp32!).toBeCloseTo(0.5, 1);
    expect(sizes.int8! / sizes.fp32!).toBeLessThan(0.35);
    const compact = await native.createLinear(w, b, K, N, { dtype: 'bf16' });
    if (compact.compactChunks > 0) expect(compact.packedBytes / sizes.fp32!).toBeCloseTo(0.375, 1);
  });

  it('reports what oneDNN dispatches to', () => {
    const f = native.features();
    expect(f.version).toMatch(/^\d+\.\d+\.\d+$/);
    expect(f.threads).toBeGreaterThan(0);
    expect(f.bf16Impl).toMatch(/bf16|ref|gemm|brg/);
  });

  it('rejects wrong sizes and types with a clear message', async () => {
    expect(() => native.createLinear(w, b, K, N + 1, { dtype: 'fp32' })).toThrow(/weight has 60000 elements, expected 60200/);
    expect(() => native.createLinear(w, b, K, N, { dtype: 'fp16' as ComputeDtype })).toThrow(/dtype must be 'fp32', 'bf16' or 'int8'/);
    const lin = await native.createLinear(w, b, K, N, { dtype: 'fp32' });
    expect(() => lin.run(new Float32Array(K), 2, new Float32Array(2 * N))).toThrow(/x has 200 elements, expected 400/);
    expect(() => lin.run(new Float64Array(K) as unknown as Float32Array, 1, new Float32Array(N))).toThrow(/x must be a Float32Array/);
    expect(() => lin.run(new Float32Array(K), 0, new Float32Array(N))).toThrow(/rows must be a positive integer/);
  });

  it('builds a layer from a partial one (resident parts shared), and a partial layer refuses to run', async () => {
    const shape = { hidden: 32, heads: 2, ffn: 64, preLayerNorm: true, eps: 1e-5 };
    const sizes: Record<string, number> = { qW: 1024, kW: 1024, vW: 1024, oW: 1024, fc1W: 2048, fc2W: 2048, fc1B: 64 };
    const names = ['qW', 'qB', 'kW', 'kB', 'vW', 'vB', 'oW', 'oB', 'ln1W', 'ln1B', 'fc1W', 'fc1B', 'fc2W', 'fc2B', 'ln2W', 'ln2B'];
    const weights = Object.fromEntries(names.map((n, i) => [n, wave(sizes[n] ?? 32, 0.1 + i / 50, 0.2)]));
    const full = await createOptLayer(native, shape, weights, { dtype: 'fp32' });
    const attention = Object.fromEntries(names.filter((n) => !n.startsWith('fc')).map((n) => [n, weights[n]!]));
    const base = await createOptLayer(native, shape, attention, { dtype: 'fp32', parts: ['qkv', 'out', 'ln'] });
    const mlp = { fc1W: weights.fc1W!, fc1B: weights.fc1B!, fc2W: weights.fc2W!, fc2B: weights.fc2B! };
    const built = await createOptLayer(native, shape, mlp, { dtype: 'fp32', parts: ['fc1', 'fc2'] }, base);
    expect(built.packedBytes).toBe(full.packedBytes);
    const x = wave(3 * 32, 0.37, 1);
    const mask = new Float32Array(9).map((_, i) => (i % 3 <= Math.floor(i / 3) ? 0 : -1e30));
    const run = async (layer: typeof full) => {
      const y = new Float32Array(3 * 32);
      await layer.run(x, new Float32Array(0), new Float32Array(0), mask, 1, 3, 0, y, new Float32Array(96), new Float32Array(96));
      return y;
    };
    expect(await run(built)).toEqual(await run(full));
    await expect(run(base)).rejects.toThrow(/this layer holds only some of its parts/);
    expect(() => createOptLayer(native, shape, mlp, { dtype: 'fp32', parts: ['mlp' as 'fc1'] })).toThrow(/unknown part 'mlp' \(use 'qkv', 'out', 'fc1', 'fc2', 'ln'\)/);
    expect(() => createOptLayer(native, shape, mlp, { dtype: 'fp32', parts: ['qkv'] })).toThrow(/weights.qW must be a Float32Array/);
    base.release();
    expect(await run(built)).toEqual(await run(full)); // the built layer keeps the shared parts alive
  });

  // Head size 16 takes the AVX-512 kernels (bf16 blocks for the prompt, one row for decode), 8 the plain loop.
  it.each([16, 8])('a bf16 layer keeps its KV cache in bf16 (head size %i): the keys stored are the fp32 cache\'s rounded, the outputs the same', async (D) => {
    const H = 4;
    const E = H * D;
    const shape = { hidden: E, heads: H, ffn: 2 * E, preLayerNorm: true, eps: 1e-5 };
    const sizes: Record<string, number> = { qW: E * E, kW: E * E, vW: E * E, oW: E * E, fc1W: 2 * E * E, fc2W: 2 * E * E, fc1B: 2 * E };
    const names = ['qW', 'qB', 'kW', 'kB', 'vW', 'vB', 'oW', 'oB', 'ln1W', 'ln1B', 'fc1W', 'fc1B', 'fc2W', 'fc2B', 'ln2W', 'ln2B'];
    const weights = Object.fromEntries(names.map((n, i) => [n, wave(sizes[n] ?? E, 0.1 + i / 50, n.startsWith('ln') && n.endsWith('W') ? 1 : 0.3)]));
    const layer = await createOptLayer(native, shape, weights, { dtype: 'bf16' });
    const B = 2;
    const S = 5;
    const cap = 8;
    const causal = (s: number, past: number) => {
      const T = past + s;
      const m = new Float32Array(B * s * T);
      for (let b = 0; b < B; b++) for (let i = 0; i < s; i++) for (let t = 0; t < T; t++) m[(b * s + i) * T + t] = t <= past + i ? 0 : -1e30;
      return m;
    };
    const k32 = new Float32Array(B * H * cap * D);
    const v32 = new Float32Array(B * H * cap * D);
    const k16 = new Uint16Array(B * H * cap * D);
    const v16 = new Uint16Array(B * H * cap * D);
    const x = wave(B * S * E, 0.37, 1);
    const x1 = wave(B * E, 0.91, 1);
    const outs: Float32Array[] = [];
    for (const [k, v] of [[k32, v32], [k16, v16]] as const) {
      const y = new Float32Array(B * S * E);
      await layer.runCached(x, causal(S, 0), B, S, 0, y, k, v, cap);
      const y1 = new Float32Array(B * E);
      await layer.runCached(x1, causal(1, S), B, 1, S, y1, k, v, cap);
      outs.push(y, y1);
    }
    // A bf16 layer stores its keys and values rounded to bf16 in a float cache too: it computes the same with either
    // cache, to the bit, prompt and decode step.
    expect(Array.from(outs[2]!)).toEqual(Array.from(outs[0]!));
    expect(Array.from(outs[3]!)).toEqual(Array.from(outs[1]!));
    for (let r = 0; r < B * H; r++) {
      for (let i = 0; i < (S + 1) * D; i++) {
        expect(k16[r * cap * D + i]).toBe(bf16Bits(k32[r * cap * D + i]!));
        expect(v16[r * cap * D + i]).toBe(bf16Bits(v32[r * cap * D + i]!));
      }
    }
    const fp32 = await createOptLayer(native, shape, weights, { dtype: 'fp32' });
    await expect(fp32.runCached(x, causal(S, 0), B, S, 0, new Float32Array(B * S * E), k16, v16, cap)).rejects.toThrow(/a bf16 KV cache \(Uint16Array\) needs a bf16 layer; this one computes in fp32/);
    expect(() => layer.runCached(x, causal(S, 0), B, S, 0, new Float32Array(B * S * E), k16.subarray(1), v16, cap)).toThrow(new RegExp(`cache.k has ${k16.length - 1} elements, expected ${k16.length}`));
    expect(() => layer.runCached(x, causal(S, 0), B, S, 0, new Float32Array(B * S * E), k16, v32, cap)).toThrow(/cache.k and cache.v must both be Float32Array \(fp32 cache\) or both Uint16Array \(bf16 cache\)/);
  });

  it('allocates 64-byte-aligned zeroed arrays, including empty ones', () => {
    const a = native.allocFloat32(1000);
    expect(a.length).toBe(1000);
    expect(a.every((v) => v === 0)).toBe(true);
    expect(native.allocFloat32(0).length).toBe(0);
  });
});
