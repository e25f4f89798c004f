import { dequantize, quantize } from '@flexhelm/gguf';
import { describe, expect, it } from 'vitest';
import { oneDnnStatus, type NativeBinding, type NativeQuantLinear, type QuantType } from './native-addon.js';
import { outputsPerThreadCount } from './test-signals.js';

// The AMX tile GEMM (native/gemm/amx-gemm.cc) under quantized layers: the blocks widened to bf16 a panel at a time,
// straight into tiles from the interleaved Q8_0 / Q4_0 layout, row by row from GGUF's rows (FLEXHELM_QUANT_GEMM=0,
// Q5_K), from interleaved Q4_K / Q6_K groups read back in row form, and for a last partial group. Only AMX hosts run it (`features().amxBf16`).
delete process.env.FLEXHELM_QUANT_GEMM;
const status = oneDnnStatus();
const native = status.available ? status.binding : (undefined as unknown as NativeBinding);
const amx = status.available && status.features.amxBf16;

function noise(n: number, seed: number, amp: number): Float32Array {
  let s = seed >>> 0;
  return Float32Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return ((s / 2 ** 32) * 2 - 1) * amp;
  });
}

/** Round to nearest even bf16, as the kernel rounds x and the widened weights. */
function bf16(v: number): number {
  const f = new Float32Array([v]);
  const u = new Uint32Array(f.buffer);
  u[0] = (u[0]! + 0x7fff + ((u[0]! >>> 16) & 1)) & 0xffff0000;
  return f[0]!;
}

/**
 * Checks y against the exact sum of the bf16 products (each exact in fp32) plus y0: only fp32 summation separates them,
 * at most K · 2⁻²⁴ · Σ|terms| per output whatever the order.
 */
function expectBf16Products(y: Float32Array, wq: Float32Array, x: Float32Array, M: number, K: number, N: number, y0: Float32Array | null) {
  const wr = wq.map(bf16);
  const xr = x.map(bf16);
  let worst = 0;
  for (let m = 0; m < M; m++) {
    for (let n = 0; n < N; n++) {
      let s = y0 ? y0[m * N + n]! : 0;
      let a = Math.abs(s);
      for (let k = 0; k < K; k++) {
        const p = wr[n * K + k]! * xr[m * K + k]!;
        s += p;
        a += Math.abs(p);
      }
      worst = Math.max(worst, Math.abs(y[m * N + n]! - s) / ((K + 1) * 2 ** -24 * a + 1e-30));
    }
  }
  expect(worst).toBeLessThanOrEqual(1);
}

async function layer(type: QuantType, blocks: Uint8Array, K: number, N: number, rowOrder: boolean): Promise<NativeQuantLinear> {
  if (rowOrder) process.env.FLEXHELM_QUANT_GEMM = '0';
  try {
    return await native.createQuantLinear(type, blocks, K, N);
  } finally {
    delete process.env.FLEXHELM_QUANT_GEMM;
  }
}

describe.skipIf(!amx)('amx-bf16: the tile GEMM on quantized blocks widened in cache', () => {
  // [K, N, M]: partial last groups (N 19, 130) and an odd number of groups (N 48: a zero group pairs the third);
  // K 4096 two k panels of 2048; M off multiples of 16 and 32 (the bounce tiles of y's edges).
  const shapes: [number, number, number][] = [
    [256, 19, 13],
    [512, 130, 40],
    [4096, 64, 33],
    [256, 48, 64],
  ];
  const cases: [QuantType, boolean][] = [
    ['Q8_0', false],
    ['Q4_0', false],
    ['Q8_0', true],
    ['Q4_0', true],
    ['Q4_K', false],
    ['Q6_K', false],
    ['Q4_K', true],
    ['Q5_K', true],
    ['Q6_K', true],
  ];
  it.each(cases)('%s (row order: %s): every output within fp32 summation of the exact bf16 products, fresh and accumulated', { timeout: 60_000 }, async (type, rowOrder) => {
    for (const [K, N, M] of shapes) {
      const blocks = quantize(type, noise(N * K, K + N, 0.08));
      const wq = dequantize(type, blocks, N * K);
      const lin = await layer(type, blocks, K, N, rowOrder);
      const x = noise(M * K, 7 * M + K, 1.5);
      const fresh = new Float32Array(M * N);
      await lin.run(x, M, fresh, false, 'amx-bf16');
      expectBf16Products(fresh, wq, x, M, K, N, null);
      const y0 = noise(M * N, 3, 2);
      const added = y0.slice();
      await lin.run(x, M, added, true, 'amx-bf16');
      expectBf16Products(added, wq, x, M, K, N, y0);
    }
  });

  it('both layouts give the same bits; `best` runs it from 64 prompt rows (Q8_0 / Q4_0) and 128 (K-quants)', async () => {
    const K = 512;
    const N = 70;
    for (const type of ['Q8_0', 'Q4_0'] as const) {
      const blocks = quantize(type, noise(N * K, 21, 0.3));
      const interleaved = await layer(type, blocks, K, N, false);
      const rows = await layer(type, blocks, K, N, true);
      const x = noise(64 * K, 5, 2);
      const a = new Float32Array(64 * N);
      const b = new Float32Array(64 * N);
      const c = new Float32Array(64 * N);
      await interleaved.run(x, 64, a, false, 'amx-bf16');
      await rows.run(x, 64, b, false, 'amx-bf16');
      await interleaved.run(x, 64, c);
      expect(b).toEqual(a);
      expect(c).toEqual(a);
      // 63 rows stay on the integer GEMM (its q8 activations give other bits).
      const d = new Float32Array(63 * N);
      const e = new Float32Array(63 * N);
      await interleaved.run(x.subarray(0, 63 * K), 63, d);
      await interleaved.run(x.subarray(0, 63 * K), 63, e, false, 'vnni-gemm');
      expect(d).toEqual(e);
    }
    const kBlocks = quantize('Q4_K', noise(N * K, 22, 0.3));
    const k = await native.createQuantLinear('Q4_K', kBlocks, K, N);
    const x = noise(128 * K, 6, 2);
    const a = new Float32Array(128 * N);
    const b = new Float32Array(128 * N);
    await k.run(x, 128, a);
    await k.run(x, 128, b, false, 'amx-bf16');
    expect(a).toEqual(b);
  });

  // Each output is one thread's, its k terms in a fixed order: a fresh process per OpenMP thread count must give the
  // same bits.
  it('gives the same bits with 1, 2 and 3 threads', () => {
    const outputs = outputsPerThreadCount('Q4_0', 2304, 200, 70, 'amx-bf16');
    expect(outputs[0]!.length).toBeGreaterThan(1000);
    expect(outputs[1]).toBe(outputs[0]);
    expect(outputs[2]).toBe(outputs[0]);
  });
});

describe.skipIf(!status.available || amx)('amx-bf16 on a host without AMX', () => {
  it('is refused with a clear error', async () => {
    const lin = await native.createQuantLinear('Q8_0', quantize('Q8_0', new Float32Array(64 * 2)), 64, 2);
    await expect(async () => lin.run(new Float32Array(64 * 64), 64, new Float32Array(64 * 2), false, 'amx-bf16')).rejects.toThrow(/amx-bf16 is not available on this CPU/);
  });
});
