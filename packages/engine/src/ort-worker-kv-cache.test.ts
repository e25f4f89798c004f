import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { MASK_BIAS } from './opt-backend.js';
import { kvCapacityFor, WorkerKvCache } from './ort-worker-kv-cache.js';

/** `[B, H, S, D]` values that encode their own coordinates (row r = b·H + h, token t, dim d) with a token offset. */
function block(rows: number, S: number, D: number, t0: number): Float32Array {
  const a = new Float32Array(rows * S * D);
  for (let r = 0; r < rows; r++) for (let t = 0; t < S; t++) for (let d = 0; d < D; d++) a[(r * S + t) * D + d] = r * 1e4 + (t0 + t) * 10 + d;
  return a;
}

/** The first `T` slots of each row of a `[rows, cap, D]` buffer, as `[rows, T, D]`. */
function filled(t: ort.Tensor, T: number): number[] {
  const [B, H, cap, D] = t.dims as number[];
  const a = t.data as Float32Array;
  const out: number[] = [];
  for (let r = 0; r < B! * H!; r++) out.push(...a.subarray(r * cap! * D!, (r * cap! + T) * D!));
  return out;
}

describe('WorkerKvCache', () => {
  it('appends steps in place into [B, H, capacity, D], growing past its headroom, as concatenation along T would', () => {
    const [B, H, D] = [2, 3, 4];
    const rows = B * H;
    const cache = new WorkerKvCache(B, H, D);
    expect(cache.past(0).k.dims).toEqual([B, H, 0, D]);
    let T = 0;
    const capacities = new Set<number>();
    // A 5-token prefill, then 70 one-token steps: the first decode step allocates headroom, a later one grows again.
    for (const S of [5, ...Array<number>(70).fill(1)]) {
      cache.reserve(0, S);
      cache.append(0, block(rows, S, D, T), block(rows, S, D, T).map((x) => -x), S > 1);
      T += S;
      const past = cache.past(0);
      const cap = past.k.dims[2]!;
      capacities.add(cap);
      expect(cap).toBeGreaterThanOrEqual(T);
      expect(cache.tokens(0)).toBe(T);
      expect(filled(past.k, T)).toEqual(Array.from(block(rows, T, D, 0)));
      expect(filled(past.v, T)).toEqual(Array.from(block(rows, T, D, 0).map((x) => -x)));
      // Unused slots are zeros (they get softmax weight 0; a NaN there would still poison p·v).
      const k = past.k.data as Float32Array;
      for (let r = 0; r < rows; r++) expect(k.subarray((r * cap + T) * D, (r + 1) * cap * D).every((x) => x === 0)).toBe(true);
    }
    // Grown only when full, each time with headroom: 5 → 38 → 71 → 104 for 75 tokens.
    const expected = [5];
    while (expected.at(-1)! < T) expected.push(kvCapacityFor(expected.at(-1)! + 1));
    expect([...capacities]).toEqual(expected);
    expect(expected.length).toBe(4);
    expect(cache.values).toBeGreaterThanOrEqual(2 * rows * T * D);
    // Layers are independent.
    expect(cache.past(1).k.dims).toEqual([B, H, 0, D]);
  });

  it('widens the step mask to the capacity: unused slots masked, the step’s own keys last', () => {
    const [B, H, D] = [2, 1, 2];
    const cache = new WorkerKvCache(B, H, D);
    cache.append(0, new Float32Array(B * H * 3 * D), new Float32Array(B * H * 3 * D), true);
    cache.reserve(0, 1);
    const cap = cache.past(0).k.dims[2]!;
    const P = 3;
    // [B, 1, S=1, P+1]: row b sees keys j with bias 10·b + j.
    const src = new Float32Array(B * (P + 1)).map((_, i) => 10 * Math.floor(i / (P + 1)) + (i % (P + 1)));
    const mask = new ort.Tensor('float32', src, [B, 1, 1, P + 1]);
    const wide = cache.attentionMask(0, mask);
    expect(wide.dims).toEqual([B, 1, 1, cap + 1]);
    const w = Array.from(wide.data as Float32Array);
    for (let b = 0; b < B; b++) {
      const row = w.slice(b * (cap + 1), (b + 1) * (cap + 1));
      expect(row.slice(0, P)).toEqual([0, 1, 2].map((j) => 10 * b + j));
      expect(row.slice(P, cap).every((x) => x === Math.fround(MASK_BIAS))).toBe(true);
      expect(row[cap]).toBe(10 * b + P);
    }
    // The same tensor for every layer of the step.
    expect(cache.attentionMask(0, mask)).toBe(wide);
    expect(() => cache.attentionMask(0, new ort.Tensor('float32', new Float32Array(B * 2), [B, 1, 1, 2]))).toThrow(/mask covers 2 keys/);
  });
});
