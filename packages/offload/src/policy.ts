import { accessSync, constants, existsSync, mkdirSync, statSync } from 'node:fs';
import { z } from 'zod';

/** FlexLLMGen's group-wise quantisation settings (`CompressionConfig`). */
export interface CompressionConfig {
  numBits: number;
  groupSize: number;
  groupDim: number;
  symmetric: boolean;
}

/** FlexLLMGen's defaults: weights grouped along output rows, KV cache along head_dim. */
export const WEIGHT_COMPRESSION: CompressionConfig = { numBits: 4, groupSize: 64, groupDim: 0, symmetric: false };
export const CACHE_COMPRESSION: CompressionConfig = { numBits: 4, groupSize: 64, groupDim: 2, symmetric: false };

/**
 * FlexLLMGen's `Policy`, with its names and meaning, less the switches this engine has one behaviour for (see
 * `FIXED_SWITCHES`). The six percents place weights, KV cache and activations on
 * the compute device ("gpu": the compute backend's working set) and host memory ("cpu"); the rest of each goes to
 * disk. On a machine without a GPU the compute device is the CPU backend's ready-to-use form (fp32 or pre-packed).
 */
export interface Policy {
  gpuBatchSize: number;
  numGpuBatches: number;
  wGpuPercent: number;
  wCpuPercent: number;
  cacheGpuPercent: number;
  cacheCpuPercent: number;
  actGpuPercent: number;
  actCpuPercent: number;
  compressWeight: boolean;
  compWeightConfig: CompressionConfig;
  compressCache: boolean;
  compCacheConfig: CompressionConfig;
}

const percent = (what: string) =>
  z
    .number({ error: `${what} must be a number from 0 to 100` })
    .min(0, `${what} must be at least 0`)
    .max(100, `${what} must be at most 100`);

const compressionSchema = z.object({
  numBits: z.number().refine((b): boolean => b === 4, 'only 4-bit compression is implemented (FlexLLMGen packs two 4-bit codes per byte)'),
  groupSize: z.number().int().positive().refine((g) => g % 2 === 0, 'the group size must be even (codes are packed in pairs)'),
  groupDim: z.number().int().min(0),
  symmetric: z.boolean().refine((s): boolean => !s, 'only asymmetric (min/max) quantisation is implemented, as in FlexLLMGen'),
});

/**
 * FlexLLMGen's switches this engine computes one way only: the value it computes with, and why another is refused.
 * A policy may still name them (FlexLLMGen's command lines and JSON do), but only with that value: accepting another
 * and computing the same would be a silent lie.
 */
const FIXED_SWITCHES = {
  overlap: { value: true, refusal: 'false is not implemented: the engine always loads the next streamed unit while the current one computes (FlexLLMGen\'s overlapped loops); remove it' },
  sepLayer: { value: true, refusal: 'false is not implemented: attention and MLP are always separate streamed units (FlexLLMGen\'s default); remove it' },
  pinWeight: { value: true, refusal: 'false is not implemented: host-tier weights are always allocated pinned (mlock\'d where RLIMIT_MEMLOCK allows), which on a CPU-only host costs no second copy; remove it' },
  cpuCacheCompute: {
    value: false,
    refusal: 'true (--cpu-cache-compute) is not implemented: there is no GPU, attention always runs on the CPU on the cache loaded into the compute form; remove it',
  },
  attnSparsity: { value: 1, refusal: 'values below 1 (top-k sparse attention) are not implemented: attention is always dense; use 1 or remove it' },
} as const;

function fixedSwitch(key: keyof typeof FIXED_SWITCHES) {
  const { value, refusal } = FIXED_SWITCHES[key];
  return z.union([z.boolean(), z.number()]).optional().refine((v) => v === undefined || v === value, refusal);
}

