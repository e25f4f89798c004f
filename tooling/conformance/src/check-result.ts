/** The outcome of checking one golden file: every case in it counted, failures explained. */
export interface CheckResult {
  passed: number;
  failed: number;
  /** One line per failed case: which case and what differed. */
  failures: string[];
  /**
   * Cases that could not be run here at all, with why and how to run them (e.g. they need data flexhelm may not ship
   * and this machine cannot download). Reported on their own line; never counted as passed.
   */
  notRun?: number;
  notRunReasons?: string[];
  /** Summary lines printed under the file's line (e.g. a second backend's worst error). */
  notes?: string[];
}

/** A checker for one kind of golden file: reads the file at `path` (and may read files beside it). */
export type Checker = (path: string) => Promise<CheckResult>;

/** Accumulates case outcomes; `check` records an exception as a failure rather than aborting the file. */
export class CaseRecorder {
  passed = 0;
  failed = 0;
  failures: string[] = [];
  notRunCount = 0;
  notRunReasons = new Set<string>();
  notes: string[] = [];

  pass(): void {
    this.passed++;
  }

  fail(caseName: string, why: string): void {
    this.failed++;
    this.failures.push(`${caseName}: ${why}`);
  }

  /** Runs one case: `body` returns nothing or a mismatch description; throwing counts as a failure too. */
  async check(caseName: string, body: () => string | undefined | Promise<string | undefined>): Promise<void> {
    try {
      const problem = await body();
      if (problem) this.fail(caseName, problem);
      else this.pass();
    } catch (err) {
      this.fail(caseName, `threw ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`);
    }
  }

  /** A case that cannot run on this machine; `reason` says what is missing and how to provide it. */
  notRun(reason: string): void {
    this.notRunCount++;
    this.notRunReasons.add(reason);
  }

  /** A summary line for the file's report. */
  note(line: string): void {
    this.notes.push(line);
  }

  result(): CheckResult {
    return { passed: this.passed, failed: this.failed, failures: this.failures, notRun: this.notRunCount, notRunReasons: [...this.notRunReasons], notes: this.notes };
  }
}

/** First difference between two strings, for failure messages. */
export function describeDifference(expected: string, actual: string): string | undefined {
  if (expected === actual) return undefined;
  let i = 0;
  while (i < expected.length && i < actual.length && expected[i] === actual[i]) i++;
  const ctx = (s: string) => JSON.stringify(s.slice(Math.max(0, i - 40), i + 40));
  return `differs at char ${i}: expected …${ctx(expected)}…, got …${ctx(actual)}…`;
}
