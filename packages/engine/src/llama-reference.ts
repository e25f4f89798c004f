/**
 * The Llama-family forward pass (Llama 2/3, Mistral, Qwen2) in plain TypeScript, as transformers 4.47.1's
 * modeling_llama.py / modeling_mistral.py / modeling_qwen2.py compute it: float32 storage, float64 accumulation. The
 * reference backend (`ReferenceBackend`) computes these families with these functions, one stage at a time; it is
 * the check for the fast backends, not the fast path.
 *
 * Shapes: B batch, S new tokens, P cached tokens, T = P + S, H hidden, nh query heads, nkv key/value heads,
 * hd head_dim, Q = nh·hd, KV = nkv·hd, I intermediate, V vocab. Linear weights here are in the checkpoint's `[out, in]`.
 */
import type { LayerTensors, ModelDescription } from './model-description.js';
import type { KvPair, StepShape } from './decoder-backend.js';
import { linear } from './opt-reference.js';
import type { HeadWeights } from './opt-weights.js';
import { ropeInvFreq } from './rope-inv-freq.js';

/** y[r, :] = w · x[r, :] / sqrt(mean(x[r, :]²) + eps): no mean subtraction, no bias (transformers' LlamaRMSNorm). */
export function rmsNorm(x: Float32Array, rows: number, dim: number, w: Float32Array, eps: number): Float32Array {
  const y = new Float32Array(rows * dim);
  for (let r = 0; r < rows; r++) {
    const o = r * dim;
    let sq = 0;
    for (let i = 0; i < dim; i++) sq += x[o + i]! * x[o + i]!;
    const inv = 1 / Math.sqrt(sq / dim + eps);
    // transformers normalises in float32 and rounds before multiplying by the weight.
    for (let i = 0; i < dim; i++) y[o + i] = w[i]! * Math.fround(x[o + i]! * inv);
  }
  return y;
}

/**
 * Rotates `x` `[N, heads, hd]` in place by RoPE, rotate-half layout (HF checkpoints): dimension i pairs with
 * i + hd/2, not with its neighbour: x'[i] = x[i]·cos θ_i − x[i+hd/2]·sin θ_i, x'[i+hd/2] = x[i+hd/2]·cos θ_i + x[i]·sin θ_i,
 * θ_i = position · inv_freq[i]. Angles, cos and sin are float32 like transformers'.
 */
export function applyRope(x: Float32Array, positions: ArrayLike<number>, heads: number, hd: number, invFreq: Float32Array): void {
  const half = hd / 2;
  for (let n = 0; n < positions.length; n++) {
    const p = positions[n]!;
    for (let i = 0; i < half; i++) {
      const angle = Math.fround(p * invFreq[i]!);
      const cos = Math.fround(Math.cos(angle));
      const sin = Math.fround(Math.sin(angle));
      for (let h = 0; h < heads; h++) {
        const o = (n * heads + h) * hd;
        const a = x[o + i]!;
        const b = x[o + i + half]!;
        x[o + i] = a * cos - b * sin;
        x[o + i + half] = b * cos + a * sin;
      }
    }
  }
}

/** Token embeddings (no scaling, no position table): ids `[N]` → hidden `[N, H]`. */
export function llamaEmbed(d: ModelDescription, tokens: Float32Array, ids: Int32Array): Float32Array {
  const H = d.hiddenSize;
  const h = new Float32Array(ids.length * H);
  for (let n = 0; n < ids.length; n++) h.set(tokens.subarray(ids[n]! * H, (ids[n]! + 1) * H), n * H);
  return h;
}

/**
 * RoPE inverse frequencies for one step: `dynamic` scaling depends on the longest sequence the step sees (the largest
 * position + 1), as transformers recomputes it per forward.
 */
export function stepInvFreq(d: ModelDescription, positions: Int32Array): Float32Array {
  if (d.positions.kind !== 'rope') throw new Error(`${d.name}: ${d.family} models have rotary positions in this kernel, the description says ${d.positions.kind}`);
  let maxPos = 0;
  for (const p of positions) maxPos = Math.max(maxPos, p);
  return ropeInvFreq(d.attention.headDim, d.positions.theta, d.positions.scaling, maxPos + 1);
}

/**
 * One pre-norm decoder layer: h + o_proj(attn(norm(h))), then + down(silu(gate(x)) · up(x)). `x` `[B, S, H]`, the
 * past k/v `[B, nkv, P, hd]` (after RoPE); returns the new hidden and the present k/v `[B, nkv, T, hd]`. The mask
 * (causal, pads, sliding window) is `step.maskBias`; positions are `step.positions`.
 */
