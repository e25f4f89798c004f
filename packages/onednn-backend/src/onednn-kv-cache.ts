import type { BackendKvCache, BufferPool, KvDtype, StepShape } from '@flexhelm/engine';
import type { ComputeDtype, KvBuffer } from './native-addon.js';

/** What the cache needs from its backend to run a step (OneDnnBackend implements it). */
export interface CachedStepper {
  forwardCached(cache: OneDnnKvCache, ids: Int32Array, positions: Int32Array, step: StepShape): Promise<Float32Array>;
  layerCached(cache: OneDnnKvCache, index: number, hidden: Float32Array): Promise<Float32Array>;
  /** Rounds `x` to bf16 bits into `y` (natively). */
  narrowBf16(x: Float32Array, y: Uint16Array): Promise<void>;
}

/**
 * The KV element type of a layer computed in `dtype`, for this backend's own cache and for caller-owned in-place ones
 * alike: bf16 bits for bf16 layers of either family (a decode step reads half the bytes), fp32 otherwise.
 */
export function kvDtypeOf(dtype: ComputeDtype | 'auto' | undefined): KvDtype {
  return dtype === 'bf16' ? 'bf16' : 'fp32';
}

/**
 * KV buffers from the backend's pool: a bf16 buffer is a `Uint16Array` view of a pooled `Float32Array` of half the
 * length (warm, aligned memory for both element types).
 */
export class KvAllocator {
  /** The pooled arrays under the bf16 views handed out. */
  private readonly backing = new WeakMap<Uint16Array, Float32Array>();

  constructor(private readonly pool: BufferPool) {}

  take(length: number, dtype: KvDtype): KvBuffer {
    if (dtype === 'fp32') return this.pool.take(length);
    const floats = this.pool.take(Math.ceil(length / 2));
    const bits = new Uint16Array(floats.buffer, floats.byteOffset, length);
    this.backing.set(bits, floats);
    return bits;
  }

  /** Gives back a buffer from `take`; anything else is ignored. */
  give(buffer: KvBuffer): void {
    const floats = buffer instanceof Float32Array ? buffer : this.backing.get(buffer);
    if (!floats) return;
    if (!(buffer instanceof Float32Array)) this.backing.delete(buffer);
    this.pool.give(floats);
  }
}

/**
 * A batch's KV cache kept by the oneDNN backend (`DecoderBackend.openKvCache`): per layer one K and one V buffer in
 * `[batch, heads, capacity, headDim]` order (`heads`: the key/value heads, fewer than the query heads with
 * grouped-query attention), filled up to `tokens`. A step writes only its new keys and values, in
 * place; the engine's own cache would hand the whole past in and take a grown copy out on every decode step (two
 * 34 MiB copies per opt-1.3b layer at 8 × 512 tokens, a third of the step). Capacity grows with headroom, so growing
 * (one copy) is rare; buffers come from and go back to the backend's pool (a bf16 buffer is a `Uint16Array` view of a
 * pooled `Float32Array` of half the length).
 */
export class OneDnnKvCache implements BackendKvCache {
  readonly k: KvBuffer[] = [];
  readonly v: KvBuffer[] = [];
  /** Tokens per (batch, head) the buffers have room for. */
  capacity = 0;
  /** Tokens stored per row. */
  tokens = 0;
  private closed = false;

  constructor(
    private readonly stepper: CachedStepper,
    private readonly buffers: KvAllocator,
    public batch: number,
    readonly heads: number,
    readonly headDim: number,
    readonly layers: number,
    private kvDtype: KvDtype = 'fp32',
  ) {}

  get dtype(): KvDtype {
    return this.kvDtype;
  }

  private take(length: number, dtype: KvDtype): KvBuffer {
    return this.buffers.take(length, dtype);
  }

  private give(buffer: KvBuffer): void {
    this.buffers.give(buffer);
  }

  /**
   * Makes a float32 cache bf16, rounding what it holds (nearest even: the bits a bf16 cache would have stored). `auto`
   * fills its first batch's cache in fp32 (every candidate dtype runs on it) and narrows it once bf16 is kept.
   */
  async narrowToBf16(): Promise<void> {
    if (this.kvDtype === 'bf16') return;
    for (const list of [this.k, this.v]) {
      for (let i = 0; i < list.length; i++) {
        const old = list[i] as Float32Array;
        const bits = this.take(old.length, 'bf16') as Uint16Array;
        await this.stepper.narrowBf16(old, bits);
        this.give(old);
        list[i] = bits;
      }
    }
    this.kvDtype = 'bf16';
  }

  /** Makes room for `total` tokens per row, keeping the stored ones. */
  reserve(total: number): void {
    if (this.closed) throw new Error('OneDnnKvCache: this cache was closed; start a new batch');
    if (total <= this.capacity) return;
    // 25% headroom (at least 64 tokens): a prompt's cache then takes the following decode steps without growing.
    const capacity = total + Math.max(64, total >> 2);
    const rows = this.batch * this.heads;
    const D = this.headDim;
    const move = (old: KvBuffer | undefined): KvBuffer => {
      const grown = this.take(rows * capacity * D, this.kvDtype);
      if (old) {
        for (let r = 0; r < rows; r++) grown.set(old.subarray(r * this.capacity * D, (r * this.capacity + this.tokens) * D), r * capacity * D);
        this.give(old);
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
    // In the cache's own dtype: bf16 bits are copied as they are.
    const repeat = (one: KvBuffer): KvBuffer => {
      const many = this.take(one.length * rows, this.kvDtype);
      for (let r = 0; r < rows; r++) many.set(one as never, r * one.length);
      this.give(one);
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
    return (this.kvDtype === 'bf16' ? 2 : 4) * this.k.reduce((a, b) => a + b.length, 0) * 2;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const buffer of [...this.k, ...this.v]) this.give(buffer);
    this.k.length = 0;
    this.v.length = 0;
  }
}