/** The zod schema of a policy; `parsePolicy` adds FlexLLMGen's cross-field rules with explanations. */
export const policySchema = z
  .object({
    gpuBatchSize: z.number().int('the GPU batch size must be a whole number').min(1, 'the GPU batch size must be at least 1'),
    numGpuBatches: z.number().int('the number of GPU batches must be a whole number').min(1, 'the number of GPU batches must be at least 1'),
    wGpuPercent: percent('the weights’ compute-device percent'),
    wCpuPercent: percent('the weights’ host-memory percent'),
    cacheGpuPercent: percent('the KV cache’s compute-device percent'),
    cacheCpuPercent: percent('the KV cache’s host-memory percent'),
    actGpuPercent: percent('the activations’ compute-device percent'),
    actCpuPercent: percent('the activations’ host-memory percent'),
    overlap: fixedSwitch('overlap'),
    sepLayer: fixedSwitch('sepLayer'),
    pinWeight: fixedSwitch('pinWeight'),
    cpuCacheCompute: fixedSwitch('cpuCacheCompute'),
    attnSparsity: fixedSwitch('attnSparsity'),
    compressWeight: z.boolean().default(false),
    compWeightConfig: compressionSchema.default(WEIGHT_COMPRESSION),
    compressCache: z.boolean().default(false),
    compCacheConfig: compressionSchema.default(CACHE_COMPRESSION),
  })
  .superRefine((p, ctx) => {
    const pairs: [string, number, number][] = [
      ['weights', p.wGpuPercent, p.wCpuPercent],
      ['KV cache', p.cacheGpuPercent, p.cacheCpuPercent],
      ['activations', p.actGpuPercent, p.actCpuPercent],
    ];
    for (const [what, g, c] of pairs) {
      if (g + c > 100) {
        ctx.addIssue({
          code: 'custom',
          message: `the ${what}' compute-device and host percents add up to ${g + c}, over 100 (the rest, 100 − ${g} − ${c}, would go to disk); lower one of them`,
        });
      }
    }
    const act = [p.actGpuPercent, p.actCpuPercent, 100 - p.actGpuPercent - p.actCpuPercent];
    if (!act.some((x) => x === 100)) {
      ctx.addIssue({
        code: 'custom',
        message: `activations must live 100% on one tier (as in FlexLLMGen), got ${act[0]}/${act[1]}/${act[2]} (compute/host/disk); use 100 0, 0 100 or 0 0`,
      });
    }
    const cacheMixed = ![p.cacheGpuPercent, p.cacheCpuPercent, 100 - p.cacheGpuPercent - p.cacheCpuPercent].some((x) => x === 100);
    if (p.compressCache && cacheMixed) {
      ctx.addIssue({ code: 'custom', message: 'KV-cache compression needs the whole cache on one tier (FlexLLMGen asserts this); set the cache percents to 100 0, 0 100 or 0 0' });
    }
  });

export type PolicyInput = z.input<typeof policySchema>;

/** A policy validation failure: every problem, each saying what to change. */
export class PolicyError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid offloading policy:\n  - ${problems.join('\n  - ')}`);
    this.name = 'PolicyError';
  }
}

/** Validates a policy before any work starts. */
export function parsePolicy(input: PolicyInput): Policy {
  const r = policySchema.safeParse(input);
  if (!r.success) throw new PolicyError(r.error.issues.map((i) => (i.path.length ? `${i.path.join('.')}: ${i.message}` : i.message)));
  return r.data;
}

/**
 * FlexLLMGen's `--percent wg wc cg cc hg hc` (six numbers) into policy fields. Accepts numbers or strings as a
 * command line gives them.
 */
export function percentsFromArgs(values: readonly (string | number)[]): Pick<Policy, 'wGpuPercent' | 'wCpuPercent' | 'cacheGpuPercent' | 'cacheCpuPercent' | 'actGpuPercent' | 'actCpuPercent'> {
  if (values.length !== 6) {
    throw new PolicyError([
      `--percent takes six numbers (weights on compute device, weights on host, cache on compute device, cache on host, activations on compute device, activations on host), got ${values.length}`,
    ]);
  }
  const nums = values.map((v, i) => {
    const n = typeof v === 'number' ? v : Number(v);
    if (typeof v === 'string' && (v.trim() === '' || !Number.isFinite(n))) throw new PolicyError([`--percent value ${i + 1} (${JSON.stringify(v)}) is not a number`]);
    return n;
  });
  const [wGpuPercent, wCpuPercent, cacheGpuPercent, cacheCpuPercent, actGpuPercent, actCpuPercent] = nums as [number, number, number, number, number, number]; // length checked above
  return { wGpuPercent, wCpuPercent, cacheGpuPercent, cacheCpuPercent, actGpuPercent, actCpuPercent };
}

/** The disk share of a percent pair. */
export function diskPercent(gpu: number, cpu: number): number {
  return 100 - gpu - cpu;
}

/** Whether the policy puts anything on disk. */
export function usesDisk(p: Policy): boolean {
  return diskPercent(p.wGpuPercent, p.wCpuPercent) > 0 || diskPercent(p.cacheGpuPercent, p.cacheCpuPercent) > 0 || diskPercent(p.actGpuPercent, p.actCpuPercent) > 0;
}

/**
 * Checks that the offload directory can be used (created if missing, writable) when the policy needs disk.
 * Done before any work starts, so a bad folder is an error up front, not halfway through a run.
 */
export function checkOffloadDir(p: Policy, offloadDir: string): void {
  if (!usesDisk(p)) return;
  try {
    if (!existsSync(offloadDir)) mkdirSync(offloadDir, { recursive: true });
    accessSync(offloadDir, constants.W_OK | constants.R_OK);
  } catch (err) {
    throw new PolicyError([
      `the policy puts data on disk but the offload directory ${offloadDir} is not usable (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); pass --offload-dir with a writable folder`,
    ]);
  }
  // A writable file passes the access check, but the engine's scratch folder cannot be made inside it.
  if (!statSync(offloadDir).isDirectory()) {
    throw new PolicyError([`the policy puts data on disk but the offload directory ${offloadDir} is not usable (it is a file, not a folder); pass --offload-dir with a writable folder`]);
  }
}
