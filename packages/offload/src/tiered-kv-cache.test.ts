import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { InPlaceKv, InPlaceKvLayers } from '@flexhelm/engine';
import { f16ToF32, f32ToF16 } from '@flexhelm/pinned-memory';
import { afterAll, describe, expect, it } from 'vitest';
import { IoClock } from './io-clock.js';
import { kvCapacityFor } from './kv-capacity.js';
import { parsePolicy, percentsFromArgs } from './policy.js';
import { TieredKvCache } from './tiered-kv-cache.js';

const root = mkdtempSync(join(tmpdir(), 'flexhelm-kv-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const stats = () => ({ cacheLoadMs: 0, cacheStoreMs: 0, cacheDiskBytesRead: 0, cacheDiskBytesWritten: 0 });

/** A one-layer cache of 2 rows × 2 heads × headDim 4, all on disk (f16). */
function diskCache(dir: string, s = stats()) {
  const policy = parsePolicy({ gpuBatchSize: 2, numGpuBatches: 1, ...percentsFromArgs([100, 0, 0, 0, 100, 0]) });
  return new TieredKvCache({ policy, layers: 1, heads: 2, headDim: 4, batch: 2, dir, direct: false, stats: s, clock: new IoClock(() => {}) });
}

describe('TieredKvCache', () => {
  it('gives back what was stored on disk (f16), and close waits for a load still running before deleting the files', async () => {
    const dir = join(root, 'a');
    const s = stats();
    const cache = diskCache(dir, s);
    // present [rows 2, heads 2, tokens 3, headDim 4]
    const k = Float32Array.from({ length: 48 }, (_, i) => i / 7);
    const v = Float32Array.from({ length: 48 }, (_, i) => -i / 3);
    cache.store(0, 0, { k: k.slice(), v: v.slice() }, 0, 3);
    expect(cache.microBatches).toBe(1);
    // Started and left running (as a schedule's read-ahead is when its batch ends), then the cache closes at once.
    const loading = cache.load(0, 0, 3);
    const closing = cache.close();
    const past = await loading;
    await closing;
    const f16 = async (a: Float32Array) => f16ToF32(await f32ToF16(a));
    expect([...past.k]).toEqual([...(await f16(k))]);
    expect([...past.v]).toEqual([...(await f16(v))]);
    expect(s.cacheDiskBytesWritten).toBe(2 * 48 * 2);
    expect(s.cacheDiskBytesRead).toBe(2 * 48 * 2);
    expect(existsSync(dir)).toBe(false);
  });

  it('refuses loads after close and a load at the wrong length, naming what is wrong', async () => {
    const dir = join(root, 'b');
    const cache = diskCache(dir);
    cache.store(0, 0, { k: new Float32Array(16), v: new Float32Array(16) }, 0, 1);
    await expect(cache.load(0, 0, 2)).rejects.toThrow('layer 0 micro-batch 0 holds 1 tokens but the step says 2 are cached');
    await expect(cache.load(3, 0, 1)).rejects.toThrow('no layer 3 micro-batch 0');
    expect(readdirSync(dir).length).toBeGreaterThan(0);
    await cache.close();
    await expect(cache.load(0, 0, 1)).rejects.toThrow(/closed.*start a new batch run/);
    expect(existsSync(dir)).toBe(false);
  });
});

describe('TieredKvCache in place (a backend with InPlaceKvLayers)', () => {
  /** Plain arrays as the backend's KV buffers, counting what is live. */
  function fakeBackend(dtype: 'fp32' | 'bf16') {
    const live = new Set<Float32Array | Uint16Array>();
    const backend: InPlaceKvLayers = {
      kvDtype: () => dtype,
      allocKv: (length, d) => {
        const a = d === 'bf16' ? new Uint16Array(length) : new Float32Array(length);
        live.add(a);
        return a;
      },
      freeKv: (buffer) => {
        if (!live.delete(buffer)) throw new Error('freed a buffer twice or one not allocated');
      },
      layerInPlace: () => Promise.reject(new Error('not used here')),
    };
    return { backend, live };
  }
  /** 2 layers, micro-batches of 2 rows, 2 heads × headDim 4, the whole cache on the compute tier. */
  function inPlaceCache(backend: InPlaceKvLayers, batch: number, percents = [100, 0, 100, 0, 100, 0]) {
    const policy = parsePolicy({ gpuBatchSize: 2, numGpuBatches: 2, ...percentsFromArgs(percents) });
    return new TieredKvCache({ policy, layers: 2, heads: 2, headDim: 4, batch, direct: false, stats: stats(), clock: new IoClock(() => {}), inPlace: backend });
  }
  /** Writes tokens `from … to` of every (row, head) as the layer would: value = 1000·row-head + 10·token + d. */
  function write(kv: InPlaceKv, R: number, from: number, to: number) {
    for (let r = 0; r < R; r++) for (let t = from; t < to; t++) for (let d = 0; d < 4; d++) kv.k[(r * kv.capacity + t) * 4 + d] = kv.v[(r * kv.capacity + t) * 4 + d] = 1000 * r + 10 * t + d;
  }
  function tokens(kv: InPlaceKv, R: number, n: number): number[] {
    const out: number[] = [];
    for (let r = 0; r < R; r++) for (let t = 0; t < n; t++) for (let d = 0; d < 4; d++) out.push(kv.k[(r * kv.capacity + t) * 4 + d]!, kv.v[(r * kv.capacity + t) * 4 + d]!);
    return out;
  }

  it('grows with headroom keeping the stored tokens, counts the capacity in bytes, and frees every buffer at close', async () => {
    const { backend, live } = fakeBackend('fp32');
    const cache = inPlaceCache(backend, 3);
    expect(cache.microBatches).toBe(2);
    expect([cache.isInPlace(0), cache.isInPlace(1)]).toEqual([true, true]);
    const R = 2 * 2; // micro-batch 0: 2 rows × 2 heads
    const prompt = cache.inPlaceKv(0, 0, 0, 10);
    expect(prompt.capacity).toBe(kvCapacityFor(10));
    write(prompt, R, 0, 10);
    const before = tokens(prompt, R, 10);
    // Decode steps up to the capacity keep the same buffers.
    for (let t = 10; t < prompt.capacity; t++) expect(cache.inPlaceKv(0, 0, t, 1)).toBe(prompt);
    const grown = cache.inPlaceKv(0, 0, prompt.capacity, 1);
    expect(grown.capacity).toBe(kvCapacityFor(prompt.capacity + 1));
    expect(tokens(grown, R, 10)).toEqual(before);
    expect(() => cache.inPlaceKv(0, 0, 5, 1)).toThrow(`holds ${prompt.capacity + 1} tokens but the step says 5 are cached`);
    await expect(cache.load(0, 0, 5)).rejects.toThrow('is kept in place; use inPlaceKv');
    cache.inPlaceKv(1, 1, 0, 10);
    // K and V of (layer 0, micro-batch 0) at the grown capacity, (layer 1, micro-batch 1: one row) at the first.
    expect(cache.bytes).toBe(4 * 2 * (R * grown.capacity * 4 + 2 * kvCapacityFor(10) * 4));
    expect(live.size).toBe(4);
    await cache.close();
    expect(live.size).toBe(0);
    expect(() => cache.inPlaceKv(0, 0, 0, 1)).toThrow(/closed/);
  });

  it('expandRows repeats the one row in every new micro-batch (bf16 bits as they are), only for a whole in-place cache', async () => {
    const { backend, live } = fakeBackend('bf16');
    const cache = inPlaceCache(backend, 1);
    expect(cache.canExpandRows).toBe(true);
    for (const layer of [0, 1]) write(cache.inPlaceKv(layer, 0, 0, 5), 2, 0, 5);
    const one = tokens(cache.inPlaceKv(1, 0, 5, 0), 2, 5);
    await cache.expandRows(3);
    expect(cache.batch).toBe(3);
    expect(cache.microBatches).toBe(2);
    for (const layer of [0, 1]) {
      const m0 = cache.inPlaceKv(layer, 0, 5, 0);
      const m1 = cache.inPlaceKv(layer, 1, 5, 0);
      expect(m0.k).toBeInstanceOf(Uint16Array);
      expect(tokens(m0, 4, 5)).toEqual([...one, ...one]);
      expect(tokens(m1, 2, 5)).toEqual(one);
    }
    // The one-row buffers went back; 2 layers × 2 micro-batches × K and V remain.
    expect(live.size).toBe(8);
    await expect(cache.expandRows(2)).rejects.toThrow('needs a cache of one row, this one has 3');
    await cache.close();
    expect(live.size).toBe(0);
    const mixed = inPlaceCache(fakeBackend('fp32').backend, 1, [100, 0, 50, 50, 100, 0]);
    expect(mixed.canExpandRows).toBe(false);
    expect(mixed.isInPlace(0)).toBe(false);
    await expect(mixed.expandRows(2)).rejects.toThrow('expandRows needs the whole cache in place');
    await mixed.close();
  });
});
