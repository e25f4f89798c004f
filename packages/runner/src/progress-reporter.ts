import type { RunEvent } from './run-one.js';

/** The width a redrawn line gets when the terminal does not say (`columns` absent or 0, as some consoles report). */
const FALLBACK_COLUMNS = 80;
/** A run name is never shortened below this while a less detailed line would keep it longer. */
const MIN_NAME = 16;

/** `name` in at most `max` characters: the start and the end kept (scenario and model), an ellipsis between. */
function shortenName(name: string, max: number): string {
  if (name.length <= max) return name;
  if (max <= 1) return max === 1 ? '…' : '';
  const head = Math.ceil((max - 1) / 2);
  return `${name.slice(0, head)}…${name.slice(name.length - (max - 1 - head))}`;
}

/**
 * The line `name` + one of `variants` (most detailed first) in `width` characters: the run name is shortened first, down
 * to {@link MIN_NAME}; then a less detailed variant is tried; the last variant keeps whatever name still fits.
 */
function fitLine(name: string, variants: string[], width: number): string {
  for (const [i, rest] of variants.entries()) {
    const room = width - rest.length;
    const last = i === variants.length - 1;
    if (room >= Math.min(name.length, MIN_NAME) || last) {
      if (room <= 0) return rest.replace(/^: /, '').slice(0, width);
      return `${shortenName(name, room)}${rest}`;
    }
  }
  return '';
}

/** The execute line's variants, most detailed first: counts, rate and ETA are in every one; the bar shrinks, then goes. */
function executeVariants(done: number, total: number, cachedHits: number, tokPerS: number, eta: string): string[] {
  const bar = (n: number) => {
    const filled = total > 0 ? Math.round((done / total) * n) : n;
    return `[${'#'.repeat(filled)}${'.'.repeat(n - filled)}] `;
  };
  const rate = `${tokPerS.toFixed(1)} tok/s`;
  const full = `${done}/${total} requests${cachedHits ? ` (${cachedHits} from cache)` : ''}, ${rate}, ETA ${eta}`;
  const short = `${done}/${total}${cachedHits ? ` (${cachedHits} cached)` : ''} ${rate} ETA ${eta}`;
  return [`: execute ${bar(24)}${full}`, `: execute ${bar(12)}${full}`, `: execute ${full}`, `: ${bar(10)}${short}`, `: ${short}`, `: ${done}/${total} ${Math.round(tokPerS)} tok/s ${eta}`];
}

/**
 * Shows a run's progress: on a terminal, one redrawn line per run (phase, requests done/total, tokens/s, ETA), fitted
 * to the terminal's width by shortening the run name first, so that the counts, rate and ETA stay visible at any width
 * of 40 or more; elsewhere plain log lines at phase changes and every few seconds.
 */
export class ProgressReporter {
  private started = Date.now();
  private lastLine = 0;
  private lastPhase = '';
  private executeStarted = 0;
  /** A redrawn line is on the terminal without its newline yet. */
  private lineOpen = false;

  constructor(
    private readonly out: NodeJS.WritableStream & { isTTY?: boolean; columns?: number },
    private readonly label = '',
  ) {}

  /** Ends the redrawn line, if one is open, so that a message written next (Ctrl-C's) starts on its own line. */
  endLine(): void {
    if (this.lineOpen) this.out.write('\n');
    this.lineOpen = false;
  }

  private write(name: string, variants: string[]): void {
    if (this.out.isTTY) {
      // The last column is left free: writing into it makes some terminals wrap before the next redraw.
      const width = (this.out.columns || FALLBACK_COLUMNS) - 1;
      this.out.write(`\r\x1b[2K${fitLine(`${this.label}${name}`, variants, width)}`);
      this.lineOpen = true;
    } else this.out.write(`${this.label}${name}${variants[0]}\n`);
  }

  event(e: RunEvent): void {
    const now = Date.now();
    if (e.phase !== this.lastPhase) {
      if (this.out.isTTY && this.lastPhase) this.endLine();
      this.lastPhase = e.phase;
      if (e.phase === 'execute') this.executeStarted = now;
      if (e.phase === 'done' || e.phase === 'skipped') {
        const took = `(${((now - this.started) / 1000).toFixed(1)} s)`;
        const what = e.phase === 'done' ? 'done' : 'skipped';
        this.write(e.runName, [`: ${what} ${e.message ?? ''} ${took}`, `: ${what} ${took}`]);
        if (this.out.isTTY) this.endLine();
        return;
      }
    } else if (!this.out.isTTY && now - this.lastLine < 5000 && !(e.progress && (e.progress.done === e.progress.total || e.progress.cachedHits === e.progress.done))) {
      // Plain logs: phase changes, the cache's contribution, the end of execution, and otherwise every 5 s.
      return;
    }
    this.lastLine = now;
    if (e.phase === 'execute' && e.progress) {
      const { done, total, generatedTokens, cachedHits } = e.progress;
      const seconds = Math.max(1e-3, (now - this.executeStarted) / 1000);
      const fresh = done - cachedHits;
      const rate = fresh > 0 ? fresh / seconds : 0;
      const eta = rate > 0 ? `${Math.round((total - done) / rate)} s` : '?';
      this.write(e.runName, executeVariants(done, total, cachedHits, generatedTokens / seconds, eta));
      return;
    }
    this.write(e.runName, [`: ${e.phase}${e.message ? ` — ${e.message}` : ''}`, `: ${e.phase}`]);
  }
}
