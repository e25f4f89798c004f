// Deterministic test inputs and the error measure the native kernel tests share.

import { execFileSync } from 'node:child_process';
import { addonPath, type QuantKernel } from './native-addon.js';

/** n values of a sine of frequency `f` and amplitude `amp`: smooth, signed, reproducible weights and activations. */
export function wave(n: number, f: number, amp: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => Math.sin(i * f + 0.3) * amp);
}

/** Relative L2 error of `y` against a float64 reference. */
export function relErr(ref: Float64Array, y: Float32Array): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < ref.length; i++) {
    num += (ref[i]! - y[i]!) ** 2;
    den += ref[i]! ** 2;
  }
  return Math.sqrt(num / den);
}

/** What a quantized linear is checked against: x · W'ᵀ in float64 (W' the dequantized blocks) and its error bounds. */
export interface QuantReference {
  y: Float64Array;
  /** Σ_k |W'[n, k] · x[m, k]|: what a change of summation order is measured against. */
  abs: Float64Array;
  /** Σ_k |W'[n, k]| · (max |x| over k's activation block) / 254: the most int8 rounding of the activations can move an output. */
  roundBound: Float64Array;
}

/**
 * The float64 reference of y [M, N] = x [M, K] · W'ᵀ for W' [N, K], with the activations quantized per
 * `activationBlock` values (32: ggml's q8_0 for Q8_0/Q4_0; 256: q8_K for the K-quants).
 */
export function quantReference(w: Float32Array, x: Float32Array, M: number, K: number, N: number, activationBlock: 32 | 256): QuantReference {
  const y = new Float64Array(M * N);
  const abs = new Float64Array(M * N);
  const roundBound = new Float64Array(M * N);
  for (let m = 0; m < M; m++) {
    const amax = new Float64Array(K / activationBlock);
    for (let k = 0; k < K; k++) amax[Math.floor(k / activationBlock)] = Math.max(amax[Math.floor(k / activationBlock)]!, Math.abs(x[m * K + k]!));
    for (let n = 0; n < N; n++) {
      let s = 0;
      let a = 0;
      let r = 0;
      for (let k = 0; k < K; k++) {
        const wk = w[n * K + k]!;
        s += wk * x[m * K + k]!;
        a += Math.abs(wk * x[m * K + k]!);
        r += (Math.abs(wk) * amax[Math.floor(k / activationBlock)]!) / 254;
      }
      y[m * N + n] = s;
      abs[m * N + n] = a;
      roundBound[m * N + n] = r;
    }
  }
  return { y, abs, roundBound };
}

/**
 * One quantized linear's output (base64 of y) computed in a fresh process per OpenMP thread count (libgomp reads
 * OMP_NUM_THREADS once): random Q8_0 / Q4_0 blocks of scale 0x2e66 (f16 ≈ 0.1), random x, `kernel`. A kernel whose
 * outputs are each one thread's, summed in a fixed order, gives the same string for every count.
 */
export function outputsPerThreadCount(type: 'Q8_0' | 'Q4_0', K: number, N: number, M: number, kernel: QuantKernel, counts = ['1', '2', '3']): string[] {
  const blockBytes = type === 'Q8_0' ? 34 : 18;
  const script = `
    const b = require(${JSON.stringify(addonPath)});
    const K = ${K}, N = ${N}, M = ${M}, bb = ${blockBytes};
    let s = 1;
    const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
    const blocks = new Uint8Array((K / 32) * bb * N);
    for (let i = 0; i < blocks.length; i++) blocks[i] = i % bb === 0 ? 0x66 : i % bb === 1 ? 0x2e : (rnd() * 256) | 0;
    const x = Float32Array.from({ length: M * K }, () => rnd() * 2 - 1);
    const y = new Float32Array(M * N);
    b.createQuantLinear(${JSON.stringify(type)}, blocks, K, N)
      .then((lin) => lin.run(x, M, y, false, ${JSON.stringify(kernel)}))
      .then(() => process.stdout.write(Buffer.from(y.buffer).toString('base64')));`;
  return counts.map((threads) => execFileSync(process.execPath, ['-e', script], { env: { ...process.env, OMP_NUM_THREADS: threads, OMP_WAIT_POLICY: 'passive' }, encoding: 'utf8' }));
}
