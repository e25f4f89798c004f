/**
 * The rotary families' forward pass (Llama 2/3, Mistral, Qwen2, Gemma 2, Phi-3, OLMo 2, Mixtral, Qwen2-MoE) in plain TypeScript, one
 * readable `decoderLayer` that reads the description's kinds, as transformers 4.47.1's modeling_<family>.py compute
 * them: float32 storage, float64 accumulation. The reference backend (`ReferenceBackend`) computes these families with
 * these functions, one stage at a time; it is the check for the fast backends, not the fast path.
 *
 * Shapes: B batch, S new tokens, P cached tokens, T = P + S, H hidden, nh query heads, nkv key/value heads,
 * hd head_dim, Q = nh·hd, KV = nkv·hd, I intermediate, V vocab. Linear weights here are in the checkpoint's `[out, in]`.
 * Mixtral's and Qwen2-MoE's sparse MLP is moe-reference.ts's `moeMlp`.
 */
import { gatedMlp } from './gated-mlp.js';
import { isSparseLayer, type LayerTensors, type ModelDescription, type KvPair, type StepShape, MASK_BIAS } from '@flexhelm/contract';
import { moeMlp, type TokenRoutes } from './moe-reference.js';
import { linear } from './families/opt/opt-reference.js';
import type { HeadWeights } from '@flexhelm/contract';
import { ropeInvFreq } from './rope-inv-freq.js';

/** y[r, :] = w · x[r, :] / sqrt(mean(x[r, :]²) + eps): no mean subtraction, no bias (transformers' LlamaRMSNorm). */
export function rmsNorm(x: Float32Array, rows: number, dim: number, w: Float32Array, eps: number): Float32Array {
  return rmsNormOfKind('rmsnorm', x, rows, dim, w, eps);
}

/**
 * RMSNorm of either kind. `rmsnorm`: transformers normalises in float32 and rounds before multiplying by w (Llama).
 * `rmsnorm-plus-one` (Gemma): `(x / rms) · (1 + w)`, the whole product in float32, rounded once at the end.
 */
function rmsNormOfKind(kind: ModelDescription['norm']['kind'], x: Float32Array, rows: number, dim: number, w: Float32Array, eps: number): Float32Array {
  const y = new Float32Array(rows * dim);
  for (let r = 0; r < rows; r++) {
    const o = r * dim;
    let sq = 0;
    for (let i = 0; i < dim; i++) sq += x[o + i]! * x[o + i]!;
    const inv = 1 / Math.sqrt(sq / dim + eps);
    if (kind === 'rmsnorm-plus-one') for (let i = 0; i < dim; i++) y[o + i] = x[o + i]! * inv * (1 + w[i]!);
    else for (let i = 0; i < dim; i++) y[o + i] = w[i]! * Math.fround(x[o + i]! * inv);
  }
  return y;
}

/**
 * Rotates `x` `[N, heads, hd]` in place by RoPE, rotate-half layout (HF checkpoints): dimension i pairs with
 * i + hd/2, not with its neighbour: x'[i] = x[i]·cos θ_i − x[i+hd/2]·sin θ_i, x'[i+hd/2] = x[i+hd/2]·cos θ_i + x[i]·sin θ_i,
 * θ_i = position · inv_freq[i]. Angles, cos and sin are float32 like transformers'; `scale` multiplies cos and sin
 * (Phi-3's longrope `cosSinScale`, rounded in float32 too).
 */
