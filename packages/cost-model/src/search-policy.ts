import { describePolicy, parsePolicy, placeWeights, layerObjects, planMemory, type ModelShape, type Policy, type Workload } from '@flexhelm/offload/plan';
import type { MachineProfile } from './machine-profile.js';
import { planOptionsFor, predictCost, type CostOptions, type CostPrediction } from './predict-cost.js';

/** The run to optimise for: FlexLLMGen's prompt and generation lengths, and how many sequences there are to generate. */
export interface SearchWorkload extends Workload {
  /** Sequences the run generates (bounds the block size; default: unbounded, FlexLLMGen's search). */
  numSequences?: number;
}

export interface SearchBudget {
  /** Bytes of RAM the process may reach (peak RSS). */
  maxRam: number;
  /** Free bytes in the offload directory (undefined: the disk tier is not considered). */
  freeDisk?: number;
  /** Fraction of the budget kept free for what the model does not see (default 0.1). */
  safetyMargin?: number;
}

export interface SearchOptions extends CostOptions {
  /** Fix some choices (what the user gave explicitly); the rest are searched. */
  fixed?: Partial<Pick<Policy, 'gpuBatchSize' | 'numGpuBatches' | 'wGpuPercent' | 'wCpuPercent' | 'compressWeight'>>;
  /** Largest gpu batch size tried (default 256, or the number of sequences). */
  maxGpuBatchSize?: number;
  /**
   * Also require offload's memory plan to fit (`planMemory` within `maxRam` and the free disk): what the engine checks
   * before loading. Sessions pass it so that the search never chooses, or suggests, a policy the engine then refuses.
   */
  planFits?: boolean;
}

export interface Candidate {
  policy: Policy;
  prediction: CostPrediction;
  /** Predicted generation throughput over the whole workload (tokens/s), the quantity maximised. */
  throughput: number;
}

export interface SearchResult {
  best: Candidate;
  /** The best candidate that differs from `best` in placement, block or compression. */
  runnerUp?: Candidate;
  /** Policies evaluated (after pruning duplicate placements) and how many fit the budget. */
  evaluated: number;
  feasible: number;
  searchMs: number;
}

/** A policy whose predicted peak memory or disk use exceeds the budget. */
export class NoPolicyFitsError extends Error {
  override name = 'NoPolicyFitsError';
}

/** Weight percents (wg, wc) in steps of 10, one per distinct per-tensor placement (the midpoint rule is coarse). */
export function distinctPlacements(shape: ModelShape): { wg: number; wc: number }[] {
  const objects = layerObjects({ ...shape, numLayers: 1 }).filter((o) => o.name.startsWith('attention_') || o.name.startsWith('mlp_'));
  const seen = new Map<string, { wg: number; wc: number }>();
  // From most resident to least, so the first pair of each placement is kept (fewest bytes off the compute tier).
  for (let wg = 100; wg >= 0; wg -= 10) {
    for (let wc = 100 - wg; wc >= 0; wc -= 10) {
      const sig = objects.map((o) => placeWeights(o.tensors, wg, wc).join(',')).join('|');
      if (!seen.has(sig)) seen.set(sig, { wg, wc });
    }
  }
  return [...seen.values()];
}

/** gbs candidates: FlexLLMGen's 1, 2, 3, 4, then doubling. */
function batchSizes(limit: number): number[] {
  const out: number[] = [];
  for (let g = 1; g <= limit; g = g < 4 ? g + 1 : g * 2) out.push(g);
  return out;
}

/** The time of generating `numSequences` in blocks of `policy`'s size: full blocks and a last, smaller one. */
export function workloadThroughput(shape: ModelShape, policy: Policy, workload: SearchWorkload, profile: MachineProfile, options: CostOptions = {}): { throughput: number; prediction: CostPrediction } {
  const prediction = predictCost(shape, policy, workload, profile, options);
  const n = workload.numSequences;
  const B = prediction.block;
  if (n === undefined || n % B === 0) return { throughput: prediction.throughput, prediction };
  const full = Math.floor(n / B);
  const rest = n - full * B;
  const g = Math.min(policy.gpuBatchSize, rest);
  const last = predictCost(shape, { ...policy, gpuBatchSize: g, numGpuBatches: Math.ceil(rest / g) }, workload, profile, options);
  const ms = full * prediction.totalMs + last.totalMs;
  return { throughput: (n * Math.max(1, workload.genLen)) / (ms / 1000), prediction };
}

/** Whether a prediction fits the budget with its safety margin; the reason when not. */
export function fitsBudget(prediction: CostPrediction, budget: SearchBudget): string | undefined {
  const keep = 1 - (budget.safetyMargin ?? 0.1);
  if (prediction.peakRssBytes > budget.maxRam * keep) return `peak RAM ${gib(prediction.peakRssBytes)} over ${gib(budget.maxRam * keep)} (${gib(budget.maxRam)} less the ${Math.round((1 - keep) * 100)}% margin)`;
  if (prediction.diskBytes > 0 && (budget.freeDisk === undefined || prediction.diskBytes > budget.freeDisk * keep)) {
    return budget.freeDisk === undefined ? 'the disk tier is unavailable' : `disk ${gib(prediction.diskBytes)} over ${gib(budget.freeDisk * keep)} free`;
  }
  return undefined;
}

