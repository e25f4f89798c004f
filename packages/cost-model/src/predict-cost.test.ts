import { describe, expect, it } from 'vitest';
import { parsePolicy, planMemory } from '@flexhelm/offload/plan';
import { FRESH_ALLOCATION_BYTES, headPlacement, nonDecreasing, layerPlacement, loadMs, predictCost, predictPeakRss, stepCost } from './predict-cost.js';
import { microBatchBytes } from './micro-batch-bytes.js';
import { shapeId } from './machine-profile.js';
import { PROBE, probedProfile, SHAPE, testProfile } from './test-profile.js';

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

describe('stepCost with a decode probe (hand-computed)', () => {
  const profile = probedProfile();

  it('direct decode: round trip, embedding, each layer from the probe plus its context slope, logits and sampling', () => {
    // 4 rows, 9 cached tokens (context 10, the probe's 5): layer = interp(1 → 1 ms, 10 → 2 ms; 4) + 0.001·4·(10 − 5)
    const layer = 1 + 3 / 9 + 0.001 * 4 * 5;
    const embed = 0.1 + 0.01 * 4;
    const head = 3 + 3 / 9 + 0.1 * 4;
    const c = stepCost(SHAPE, policy(100, 0, 4, 1), profile, 1, 9);
    expect(c.residentLayerMs).toBeCloseTo(layer, 9);
    expect(c.headMs).toBeCloseTo(head, 9);
    expect(c.ms).toBeCloseTo(0.1 + embed + 2 * layer + head, 9);
  });

  it('prefill keeps the per-call terms; its head is the probed logits', () => {
    const c = stepCost(SHAPE, policy(100, 0, 4, 1), profile, 8, 0);
    const old = stepCost(SHAPE, policy(100, 0, 4, 1), testProfile(), 8, 0);
    expect(c.residentLayerMs).toBeCloseTo(old.residentLayerMs, 9);
    expect(c.headMs).toBeCloseTo(3 + 3 / 9 + 0.4, 9);
  });

  it('offloaded decode: one hand-over per layer, per micro-batch a round trip, its call and its copies; the head streamed', () => {
    // 0 100, 2 × 2 rows, 9 cached tokens. Streamed layer of 2 rows from the probe: 2 + 2/9 + 0.002·2·5 (hand-over
    // included); each micro-batch pays it without the hand-over (0.7 as timed in the probe's steps, not the 0.5 timed
    // alone), plus a round trip and its bytes at 1e-6 ms.
    const streamed = 2 + 2 / 9 + 0.002 * 2 * 5;
    const micro = 0.1 + (streamed - 0.7) + microBatchBytes(2, 9, 64) * 1e-6;
    const compute = 0.7 + 2 * micro;
    const c = stepCost(SHAPE, policy(0, 100, 2, 2), profile, 1, 9);
    expect(c.computeMs).toBeCloseTo(compute, 9);
    // The head (final LN + 100×64 table, all on the host) loads during the last layer, which covers it here.
    const hp = headPlacement(SHAPE, policy(0, 100, 2, 2));
    expect(hp.resident).toBe(false);
    expect(hp.hostElements).toBe(2 * 64 + 100 * 64);
    expect(loadMs(hp, profile.host, false)).toBeLessThan(c.streamedLayerMs);
    expect(c.headMs).toBeCloseTo(5 + 3 / 9 + 0.1 * 4, 9);
    // One micro-batch: the probe's streamed layer as it is.
    expect(stepCost(SHAPE, policy(0, 100, 4, 1), profile, 1, 9).computeMs).toBeCloseTo(2 + 6 / 9 + 0.002 * 4 * 5, 9);
  });

  it('a head whose load outlasts the last layer is waited for (a 51 MB table: fresh memory each load)', () => {
    const big = { ...SHAPE, vocabSize: 200_000 };
    const profile = probedProfile({ freshMsPerMB: { median: 5, min: 5, max: 5, samples: 1 } });
    const shapes = Object.values(profile.shapes);
    const id = shapeId({ hiddenSize: 64, ffnDim: 256, numHeads: 4, vocabSize: 200_000, wordEmbedProjDim: 64 });
    profile.shapes[id] = { ...shapes[0]!, shape: { ...shapes[0]!.shape, vocabSize: 200_000 } };
    const c = stepCost(big, policy(0, 100, 4, 1), profile, 1, 9);
    const headElements = 200_000 * 64 + 2 * 64;
    // converted at 1 G elements/s, plus 5 ms per MB first touched for the table (the LayerNorm vectors are small)
    const headLoad = headElements / 1e6 + ((4 * 200_000 * 64) / 1e6) * 5;
    expect(headLoad).toBeGreaterThan(c.streamedLayerMs);
    expect(c.headMs).toBeCloseTo(6 - 2 / 3 + 0.4 + headLoad - c.streamedLayerMs, 6);
  });

  it('micro-batch copies: mask slice, hidden in and out, past K/V in, present K/V out', () => {
    expect(microBatchBytes(2, 9, 64)).toBe(4 * (2 * 10 + 2 * 2 * 64 + 2 * 2 * 9 * 64 + 2 * 2 * 10 * 64));
    expect(PROBE.rows).toEqual([1, 10]);
  });
});

