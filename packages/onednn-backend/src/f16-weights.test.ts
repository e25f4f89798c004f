import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { f16ToF32, f32ToF16 } from '@flexhelm/python-compat';
import { describe, expect, it } from 'vitest';
import { oneDnnStatus, type NativeBinding, type NativeLinear } from './native-addon.js';
import { createOptLayer } from './opt-shaped-layer.js';
import type { NativeDecoderBinding } from './native-decoder-layer.js';
import { relErr, wave } from './test-signals.js';

const status = oneDnnStatus();
const native = (status.available ? status.binding : undefined) as unknown as NativeBinding & NativeDecoderBinding;

/** y = act(x · W + b) (+ y0) in float64, W given [K, N] ([in, out]). */
function reference(x: Float32Array, M: number, K: number, wt: Float32Array, N: number, b: Float32Array, relu: boolean, y0: Float32Array): Float64Array {
  const y = new Float64Array(M * N);
  for (let m = 0; m < M; m++) {
    for (let n = 0; n < N; n++) {
      let s = b[n]! + y0[m * N + n]!;
      for (let k = 0; k < K; k++) s += x[m * K + k]! * wt[k * N + n]!;
      y[m * N + n] = relu && s < 0 ? 0 : s;
    }
  }
  return y;
}

/** Round to nearest even float → bfloat16 (as a float). */
function bf16Round(v: number): number {
  const f = new Float32Array([v]);
  const u = new Uint32Array(f.buffer);
  u[0] = (u[0]! + 0x7fff + ((u[0]! >>> 16) & 1)) & 0xffff0000;
  return f[0]!;
}

/**
 * The bf16 decode kernel's numerics: x and w rounded to bf16, each sum in fp32 k ascending with one rounding per
 * product added (bf16 products are exact in fp32), then bias, the residual y0 (when accumulate) and ReLU in fp32.
 */
function bf16Reference(x: Float32Array, M: number, K: number, wt: Float32Array, N: number, b: Float32Array, relu: boolean, y0: Float32Array, accumulate: boolean): Float32Array {
  const xr = x.map(bf16Round);
  const wr = wt.map(bf16Round);
  const y = new Float32Array(M * N);
  for (let m = 0; m < M; m++) {
    for (let n = 0; n < N; n++) {
      let s = 0;
      for (let k = 0; k < K; k++) s = Math.fround(s + xr[m * K + k]! * wr[k * N + n]!);
      s = Math.fround(s + b[n]!);
      if (accumulate) s = Math.fround(s + y0[m * N + n]!);
      y[m * N + n] = relu && s < 0 ? 0 : s;
    }
  }
  return y;
}

