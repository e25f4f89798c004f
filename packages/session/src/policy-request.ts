import { totalmem } from 'node:os';
import { checkOffloadDir, modelShapeOfDescription, parsePolicy, percentsFromArgs, PolicyError, type Policy } from '@flexhelm/offload';
import { autoPolicy, describeSearch, NoPolicyFitsError, ProfilingError, type AutoPolicyOptions, type MachineProfile } from '@flexhelm/policy-search';
import { costPathFor, type ComputeDtype } from './decide-backend.js';

/** A bad option value (the message names the flag and what it takes): the caller reports it as a usage error. */
export class OptionError extends Error {
  override name = 'OptionError';
}

/** A problem with a folder or the machine rather than the command line: one line, no usage hint. */
export class SessionInputError extends Error {
  override name = 'SessionInputError';
}

/**
 * The policy as asked for, in FlexLLMGen's flags, as plain values: `percent` is six numbers separated by blanks or
 * `auto`, the batch sizes are integers or `auto`; absent means the default.
 */
export interface PolicyRequest {
  percent?: string;
  gpuBatchSize?: string;
  numGpuBatches?: string;
  /** FlexLLMGen's default and this engine's only behaviour (host-tier weights are mlock'd); false is refused. */
  pinWeight?: boolean;
  /** Refused when true: without a GPU attention always runs on the CPU (FlexLLMGen's switch is N/A, spec §13). */
  cpuCacheCompute?: boolean;
  compressWeight?: boolean;
  compressCache?: boolean;
}

/** Which policy choices the search makes. */
export interface AutoParts {
  percent: boolean;
  gpuBatchSize: boolean;
  numGpuBatches: boolean;
}

const GiB = 1024 ** 3;

/** An integer option value, or undefined when absent. */
export function integerValue(value: string | number | undefined, flag: string, min: number): number | undefined {
  if (value === undefined) return undefined;
  const text = String(value).trim();
  if (!/^[+-]?\d+$/.test(text) || Number(text) < min || !Number.isSafeInteger(Number(text))) {
    throw new OptionError(`--${flag} must be an integer ≥ ${min}, got '${String(value)}'`);
  }
  return Number(text);
}

/** `--max-ram` GiB in bytes (default 80% of this machine's memory); a bad value is one line (SessionInputError), as before. */
export function maxRamBytes(maxRamGiB: string | number | undefined): number {
  if (maxRamGiB === undefined) return totalmem() * 0.8;
  const n = Number(maxRamGiB);
  if (String(maxRamGiB).trim() === '' || !Number.isFinite(n) || n <= 0) throw new SessionInputError(`--max-ram must be a positive number of GiB (e.g. --max-ram 16), got '${String(maxRamGiB)}'`);
  return n * GiB;
}

/** The offload policy of a request without `auto` parts (defaults: FlexLLMGen's); a bad value is an OptionError. */
export function policyFromRequest(r: PolicyRequest): Policy {
  // Refused in one line naming the flag (the policy's own check says the same, under its field name).
  if (r.cpuCacheCompute) throw new OptionError('--cpu-cache-compute is not implemented: there is no GPU, so attention always runs on the CPU; leave the flag out');
  if (r.pinWeight === false) throw new OptionError('--pin-weight false is not implemented: host-tier weights are always pinned (mlock); leave the flag out');
  try {
    return parsePolicy({
      gpuBatchSize: integerValue(r.gpuBatchSize, 'gpu-batch-size', 1) ?? 4,
      numGpuBatches: integerValue(r.numGpuBatches, 'num-gpu-batches', 1) ?? 1,
      ...percentsFromArgs(r.percent === undefined ? [100, 0, 100, 0, 100, 0] : r.percent.trim().split(/\s+/)),
      compressWeight: Boolean(r.compressWeight),
      compressCache: Boolean(r.compressCache),
    });
  } catch (err) {
    if (err instanceof PolicyError) throw new OptionError(err.message);
    throw err;
  }
}

const isAuto = (v: string | undefined) => v !== undefined && v.trim() === 'auto';

/**
 * The `auto` parts of a request, or undefined when it has none. `percentDefault` is what an absent --percent means:
 * `auto` for `flexhelm run`, every weight resident for a worker or the server.
 */
export function autoParts(r: PolicyRequest, percentDefault: 'auto' | 'resident' = 'auto'): AutoParts | undefined {
  const percent = isAuto(r.percent) || (r.percent === undefined && percentDefault === 'auto');
  // With the placement searched, unset batch sizes are searched too; with fixed percents they keep their defaults.
  const gpuBatchSize = isAuto(r.gpuBatchSize) || (percent && r.gpuBatchSize === undefined);
  const numGpuBatches = isAuto(r.numGpuBatches) || (percent && r.numGpuBatches === undefined);
  return percent || gpuBatchSize || numGpuBatches ? { percent, gpuBatchSize, numGpuBatches } : undefined;
}

