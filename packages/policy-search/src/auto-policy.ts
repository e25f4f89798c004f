import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import type { OptConfig } from '@flexhelm/engine';
import { BudgetError, describePercents, planMemory, type ModelShape, type Policy } from '@flexhelm/offload';
import type { MachineProfile } from './machine-profile.js';
import { fittedMemoryScales, predictPeakRss, type ComputePath, type CostOptions, type CostPrediction } from './predict-cost.js';
import { ensureProfile } from './profile-cache.js';
import { availableRam, freeDiskAt } from './profile-machine.js';
import { fitsBudget, searchPolicy, type SearchBudget, type SearchOptions, type SearchResult, type SearchWorkload } from './search-policy.js';

export interface AutoPolicyOptions extends CostOptions {
  config: OptConfig;
  shape: ModelShape;
  workload: SearchWorkload;
  dataDir: string;
  offloadDir: string;
  /** The RAM budget (bytes); the search also keeps within the RAM available now. */
  maxRam: number;
  fixed?: SearchOptions['fixed'];
  /** The compute backend, once the profile says what is usable (default: `backend`, or onnxruntime fp32). */
  backendFor?: (profile: MachineProfile) => ComputePath;
  log?: (line: string) => void;
}

/** The RAM the search may plan for: the budget, but never more than what is free now plus what this process holds. */
export function effectiveBudget(maxRam: number, offloadDir: string): SearchBudget {
  const available = availableRam() + process.memoryUsage().rss;
  return { maxRam: Math.min(maxRam, available), freeDisk: freeDiskAt(existingAncestor(offloadDir)) };
}


/**
 * `--percent auto`: the machine profile (taken quickly on first use and cached under the data dir), then the search for
 * the policy with the highest predicted throughput on this workload that fits the budget.
 */
export async function autoPolicy(o: AutoPolicyOptions): Promise<{ result: SearchResult; profile: MachineProfile; profiled: boolean }> {
  const { profile, measured } = await ensureProfile(o.config, { dataDir: o.dataDir, offloadDir: o.offloadDir, quick: true, log: o.log });
  const budget = effectiveBudget(o.maxRam, o.offloadDir);
  const result = searchPolicy(o.shape, o.workload, profile, budget, { fixed: o.fixed, backend: o.backendFor?.(profile) ?? o.backend });
  return { result, profile, profiled: measured };
}

const gib = (b: number) => `${(b / 1024 ** 3).toFixed(2)} GiB`;

/** One line per candidate: the flags, predicted throughput, step times, peak RAM and disk. */
export function describeCandidate(label: string, c: { policy: Policy; prediction: CostPrediction; throughput: number }): string {
  const p = c.prediction;
  return (
    `${label}: ${describePercents(c.policy)}${c.policy.compressWeight ? ' --compress-weight' : ''} — predicted ${c.throughput.toFixed(2)} tok/s ` +
    `(prefill ${(p.prefill.ms / 1000).toFixed(2)} s, decode ${p.decode.ms.toFixed(0)} ms/step for ${p.block} sequences), peak RAM ${gib(p.peakRssBytes)}` +
    `${p.diskBytes > 0 ? `, disk ${gib(p.diskBytes)}` : ''}`
  );
}

/** The lines `flexhelm run` prints before a run with an automatic policy. */
export function describeSearch(r: SearchResult): string[] {
  const lines = [describeCandidate('policy (auto)', r.best)];
  if (r.runnerUp) lines.push(describeCandidate('runner-up', r.runnerUp));
  lines.push(`searched ${r.evaluated} policies (${r.feasible} fit) in ${r.searchMs.toFixed(0)} ms`);
  return lines;
}

/** Base RSS assumed when no profile is cached yet (measured: Node 20 + onnxruntime 1.30 worker + addons, tiny model). */
export const DEFAULT_BASE_RSS = 110 * 1024 ** 2;

/**
 * Refuses a user-given policy whose predicted peak memory or disk use does not fit, with the numbers and a policy that
 * would (the search's best with the user's other choices kept where possible). Throws offload's BudgetError, which the
 * engine setup already reports as a usage error.
 */
export function checkPredictedFit(shape: ModelShape, policy: Policy, workload: SearchWorkload, budget: SearchBudget, profile?: MachineProfile, options: CostOptions = {}): void {
  const plan = planMemory(shape, policy, workload);
  const peak = predictPeakRss(shape, policy, plan, profile?.host.baseRssBytes ?? DEFAULT_BASE_RSS, fittedMemoryScales(profile, shape, options.backend), workload);
  const margin = budget.safetyMargin ?? 0.1;
  const problem = fitsBudget({ peakRssBytes: peak, diskBytes: plan.diskBytes } as CostPrediction, { ...budget, safetyMargin: margin });
  if (!problem || (plan.diskBytes > 0 && budget.freeDisk === undefined && peak <= budget.maxRam * (1 - margin))) return;
  let hint = 'no policy fits: raise --max-ram, free memory or disk, or use a smaller model';
  if (profile) {
    try {
      const best = searchPolicy(shape, workload, profile, budget, options).best;
      hint = `a policy that fits: ${describePercents(best.policy)}${best.policy.compressWeight ? ' --compress-weight' : ''} (or --percent auto)`;
    } catch {
      // keep the generic hint
    }
  } else hint = 'try --percent auto, which searches for one that fits';
  throw new BudgetError(`the policy ${describePercents(policy)} is predicted not to fit: ${problem}. ${hint}`, plan);
}


/** statfs needs an existing path; the offload folder may be created only later, so ask its nearest existing parent. */
function existingAncestor(dir: string): string {
  let probe = dir;
  while (!existsSync(probe) && dirname(probe) !== probe) probe = dirname(probe);
  return probe;
}

/**
 * The cost path of a --compute-dtype: oneDNN (profiled as bf16) for auto/bf16/int8 where it was profiled. Follows
 * @flexhelm/session's `decideBackend`, which openEngine uses (int8 runs on oneDNN, not onnxruntime).
 */
export function computePathFor(computeDtype: string | undefined, profile: MachineProfile): ComputePath {
  if (computeDtype === 'fp32') return 'onnxruntime-fp32';
  const any = Object.values(profile.shapes)[0];
  return any?.backends['onednn-bf16'] ? 'onednn-bf16' : 'onnxruntime-fp32';
}
