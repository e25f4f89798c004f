import { describe, expect, it } from 'vitest';
import { oneDnnStatus, type NativeBinding } from './native-addon.js';
import { wave } from './test-signals.js';

const status = oneDnnStatus();
const native = status.available ? status.binding : (undefined as unknown as NativeBinding);
const bf16Cpu = status.available && /bf16|amx/.test(status.features.isa);

/**
 * Decode-step GEMMs of a packed bf16 linear read the packed panels themselves (packedGemvBf16, ≤ 4 rows). They multiply
 * the same bf16 products as oneDNN's matmul on the same packed weights and sum them in fp32, only in another order:
 * every output within a few fp32 roundings of Σ|products| of oneDNN's.
 */
describe.skipIf(!bf16Cpu)('packed bf16 decode GEMMs (packedGemvBf16) against oneDNN on the same packed weights', () => {
  const shapes: [number, number][] = [
    [64, 48],
    [100, 37],
    [2048, 2048],
    [301, 1000],
  ];
  it.each(shapes)('K %i × N %i, 1–4 rows, bias / ReLU / accumulate, column blocks', async (K, N) => {
    const w = wave(K * N, 0.37, 0.05);
    const bias = wave(N, 1.1, 0.1);
    // Some output differs in its last bits (another summation order): the packed-panel kernel did run.
    let differs = false;
    for (const relu of [false, true]) {
      for (const chunkBytes of [0, 64 * K * 2]) {
        const options = { dtype: 'bf16' as const, transposed: true, relu, chunkBytes, compact: false };
        const ours = await native.createLinear(w, bias, K, N, { ...options, packedGemv: true });
        const theirs = await native.createLinear(w, bias, K, N, { ...options, packedGemv: false });
        for (const M of [1, 2, 3, 4]) {
          const x = wave(M * K, 1.3, 1);
          for (const accumulate of [false, true]) {
            const start = wave(M * N, 0.7, 0.5);
            const a = Float32Array.from(start);
            const b = Float32Array.from(start);
            await ours.run(x, M, a, accumulate);
            await theirs.run(x, M, b, accumulate);
            // Σ|products| bounds what summing in another order can change.
            let worst = 0;
            for (let m = 0; m < M; m++) {
              for (let n = 0; n < N; n++) {
                let scale = Math.abs(bias[n]!) + (accumulate ? Math.abs(start[m * N + n]!) : 0);
                for (let k = 0; k < K; k++) scale += Math.abs(x[m * K + k]! * w[k * N + n]!);
                worst = Math.max(worst, Math.abs(a[m * N + n]! - b[m * N + n]!) / (scale * 2 ** -20));
                differs ||= a[m * N + n] !== b[m * N + n];
              }
            }
            expect(worst, `M ${M} relu ${relu} accumulate ${accumulate} chunkBytes ${chunkBytes}`).toBeLessThan(K / 8 + 4);
          }
        }
      }
    }
    if (K >= 2048) expect(differs).toBe(true);
  });

  it('at 5 or more rows the linear keeps oneDNN: bit for bit the same as with packedGemv off', async () => {
    const K = 256;
    const N = 320;
    const w = wave(K * N, 0.37, 0.05);
    const ours = await native.createLinear(w, null, K, N, { dtype: 'bf16', transposed: true, packedGemv: true, compact: false });
    const theirs = await native.createLinear(w, null, K, N, { dtype: 'bf16', transposed: true, packedGemv: false, compact: false });
    for (const M of [5, 8, 16]) {
      const x = wave(M * K, 1.3, 1);
      const a = new Float32Array(M * N);
      const b = new Float32Array(M * N);
      await ours.run(x, M, a);
      await theirs.run(x, M, b);
      expect(a).toEqual(b);
    }
  });
});