export function applyRope(x: Float32Array, positions: ArrayLike<number>, heads: number, hd: number, invFreq: Float32Array, scale = 1): void {
  const half = hd / 2;
  const s = Math.fround(scale);
  for (let n = 0; n < positions.length; n++) {
    const p = positions[n]!;
    for (let i = 0; i < half; i++) {
      const angle = Math.fround(p * invFreq[i]!);
      const cos = Math.fround(Math.fround(Math.cos(angle)) * s);
      const sin = Math.fround(Math.fround(Math.sin(angle)) * s);
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

/**
 * Token embeddings (no position table): ids `[N]` → hidden `[N, H]`, times `embedding.scale` when set (Gemma's
 * sqrt(hidden), the factor itself rounded to float32, the compute dtype here, as transformers does).
 */
export function llamaEmbed(d: ModelDescription, tokens: Float32Array, ids: Int32Array): Float32Array {
  const H = d.hiddenSize;
  const h = new Float32Array(ids.length * H);
  for (let n = 0; n < ids.length; n++) h.set(tokens.subarray(ids[n]! * H, (ids[n]! + 1) * H), n * H);
  const scale = d.embedding.scale;
  if (scale !== undefined && scale !== 1) {
    const s = Math.fround(scale);
    for (let i = 0; i < h.length; i++) h[i] = h[i]! * s;
  }
  return h;
}

/**
 * RoPE inverse frequencies for one step. `dynamic` scaling depends on the longest sequence the step sees (largest
 * position + 1); `longrope` on the call's key count `keys` (cached + new tokens, padding included: transformers'
 * kv_seq_len), long factors once it exceeds `originalMaxPositions`. Without `keys`, transformers' fallback
 * (largest position + 1) applies.
 */
export function stepInvFreq(d: ModelDescription, positions: Int32Array, keys?: number): Float32Array {
  if (d.positions.kind !== 'rope') throw new Error(`${d.name}: ${d.family} models have rotary positions in this kernel, the description says ${d.positions.kind}`);
  let maxPos = 0;
  for (const p of positions) maxPos = Math.max(maxPos, p);
  const seqLen = d.positions.scaling?.kind === 'longrope' && keys !== undefined ? keys : maxPos + 1;
  return ropeInvFreq(d.attention.headDim, d.positions.theta, d.positions.scaling, seqLen);
}

/** Whether layer `index` attends through the sliding window (Gemma 2: even layers only; Mistral: all). */
export function layerHasWindow(d: ModelDescription, index: number): boolean {
  const a = d.attention;
  return a.slidingWindow !== undefined && (a.slidingWindowLayers !== 'even' || index % 2 === 0);
}

/**
 * One decoder layer of a rotary family, by the description's kinds. `h` `[B, S, H]`, the past k/v `[B, nkv, P, hd]`
 * (after RoPE); `onRoutes` sees a sparse layer's routes. Returns the new hidden and the present k/v `[B, nkv, T, hd]` (all keys: a sliding window masks old
 * ones, as transformers' DynamicCache does, so the cache is right past the window). The mask is `step.maskBias`
 * (causal, pads, an every-layer window); a window on some layers only is applied here from the padded slot indices.
 *
 *   norm placement  pre:                  h += attn(N_in(h));        h += mlp(N_post(h))            (Llama, Phi-3)
 *                   post-branch:          h += N_attnOut(attn(h));   h += N_mlpOut(mlp(h))          (OLMo 2)
 *                   pre-and-post-branch:  h += N_attnOut(attn(N_in(h)));  h += N_mlpOut(mlp(N_post(h)))  (Gemma 2)
 */
export function decoderLayer(d: ModelDescription, index: number, w: LayerTensors, step: StepShape, invFreq: Float32Array, h: Float32Array, past: KvPair, onRoutes?: (routes: TokenRoutes) => void): { hidden: Float32Array; present: KvPair } {
  const half = attentionHalf(d, index, w, step, invFreq, h, past);
  // A mixture of experts' sparse layers route each token to its experts (moe-reference.ts); dense layers as Llama.
  const N = step.batch * step.seq;
  return { hidden: mlpHalf(d, index, w, half, isSparseLayer(d, index) ? moeMlp(d, w, half.x, N, onRoutes) : mlp(d, w, half.x, N)), present: half.present };
}

/** A layer up to its MLP: the residual stream after attention `r`, the MLP's input `x` (both `[B, S, H]`), the present KV. */
export interface AttentionHalf {
  r: Float32Array;
  x: Float32Array;
  present: KvPair;
}

/**
 * The first half of `decoderLayer`: the attention block added to the residual stream, and the MLP's input. What a
 * caller that brings in a sparse layer's experts after routing (`routeLayerTokens` on `x`) computes first.
 */
export function attentionHalf(d: ModelDescription, index: number, w: LayerTensors, step: StepShape, invFreq: Float32Array, h: Float32Array, past: KvPair): AttentionHalf {
  const place = d.norm.placement;
  if (place === 'post') throw new Error(`${d.name}: the rotary layer has no 'post' norm placement (that is OPT-350m's)`);
  const norm = layerNorm(d, index, w, step.batch * step.seq);
  const { out: a, present } = attention(d, index, w, step, invFreq, place === 'post-branch' ? h : norm(h, 'inNormW'), past);
  const r = place === 'pre' ? a : norm(a, 'attnOutNormW');
  for (let i = 0; i < r.length; i++) r[i] = r[i]! + h[i]!;
  return { r, x: place === 'post-branch' ? r : norm(r, 'postNormW'), present };
}

/** The second half of `decoderLayer`: the MLP's output `m` `[B, S, H]` (dense or sparse) through its norm, added to `r`. */
export function mlpHalf(d: ModelDescription, index: number, w: LayerTensors, half: AttentionHalf, m: Float32Array): Float32Array {
  const out = d.norm.placement === 'pre' ? m : layerNorm(d, index, w, m.length / d.hiddenSize)(m, 'mlpOutNormW');
  for (let i = 0; i < out.length; i++) out[i] = out[i]! + half.r[i]!;
  return out;
}

/** Layer `index`'s norm of kind `d.norm.kind` over `N` rows, by tensor key. */
function layerNorm(d: ModelDescription, index: number, w: LayerTensors, N: number): (x: Float32Array, key: string) => Float32Array {
  return (x, key) => {
    const weight = w[key];
    if (!weight) throw new Error(`${d.name}: layer ${index} has no ${key} (norm placement ${d.norm.placement})`);
    return rmsNormOfKind(d.norm.kind, x, N, d.hiddenSize, weight, d.norm.eps);
  };
}

/** Self-attention of `x` `[B, S, H]`: q/k/v, optional q/k projection norms, RoPE, scores, soft-cap, mask, softmax, o. */
function attention(d: ModelDescription, index: number, w: LayerTensors, step: StepShape, invFreq: Float32Array, x: Float32Array, past: KvPair): { out: Float32Array; present: KvPair } {
  const { heads: nh, kvHeads: nkv, headDim: hd, logitSoftcap: cap } = d.attention;
  const { batch: B, seq: S, pastLen: P, maskBias, positions } = step;
  if (!positions || positions.length !== B * S) throw new Error(`${d.name}: a rotary layer needs the step's ${B * S} positions (StepShape.positions)`);
  const H = d.hiddenSize;
  const N = B * S;
  const T = P + S;
  // q [N, nh, hd], k/v [N, nkv, hd]
  let q = linear(x, N, H, w.qW!, nh * hd, w.qB);
  let k = linear(x, N, H, w.kW!, nkv * hd, w.kB);
  const v = linear(x, N, H, w.vW!, nkv * hd, w.vB);
  if (d.attention.qkNorm === 'projection') {
    // OLMo 2: RMSNorm over the whole projection (all heads together), before the split into heads and RoPE.
    q = rmsNorm(q, N, nh * hd, w.qNormW!, d.norm.eps);
    k = rmsNorm(k, N, nkv * hd, w.kNormW!, d.norm.eps);
  }
  const ropeScale = d.positions.kind === 'rope' && d.positions.scaling?.kind === 'longrope' ? d.positions.scaling.cosSinScale : 1;
  applyRope(q, positions, nh, hd, invFreq, ropeScale);
  applyRope(k, positions, nkv, hd, invFreq, ropeScale);
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
  // Gemma 2: query_pre_attn_scalar^-½ instead of head_dim^-½.
  const scale = d.attention.scale ?? 1 / Math.sqrt(hd);
  // A window on this layer only (Gemma 2's even layers): key j is out when i − j ≥ W, slot indices incl. padding.
  const window = layerHasWindow(d, index) ? d.attention.slidingWindow! : Infinity;
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
          let sc = dot * scale;
          // Gemma 2's soft-cap comes before the mask.
          if (cap !== undefined) sc = cap * Math.tanh(sc / cap);
          // The bias is 0 or MASK_BIAS: a masked key's weight underflows to exactly 0.
          scores[j] = sc + (P + s - j >= window ? MASK_BIAS : maskBias[bias + j]!);
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
  return { out: linear(attn, N, nh * hd, w.oW!, H, w.oB), present: { k: pk, v: pv } };
}

/** The dense gated MLP of `x` `[N, H]` (the layer's `gateW`, `upW`, `downW`, biases where the family has them). */
function mlp(d: ModelDescription, w: LayerTensors, x: Float32Array, N: number): Float32Array {
  return gatedMlp(d, d.mlp.kind, { gate: w.gateW!, up: w.upW!, down: w.downW!, gateB: w.gateB, upB: w.upB, downB: w.downB }, x, N, d.mlp.intermediateSize);
}

/**
 * `decoderLayer` for a description whose window (if any) is on every layer, where the index does not matter.
 * Kept for the graph tests that compare against it.
 */
export function llamaLayer(d: ModelDescription, w: LayerTensors, step: StepShape, invFreq: Float32Array, h: Float32Array, past: KvPair): { hidden: Float32Array; present: KvPair } {
  if (d.attention.slidingWindowLayers === 'even') throw new Error(`${d.name}: a window on some layers needs the layer index; call decoderLayer`);
  return decoderLayer(d, 0, w, step, invFreq, h, past);
}

/**
 * Final norm, then logits = x · headᵀ (`lm_head`, or the token table when tied): `[rows, H]` → `[rows, V]`, then
 * Gemma 2's final soft-cap `cap · tanh(logits / cap)` when the description has one.
 */
export function llamaHead(d: ModelDescription, w: HeadWeights, hidden: Float32Array, rows: number): Float32Array {
  if (!w.finalLnW) throw new Error(`${d.name}: the head has no final norm weight`);
  const x = rmsNormOfKind(d.norm.kind, hidden, rows, d.hiddenSize, w.finalLnW, d.norm.eps);
  const logits = linear(x, rows, d.hiddenSize, w.lmHead, d.vocabSize);
  const cap = d.finalLogitSoftcap;
  if (cap !== undefined) for (let i = 0; i < logits.length; i++) logits[i] = cap * Math.tanh(logits[i]! / cap);
  return logits;
}
