import { describe, expect, it } from 'vitest';
import { WorkerKvCache } from './ort-worker-kv-cache.js';

/** `[B, H, S, D]` values that encode their own coordinates (row r = b·H + h, token t, dim d) with a token offset. */
function block(rows: number, S: number, D: number, t0: number): Float32Array {
  const a = new Float32Array(rows * S * D);
  for (let r = 0; r < rows; r++) for (let t = 0; t < S; t++) for (let d = 0; d < D; d++) a[(r * S + t) * D + d] = r * 1e4 + (t0 + t) * 10 + d;
  return a;
}

describe('WorkerKvCache', () => {
  it('appends steps into [B, H, T, D] order, growing past its headroom, as concatenation along T would', () => {
    const [B, H, D] = [2, 3, 4];
    const rows = B * H;
    const cache = new WorkerKvCache(B, H, D);
    expect(cache.past(0).k.dims).toEqual([B, H, 0, D]);
    let T = 0;
    // A 5-token prefill, then 70 one-token steps: the first decode step allocates headroom, a later one grows again.
    for (const S of [5, ...Array<number>(70).fill(1)]) {
      cache.append(0, block(rows, S, D, T), block(rows, S, D, T).map((x) => -x), S > 1);
      T += S;
      const past = cache.past(0);
      expect(past.k.dims).toEqual([B, H, T, D]);
      expect(Array.from(past.k.data as Float32Array)).toEqual(Array.from(block(rows, T, D, 0)));
      expect(Array.from(past.v.data as Float32Array)).toEqual(Array.from(block(rows, T, D, 0).map((x) => -x)));
    }
    expect(cache.values).toBeGreaterThanOrEqual(2 * rows * T * D);
    // Layers are independent.
    expect(cache.past(1).k.dims).toEqual([B, H, 0, D]);
  });
});
