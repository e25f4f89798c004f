import { generate, type Completion, type GenerationRequest, type GenerationResult, type Engine, type ScoredToken, type StreamedRow } from '@flexhelm/engine';
import { ClientAbortError } from './client-abort-error.js';
import type { EngineGate } from './engine-gate.js';

export interface BatcherOptions {
  /** Rows (prompt × n) per engine call. */
  maxBatchSize: number;
  /** How long the first row of a batch waits for company before the batch starts. */
  windowMs: number;
  decode: (ids: number[]) => string;
}

export interface SubmitOptions {
  /** Aborting drops the rows that have not started and rejects with a `ClientAbortError`. */
  signal?: AbortSignal;
  /** Called as each completion (row) finishes, before the whole submission resolves. */
  onCompletion?: (request: number, completion: number, result: Completion) => void;
  /**
   * Called with each token of a row as the engine produces it (`promptTokens`: the scored prompt when echoing). Once
   * the request is aborted its running rows are cancelled at the next decode step.
   */
  onTokens?: (request: number, completion: number, tokens: ScoredToken[], promptTokens?: readonly ScoredToken[]) => void;
}

/** A row: completion `completion` of generation request `request` of a submission. */
interface RowRef {
  request: number;
  completion: number;
}

/** One client request's rows (all its prompts × n): taken one at a time, round-robin with the other submissions'. */
interface Pending {
  requests: GenerationRequest[];
  rows: RowRef[];
  /** Next row not yet handed to the engine. */
  next: number;
  finished: number;
  results: GenerationResult[];
  settled: boolean;
  options: SubmitOptions;
  resolve: (r: GenerationResult[]) => void;
  reject: (e: unknown) => void;
  detach: () => void;
}

export interface BatcherStats {
  batches: number;
  requests: number;
  /** Rows handed to the engine (rows of an aborted request that never started are not counted). */
  rows: number;
  /** Tokens the engine generated for these rows (a cancelled row's count stops where it was cancelled). */
  tokens: number;
}

/**
 * Gathers rows (prompt × n) from concurrent requests into engine batches. Rows, not requests, are scheduled: each
 * batch takes one row from each waiting request in turn (round-robin) until it is full, so a small request that
 * arrives while a large one runs rides in the next batch, and a large request yields the engine between batches.
 * A batch starts when it is full or when its first row has waited `windowMs`; while the engine is busy, arrivals
 * pile up and ride in the next batch, so batches grow with load.
 */
export class CompletionBatcher {
  /** Requests with rows not yet started, in round-robin order. */
  private queue: Pending[] = [];
  /** Requests not settled yet (queued or with rows in the engine). */
  private open = new Set<Pending>();
  private timer: NodeJS.Timeout | undefined;
  private draining = false;
  readonly stats: BatcherStats = { batches: 0, requests: 0, rows: 0, tokens: 0 };

  constructor(
    private readonly engine: Engine,
    private readonly gate: EngineGate,
    private readonly options: BatcherOptions,
  ) {}

  /** Requests waiting or with rows in the running batch. */
  get inFlight(): number {
    return this.open.size;
  }

  /** Rows waiting for the engine. */
  get queuedRows(): number {
    return this.queue.reduce((s, p) => s + p.rows.length - p.next, 0);
  }

  /**
   * Generates `request` row by row; completion i samples with seed `seed + i`, as `generate` does for one request
   * with `n` completions, so the results do not depend on how rows are batched.
   */
  async submit(request: GenerationRequest, options: SubmitOptions = {}): Promise<GenerationResult> {
    return (await this.submitAll([request], options))[0]!;
  }

