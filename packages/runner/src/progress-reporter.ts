import type { RunEvent } from './run-one.js';

/**
 * Shows a run's progress: on a terminal, one redrawn line per run (phase, requests done/total, tokens/s, ETA);
 * elsewhere plain log lines at phase changes and every few seconds.
 */
export class ProgressReporter {
  private started = Date.now();
  private lastLine = 0;
  private lastPhase = '';
  private executeStarted = 0;

  constructor(
    private readonly out: NodeJS.WritableStream & { isTTY?: boolean; columns?: number },
    private readonly label = '',
  ) {}

  private write(text: string): void {
    if (this.out.isTTY) {
      const width = Math.max(20, (this.out.columns ?? 100) - 1);
      this.out.write(`\r\x1b[2K${text.slice(0, width)}`);
    } else this.out.write(`${text}\n`);
  }

  event(e: RunEvent): void {
    const now = Date.now();
    if (e.phase !== this.lastPhase) {
      if (this.out.isTTY && this.lastPhase) this.out.write('\n');
      this.lastPhase = e.phase;
      if (e.phase === 'execute') this.executeStarted = now;
      if (e.phase === 'done' || e.phase === 'skipped') {
        this.write(`${this.label}${e.runName}: ${e.phase === 'done' ? 'done' : 'skipped'} ${e.message ?? ''} (${((now - this.started) / 1000).toFixed(1)} s)`);
        if (this.out.isTTY) this.out.write('\n');
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
      const width = 24;
      const filled = total > 0 ? Math.round((done / total) * width) : width;
      const bar = `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`;
      this.write(
        `${this.label}${e.runName}: execute ${bar} ${done}/${total} requests` +
          `${cachedHits ? ` (${cachedHits} from cache)` : ''}, ${(generatedTokens / seconds).toFixed(1)} tok/s, ETA ${eta}`,
      );
      return;
    }
    this.write(`${this.label}${e.runName}: ${e.phase}${e.message ? ` — ${e.message}` : ''}`);
  }
}
