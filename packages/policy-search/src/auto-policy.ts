import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import type { ModelDescription } from '@flexhelm/engine';
import { modelShapeOfDescription, type ModelShape } from '@flexhelm/offload';
import { searchPolicy, type ComputePath, type CostOptions, type MachineProfile, type SearchBudget, type SearchOptions, type SearchResult, type SearchWorkload } from '@flexhelm/cost-model';
import { ensureProfile } from './profile-cache.js';
import { availableRam, freeDiskAt } from './profile-machine.js';

export interface AutoPolicyOptions extends CostOptions {
  /** Any family's description (OPT's included): the profile times its own layer; the search plans its shape. */
  description: ModelDescription;
  /** The shape the search plans (default `modelShapeOfDescription(description)`; one with `family.held` for GGUF blocks). */
  shape?: ModelShape;
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
  const { profile, measured } = await ensureProfile(o.description, { dataDir: o.dataDir, offloadDir: o.offloadDir, quick: true, log: o.log });
  const budget = effectiveBudget(o.maxRam, o.offloadDir);
  const result = searchPolicy(o.shape ?? modelShapeOfDescription(o.description), o.workload, profile, budget, { fixed: o.fixed, backend: o.backendFor?.(profile) ?? o.backend, planFits: true });
  return { result, profile, profiled: measured };
}

/** statfs needs an existing path; the offload folder may be created only later, so ask its nearest existing parent. */
function existingAncestor(dir: string): string {
  let probe = dir;
  while (!existsSync(probe) && dirname(probe) !== probe) probe = dirname(probe);
  return probe;
}