  /** Generates the requests of one client request as one unit of the round-robin (a 64-prompt request is one turn). */
  submitAll(requests: GenerationRequest[], options: SubmitOptions = {}): Promise<GenerationResult[]> {
    return new Promise((resolve, reject) => {
      const { signal } = options;
      if (signal?.aborted) return reject(new ClientAbortError(signal.reason));
      const rows = requests.flatMap((r, request) => Array.from({ length: r.n ?? 1 }, (_, completion) => ({ request, completion })));
      const results = requests.map((request) => ({ request, completions: [] }));
      const p: Pending = { requests, rows, next: 0, finished: 0, results, settled: false, options, resolve, reject, detach: () => {} };
      if (signal) {
        const onAbort = () => this.fail(p, new ClientAbortError(signal.reason));
        signal.addEventListener('abort', onAbort, { once: true });
        p.detach = () => signal.removeEventListener('abort', onAbort);
      }
      this.open.add(p);
      this.stats.requests++;
      if (rows.length === 0) return this.finish(p);
      this.queue.push(p);
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.draining) return;
    if (this.queuedRows >= this.options.maxBatchSize) {
      clearTimeout(this.timer);
      this.timer = undefined;
      void this.drain();
    } else if (!this.timer && this.queue.length > 0) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        void this.drain();
      }, this.options.windowMs);
    }
  }

  /** Settles `p` with an error and drops its rows that have not started. */
  private fail(p: Pending, err: unknown): void {
    if (p.settled) return;
    p.settled = true;
    p.detach();
    this.open.delete(p);
    this.queue = this.queue.filter((q) => q !== p);
    p.reject(err);
  }

  private finish(p: Pending): void {
    p.settled = true;
    p.detach();
    this.open.delete(p);
    p.resolve(p.results);
  }

  /** Up to maxBatchSize rows, one per waiting request in turn; a request goes to the back of the line after each row. */
  private takeBatch(): { p: Pending; row: RowRef }[] {
    const batch: { p: Pending; row: RowRef }[] = [];
    while (batch.length < this.options.maxBatchSize && this.queue.length > 0) {
      const p = this.queue.shift()!;
      batch.push({ p, row: p.rows[p.next++]! }); // queued requests have rows left
      if (p.next < p.rows.length) this.queue.push(p);
    }
    return batch;
  }

  private async drain(): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.takeBatch();
        this.stats.batches++;
        this.stats.rows += batch.length;
        // One engine call per batch through the gate: evaluation jobs and other requests get their turn in between.
        const rowRequests = batch.map(({ p, row }) => {
          const r = p.requests[row.request]!;
          return { ...r, n: 1, seed: (r.seed ?? 0) + row.completion };
        });
        try {
          // One result of one completion per row.
          const onTokens = (r: StreamedRow, tokens: ScoredToken[]) => this.rowTokens(batch[r.request]!, tokens, r.promptTokens);
          const results = await this.gate.run(() => generate(this.engine, rowRequests, { decode: this.options.decode, maxBatchSize: this.options.maxBatchSize, onTokens }));
          batch.forEach(({ p, row }, i) => { this.rowDone(p, row, results[i]!.completions[0]!); });
        } catch (err) {
          for (const { p } of batch) this.fail(p, err);
        }
      }
    } finally {
      this.draining = false;
    }
  }

  /** A running row's new tokens: passed on, or the row cancelled when its request has been settled (aborted, failed). */
  private rowTokens({ p, row }: { p: Pending; row: RowRef }, tokens: ScoredToken[], promptTokens: readonly ScoredToken[] | undefined): 'cancel' | undefined {
    this.stats.tokens += tokens.length;
    if (p.settled) return 'cancel';
    try {
      p.options.onTokens?.(row.request, row.completion, tokens, promptTokens);
    } catch (err) {
      // A listener's failure ends its own request, never the batch the other requests share.
      this.fail(p, err);
      return 'cancel';
    }
    return undefined;
  }

  private rowDone(p: Pending, row: RowRef, completion: Completion): void {
    if (p.settled) return; // aborted while its row ran
    p.results[row.request]!.completions[row.completion] = completion;
    p.finished++;
    try {
      p.options.onCompletion?.(row.request, row.completion, completion);
    } catch (err) {
      this.fail(p, err);
      return;
    }
    if (p.finished === p.rows.length) this.finish(p);
  }

  /** Resolves once every submitted request has its answer. */
  async idle(): Promise<void> {
    while (this.open.size > 0 || this.draining || this.timer) await new Promise((r) => setTimeout(r, 5));
  }
}
