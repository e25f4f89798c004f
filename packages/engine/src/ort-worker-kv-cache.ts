import * as ort from 'onnxruntime-node';

interface LayerKv {
  /** Capacity buffers; the first `batch·heads·tokens·headDim` values hold `[B, H, tokens, D]`. */
  k: Float32Array;
  v: Float32Array;
  tokens: number;
}

/**
 * The KV cache of one batch, kept in the onnxruntime worker beside the sessions: per layer one buffer for K and one
 * for V in `[B, H, T, D]` order with room to grow. A step feeds a view of the filled part as the past (no copy) and
 * appends only the step's new K/V — instead of sending the whole cache out and back every step, which on this kind
 * of machine is dominated by first touches of fresh memory, not by the copy.
 */
export class WorkerKvCache {
  private readonly layers = new Map<number, LayerKv>();

  constructor(
    readonly batch: number,
    readonly heads: number,
    readonly headDim: number,
  ) {}

  /** Past K/V of `layer` as tensors over the cache buffers (valid until the next `append`). */
  past(layer: number): { k: ort.Tensor; v: ort.Tensor } {
    const l = this.layers.get(layer);
    const P = l?.tokens ?? 0;
    const n = this.batch * this.heads * P * this.headDim;
    const dims = [this.batch, this.heads, P, this.headDim];
    return {
      k: new ort.Tensor('float32', l ? l.k.subarray(0, n) : new Float32Array(0), dims),
      v: new ort.Tensor('float32', l ? l.v.subarray(0, n) : new Float32Array(0), dims),
    };
  }

  /** Appends `[B, H, S, D]` new keys and values to `layer`; `adopt`: the arrays are the caller's to give away. */
  append(layer: number, newK: Float32Array, newV: Float32Array, adopt: boolean): void {
    const rows = this.batch * this.heads;
    const D = this.headDim;
    const S = newK.length / (rows * D);
    const l = this.layers.get(layer);
    if (!l) {
      // First step: the new K/V are the cache (when given away, e.g. a session's own output copies).
      this.layers.set(layer, { k: adopt ? newK : newK.slice(), v: adopt ? newV : newV.slice(), tokens: S });
      return;
    }
    const P = l.tokens;
    const T = P + S;
    if (l.k.length < rows * T * D) {
      // Grow with headroom, so a decode step rarely allocates (fresh memory is slow to touch).
      const cap = T + Math.max(64, T >> 2);
      l.k = grow(l.k, rows * cap * D, rows * P * D);
      l.v = grow(l.v, rows * cap * D, rows * P * D);
    }
    for (const [buf, add] of [[l.k, newK], [l.v, newV]] as const) {
      // Row r moves from r·P·D to r·T·D; going from the last row down never overwrites a row not yet moved.
      for (let r = rows - 1; r >= 0; r--) {
        if (r > 0) buf.copyWithin(r * T * D, r * P * D, (r + 1) * P * D);
        buf.set(add.subarray(r * S * D, (r + 1) * S * D), r * T * D + P * D);
      }
    }
    l.tokens = T;
  }

  /** Float32 values held (capacity included). */
  get values(): number {
    let n = 0;
    for (const l of this.layers.values()) n += l.k.length + l.v.length;
    return n;
  }
}

function grow(a: Float32Array, length: number, used: number): Float32Array {
  const b = new Float32Array(length);
  b.set(a.subarray(0, used));
  return b;
}