type Choices = Pick<Policy, 'gpuBatchSize' | 'numGpuBatches' | 'wGpuPercent' | 'wCpuPercent' | 'cacheGpuPercent' | 'cacheCpuPercent' | 'actGpuPercent' | 'actCpuPercent' | 'compressWeight'>;
/** Stand-ins for the `auto` parts while the other values are checked (FlexLLMGen's defaults; what `--queue` uses). */
const PLACEHOLDER: Choices = { gpuBatchSize: 4, numGpuBatches: 1, wGpuPercent: 100, wCpuPercent: 0, cacheGpuPercent: 100, cacheCpuPercent: 0, actGpuPercent: 100, actCpuPercent: 0, compressWeight: false };

/** The request with `p` written in place of the `auto` parts. */
export function withChoices(r: PolicyRequest, auto: AutoParts, p: Choices): PolicyRequest {
  const out = { ...r };
  if (auto.percent) {
    out.percent = [p.wGpuPercent, p.wCpuPercent, p.cacheGpuPercent, p.cacheCpuPercent, p.actGpuPercent, p.actCpuPercent].join(' ');
    if (r.compressWeight === undefined) out.compressWeight = p.compressWeight;
  }
  if (auto.gpuBatchSize) out.gpuBatchSize = String(p.gpuBatchSize);
  if (auto.numGpuBatches) out.numGpuBatches = String(p.numGpuBatches);
  return out;
}

/** The request with the `auto` parts replaced by stand-ins, so every other problem is reported before any work starts. */
export function withPlaceholders(r: PolicyRequest, auto: AutoParts): PolicyRequest {
  return withChoices(r, auto, PLACEHOLDER);
}

/** The choices the user fixed while others are `auto` (given numbers are kept; the search fills the rest). */
export function fixedChoices(r: PolicyRequest, auto: AutoParts): { gpuBatchSize?: number; numGpuBatches?: number; wGpuPercent?: number; wCpuPercent?: number; compressWeight?: boolean } {
  const fixed: ReturnType<typeof fixedChoices> = {};
  if (!auto.gpuBatchSize) fixed.gpuBatchSize = integerValue(r.gpuBatchSize, 'gpu-batch-size', 1) ?? 4;
  if (!auto.numGpuBatches) fixed.numGpuBatches = integerValue(r.numGpuBatches, 'num-gpu-batches', 1) ?? 1;
  if (!auto.percent) {
    try {
      const p = percentsFromArgs(String(r.percent).trim().split(/\s+/));
      fixed.wGpuPercent = p.wGpuPercent;
      fixed.wCpuPercent = p.wCpuPercent;
    } catch (err) {
      if (err instanceof PolicyError) throw new OptionError(err.message);
      throw err;
    }
  }
  // 4-bit weights change the model's outputs: an evaluation never turns them on by itself, only --compress-weight does.
  fixed.compressWeight = Boolean(r.compressWeight);
  return fixed;
}

/** What the search needs (`autoPolicy`'s model, workload, folders and effective RAM budget), with the dtype asked for. */
export interface SearchedPolicyOptions extends Pick<AutoPolicyOptions, 'description' | 'shape' | 'workload' | 'dataDir' | 'offloadDir' | 'maxRam'> {
  computeDtype: ComputeDtype;
  log: (line: string) => void;
}

/** The `auto` parts of the policy searched for the workload (profiling this machine on first use); logs the choice and the runner-up. */
export async function searchedPolicy(r: PolicyRequest, auto: AutoParts, o: SearchedPolicyOptions): Promise<{ policy: Policy; profile: MachineProfile }> {
  try {
    const chosen = await autoPolicy({
      description: o.description, ...(o.shape ? { shape: o.shape } : {}), workload: o.workload, dataDir: o.dataDir, offloadDir: o.offloadDir, maxRam: o.maxRam,
      backendFor: (p) => costPathFor(o.computeDtype, p, undefined, o.shape ?? modelShapeOfDescription(o.description)),
      fixed: fixedChoices(r, auto), log: o.log,
    });
    for (const line of describeSearch(chosen.result)) o.log(line);
    const policy = policyFromRequest(withChoices(r, auto, chosen.result.best.policy));
    checkOffloadDir(policy, o.offloadDir);
    return { policy, profile: chosen.profile };
  } catch (err) {
    if (err instanceof PolicyError && err.problems.length === 1) throw new SessionInputError(err.problems[0]!);
    if (err instanceof NoPolicyFitsError || err instanceof PolicyError) throw new OptionError(err.message);
    if (err instanceof ProfilingError) throw new SessionInputError(err.message);
    throw err;
  }
}
