import { generate, type GenerationRequest, type GenerationResult, type OptEngine } from '@flexhelm/engine';
import type { EngineGate } from './engine-gate.js';

export interface BatcherOptions {
  /** Rows (prompt × n) per engine call. */
  maxBatchSize: number;
  /** How long the first request of a batch waits for company before the batch starts. */
  windowMs: number;
  decode: (ids: number[]) => string;
}

interface Pending {
  request: GenerationRequest;
  rows: number;
  resolve: (r: GenerationResult) => void;
  reject: (e: unknown) => void;
}

export interface BatcherStats {
  batches: number;
  requests: number;
  rows: number;
}

/**
 * Gathers generation requests from concurrent clients into engine batches. A batch starts when it is full or when
 * its first request has waited `windowMs`; while the engine is busy, arrivals pile up and ride in the next batch,
 * so batches grow with load.
 */
export class CompletionBatcher {
  private pending: Pending[] = [];
  private timer: NodeJS.Timeout | undefined;
  private draining = false;
  readonly stats: BatcherStats = { batches: 0, requests: 0, rows: 0 };

  constructor(
    private readonly engine: OptEngine,
    private readonly gate: EngineGate,
    private readonly options: BatcherOptions,
  ) {}

  /** Requests waiting or in the running batch. */
  get inFlight(): number {
    return this.pending.length + (this.draining ? 1 : 0);
  }

  submit(request: GenerationRequest): Promise<GenerationResult> {
    return new Promise((resolve, reject) => {
      this.pending.push({ request, rows: request.n ?? 1, resolve, reject });
      if (this.draining) return;
      if (this.pendingRows() >= this.options.maxBatchSize) {
        clearTimeout(this.timer);
        this.timer = undefined;
        void this.drain();
      } else if (!this.timer) {
        this.timer = setTimeout(() => {
          this.timer = undefined;
          void this.drain();
        }, this.options.windowMs);
      }
    });
  }

  private pendingRows(): number {
    return this.pending.reduce((s, p) => s + p.rows, 0);
  }

  /** Takes whole requests up to maxBatchSize rows (at least one request, even if it alone is larger). */
  private takeBatch(): Pending[] {
    let rows = 0;
    let count = 0;
    while (count < this.pending.length && (count === 0 || rows + this.pending[count]!.rows <= this.options.maxBatchSize)) {
      rows += this.pending[count]!.rows;
      count++;
    }
    return this.pending.splice(0, count);
  }

  private async drain(): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    try {
      while (this.pending.length > 0) {
        const batch = this.takeBatch();
        this.stats.batches++;
        this.stats.requests += batch.length;
        this.stats.rows += batch.reduce((s, p) => s + p.rows, 0);
        try {
          const results = await this.gate.run(() =>
            generate(
              this.engine,
              batch.map((p) => p.request),
              { decode: this.options.decode, maxBatchSize: this.options.maxBatchSize },
            ),
          );
          batch.forEach((p, i) => { p.resolve(results[i]!); }); // generate answers each request, in order
        } catch (err) {
          for (const p of batch) p.reject(err);
        }
      }
    } finally {
      this.draining = false;
    }
  }

  /** Resolves once every submitted request has its answer. */
  async idle(): Promise<void> {
    while (this.pending.length > 0 || this.draining || this.timer) await new Promise((r) => setTimeout(r, 5));
  }
}
