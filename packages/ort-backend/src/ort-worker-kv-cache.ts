import * as ort from 'onnxruntime-node';
import { totalmem } from 'node:os';
import { BufferPool } from '@flexhelm/engine';
import { MASK_BIAS } from '@flexhelm/contract';

interface LayerKv {
  /** `[B, H, capacity, D]`: slots `0..tokens-1` of each (batch, head) row hold keys/values, the rest are zeros. */
  k: Float32Array;
  v: Float32Array;
  capacity: number;
  tokens: number;
}

/**
 * The pool cache buffers come from and go back to when a batch closes: the next batch reuses them instead of
 * first-touching fresh memory (~4 ms per MB on this kind of VM: a 340 MB opt-125m cache at batch 8 was ~1.4 s, a
 * quarter of its prefill). Keeps at most an eighth of the RAM, as the oneDNN backend's.
 */
export function newKvBufferPool(): BufferPool {
  return new BufferPool((n) => new Float32Array(n), totalmem() / 8);
}

/** Slots a layer's buffers get when they must grow to hold `tokens`: room for a few decode steps more. */
export function kvCapacityFor(tokens: number): number {
  return tokens + Math.max(32, Math.ceil(tokens / 8));
}

/**
 * The KV cache of one batch, kept in the onnxruntime worker beside the sessions: per layer one buffer for K and one
 * for V in `[B, H, capacity, D]` order. Attention reads the whole buffer with the unused slots masked out, so a step
 * only writes its own keys and values into slot `tokens` of each row: no row moves, no concatenation into a fresh
 * present, no fresh memory — on this kind of machine those cost more than the attention itself. Unused slots are
 * zeros and get softmax weight exactly 0, so they change no result.
 *
 * A step: `reserve(layer, S)`, then `write` (every row range), then `commit(layer, S)`.
 */
export class WorkerKvCache {
  private readonly layers = new Map<number, LayerKv>();
  /**
   * Widened masks of the current step by source mask (the step's, and its windowed one for Gemma 2's windowed layers)
   * and shape, so every layer of a step shares one.
   */
  private masks = new Map<ort.Tensor, Map<string, ort.Tensor>>();

  constructor(
    public batch: number,
    readonly heads: number,
    readonly headDim: number,
    private readonly pool = newKvBufferPool(),
  ) {}

  /** Forgets the previous step's widened masks (a step sends masks of its own). */
  beginStep(): void {
    this.masks.clear();
  }

  /** Gives every buffer back to the pool; the cache is empty afterwards. */
  release(): void {
    for (const l of this.layers.values()) {
      this.pool.give(l.k);
      this.pool.give(l.v);
    }
    this.layers.clear();
    this.masks.clear();
  }

  /**
   * A cache of one row (a shared prompt prefix) becomes `rows` rows, each a copy of that row's held slots. The copies
   * get room for half as many tokens again (each row's own rest of the prompt comes next), so that step does not
   * grow every buffer a second time; the headroom stays zeros.
   */
  expandRows(rows: number): void {
    if (this.batch !== 1) throw new Error(`WorkerKvCache: expandRows needs a cache of one row, this one has ${this.batch}`);
    if (!Number.isInteger(rows) || rows < 1) throw new Error(`WorkerKvCache: expandRows takes a whole number of rows ≥ 1, got ${rows}`);
    const D = this.headDim;
    for (const l of this.layers.values()) {
      const cap = Math.max(l.capacity, kvCapacityFor(l.tokens + Math.ceil(l.tokens / 2)));
      for (const key of ['k', 'v'] as const) {
        const many = this.pool.take(rows * this.heads * cap * D, true);
        for (let r = 0; r < rows; r++) regridInto(l[key], many.subarray(r * this.heads * cap * D), this.heads, l.capacity, cap, l.tokens, D);
        this.pool.give(l[key]);
        l[key] = many;
      }
      l.capacity = cap;
    }
    this.batch = rows;
    this.masks.clear();
  }

  /** Token slots `layer` will have after `reserve(layer, seq)` (what attention then reads), without reserving. */
  capacityFor(layer: number, seq: number): number {
    const l = this.layers.get(layer);
    if (!l) return kvCapacityFor(seq);
    return l.tokens + seq <= l.capacity ? l.capacity : kvCapacityFor(l.tokens + seq);
  }

  /** Makes room for `seq` more tokens in `layer`: allocates an empty layer, grows full buffers with headroom. */
  reserve(layer: number, seq: number): void {
    const rows = this.batch * this.heads;
    const D = this.headDim;
    const l = this.layers.get(layer);
    if (!l) {
      const cap = kvCapacityFor(seq);
      this.layers.set(layer, { k: this.pool.take(rows * cap * D, true), v: this.pool.take(rows * cap * D, true), capacity: cap, tokens: 0 });
      return;
    }
    if (l.tokens + seq <= l.capacity) return;
    const cap = kvCapacityFor(l.tokens + seq);
    for (const key of ['k', 'v'] as const) {
      const grown = this.pool.take(rows * cap * D, true);
      regridInto(l[key], grown, rows, l.capacity, cap, l.tokens, D);
      this.pool.give(l[key]);
      l[key] = grown;
    }
    l.capacity = cap;
  }

