import type { BatchNeed } from '@flexhelm/contract';

/**
 * The RAM a process may use (`--max-ram`) and what a batch needs of it, as the memory plan predicts: `generate` refuses
 * a request that cannot fit even alone (`RequestMemoryError`) and runs rows that fit alone but not together in smaller
 * batches. Set by whoever planned the memory (the session), through `EngineOptions.memory`.
 */
export interface MemoryBudget {
  /** Bytes the process may use. */
  limitBytes: number;
  /** Peak bytes of the process while it runs a batch of `rows` rows shaped by `need` (model and runtime included). */
  needBytes(rows: number, need: BatchNeed): number;
  /** The option that sets the limit, named in messages (default `--max-ram`). */
  option?: string;
}

/**
 * A request that cannot fit the memory budget even as a batch of its own: the message gives its prompt's token count,
 * what it needs, the budget, and how to fix it. Front ends report it as the client's error (HTTP 400, exit 2).
 */
export class RequestMemoryError extends Error {
  override name = 'RequestMemoryError';
  constructor(
    message: string,
    readonly needBytes: number,
    readonly limitBytes: number,
  ) {
    super(message);
  }
}

const GiB = 1024 ** 3;
const gib = (b: number): string => `${(b / GiB).toFixed(2)} GiB`;

/** The longest prompt (≤ `maxPrompt`) a row with `need`'s other settings fits in, 0 when none does. */
function longestFitting(budget: MemoryBudget, need: BatchNeed, maxPrompt: number): number {
  let lo = 0;
  let hi = maxPrompt;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (budget.needBytes(1, { ...need, promptTokens: mid }) <= budget.limitBytes) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/**
 * Throws `RequestMemoryError` when one row of `need` does not fit `budget` (nothing when there is no budget).
 * `what` names the request in the message (`request 3`, `prompt 0`); `maxPositions` bounds the fitting length.
 */
export function checkRequestMemory(budget: MemoryBudget | undefined, need: BatchNeed, what: string, maxPositions: number): void {
  if (!budget) return;
  const bytes = budget.needBytes(1, need);
  if (bytes <= budget.limitBytes) return;
  const option = budget.option ?? '--max-ram';
  const fits = longestFitting(budget, need, Math.max(0, maxPositions - need.newTokens));
  const fix = fits > 0 ? `shorten the prompt to at most ${fits} tokens${need.echo ? ' (or do not echo it)' : ''}, or raise ${option}` : `raise ${option}`;
  throw new RequestMemoryError(
    `${what}: a prompt of ${need.promptTokens} tokens with ${need.newTokens} new tokens needs ${gib(bytes)} of RAM, more than the ${gib(budget.limitBytes)} budget (${option}); ${fix}`,
    bytes,
    budget.limitBytes,
  );
}
