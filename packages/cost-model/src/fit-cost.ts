import { parsePolicy, planMemory, type ModelShape, type Policy } from '@flexhelm/offload/plan';
import type { CalibrationRun, CostFit, MachineProfile, MemoryScales, TimeScales } from './machine-profile.js';
import { fitScales, type ParamRange } from './fit-scales.js';
import { predictPeakRss, stepCost, UNIT_MEMORY_SCALES, UNIT_TIME_SCALES, type ComputePath } from './predict-cost.js';

/** The policy of a calibration run (KV cache and activations on the compute tier, as the search plans them). */
export function calibrationPolicy(r: CalibrationRun['policy']): Policy {
  return parsePolicy({
    gpuBatchSize: r.gbs, numGpuBatches: r.ngb, wGpuPercent: r.wg, wCpuPercent: r.wc,
    cacheGpuPercent: 100, cacheCpuPercent: 0, actGpuPercent: 100, actCpuPercent: 0, compressWeight: r.compress,
  });
}

// Scales stay within a factor of 4 of the measured terms: a fit that needs more says the structure is wrong.
const FACTOR: ParamRange = { lo: 0.25, hi: 4, log: true };
const TIME_RANGES: Record<keyof TimeScales, ParamRange> = {
  directPrefill: FACTOR, directDecode: FACTOR, load: FACTOR, prefillCompute: FACTOR, decodeCompute: FACTOR, headLoad: FACTOR,
  freshLoad: { lo: 0, hi: 1 }, contention: { lo: 0, hi: 1 },
};
const MEMORY_RANGES: Record<keyof MemoryScales, ParamRange> = { resident: FACTOR, host: FACTOR, streamed: FACTOR, disk: FACTOR, workspace: FACTOR, kv: FACTOR, stack: FACTOR, loading: FACTOR };
/** Pull towards the unfitted model, so a term no run exercises keeps its measured value. */
const PRIOR = 0.02;

const sq = (x: number) => x * x;
const prior = (p: Record<string, number>, ranges: Record<string, ParamRange>) =>
  PRIOR * Object.entries(p).reduce((a, [k, v]) => a + (ranges[k]!.log ? sq(Math.log(v)) : sq(v)), 0);

/**
 * Fits the cost model's per-term scale factors to calibration runs of `shape` (each at its own layer count): time
 * scales by least squares on ln(predicted / measured) of the prefill and of the mean decode step, memory scales on the
 * peak RSS, both with a weak pull towards 1 (0 for `contention` and `freshLoad`).
 */
export function fitCost(shape: ModelShape, runs: CalibrationRun[], profile: MachineProfile, backend: ComputePath = 'onnxruntime-fp32'): CostFit {
  if (runs.length === 0) throw new Error('fitCost: no calibration runs');
  const cases = runs.map((r) => {
    const s = { ...shape, numLayers: r.layers };
    const policy = calibrationPolicy(r.policy);
    const workload = { promptLen: r.promptLen, genLen: r.genLen };
    return { r, s, policy, plan: planMemory(s, policy, workload), past: r.promptLen + (Math.max(1, r.genLen) - 2) / 2 };
  });
  const timeErrors = (k: TimeScales) =>
    cases.flatMap(({ r, s, policy, past }) => {
      const pre = stepCost(s, policy, profile, r.promptLen, 0, { backend, timeScales: k }).ms;
      const dec = stepCost(s, policy, profile, 1, past, { backend, timeScales: k }).ms;
      return [Math.log(pre / r.prefillMs), Math.log(dec / r.decodeStepMs)];
    });
  const memoryErrors = (k: MemoryScales) => cases.map(({ r, s, policy, plan }) => Math.log(predictPeakRss(s, policy, plan, profile.host.baseRssBytes, k, { promptLen: r.promptLen, genLen: r.genLen }) / r.peakRssBytes));
  const sumSq = (xs: number[]) => xs.reduce((a, x) => a + x * x, 0);
  const time = fitScales(UNIT_TIME_SCALES, TIME_RANGES, (k) => sumSq(timeErrors(k)) + prior(k, TIME_RANGES));
  const memory = fitScales(UNIT_MEMORY_SCALES, MEMORY_RANGES, (k) => sumSq(memoryErrors(k)) + prior(k, MEMORY_RANGES));
  const rms = (xs: number[]) => Math.sqrt(sumSq(xs) / xs.length);
  return { time, memory, runs, rmsLogError: { time: rms(timeErrors(time)), memory: rms(memoryErrors(memory)) } };
}
