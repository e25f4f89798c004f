import { describe, expect, it } from 'vitest';
import { parsePolicy, planMemory } from '@flexhelm/offload';
import { layerPlacement, loadMs, predictCost, predictPeakRss, stepCost } from './predict-cost.js';
import { SHAPE, testProfile } from './test-profile.js';

const policy = (wg: number, wc: number, gbs: number, ngb: number, compressWeight = false) =>
  parsePolicy({ gpuBatchSize: gbs, numGpuBatches: ngb, wGpuPercent: wg, wCpuPercent: wc, cacheGpuPercent: 100, cacheCpuPercent: 0, actGpuPercent: 100, actCpuPercent: 0, compressWeight });

// Layer elements: 4·64² + 64·256·2 = 49152 in matrices, 832 in vectors (4 attention biases, 2 LN pairs, fc biases).
const LAYER_ELEMENTS = 49152 + 4 * 64 + 2 * 64 + 256 + 64 + 2 * 64;

describe('layerPlacement', () => {
  it('follows the midpoint rule per layer object', () => {
    expect(layerPlacement(SHAPE, policy(100, 0, 1, 1))).toMatchObject({ resident: true, hostElements: 0, diskElements: 0, computeBytes: 4 * LAYER_ELEMENTS });
    expect(layerPlacement(SHAPE, policy(0, 100, 1, 1))).toMatchObject({ resident: false, hostElements: LAYER_ELEMENTS, diskElements: 0, hostBytes: 2 * LAYER_ELEMENTS });
    // 0 50: q, b_q, k, b_k (attention: b_k's midpoint is 49.6%) and fc1, b1 (MLP) → disk, each tensor a 4 KiB-aligned
    // run of f16: 8192 + 4096 + 8192 + 4096 + 32768 + 4096 bytes.
    const half = layerPlacement(SHAPE, policy(0, 50, 1, 1));
    expect(half.diskElements).toBe(2 * 64 * 64 + 2 * 64 + 64 * 256 + 256);
    expect(half.diskBytes).toBe(2 * 8192 + 3 * 4096 + 32768);
  });
});

describe('stepCost (hand-computed against the test profile)', () => {
  const profile = testProfile();

  it('direct path: one batch, cache owned by the backend, one round trip per step', () => {
    // decode, 2 rows, 9 cached tokens: layer = linear(2) + owned attention = (1.0 + 1.0/9) + 0.0005·2·10
    const layer = 1 + 1 / 9 + 0.01;
    const embed = 0.1 + 0.01 * 2;
    const head = 0.5 + 0.9 / 9;
    const c = stepCost(SHAPE, policy(100, 0, 2, 1), profile, 1, 9);
    expect(c.path).toBe('direct');
    expect(c.residentLayerMs).toBeCloseTo(layer, 9);
    expect(c.ms).toBeCloseTo(0.1 + embed + 2 * layer + head, 9);
  });

  it('offloaded path: micro-batches reuse one load; the slower of load and compute sets each layer', () => {
    // 0 100, 2 × 2 rows, decode at 9 cached tokens. Per micro-batch: a round trip for its setStep, its copies
    // (4 · (2·10 + 2·2·64 + 2·2·9·64 + 2·2·10·64) = 20560 bytes at 1 GB/s) and a streamed layer call
    // (0.1 + [1.6 + 1.5/9 − 0.1] + 0.001·2·10).
    const call = 0.1 + (1.6 + 1.5 / 9 - 0.1) + 0.02;
    const micro = 0.1 + 20560e-6 + call;
    const compute = 0.5 + 2 * micro;
    const load = LAYER_ELEMENTS / 1e6; // f16→f32 at 1 G elements/s, in ms
    const c = stepCost(SHAPE, policy(0, 100, 2, 2), profile, 1, 9);
    expect(c.path).toBe('offloaded');
    expect(c.loadMs).toBeCloseTo(load, 9);
    expect(c.computeMs).toBeCloseTo(compute, 9);
    expect(c.streamedLayerMs).toBeCloseTo(Math.max(load, compute), 9);
    expect(c.ms).toBeCloseTo(0.1 + 0.04 + 2 * compute + (0.5 + (0.9 * 3) / 9), 9);
  });

  it('a disk-bound layer is set by its load: the read, then its conversion, next to the host conversions', () => {
    const slow = testProfile({ diskReadGBs: { median: 0.001, min: 0.001, max: 0.001, samples: 1 } });
    const p = layerPlacement(SHAPE, policy(0, 0, 1, 1));
    // read at 1 MB/s (bytes / 1e6 s = bytes / 1e3 ms), then converted at 1 G elements/s
    const expected = p.diskBytes / 1e3 + p.diskElements / 1e6;
    expect(loadMs(p, slow.host, false)).toBeCloseTo(expected, 9);
    const c = stepCost(SHAPE, policy(0, 0, 1, 1), slow, 1, 9);
    expect(c.streamedLayerMs).toBeCloseTo(expected, 9);
  });

  it('4-bit weights convert at the dequantisation rate', () => {
    const p = layerPlacement(SHAPE, policy(0, 100, 1, 1, true));
    expect(loadMs(p, testProfile().host, true)).toBeCloseTo(LAYER_ELEMENTS / 0.5e6, 9);
  });
});

describe('predictCost', () => {
  it('sums the prefill and genLen − 1 decode steps at the mean context, and reports FlexLLMGen throughput', () => {
    const profile = testProfile();
    const p = policy(100, 0, 2, 1);
    const r = predictCost(SHAPE, p, { promptLen: 8, genLen: 5 }, profile);
    const prefill = stepCost(SHAPE, p, profile, 8, 0).ms;
    const decode = stepCost(SHAPE, p, profile, 1, 8 + 1.5).ms;
    expect(r.totalMs).toBeCloseTo(prefill + 4 * decode, 9);
    expect(r.throughput).toBeCloseTo((2 * 5) / ((prefill + 4 * decode) / 1000), 6);
  });

  it('peak memory: the floor, layer weights, embedding and head, plan terms, and the loading garbage', () => {
    const embedding = 4 * (100 * 64 + 64 * 64);
    const head = 4 * 100 * 64;
    const planned = (p: ReturnType<typeof planMemory>) => p.cache.compute + p.cache.host + p.activations.compute + p.activations.host + p.workspace;
    // All resident: 2 layers of fp32 held, and both layers' loading copies still uncollected (min(L, 12) = 2).
    const direct = policy(100, 0, 2, 1);
    const plan = planMemory(SHAPE, direct, { promptLen: 8, genLen: 5 });
    expect(predictPeakRss(SHAPE, direct, plan, 1e8)).toBe(1e8 + 2 * 4 * LAYER_ELEMENTS + embedding + head + planned(plan) + 2 * 4 * LAYER_ELEMENTS);
    // All on the host: f16 copies held; min(L, 4) = 2 layers of fp32 loading garbage.
    const host = policy(0, 100, 2, 1);
    const hostPlan = planMemory(SHAPE, host, { promptLen: 8, genLen: 5 });
    expect(predictPeakRss(SHAPE, host, hostPlan, 1e8)).toBe(1e8 + 2 * 2 * LAYER_ELEMENTS + embedding + head + planned(hostPlan) + 2 * 4 * LAYER_ELEMENTS);
  });
});