describe('nonDecreasing', () => {
  it('reads a probe that falls with more rows through the larger batch', () => {
    expect(nonDecreasing([51, 37, 40])).toEqual([37, 37, 40]);
    expect(nonDecreasing([1, 2, 3])).toEqual([1, 2, 3]);
  });
});

describe('fresh memory', () => {
  it('a streamed tensor above 32 MiB pays first-touch cost per load; smaller ones do not', () => {
    const big = { ...SHAPE, hiddenSize: 4096, ffnDim: 4 * 4096, numHeads: 32 };
    const p = layerPlacement(big, policy(0, 100, 1, 1));
    // fc1 and fc2 are 4096 × 16384 floats = 256 MiB each; the 4096² attention matrices are 64 MiB each.
    expect(p.freshBytes).toBe(4 * (2 * 4096 * 16384 + 4 * 4096 * 4096));
    expect(4 * 4096 * 4096).toBeGreaterThan(FRESH_ALLOCATION_BYTES);
    expect(layerPlacement(SHAPE, policy(0, 100, 1, 1)).freshBytes).toBe(0);
    const host = { ...testProfile().host, freshMsPerMB: { median: 5, min: 5, max: 5, samples: 1 } };
    expect(loadMs(p, host, false) - loadMs(p, testProfile().host, false)).toBeCloseTo((p.freshBytes / 1e6) * 5, 6);
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
    // Final LayerNorm and the head's own copy of the token table.
    const headElements = 100 * 64 + 2 * 64;
    const head = 4 * headElements;
    const planned = (p: ReturnType<typeof planMemory>) => p.cache.compute + p.cache.host + p.activations.compute + p.activations.host + p.workspace;
    // All resident: 2 layers of fp32 held, and both layers' loading copies still uncollected (min(L, 12) = 2).
    const direct = policy(100, 0, 2, 1);
    const plan = planMemory(SHAPE, direct, { promptLen: 8, genLen: 5 });
    expect(predictPeakRss(SHAPE, direct, plan, 1e8)).toBe(1e8 + 2 * 4 * LAYER_ELEMENTS + embedding + head + planned(plan) + 2 * 4 * LAYER_ELEMENTS);
    // All on the host: f16 copies held; the layers and the head in flight are the plan's workspace (nothing more).
    const host = policy(0, 100, 2, 1);
    const hostPlan = planMemory(SHAPE, host, { promptLen: 8, genLen: 5 });
    // The input embedding and the streamed head's table in f16 on the host.
    const hostEmbedding = embedding / 2;
    const hostHead = 2 * headElements;
    expect(predictPeakRss(SHAPE, host, hostPlan, 1e8)).toBe(1e8 + 2 * 2 * LAYER_ELEMENTS + hostEmbedding + hostHead + planned(hostPlan));
  });
});
