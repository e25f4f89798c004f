import { describe, expect, it } from 'vitest';
import { planMemory } from '@flexhelm/offload/plan';
import { fitScales } from './fit-scales.js';
import { calibrationPolicy, fitCost } from './fit-cost.js';
import { CALIBRATION_POLICIES, calibrationLayers } from './calibration-policies.js';
import type { CalibrationRun, MemoryScales, TimeScales } from './machine-profile.js';
import { predictCost, predictPeakRss, stackActivationBytes, stepCost, UNIT_TIME_SCALES } from './predict-cost.js';
import { probedProfile, SHAPE } from './test-profile.js';

describe('fitScales', () => {
  it('finds the minimum of a bounded loss, on log and linear scales', () => {
    const p = fitScales({ a: 1, b: 0 }, { a: { lo: 0.25, hi: 4, log: true }, b: { lo: 0, hi: 1 } }, ({ a, b }) => (Math.log(a) - Math.log(2.5)) ** 2 + (b - 0.3) ** 2);
    expect(p.a).toBeCloseTo(2.5, 4);
    expect(p.b).toBeCloseTo(0.3, 4);
  });

  it('stays within the bounds', () => {
    const p = fitScales({ a: 1 }, { a: { lo: 0.25, hi: 4, log: true } }, ({ a }) => -a);
    expect(p.a).toBeCloseTo(4, 6);
  });
});

describe('fitCost', () => {
  const profile = probedProfile();
  const truth: TimeScales = { directPrefill: 1.3, directDecode: 0.8, load: 1.5, prefillCompute: 0.9, decodeCompute: 0.6, headLoad: 1.2, freshLoad: 0.3, contention: 0.4 };
  const memory: MemoryScales = { resident: 1.1, host: 1, streamed: 0.7, disk: 0.9, workspace: 1.2, kv: 0.9, stack: 1.5, loading: 0.8 };
  const workload = { promptLen: 16, genLen: 6 };
  // "Measured" runs made by the model itself at known scales: the fit must reproduce them.
  const runs: CalibrationRun[] = CALIBRATION_POLICIES.map(({ promptLen: _, ...p }) => {
    const policy = calibrationPolicy(p);
    const past = workload.promptLen + (workload.genLen - 2) / 2;
    return {
      policy: p, layers: SHAPE.numLayers, ...workload,
      prefillMs: stepCost(SHAPE, policy, profile, workload.promptLen, 0, { timeScales: truth }).ms,
      decodeStepMs: stepCost(SHAPE, policy, profile, 1, past, { timeScales: truth }).ms,
      peakRssBytes: predictPeakRss(SHAPE, policy, planMemory(SHAPE, policy, workload), profile.host.baseRssBytes, memory, workload),
    };
  });

  it('reproduces runs generated at known scales, and predictCost then uses the fit', () => {
    const fit = fitCost(SHAPE, runs, profile);
    expect(fit.rmsLogError.time).toBeLessThan(0.01);
    expect(fit.rmsLogError.memory).toBeLessThan(0.01);
    expect(fit.runs).toBe(runs);
    const before = predictCost(SHAPE, calibrationPolicy(runs[2]!.policy), workload, profile);
    profile.shapes[Object.keys(profile.shapes)[0]!]!.backends['onnxruntime-fp32']!.fit = fit;
    const after = predictCost(SHAPE, calibrationPolicy(runs[2]!.policy), workload, profile);
    // Within 1% (the weak pull towards 1 keeps a little of the unfitted model).
    expect(Math.abs(after.prefill.ms / runs[2]!.prefillMs - 1)).toBeLessThan(0.01);
    expect(Math.abs(after.decode.ms / runs[2]!.decodeStepMs - 1)).toBeLessThan(0.01);
    expect(after.decode.ms).not.toBeCloseTo(before.decode.ms, 3);
  });

  it('refuses to fit nothing', () => {
    expect(() => fitCost(SHAPE, [], profile)).toThrow(/no calibration runs/);
  });
});

describe('the unfitted model and the stack term', () => {
  it('scales of 1 and no contention are FlexLLMGen\'s max of load and compute', () => {
    const profile = probedProfile();
    const policy = calibrationPolicy({ wg: 0, wc: 100, gbs: 2, ngb: 1, compress: false });
    const c = stepCost(SHAPE, policy, profile, 1, 9, { timeScales: UNIT_TIME_SCALES });
    expect(c.streamedLayerMs).toBeCloseTo(Math.max(c.loadMs, c.computeMs), 12);
    const k = stepCost(SHAPE, policy, profile, 1, 9, { timeScales: { ...UNIT_TIME_SCALES, contention: 0.5 } });
    expect(k.streamedLayerMs).toBeCloseTo(Math.max(c.loadMs, c.computeMs) + 0.5 * Math.min(c.loadMs, c.computeMs), 12);
  });

  it('charges every layer\'s prefill activations to all-resident runs only', () => {
    // 2 layers · 3 rows · 8 tokens (one chunk) · (256 + 8·64 + 4·8) activations + 4·64 fetched copies, fp32
    expect(stackActivationBytes(SHAPE, 3, 8)).toBe(4 * 2 * 3 * 8 * (256 + 512 + 32 + 4 * 64));
    // Past ORT_CHUNK_TOKENS (1024) a call takes 1024 / 512 = 2 rows: the activations of 2 rows, the copies of all 5.
    expect(stackActivationBytes(SHAPE, 5, 512)).toBe(4 * 2 * (2 * 512 * (256 + 512 + 4 * 512) + 5 * 512 * 4 * 64));
    const wl = { promptLen: 8, genLen: 2 };
    const direct = calibrationPolicy({ wg: 100, wc: 0, gbs: 3, ngb: 1, compress: false });
    const withStack = predictPeakRss(SHAPE, direct, planMemory(SHAPE, direct, wl), 0, undefined, wl);
    expect(withStack - predictPeakRss(SHAPE, direct, planMemory(SHAPE, direct, wl), 0)).toBe(stackActivationBytes(SHAPE, 3, 8));
    const host = calibrationPolicy({ wg: 0, wc: 100, gbs: 3, ngb: 1, compress: false });
    expect(predictPeakRss(SHAPE, host, planMemory(SHAPE, host, wl), 0, undefined, wl)).toBe(predictPeakRss(SHAPE, host, planMemory(SHAPE, host, wl), 0));
  });

  it('calibrates on at most 12 layers, 4 for layers above 200 MB', () => {
    expect(calibrationLayers({ ...SHAPE, numLayers: 24 })).toBe(12);
    expect(calibrationLayers({ ...SHAPE, numLayers: 2 })).toBe(2);
    expect(calibrationLayers({ ...SHAPE, numLayers: 32, hiddenSize: 4096, ffnDim: 16384 })).toBe(4);
  });
});
