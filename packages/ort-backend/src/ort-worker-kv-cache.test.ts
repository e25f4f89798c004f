import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { MASK_BIAS } from '@flexhelm/contract';
import { bucketCapacity } from '@flexhelm/engine';
import { concatRows, kvCapacityFor, newKvBufferPool, WorkerKvCache } from './ort-worker-kv-cache.js';

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
  it('expandRows copies a one-row cache to every row with room for the rows\' own rest, the headroom zeros', () => {
    const [H, D] = [3, 4];
    const cache = new WorkerKvCache(1, H, D);
    cache.append(0, block(H, 40, D, 0), block(H, 40, D, 0).map((x) => -x));
    expect(() => new WorkerKvCache(2, H, D).expandRows(3)).toThrow('needs a cache of one row, this one has 2');
    cache.expandRows(3);
    expect(cache.batch).toBe(3);
    expect(cache.capacity(0)).toBe(kvCapacityFor(60));
    const { k, v } = cache.buffers(0);
    expect(k.dims).toEqual([3, H, kvCapacityFor(60), D]);
    const one = [...block(H, 40, D, 0)];
    expect(filled(k, 40)).toEqual([...one, ...one, ...one]);
    expect(filled(v, 40)).toEqual([...one, ...one, ...one].map((x) => -x));
    const cap = kvCapacityFor(60);
    for (let r = 0; r < 3 * H; r++) expect((k.data as Float32Array).subarray((r * cap + 40) * D, (r + 1) * cap * D).every((x) => x === 0)).toBe(true);
    // The next step (each row's rest) fits without growing.
    cache.append(0, block(3 * H, 15, D, 40), block(3 * H, 15, D, 40));
    expect(cache.capacity(0)).toBe(cap);
  });

  it('appends steps in place into [B, H, capacity, D], growing past its headroom, as concatenation along T would', () => {
    const [B, H, D] = [2, 3, 4];
    const rows = B * H;
    const cache = new WorkerKvCache(B, H, D);
    expect(cache.buffers(0).k.dims).toEqual([B, H, 0, D]);
    let T = 0;
    const capacities = new Set<number>();
    // A 5-token prefill, then 70 one-token steps: the first decode step allocates headroom, a later one grows again.
    for (const S of [5, ...Array<number>(70).fill(1)]) {
      cache.append(0, block(rows, S, D, T), block(rows, S, D, T).map((x) => -x));
      T += S;
      const past = cache.buffers(0);
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
    // Allocated with headroom, grown only when full: 37 → 70 → 103 for 75 tokens.
    const expected = [kvCapacityFor(5)];
    while (expected.at(-1)! < T) expected.push(kvCapacityFor(expected.at(-1)! + 1));
    expect([...capacities]).toEqual(expected);
    expect(expected.length).toBe(3);
    expect(cache.values).toBeGreaterThanOrEqual(2 * rows * T * D);
    // Layers are independent.
    expect(cache.buffers(1).k.dims).toEqual([B, H, 0, D]);
  });

  it('writes row ranges of a step separately and counts them only on commit', () => {
    const [B, H, D] = [3, 2, 2];
    const cache = new WorkerKvCache(B, H, D);
    cache.reserve(0, 4);
    const all = block(B * H, 4, D, 0);
    // Rows 0-1 and row 2 of the batch, as a chunked prefill writes them.
    cache.write(0, 0, all.subarray(0, 2 * H * 4 * D), all.subarray(0, 2 * H * 4 * D), 4);
    cache.write(0, 2, all.subarray(2 * H * 4 * D), all.subarray(2 * H * 4 * D), 4);
    expect(cache.tokens(0)).toBe(0);
    cache.commit(0, 4);
    expect(filled(cache.buffers(0).k, 4)).toEqual(Array.from(all));
    expect(() => cache.write(0, 0, new Float32Array(B * H * 40 * D), new Float32Array(B * H * 40 * D), 40)).toThrow(/no room for 40 more tokens/);
    expect(() => cache.commit(5, 1)).toThrow(/layer 5 has no buffers/);
  });

  it('concatRows gives the present of a past and new keys, row by row', () => {
    const rows = 3;
    const D = 2;
    const past = block(rows, 4, D, 0);
    const added = block(rows, 2, D, 4);
    expect(Array.from(concatRows(past, added, rows, D))).toEqual(Array.from(block(rows, 6, D, 0)));
  });

  it('widens the step mask to the buffers: unused slots masked, the step’s own keys in place or last', () => {
    const [B, H, D] = [2, 1, 2];
    const cache = new WorkerKvCache(B, H, D);
    cache.append(0, new Float32Array(B * H * 3 * D), new Float32Array(B * H * 3 * D));
    cache.reserve(0, 1);
    const cap = cache.capacity(0);
    const P = 3;
    // [B, 1, S=1, P+1]: row b sees keys j with bias 10·b + j.
    const src = new Float32Array(B * (P + 1)).map((_, i) => 10 * Math.floor(i / (P + 1)) + (i % (P + 1)));
    const mask = new ort.Tensor('float32', src, [B, 1, 1, P + 1]);
    const masked = Math.fround(MASK_BIAS);
    const inPlace = cache.widenMask(0, mask, false);
    expect(inPlace.dims).toEqual([B, 1, 1, cap]);
    const last = cache.widenMask(0, mask, true);
    expect(last.dims).toEqual([B, 1, 1, cap + 1]);
    const w = Array.from(inPlace.data as Float32Array);
    const l = Array.from(last.data as Float32Array);
    for (let b = 0; b < B; b++) {
      const row = w.slice(b * cap, (b + 1) * cap);
      expect(row.slice(0, P + 1)).toEqual([0, 1, 2, 3].map((j) => 10 * b + j));
      expect(row.slice(P + 1).every((x) => x === masked)).toBe(true);
      const rowLast = l.slice(b * (cap + 1), (b + 1) * (cap + 1));
      expect(rowLast.slice(0, P)).toEqual([0, 1, 2].map((j) => 10 * b + j));
      expect(rowLast.slice(P, cap).every((x) => x === masked)).toBe(true);
      expect(rowLast[cap]).toBe(10 * b + P);
    }
    // The same tensor for every layer of the step.
    expect(cache.widenMask(0, mask, false)).toBe(inPlace);
    expect(() => cache.widenMask(0, new ort.Tensor('float32', new Float32Array(B * 2), [B, 1, 1, 2]), false)).toThrow(/mask covers 2 keys/);
  });

  it('a closed batch gives its buffers to the next one through the pool, cleared', () => {
    const pool = newKvBufferPool();
    // Large enough to be pooled (BufferPool leaves buffers under 64 Ki floats to the allocator).
    const [B, H, D, S] = [2, 2, 64, 300];
    const a = new WorkerKvCache(B, H, D, pool);
    a.append(0, block(B * H, S, D, 0), block(B * H, S, D, 0));
    a.append(1, block(B * H, S, D, 0), block(B * H, S, D, 0));
    const used = [a.buffers(0).k.data, a.buffers(1).v.data].map((d) => (d as Float32Array).buffer);
    a.release();
    expect(pool.bytes).toBe(4 * bucketCapacity(B * H * kvCapacityFor(S) * D) * 4);
    const b = new WorkerKvCache(B, H, D, pool);
    b.reserve(0, S);
    const k = b.buffers(0).k.data as Float32Array;
    expect(used).toContain(k.buffer);
    expect(k.every((x) => x === 0)).toBe(true);
  });
});
