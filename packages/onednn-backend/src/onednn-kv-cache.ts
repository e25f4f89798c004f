import type { BackendKvCache, BufferPool, StepShape } from '@flexhelm/engine';

/** What the cache needs from its backend to run a step (OneDnnBackend implements it). */
export interface CachedStepper {
  forwardCached(cache: OneDnnKvCache, ids: Int32Array, positions: Int32Array, step: StepShape): Promise<Float32Array>;
  layerCached(cache: OneDnnKvCache, index: number, hidden: Float32Array): Promise<Float32Array>;
}

/**
 * A batch's KV cache kept by the oneDNN backend (`OptBackend.openKvCache`): per layer one K and one V buffer in
 * `[batch, heads, capacity, headDim]` order (`heads`: the key/value heads, fewer than the query heads with
 * grouped-query attention), filled up to `tokens`. A step writes only its new keys and values, in
 * place; the engine's own cache would hand the whole past in and take a grown copy out on every decode step (two
 * 34 MiB copies per opt-1.3b layer at 8 × 512 tokens, a third of the step). Capacity grows with headroom, so growing
 * (one copy) is rare; buffers come from and go back to the backend's pool.
 */
export class OneDnnKvCache implements BackendKvCache {
  readonly k: Float32Array[] = [];
  readonly v: Float32Array[] = [];
  /** Tokens per (batch, head) the buffers have room for. */
  capacity = 0;
  /** Tokens stored per row. */
  tokens = 0;
  private closed = false;

  constructor(
    private readonly stepper: CachedStepper,
    private readonly pool: BufferPool,
    public batch: number,
    readonly heads: number,
    readonly headDim: number,
    readonly layers: number,
  ) {}

  /** Makes room for `total` tokens per row, keeping the stored ones. */
  reserve(total: number): void {
    if (this.closed) throw new Error('OneDnnKvCache: this cache was closed; start a new batch');
    if (total <= this.capacity) return;
    // 25% headroom (at least 64 tokens): a prompt's cache then takes the following decode steps without growing.
    const capacity = total + Math.max(64, total >> 2);
    const rows = this.batch * this.heads;
    const D = this.headDim;
    const move = (old: Float32Array | undefined): Float32Array => {
      const grown = this.pool.take(rows * capacity * D);
      if (old) {
        for (let r = 0; r < rows; r++) grown.set(old.subarray(r * this.capacity * D, (r * this.capacity + this.tokens) * D), r * capacity * D);
        this.pool.give(old);
      }
      return grown;
    };
    for (let i = 0; i < this.layers; i++) {
      this.k[i] = move(this.k[i]);
      this.v[i] = move(this.v[i]);
    }
    this.capacity = capacity;
  }

  /** A cache of one row becomes `rows` rows, each a copy of it (see `BackendKvCache.expandRows`). */
  async expandRows(rows: number): Promise<void> {
    if (this.closed) throw new Error('OneDnnKvCache: this cache was closed; start a new batch');
    if (this.batch !== 1) throw new Error(`OneDnnKvCache: expandRows needs a cache of one row, this one has ${this.batch}`);
    if (!Number.isInteger(rows) || rows < 1) throw new Error(`OneDnnKvCache: expandRows takes a whole number of rows ≥ 1, got ${rows}`);
    const repeat = (one: Float32Array): Float32Array => {
      const many = this.pool.take(one.length * rows);
      for (let r = 0; r < rows; r++) many.set(one, r * one.length);
      this.pool.give(one);
      return many;
    };
    for (let i = 0; i < this.k.length; i++) {
      this.k[i] = repeat(this.k[i]!);
      this.v[i] = repeat(this.v[i]!);
    }
    this.batch = rows;
  }

  forward(ids: Int32Array, positions: Int32Array, step: StepShape): Promise<Float32Array> {
    this.check(step);
    return this.stepper.forwardCached(this, ids, positions, step);
  }

  layer(index: number, hidden: Float32Array): Promise<Float32Array> {
    return this.stepper.layerCached(this, index, hidden);
  }

  /** Throws unless `step` continues this cache (same batch, past = what is stored). */
  check(step: StepShape): void {
    if (step.batch !== this.batch) throw new Error(`OneDnnKvCache: step has ${step.batch} rows, the cache was opened for ${this.batch}`);
    if (step.pastLen !== this.tokens) throw new Error(`OneDnnKvCache: step continues after ${step.pastLen} tokens, the cache holds ${this.tokens}`);
  }

  get bytes(): number {
    return 4 * this.k.reduce((a, b) => a + b.length, 0) * 2;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const buffer of [...this.k, ...this.v]) this.pool.give(buffer);
    this.k.length = 0;
    this.v.length = 0;
  }
}
