import { describe, expect, it } from 'vitest';
import { BufferPool, bucketCapacity } from './buffer-pool.js';

describe('BufferPool', () => {
  it('rounds large requests up to one of 8 capacities per power of two, small ones not at all', () => {
    expect(bucketCapacity(1000)).toBe(1000);
    expect(bucketCapacity(2 ** 20)).toBe(2 ** 20);
    expect(bucketCapacity(2 ** 20 + 1)).toBe(2 ** 20 + 2 ** 17);
    for (const n of [70_000, 123_457, 5_000_001]) {
      expect(bucketCapacity(n)).toBeGreaterThanOrEqual(n);
      expect(bucketCapacity(n)).toBeLessThanOrEqual(n * 1.125);
    }
  });

  it('hands a given-back buffer out again for a request of the same bucket, and never one still in use', () => {
    const made: number[] = [];
    const pool = new BufferPool((n) => {
      made.push(n);
      return new Float32Array(n);
    }, 2 ** 30);
    const a = pool.take(100_000);
    const b = pool.take(100_001);
    expect(a.length).toBe(100_000);
    expect(a.buffer).not.toBe(b.buffer);
    pool.give(a);
    pool.give(new Float32Array(100_000)); // not the pool's: ignored
    const c = pool.take(100_002);
    expect(c.buffer).toBe(a.buffer);
    expect(c.length).toBe(100_002);
    expect(made).toEqual([bucketCapacity(100_000), bucketCapacity(100_001)]);
    pool.give(c);
    pool.give(c); // twice: the second is ignored
    expect(pool.bytes).toBe(4 * bucketCapacity(100_000));
  });

  it('keeps at most maxBytes, dropping the smallest buffers first', () => {
    const pool = new BufferPool((n) => new Float32Array(n), 4 * 300_000);
    const small = pool.take(100_000);
    const large = pool.take(250_000);
    pool.give(small);
    pool.give(large);
    expect(pool.bytes).toBe(4 * bucketCapacity(250_000));
    expect(pool.take(250_000).buffer).toBe(large.buffer);
  });

  it('clears a reused buffer when asked for zeroed memory, and leaves a new one to the allocator', () => {
    const pool = new BufferPool((n) => new Float32Array(n), 2 ** 30);
    const a = pool.take(100_000);
    a.fill(7);
    pool.give(a);
    const b = pool.take(99_000, true);
    expect(b.buffer).toBe(a.buffer);
    expect(b.every((x) => x === 0)).toBe(true);
    const c = pool.take(99_000);
    expect(c.buffer).not.toBe(a.buffer);
  });
});
