/**
 * Opt-in phase timings (`FLEXHELM_TIMINGS=1`): one stderr line per phase of opening and running a model,
 * `timing: <phase> <ms> ms (at <s> s)`, where "at" counts from the process start. Off by default: the lines are for
 * benchmarks and for finding where a slow start goes, not for users.
 */
export function timingsEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  const v = env.FLEXHELM_TIMINGS;
  return v !== undefined && v !== '' && v !== '0';
}

/** Formats one timing line (no newline); `detail` is appended in parentheses. */
export function timingLine(phase: string, ms: number, sinceStartMs: number, detail?: string): string {
  return `timing: ${phase} ${ms.toFixed(0)} ms (at ${(sinceStartMs / 1000).toFixed(2)} s${detail ? `; ${detail}` : ''})`;
}

/** Writes a phase's line to stderr when timings are on. */
export function reportPhase(phase: string, ms: number, detail?: string): void {
  if (!timingsEnabled()) return;
  process.stderr.write(`${timingLine(phase, ms, performance.now(), detail)}\n`);
}

/** Runs `f` and reports its wall time as `phase` (also when it throws: a slow failure is worth seeing too). */
export async function timePhase<T>(phase: string, f: () => Promise<T> | T): Promise<T> {
  const t0 = performance.now();
  try {
    return await f();
  } finally {
    reportPhase(phase, performance.now() - t0);
  }
}

/**
 * Sums of repeated sub-phases (e.g. every layer's read and pack), reported together at the end: a line per layer
 * would bury the totals.
 */
export class PhaseTotals {
  private readonly totals = new Map<string, number>();

  add(phase: string, ms: number): void {
    this.totals.set(phase, (this.totals.get(phase) ?? 0) + ms);
  }

  /** Times `f` into `phase`. */
  async time<T>(phase: string, f: () => Promise<T> | T): Promise<T> {
    const t0 = performance.now();
    try {
      return await f();
    } finally {
      this.add(phase, performance.now() - t0);
    }
  }

  get(phase: string): number {
    return this.totals.get(phase) ?? 0;
  }

  /** One `reportPhase` line per phase, in the order first added. */
  report(detail?: string): void {
    for (const [phase, ms] of this.totals) reportPhase(phase, ms, detail);
  }
}
