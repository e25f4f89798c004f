import { logSumExp } from '@flexhelm/engine';

/** Float32-compute tolerances of opt/check.md and llama/check.md (absolute). */
export const LOGIT_TOL = 1e-4;
export const LOGPROB_TOL = 1e-4;

/** One stored logits record of a golden.json (`prompt_logits`, `step_logits`). */
export interface LogitRecord {
  argmax: number;
  top5_ids: number[];
  top5_logits: number[];
  logsumexp: number;
  top1_margin: number;
  logits?: number[];
  fixed_logits?: number[];
}

/** Largest |expected − actual| (actual indexed by `ids` when given) and where. */
/** The `greedy` part of a golden.json (OPT and Llama-family files share it): generated ids, logprobs, step logits. */
export interface GreedyRecord {
  max_new_tokens: number;
  generated_ids: number[][];
  sequences: number[][];
  token_logprobs: number[][];
  sum_logprob: number[];
  step_logits: LogitRecord[][];
}

export function maxDiff(expected: number[], actual: ArrayLike<number>, ids?: number[]): { diff: number; at: number } {
  let diff = 0;
  let at = -1;
  expected.forEach((e, i) => {
    const d = Math.abs(e - actual[ids ? ids[i]! : i]!);
    if (!(d <= diff)) {
      diff = d;
      at = ids ? ids[i]! : i;
    }
  });
  return { diff, at };
}

/**
 * Compares one stored logits record with computed logits; returns the mismatches, or undefined. `tol` is the absolute
 * tolerance (float32 compute by default; llama/check.md's bf16 row is 0.1); argmax must match where the margin exceeds 2·tol.
 */
export function compareRecord(rec: LogitRecord, logits: Float32Array, fixedTokenIds?: number[], tol = LOGIT_TOL): string | undefined {
  const problems: string[] = [];
  if (rec.logits) {
    if (rec.logits.length !== logits.length) return `vocab size ${logits.length}, golden has ${rec.logits.length}`;
    const { diff, at } = maxDiff(rec.logits, logits);
    if (diff > tol) problems.push(`logit of token ${at} off by ${diff.toExponential(2)} (golden ${rec.logits[at]}, got ${logits[at]})`);
  }
  if (rec.fixed_logits && fixedTokenIds) {
    const { diff, at } = maxDiff(rec.fixed_logits, logits, fixedTokenIds);
    if (diff > tol) problems.push(`fixed logit of token ${at} off by ${diff.toExponential(2)}`);
  }
  const top = maxDiff(rec.top5_logits, logits, rec.top5_ids);
  if (top.diff > tol) problems.push(`top-5 logit of token ${top.at} off by ${top.diff.toExponential(2)}`);
  const lse = logSumExp(logits);
  if (!(Math.abs(lse - rec.logsumexp) <= tol)) problems.push(`logsumexp ${lse} vs golden ${rec.logsumexp}`);
  if (rec.top1_margin > 2 * tol) {
    let best = 0;
    for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[best]!) best = i;
    if (best !== rec.argmax) problems.push(`argmax ${best}, golden ${rec.argmax} (margin ${rec.top1_margin})`);
  }
  return problems.length ? problems.join('; ') : undefined;
}
