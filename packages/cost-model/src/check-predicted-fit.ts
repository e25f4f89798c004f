import { BudgetError, describePercents, describePolicy, planMemory, type ModelShape, type Policy } from '@flexhelm/offload/plan';
import type { MachineProfile } from './machine-profile.js';
import { fittedMemoryScales, planOptionsFor, predictPeakRss, type CostOptions, type CostPrediction } from './predict-cost.js';
import { fitsBudget, searchPolicy, type SearchBudget, type SearchWorkload } from './search-policy.js';

/** Base RSS assumed when no profile is cached yet (measured: Node 20 + onnxruntime 1.30 worker + addons, tiny model). */
export const DEFAULT_BASE_RSS = 110 * 1024 ** 2;

/**
 * Refuses a user-given policy whose predicted peak memory or disk use does not fit, with the numbers and a policy that
 * would (the search's best with the user's other choices kept where possible). Throws offload's BudgetError, which the
 * engine setup already reports as a usage error.
 */
export function checkPredictedFit(shape: ModelShape, policy: Policy, workload: SearchWorkload, budget: SearchBudget, profile?: MachineProfile, options: CostOptions = {}): void {
  const plan = planMemory(shape, policy, workload, planOptionsFor(options.backend));
  const peak = predictPeakRss(shape, policy, plan, profile?.host.baseRssBytes ?? DEFAULT_BASE_RSS, fittedMemoryScales(profile, shape, options.backend), workload);
  const margin = budget.safetyMargin ?? 0.1;
  const problem = fitsBudget({ peakRssBytes: peak, diskBytes: plan.diskBytes } as CostPrediction, { ...budget, safetyMargin: margin });
  if (!problem || (plan.diskBytes > 0 && budget.freeDisk === undefined && peak <= budget.maxRam * (1 - margin))) return;
  let hint = 'no policy fits: raise --max-ram, free memory or disk, or use a smaller model';
  if (profile) {
    try {
      // Only a policy that the engine's own memory check accepts too.
      const best = searchPolicy(shape, workload, profile, budget, { ...options, planFits: true }).best;
      hint = `a policy that fits: ${describePolicy(best.policy)} (or --percent auto)`;
    } catch {
      // keep the generic hint
    }
  } else hint = 'try --percent auto, which searches for one that fits';
  throw new BudgetError(`the policy ${describePercents(policy)} is predicted not to fit: ${problem}. ${hint}`, plan);
}
