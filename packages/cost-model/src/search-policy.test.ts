import { describe, expect, it } from 'vitest';
import { parsePolicy } from '@flexhelm/offload/plan';
import { distinctPlacements, fitsBudget, NoPolicyFitsError, searchPolicy, workloadThroughput } from './search-policy.js';
import { SHAPE, testProfile } from './test-profile.js';

const profile = testProfile();
const workload = { promptLen: 8, genLen: 4, numSequences: 16 };
const roomy = { maxRam: 2 ** 34, freeDisk: 2 ** 40 };

describe('distinctPlacements', () => {
  it('keeps one (wg, wc) per distinct per-tensor placement, most resident first', () => {
    const pairs = distinctPlacements(SHAPE);
    expect(pairs[0]).toEqual({ wg: 100, wc: 0 });
    expect(pairs).toContainEqual({ wg: 0, wc: 100 });
    expect(pairs).toContainEqual({ wg: 0, wc: 0 });
    // The 66 percent pairs collapse to fewer placements (whole tensors move).
    expect(pairs.length).toBeLessThan(66);
    expect(new Set(pairs.map((p) => `${p.wg}/${p.wc}`)).size).toBe(pairs.length);
  });
});

describe('searchPolicy', () => {
  it('returns the argmax of predicted throughput over every policy of the grid that fits', () => {
    const r = searchPolicy(SHAPE, workload, profile, roomy);
    expect(fitsBudget(r.best.prediction, roomy)).toBeUndefined();
    let best = 0;
    for (const { wg, wc } of distinctPlacements(SHAPE)) {
      for (const compressWeight of [false, true]) {
        for (const gbs of [1, 2, 3, 4, 8, 16]) {
          for (const ngb of [1, 2, 3, 4, 8, 16]) {
            if (gbs * ngb > 4096 || ngb > Math.floor(16 / gbs)) continue;
            const policy = parsePolicy({ gpuBatchSize: gbs, numGpuBatches: ngb, wGpuPercent: wg, wCpuPercent: wc, cacheGpuPercent: 100, cacheCpuPercent: 0, actGpuPercent: 100, actCpuPercent: 0, compressWeight });
            const t = workloadThroughput(SHAPE, policy, workload, profile);
            if (fitsBudget(t.prediction, roomy) === undefined) best = Math.max(best, t.throughput);
          }
        }
      }
    }
    expect(r.best.throughput).toBeCloseTo(best, 9);
    expect(r.evaluated).toBeGreaterThan(r.feasible - 1);
    // The block never exceeds the sequences there are.
    expect(r.best.prediction.block).toBeLessThanOrEqual(16);
    expect(r.runnerUp).toBeDefined();
    expect(r.runnerUp!.throughput).toBeLessThanOrEqual(r.best.throughput);
  });

  it('under a tight RAM budget every candidate fits, and weights move off the compute tier', () => {
    // 48 layers and no process floor: resident weights (counted twice) dominate, so offloading saves memory.
    const deep = { ...SHAPE, numLayers: 48 };
    const bare = testProfile({ baseRssBytes: 0 });
    const loose = searchPolicy(deep, workload, bare, roomy);
    expect(loose.best.policy.wGpuPercent).toBe(100);
    // Below the leanest all-resident policy (one row: its weights, no stack activations to speak of).
    const leanResident = workloadThroughput(deep, parsePolicy({ gpuBatchSize: 1, numGpuBatches: 1, wGpuPercent: 100, wCpuPercent: 0, cacheGpuPercent: 100, cacheCpuPercent: 0, actGpuPercent: 100, actCpuPercent: 0 }), workload, bare).prediction.peakRssBytes;
    const tightRam = (leanResident * 0.8) / 0.9;
    const tight = searchPolicy(deep, workload, bare, { maxRam: tightRam, freeDisk: 2 ** 40 });
    expect(tight.best.policy.wGpuPercent).toBeLessThan(100);
    expect(tight.best.prediction.peakRssBytes).toBeLessThanOrEqual(tightRam * 0.9);
    expect(tight.best.prediction.peakRssBytes).toBeLessThan(loose.best.prediction.peakRssBytes);
  });

  it('keeps the choices the user fixed', () => {
    const r = searchPolicy(SHAPE, workload, profile, roomy, { fixed: { wGpuPercent: 0, wCpuPercent: 100, compressWeight: false, gpuBatchSize: 2 } });
    expect(r.best.policy).toMatchObject({ wGpuPercent: 0, wCpuPercent: 100, compressWeight: false, gpuBatchSize: 2 });
  });

  it('without a disk tier never puts weights on disk', () => {
    const r = searchPolicy(SHAPE, workload, profile, { maxRam: 2 ** 34 });
    expect(r.best.prediction.diskBytes).toBe(0);
  });

  it('says so when nothing fits', () => {
    expect(() => searchPolicy(SHAPE, workload, profile, { maxRam: 1e6, freeDisk: 2 ** 40 })).toThrow(NoPolicyFitsError);
    expect(() => searchPolicy(SHAPE, workload, profile, { maxRam: 1e6, freeDisk: 2 ** 40 })).toThrow(/no policy fits: the leanest \(--percent .*\) does not fit: needs [\d.]+ GiB of RAM but the budget is 0\.00 GiB.*raise --max-ram/);
  });
});
