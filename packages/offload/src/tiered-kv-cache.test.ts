import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { f16ToF32, f32ToF16 } from '@flexhelm/pinned-memory';
import { afterAll, describe, expect, it } from 'vitest';
import { IoClock } from './io-clock.js';
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
