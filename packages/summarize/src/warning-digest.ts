/**
 * The kinds of HELM `hlog("WARNING: …")` line summarize writes. A suite of many runs repeats the same few kinds many
 * times (one per run × table column), so a command prints a digest and keeps the lines for whoever asks.
 */
export type SummarizeWarningKind =
  | 'run-skipped'
  | 'metric-undefined'
  | 'group-undefined'
  | 'stat-missing'
  | 'exact-match-fallback'
  | 'empty-table'
  | 'several-runs-per-row';

/** Receives each warning: HELM's text, and its kind (callers that want only the text may ignore it). */
export type SummarizeWarn = (message: string, kind: SummarizeWarningKind) => void;

const KIND_TEXT: Record<SummarizeWarningKind, string> = {
  'run-skipped': 'run folders skipped',
  'metric-undefined': 'metrics not in schema.yaml',
  'group-undefined': 'run groups not in schema.yaml',
  'stat-missing': 'table cells whose run lacks the stat',
  'exact-match-fallback': 'no quasi_exact_match, exact_match used',
  'empty-table': 'empty tables',
  'several-runs-per-row': 'table rows over several runs',
};

/** Collects summarize's warnings; `line()` is one line with the count per kind, `messages` every line as HELM wrote it. */
export class WarningDigest {
  readonly messages: string[] = [];
  readonly counts = new Map<SummarizeWarningKind, number>();

  /** Pass as `summarizeSuite({ warn: digest.add })`. */
  readonly add: SummarizeWarn = (message, kind) => {
    this.messages.push(message);
    this.counts.set(kind, (this.counts.get(kind) ?? 0) + 1);
  };

  /** `16 HELM warnings: 12 table cells whose run lacks the stat, 4 no quasi_exact_match, exact_match used` (undefined when none). */
  line(): string | undefined {
    if (this.messages.length === 0) return undefined;
    const parts = [...this.counts].sort((a, b) => b[1] - a[1]).map(([kind, n]) => `${n} ${KIND_TEXT[kind]}`);
    return `${this.messages.length} HELM warning${this.messages.length === 1 ? '' : 's'}: ${parts.join(', ')}`;
  }
}