export function llamaLayer(d: ModelDescription, w: LayerTensors, step: StepShape, invFreq: Float32Array, h: Float32Array, past: KvPair): { hidden: Float32Array; present: KvPair } {
  const { heads: nh, kvHeads: nkv, headDim: hd } = d.attention;
  const { batch: B, seq: S, pastLen: P, maskBias, positions } = step;
  if (!positions || positions.length !== B * S) throw new Error(`${d.name}: a rotary layer needs the step's ${B * S} positions (StepShape.positions)`);
  const H = d.hiddenSize;
  const I = d.mlp.intermediateSize;
  const N = B * S;
  const T = P + S;
  const x = rmsNorm(h, N, H, w.inNormW!, d.norm.eps);
  // q [N, nh, hd], k/v [N, nkv, hd]
  const q = linear(x, N, H, w.qW!, nh * hd, w.qB);
  const k = linear(x, N, H, w.kW!, nkv * hd, w.kB);
  const v = linear(x, N, H, w.vW!, nkv * hd, w.vB);
  applyRope(q, positions, nh, hd, invFreq);
  applyRope(k, positions, nkv, hd, invFreq);
  // present k/v [B, nkv, T, hd] = past (first P) + new
  const pk = new Float32Array(B * nkv * T * hd);
  const pv = new Float32Array(B * nkv * T * hd);
  for (let b = 0; b < B; b++) {
    for (let g = 0; g < nkv; g++) {
      const dst = (b * nkv + g) * T * hd;
      pk.set(past.k.subarray((b * nkv + g) * P * hd, (b * nkv + g + 1) * P * hd), dst);
      pv.set(past.v.subarray((b * nkv + g) * P * hd, (b * nkv + g + 1) * P * hd), dst);
      for (let s = 0; s < S; s++) {
        const src = ((b * S + s) * nkv + g) * hd;
        pk.set(k.subarray(src, src + hd), dst + (P + s) * hd);
        pv.set(v.subarray(src, src + hd), dst + (P + s) * hd);
      }
    }
  }
  // GQA (repeat_kv): consecutive query heads share a kv head, q head hq reads kv head floor(hq / (nh / nkv)).
  const group = nh / nkv;
  const scale = 1 / Math.sqrt(hd);
  const attn = new Float32Array(N * nh * hd);
  const scores = new Float64Array(T);
  for (let b = 0; b < B; b++) {
    for (let s = 0; s < S; s++) {
      const bias = (b * S + s) * T;
      for (let hq = 0; hq < nh; hq++) {
        const kv = (b * nkv + Math.floor(hq / group)) * T * hd;
        const qo = ((b * S + s) * nh + hq) * hd;
        let max = -Infinity;
        for (let j = 0; j < T; j++) {
          let dot = 0;
          for (let e = 0; e < hd; e++) dot += q[qo + e]! * pk[kv + j * hd + e]!;
          // The bias is 0 or MASK_BIAS: a masked key's weight underflows to exactly 0.
          scores[j] = dot * scale + maskBias[bias + j]!;
          if (scores[j]! > max) max = scores[j]!;
        }
        let sum = 0;
        for (let j = 0; j < T; j++) {
          scores[j] = Math.exp(scores[j]! - max);
          sum += scores[j]!;
        }
        for (let e = 0; e < hd; e++) {
          let acc = 0;
          for (let j = 0; j < T; j++) if (scores[j]) acc += scores[j]! * pv[kv + j * hd + e]!;
          attn[qo + e] = acc / sum;
        }
      }
    }
  }
  const r = linear(attn, N, nh * hd, w.oW!, H, w.oB);
  for (let i = 0; i < r.length; i++) r[i] = r[i]! + h[i]!;
  // SwiGLU: the gate gets silu, up does not.
  const x2 = rmsNorm(r, N, H, w.postNormW!, d.norm.eps);
  const gate = linear(x2, N, H, w.gateW!, I, w.gateB);
  const up = linear(x2, N, H, w.upW!, I, w.upB);
  for (let i = 0; i < gate.length; i++) gate[i] = (gate[i]! / (1 + Math.exp(-gate[i]!))) * up[i]!;
  const y = linear(gate, N, I, w.downW!, H, w.downB);
  for (let i = 0; i < y.length; i++) y[i] = y[i]! + r[i]!;
  return { hidden: y, present: { k: pk, v: pv } };
}

/** Final RMSNorm, then logits = x · headᵀ (`lm_head`, or the token table when tied): `[rows, H]` → `[rows, V]`. */
export function llamaHead(d: ModelDescription, w: HeadWeights, hidden: Float32Array, rows: number): Float32Array {
  if (!w.finalLnW) throw new Error(`${d.name}: the head has no final norm weight`);
  const x = rmsNorm(hidden, rows, d.hiddenSize, w.finalLnW, d.norm.eps);
  return linear(x, rows, d.hiddenSize, w.lmHead, d.vocabSize);
}
