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
  /** Counts per variant (e.g. dtype folder × backend) when a checker runs the file's cases more than once. */
  variants?: VariantCount[];
}

export interface VariantCount {
  label: string;
  passed: number;
  failed: number;
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
  private readonly variants: VariantCount[] = [];

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

  /** Runs the cases of one variant; their counts also get a line of their own. */
  async variant(label: string, body: () => Promise<void>): Promise<void> {
    const [passed, failed] = [this.passed, this.failed];
    try {
      await body();
    } finally {
      this.variants.push({ label, passed: this.passed - passed, failed: this.failed - failed });
    }
  }

  result(): CheckResult {
    return {
      passed: this.passed,
      failed: this.failed,
      failures: this.failures,
      notRun: this.notRunCount,
      notRunReasons: [...this.notRunReasons],
      ...(this.variants.length ? { variants: [...this.variants] } : {}),
    };
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