const gib = (b: number) => `${(b / 1024 ** 3).toFixed(2)} GiB`;

/**
 * The policy with the highest predicted throughput that fits the budget: an exhaustive search over every distinct
 * weight placement (steps of 10%), gpu batch size (1, 2, 3, 4, 8, …), number of gpu batches and compression. The KV
 * cache and activations stay in RAM on the compute tier: OffloadingBackend keeps both in RAM as fp32 whatever their
 * percents, so other percents would change nothing but the plan.
 */
export function searchPolicy(shape: ModelShape, workload: SearchWorkload, profile: MachineProfile, budget: SearchBudget, options: SearchOptions = {}): SearchResult {
  const t0 = performance.now();
  const fixed = options.fixed ?? {};
  const maxSeq = workload.numSequences ?? Number.POSITIVE_INFINITY;
  const gLimit = Math.min(options.maxGpuBatchSize ?? 256, maxSeq);
  const placements =
    fixed.wGpuPercent !== undefined && fixed.wCpuPercent !== undefined ? [{ wg: fixed.wGpuPercent, wc: fixed.wCpuPercent }] : distinctPlacements(shape);
  const gbsList = fixed.gpuBatchSize !== undefined ? [fixed.gpuBatchSize] : batchSizes(gLimit);
  const compressList = fixed.compressWeight !== undefined ? [fixed.compressWeight] : [false, true];
  const candidates: Candidate[] = [];
  let evaluated = 0;
  // The leanest policy seen, for the message when nothing fits.
  let leanest: Candidate | undefined;
  let leanestNeeds = Number.POSITIVE_INFINITY;
  for (const { wg, wc } of placements) {
    for (const compressWeight of compressList) {
      for (const gpuBatchSize of gbsList) {
        const ngbLimit = Math.max(1, Math.floor(Math.min(maxSeq, 4096) / gpuBatchSize));
        const ngbList = fixed.numGpuBatches !== undefined ? [fixed.numGpuBatches] : batchSizes(Math.min(ngbLimit, 64));
        for (const numGpuBatches of ngbList) {
          const policy = parsePolicy({
            gpuBatchSize, numGpuBatches, wGpuPercent: wg, wCpuPercent: wc,
            cacheGpuPercent: 100, cacheCpuPercent: 0, actGpuPercent: 100, actCpuPercent: 0, compressWeight,
          });
          evaluated++;
          const { throughput, prediction } = workloadThroughput(shape, policy, workload, profile, options);
          // With `planFits`, the memory plan's RAM counts too (toward the leanest as the larger of the two).
          const plan = options.planFits ? planMemory(shape, policy, workload, planOptionsFor(options.backend)) : undefined;
          const needs = Math.max(prediction.peakRssBytes, plan?.ramBytes ?? 0);
          if (!leanest || needs < leanestNeeds) {
            leanest = { policy, prediction, throughput };
            leanestNeeds = needs;
          }
          if (fitsBudget(prediction, budget) !== undefined) continue;
          if (plan && (plan.ramBytes > budget.maxRam || (budget.freeDisk !== undefined && plan.diskBytes > budget.freeDisk))) continue;
          candidates.push({ policy, prediction, throughput });
        }
      }
    }
  }
  if (candidates.length === 0) {
    const lean = leanest!;
    const keep = 1 - (budget.safetyMargin ?? 0.1);
    throw new NoPolicyFitsError(
      `no policy fits: the leanest (${describePolicy(lean.policy)}) does not fit: needs ${gib(leanestNeeds)} of RAM ` +
        `but the budget is ${gib(budget.maxRam * keep)} (${gib(budget.maxRam)} less the ${Math.round((1 - keep) * 100)}% margin)${budget.freeDisk !== undefined ? `, ${gib(budget.freeDisk)} of disk free` : ', no disk tier'}; ` +
        'raise --max-ram, free memory or disk, allow --compress-weight, or use a smaller model',
    );
  }
  // Highest throughput; ties go to less memory, then to the less offloaded placement, then to fewer micro-batches.
  candidates.sort((a, b) => b.throughput - a.throughput || a.prediction.peakRssBytes - b.prediction.peakRssBytes || b.policy.wGpuPercent - a.policy.wGpuPercent || b.policy.gpuBatchSize - a.policy.gpuBatchSize);
  const best = candidates[0]!;
  const sig = (c: Candidate) => `${c.policy.wGpuPercent}/${c.policy.wCpuPercent}/${c.prediction.block}/${c.policy.compressWeight}`;
  const runnerUp = candidates.find((c) => sig(c) !== sig(best));
  return { best, runnerUp, evaluated, feasible: candidates.length, searchMs: performance.now() - t0 };
}