  /**
   * Stores new keys and values `[b, H, S, D]` of batch rows `row0 .. row0 + b - 1` at slot `tokens` (after
   * `reserve(layer, S)`); they count as held after `commit`.
   */
  write(layer: number, row0: number, newK: Float32Array, newV: Float32Array, seq: number): void {
    const l = this.get(layer);
    const D = this.headDim;
    if (l.tokens + seq > l.capacity) throw new Error(`WorkerKvCache: layer ${layer} has no room for ${seq} more tokens (reserve first)`);
    const first = row0 * this.heads;
    const count = newK.length / (seq * D);
    const at = l.tokens * D;
    const stride = l.capacity * D;
    for (let r = 0; r < count; r++) {
      l.k.set(newK.subarray(r * seq * D, (r + 1) * seq * D), (first + r) * stride + at);
      l.v.set(newV.subarray(r * seq * D, (r + 1) * seq * D), (first + r) * stride + at);
    }
  }

  /** The step's `seq` written tokens now count as held. */
  commit(layer: number, seq: number): void {
    this.get(layer).tokens += seq;
  }

  /** reserve + write (all rows) + commit. */
  append(layer: number, newK: Float32Array, newV: Float32Array): void {
    const seq = newK.length / (this.batch * this.heads * this.headDim);
    this.reserve(layer, seq);
    this.write(layer, 0, newK, newV, seq);
    this.commit(layer, seq);
  }

  /** K/V of `layer` as tensors over the whole buffers `[B, H, capacity, D]` (slots past `tokens` unused). */
  buffers(layer: number): { k: ort.Tensor; v: ort.Tensor } {
    const l = this.layers.get(layer);
    const dims = [this.batch, this.heads, l?.capacity ?? 0, this.headDim];
    return {
      k: new ort.Tensor('float32', l ? l.k : new Float32Array(0), dims),
      v: new ort.Tensor('float32', l ? l.v : new Float32Array(0), dims),
    };
  }

  /** Tokens held by `layer` (committed). */
  tokens(layer: number): number {
    return this.layers.get(layer)?.tokens ?? 0;
  }

  /** Slots of `layer`'s buffers. */
  capacity(layer: number): number {
    return this.layers.get(layer)?.capacity ?? 0;
  }

  /**
   * The step's additive mask `[B, 1, S, P + S]` (P = committed tokens) for attention whose keys are laid out as
   * `[B, H, capacity, D]` buffers: after this step's keys are written at slot P (`newKeysLast` false: the buffers
   * alone, `[B, 1, S, capacity]`), or with the step's keys appended after the buffers (`newKeysLast` true: a past fed
   * to a kernel that concatenates, `[B, 1, S, capacity + S]`). Unused slots get the mask bias.
   */
  widenMask(layer: number, mask: ort.Tensor, newKeysLast: boolean): ort.Tensor {
    const P = this.tokens(layer);
    const cap = this.capacity(layer);
    const [B, , S, T] = mask.dims as number[];
    if (T !== P + S!) throw new Error(`WorkerKvCache: the mask covers ${T} keys but layer ${layer} holds ${P} tokens and the step feeds ${S}`);
    const W = newKeysLast ? cap + S! : cap;
    if (W === T) return mask;
    let byShape = this.masks.get(mask);
    if (!byShape) {
      byShape = new Map();
      this.masks.set(mask, byShape);
    }
    const key = `${P}/${W}/${newKeysLast}`;
    let wide = byShape.get(key);
    if (!wide) {
      const src = mask.data as Float32Array;
      const dst = new Float32Array(B! * S! * W).fill(MASK_BIAS);
      for (let row = 0; row < B! * S!; row++) {
        if (newKeysLast) {
          dst.set(src.subarray(row * T, row * T + P), row * W);
          dst.set(src.subarray(row * T + P, (row + 1) * T), row * W + cap);
        } else dst.set(src.subarray(row * T, (row + 1) * T), row * W);
      }
      wide = new ort.Tensor('float32', dst, [B!, 1, S!, W]);
      byShape.set(key, wide);
    }
    return wide;
  }

  /** Float32 values held (capacity included). */
  get values(): number {
    let n = 0;
    for (const l of this.layers.values()) n += l.k.length + l.v.length;
    return n;
  }

  private get(layer: number): LayerKv {
    const l = this.layers.get(layer);
    if (!l) throw new Error(`WorkerKvCache: layer ${layer} has no buffers (reserve first)`);
    return l;
  }
}

/** `[rows, from, D]` → zeroed `[rows, to, D]`: the first `used` slots of each row. */
function regridInto(a: Float32Array, b: Float32Array, rows: number, from: number, to: number, used: number, D: number): void {
  for (let r = 0; r < rows; r++) b.set(a.subarray(r * from * D, (r * from + used) * D), r * to * D);
}

/** `[rows, P, D]` and `[rows, S, D]` → `[rows, P + S, D]` (a present from a past and a step's new keys or values). */
export function concatRows(past: Float32Array, added: Float32Array, rows: number, D: number): Float32Array {
  const P = past.length / (rows * D);
  const S = added.length / (rows * D);
  const out = new Float32Array(rows * (P + S) * D);
  for (let r = 0; r < rows; r++) {
    out.set(past.subarray(r * P * D, (r + 1) * P * D), r * (P + S) * D);
    out.set(added.subarray(r * S * D, (r + 1) * S * D), (r * (P + S) + P) * D);
  }
  return out;
}