describe.skipIf(!status.available)('f16 weights (streamed layers)', () => {
  // N not a multiple of 32 and K not of 16: the kernel's masked tails and short k-passes run too.
  const K = 203;
  const N = 301;
  const w16 = f32ToF16(wave(K * N, 0.37, 0.05));
  const w32 = f16ToF32(w16);
  const b = wave(N, 1.1, 0.1);

  /** `y += x · W + b` for M rows through both linears from the same start `y0`: the f16 one into a, the fp32 one into c. */
  async function accumulateBoth(half: NativeLinear, full: NativeLinear, M: number) {
    const x = wave(M * K, 1.3 + M / 10, 1);
    const y0 = wave(M * N, 0.7, 0.5);
    const a = Float32Array.from(y0);
    const c = Float32Array.from(y0);
    await half.run(x, M, a, true);
    await full.run(x, M, c, true);
    return { x, y0, a, c };
  }

  it('a lazily packed fp32 f16 linear gives exactly what its widened fp32 copy gives, decode rows, mid-sized rows and packed', async () => {
    for (const relu of [false, true]) {
      const half = await native.createLinear(w16, b, K, N, { dtype: 'fp32', transposed: true, packAtRows: 32, relu });
      const full = await native.createLinear(w32, b, K, N, { dtype: 'fp32', transposed: true, packAtRows: 32, relu });
      // 1–8 rows: the fp32 few-row kernel on f16 rows; 9: widened for oneDNN's fp32 GEMM; 40: packed.
      for (const M of [1, 2, 5, 8, 9, 40]) {
        const { x, y0, a, c } = await accumulateBoth(half, full, M);
        expect(Array.from(a)).toEqual(Array.from(c));
        if (M <= 9) expect(relErr(reference(x, M, K, w32, N, b, relu, y0), a)).toBeLessThan(1e-6);
      }
      expect(half.packedBytes).toBe(full.packedBytes);
      expect(half.packedBytes).toBeGreaterThan(0);
    }
  });

  // bf16 layers: 1 row takes the fp32 kernel (the f16 weights widened exactly), 8–16 rows the bf16 one; 2–7 rows either
  // (packed-linear.cc's kBf16SkinnyFromRows, set by measurement: 8 now).
  it('a bf16 f16 linear multiplies 8–16 decode rows with bf16 products, bit for bit the k-ascending reference, 1 row as its fp32 copy; mid-sized rows and packed as its fp32 copy', async () => {
    for (const relu of [false, true]) {
      const half = await native.createLinear(w16, b, K, N, { dtype: 'bf16', transposed: true, packAtRows: 32, relu });
      const full = await native.createLinear(w32, b, K, N, { dtype: 'bf16', transposed: true, packAtRows: 32, relu });
      for (const M of [1, 2, 3, 5, 6, 7, 8, 9, 12, 15, 16, 17, 40]) {
        const { x, y0, a, c } = await accumulateBoth(half, full, M);
        const got = Array.from(a);
        const bf16 = Array.from(bf16Reference(x, M, K, w32, N, b, relu, y0, true));
        if (M >= 8 && M <= 16) expect(got).toEqual(bf16);
        else if (M === 1 || M > 16) expect(got).toEqual(Array.from(c));
        else expect([bf16, Array.from(c)]).toContainEqual(got);
        // Within bf16 rounding of the weights (as packing rounds them) of the exact product.
        if (M <= 16) expect(relErr(reference(x, M, K, w32, N, b, relu, y0), a)).toBeLessThan(1e-2);
      }
      expect(half.packedBytes).toBe(full.packedBytes);
    }
  });

  it('the bf16 kernel handles odd K, a single column, 8 to 16 rows and a K of 1', async () => {
    for (const [k, n] of [[1, 7], [2, 1], [33, 17], [64, 48], [129, 95]] as const) {
      const wh = f32ToF16(wave(k * n, 0.53, 0.3));
      const wf = f16ToF32(wh);
      const bias = wave(n, 0.9, 0.2);
      const lin = await native.createLinear(wh, bias, k, n, { dtype: 'bf16', transposed: true, packAtRows: 64 });
      for (const M of [8, 9, 13, 16]) {
        const x = wave(M * k, 0.77 + M / 7, 1);
        const y = new Float32Array(M * n);
        await lin.run(x, M, y);
        expect(Array.from(y)).toEqual(Array.from(bf16Reference(x, M, k, wf, n, bias, false, new Float32Array(M * n), false)));
      }
    }
  });

  it('an OPT layer on f16 streamed weights computes what the layer on their fp32 copies computes', async () => {
    const E = 64;
    const F = 128;
    const shape = { hidden: E, heads: 4, ffn: F, preLayerNorm: true, eps: 1e-5 };
    const sizes: Record<string, number> = { qW: E * E, kW: E * E, vW: E * E, oW: E * E, fc1W: E * F, fc2W: F * E, fc1B: F };
    const names = ['qW', 'qB', 'kW', 'kB', 'vW', 'vB', 'oW', 'oB', 'ln1W', 'ln1B', 'fc1W', 'fc1B', 'fc2W', 'fc2B', 'ln2W', 'ln2B'];
    const fp32: Record<string, Float32Array> = {};
    const half: Record<string, Float32Array | Uint16Array> = {};
    names.forEach((n, i) => {
      const v = wave(sizes[n] ?? E, 0.31 + i / 17, n.startsWith('ln') && n.endsWith('W') ? 0.2 : 0.08);
      if (n.startsWith('ln') && n.endsWith('W')) for (let j = 0; j < v.length; j++) v[j] = 1 + v[j]!;
      if (sizes[n] && n.endsWith('W')) {
        half[n] = f32ToF16(v);
        fp32[n] = f16ToF32(half[n] as Uint16Array);
      } else fp32[n] = half[n] = v;
    });
    const options = { dtype: 'bf16' as const, transposed: true, packAtRows: 16 };
    // q kept fp32 (resident) beside f16 k and v (streamed): the offloader's placement may split the fused q/k/v.
    const mixed = { ...half, qW: fp32.qW! };
    const layers = [await createOptLayer(native, shape, half, options), await createOptLayer(native, shape, fp32, options), await createOptLayer(native, shape, mixed, options)];
    // Prompt of 2 × 9 rows (packs), then decode steps of 2 rows over the bf16 cache.
    const B = 2;
    const cap = 16;
    const outs = [];
    for (const layer of layers) {
      const k = new Uint16Array(B * cap * E);
      const v = new Uint16Array(B * cap * E);
      const ys: number[] = [];
      let past = 0;
      for (const S of [9, 1, 1]) {
        const T = past + S;
        const x = wave(B * S * E, 0.9 + past / 7, 1);
        const y = new Float32Array(B * S * E);
        await layer.runCached(x, new Float32Array(B * S * T), B, S, past, y, k, v, cap);
        ys.push(...y);
        past = T;
      }
      outs.push(ys);
    }
    expect(outs[0]).toEqual(outs[1]);
    expect(outs[2]).toEqual(outs[1]);
  });

  // fp32: f16 weights widened exactly, so the layer equals its fp32 copy. bf16: 8 rows take the bf16 kernel (weights
  // rounded f16 → bf16, sums k ascending), so the layer equals its copy on bf16-rounded weights, whose rows (≤ 8) take
  // the fp32 kernel: the same sums bit for bit.
  it.each(['fp32', 'bf16'] as const)('a Llama layer (GQA, SwiGLU, %s) on f16 streamed weights computes what the layer on their fp32 copies computes', async (dtype) => {
    const H = 64;
    const hd = 16;
    const I = 96;
    const shape = { hidden: H, heads: 4, kvHeads: 2, headDim: hd, ffn: I, eps: 1e-5 };
    const sizes: Record<string, number> = { qW: H * 4 * hd, kW: H * 2 * hd, vW: H * 2 * hd, oW: 4 * hd * H, gateW: H * I, upW: H * I, downW: I * H };
    const fp32: Record<string, Float32Array> = {};
    const half: Record<string, Float32Array | Uint16Array> = {};
    Object.entries(sizes).forEach(([n, size], i) => {
      half[n] = f32ToF16(wave(size, 0.29 + i / 13, 0.1));
      fp32[n] = f16ToF32(half[n] as Uint16Array);
      if (dtype === 'bf16') fp32[n] = fp32[n].map(bf16Round);
    });
    for (const n of ['inNormW', 'postNormW']) fp32[n] = half[n] = wave(H, 0.5, 0.2).map((v) => 1 + v);
    // fp32: a prompt of 2 × 9 rows packs, then decode steps of 2 rows (the fp32 few-row kernel on f16). bf16: nothing
    // packs; 8 sequences, a 1-token prompt and decode steps of 8 rows run the bf16 kernel (f16) or the fp32 one (copy).
    const options = { dtype, transposed: true, packAtRows: dtype === 'fp32' ? 16 : 64 };
    const layers = [await native.createDecoderLayer(shape, half, options), await native.createDecoderLayer(shape, fp32, options)];
    const invFreq = Float32Array.from({ length: hd / 2 }, (_, i) => 10000 ** (-(2 * i) / hd));
    const B = dtype === 'fp32' ? 2 : 8;
    const cap = 16;
    const outs = [];
    for (const layer of layers) {
      const k = new Float32Array(B * 2 * cap * hd);
      const v = new Float32Array(B * 2 * cap * hd);
      const ys: number[] = [];
      let past = 0;
      for (const S of [dtype === 'fp32' ? 9 : 1, 1, 1]) {
        const T = past + S;
        const positions = Int32Array.from({ length: B * S }, (_, i) => past + (i % S));
        const y = new Float32Array(B * S * H);
        await layer.runCached(wave(B * S * H, 0.7 + past / 5, 1), new Float32Array(B * S * T), positions, invFreq, B, S, past, y, k, v, cap);
        ys.push(...y);
        past = T;
      }
      outs.push(ys);
    }
    expect(outs[0]).toEqual(outs[1]);
  });

  it('the plain C++ bf16 kernel (no AVX-512) gives the bf16 reference bit for bit', () => {
    const addon = fileURLToPath(new URL('../build/Release/onednn_backend.node', import.meta.url));
    const [K, N] = [37, 70];
    const wh = f32ToF16(wave(K * N, 0.61, 0.4));
    const bias = wave(N, 0.3, 0.1);
    const script = `
      const native = require(${JSON.stringify(addon)});
      const [K, N] = [${K}, ${N}];
      const w = Uint16Array.from(${JSON.stringify(Array.from(wh))});
      const bias = Float32Array.from(${JSON.stringify(Array.from(bias))});
      (async () => {
        const lin = await native.createLinear(w, bias, K, N, { dtype: 'bf16', transposed: true, packAtRows: 64, relu: true });
        const out = {};
        for (const M of [8, 11]) {
          const x = Float32Array.from({ length: M * K }, (_, i) => Math.sin(i * 0.9));
          const y = new Float32Array(M * N);
          await lin.run(x, M, y);
          out[M] = Array.from(y);
        }
        process.stdout.write(JSON.stringify(out));
      })();`;
    const out = JSON.parse(execFileSync(process.execPath, ['-e', script], { env: { ...process.env, FLEXHELM_ONEDNN_PLAIN_KERNELS: '1' }, encoding: 'utf8' })) as Record<string, number[]>;
    for (const M of [8, 11]) {
      const x = Float32Array.from({ length: M * K }, (_, i) => Math.sin(i * 0.9));
      expect(out[M]).toEqual(Array.from(bf16Reference(x, M, K, f16ToF32(wh), N, bias, true, new Float32Array(M * N), false)));
    }
  });

  it('the plain C++ kernel (no AVX-512) gives the reference result', () => {
    const addon = fileURLToPath(new URL('../build/Release/onednn_backend.node', import.meta.url));
    // A fresh process: the kernel is chosen once per process.
    const script = `
      const native = require(${JSON.stringify(addon)});
      const [K, N, M] = [37, 70, 3];
      const w = new Uint16Array(K * N).map((_, i) => 0x3000 + (i * 7919) % 0x0c00 + (i % 3 === 0 ? 0x8000 : 0));
      const x = Float32Array.from({ length: M * K }, (_, i) => Math.sin(i));
      (async () => {
        const lin = await native.createLinear(w, null, K, N, { dtype: 'fp32', transposed: true, packAtRows: 64 });
        const y = new Float32Array(M * N);
        await lin.run(x, M, y);
        process.stdout.write(JSON.stringify({ w: Array.from(w), x: Array.from(x), y: Array.from(y) }));
      })();`;
    const out = JSON.parse(execFileSync(process.execPath, ['-e', script], { env: { ...process.env, FLEXHELM_ONEDNN_PLAIN_KERNELS: '1' }, encoding: 'utf8' })) as { w: number[]; x: number[]; y: number[] };
    const [K, N, M] = [37, 70, 3];
    const wt = f16ToF32(Uint16Array.from(out.w));
    expect(relErr(reference(Float32Array.from(out.x), M, K, wt, N, new Float32Array(N), false, new Float32Array(M * N)), Float32Array.from(out.y))).toBeLessThan(1e-6);
  });

  it('refuses f16 weights outside the [in, out] layout and of the wrong size, saying what to pass', async () => {
    expect(() => native.createLinear(w16, b, K, N, { dtype: 'bf16' })).toThrow('weight is a Uint16Array: f16 weights need options.transposed ([in, out] layout); pass a Float32Array otherwise');
    expect(() => native.createLinear(w16.subarray(1), b, K, N, { dtype: 'bf16', transposed: true })).toThrow(`weight has ${K * N - 1} f16 elements, expected ${K * N}`);
    expect(() => native.createLinear(new Int16Array(K * N) as unknown as Uint16Array, b, K, N, { dtype: 'bf16', transposed: true })).toThrow('weight must be a Float32Array or a Uint16Array of f16 bits');
  });
});
