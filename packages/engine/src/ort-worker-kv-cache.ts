import * as ort from 'onnxruntime-node';
import { MASK_BIAS } from './opt-backend.js';

interface LayerKv {
  /** `[B, H, capacity, D]`: slots `0..tokens-1` of each (batch, head) row hold keys/values, the rest are zeros. */
  k: Float32Array;
  v: Float32Array;
  capacity: number;
  tokens: number;
}

/** Slots a layer's buffers get when they must grow to hold `tokens`: room for a few decode steps more. */
export function kvCapacityFor(tokens: number): number {
  return tokens + Math.max(32, Math.ceil(tokens / 8));
}

/**
 * The KV cache of one batch, kept in the onnxruntime worker beside the sessions: per layer one buffer for K and one
 * for V in `[B, H, capacity, D]` order. The whole buffer is fed to attention as the past, with the unused slots masked
 * out (`attentionMask`), so a decode step writes only its own keys and values into slot `tokens` of each row: no
 * row moves and no fresh memory, which on this kind of machine cost more than the attention itself. Masked slots are
 * zeros and get softmax weight exactly 0, so they change no result.
 */
export class WorkerKvCache {
  private readonly layers = new Map<number, LayerKv>();
  /** Expanded masks of the current step, per (tokens, capacity), so every layer of a step shares one. */
  private masks: { source: ort.Tensor; byShape: Map<string, ort.Tensor> } | undefined;

  constructor(
    readonly batch: number,
    readonly heads: number,
    readonly headDim: number,
  ) {}

  /** Makes room for `seq` more tokens in `layer` (growing its buffers with headroom when they are full). */
  reserve(layer: number, seq: number): void {
    const l = this.layers.get(layer);
    if (!l || l.tokens + seq <= l.capacity) return;
    const rows = this.batch * this.heads;
    const D = this.headDim;
    const cap = kvCapacityFor(l.tokens + seq);
    l.k = regrid(l.k, rows, l.capacity, cap, l.tokens, D);
    l.v = regrid(l.v, rows, l.capacity, cap, l.tokens, D);
    l.capacity = cap;
  }

  /** Past K/V of `layer` as tensors over the whole buffers `[B, H, capacity, D]` (mask with `attentionMask`). */
  past(layer: number): { k: ort.Tensor; v: ort.Tensor } {
    const l = this.layers.get(layer);
    const cap = l?.capacity ?? 0;
    const dims = [this.batch, this.heads, cap, this.headDim];
    return {
      k: new ort.Tensor('float32', l ? l.k : new Float32Array(0), dims),
      v: new ort.Tensor('float32', l ? l.v : new Float32Array(0), dims),
    };
  }

  /** Tokens held by `layer`. */
  tokens(layer: number): number {
    return this.layers.get(layer)?.tokens ?? 0;
  }

  /**
   * The step's additive mask `[B, 1, S, tokens + S]` widened to `[B, 1, S, capacity + S]` for `past(layer)`: key
   * slots `tokens..capacity-1` (unused) get the mask bias, the step's own keys move to the end.
   */
  attentionMask(layer: number, mask: ort.Tensor): ort.Tensor {
    const l = this.layers.get(layer);
    const P = l?.tokens ?? 0;
    const cap = l?.capacity ?? 0;
    if (cap === P) return mask;
    if (this.masks?.source !== mask) this.masks = { source: mask, byShape: new Map() };
    const key = `${P}/${cap}`;
    let wide = this.masks.byShape.get(key);
    if (!wide) {
      const [B, , S, T] = mask.dims as number[];
      if (T !== P + S!) throw new Error(`WorkerKvCache: mask covers ${T} keys but layer ${layer} holds ${P} tokens and the step feeds ${S}`);
      const src = mask.data as Float32Array;
      const W = cap + S!;
      const dst = new Float32Array(B! * S! * W).fill(MASK_BIAS);
      for (let row = 0; row < B! * S!; row++) {
        dst.set(src.subarray(row * T, row * T + P), row * W);
        dst.set(src.subarray(row * T + P, (row + 1) * T), row * W + cap);
      }
      wide = new ort.Tensor('float32', dst, [B!, 1, S!, W]);
      this.masks.byShape.set(key, wide);
    }
    return wide;
  }

  /**
   * Stores `[B, H, S, D]` new keys and values after the tokens of `layer` (`reserve(layer, S)` first, unless the
   * layer is empty); `adopt`: the arrays are the caller's to give away (they become the buffers of an empty layer).
   */
  append(layer: number, newK: Float32Array, newV: Float32Array, adopt: boolean): void {
    const rows = this.batch * this.heads;
    const D = this.headDim;
    const S = newK.length / (rows * D);
    const l = this.layers.get(layer);
    if (!l) {
      // First step: the new K/V are the cache (when given away, e.g. a session's own output copies).
      this.layers.set(layer, { k: adopt ? newK : newK.slice(), v: adopt ? newV : newV.slice(), capacity: S, tokens: S });
      return;
    }
    this.reserve(layer, S);
    const at = l.tokens * D;
    const stride = l.capacity * D;
    for (let r = 0; r < rows; r++) {
      l.k.set(newK.subarray(r * S * D, (r + 1) * S * D), r * stride + at);
      l.v.set(newV.subarray(r * S * D, (r + 1) * S * D), r * stride + at);
    }
    l.tokens += S;
  }

  /** Float32 values held (capacity included). */
  get values(): number {
    let n = 0;
    for (const l of this.layers.values()) n += l.k.length + l.v.length;
    return n;
  }
}

/** `[rows, from, D]` → `[rows, to, D]` (zeros after the first `used` slots of each row). */
function regrid(a: Float32Array, rows: number, from: number, to: number, used: number, D: number): Float32Array {
  const b = new Float32Array(rows * to * D);
  for (let r = 0; r < rows; r++) b.set(a.subarray(r * from * D, (r * from + used) * D), r * to * D);
  return b;
}
