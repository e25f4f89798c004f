/**
 * The OPT forward pass in plain TypeScript, step by step (as Hugging Face's modeling_opt.py computes it), kept simple
 * and exact in float32 storage with float64 accumulation. It is the check for the fast backends, not the fast path.
 *
 * Shapes: B batch, S new tokens, P cached tokens, T = P + S, E hidden, H heads, D = E / H, F ffn, V vocab,
 * W word_embed_proj_dim.
 */
import type { KvPair, ModelDescription, StepShape } from '@flexhelm/contract';
import { headDim, type OptConfig } from './opt-config.js';
import { optConfigOfDescription } from './opt-description.js';
import { positionTable, type EmbeddingWeights, type HeadWeights, type LayerWeights } from './opt-weights.js';

/** y[r, :] = LayerNorm(x[r, :]) · w + b over the last dimension (biased variance, eps inside the sqrt). */
export function layerNorm(x: Float32Array, rows: number, dim: number, w: Float32Array, b: Float32Array, eps: number): Float32Array {
  const y = new Float32Array(rows * dim);
  for (let r = 0; r < rows; r++) {
    const o = r * dim;
    let mean = 0;
    for (let i = 0; i < dim; i++) mean += x[o + i]!;
    mean /= dim;
    let variance = 0;
    for (let i = 0; i < dim; i++) variance += (x[o + i]! - mean) ** 2;
    variance /= dim;
    const inv = 1 / Math.sqrt(variance + eps);
    for (let i = 0; i < dim; i++) y[o + i] = (x[o + i]! - mean) * inv * w[i]! + b[i]!;
  }
  return y;
}

/** y = x · Wᵀ + b with W in PyTorch `[out, in]` order: x `[rows, in]` → y `[rows, out]`. */
export function linear(x: Float32Array, rows: number, inDim: number, w: Float32Array, outDim: number, b?: Float32Array): Float32Array {
  const y = new Float32Array(rows * outDim);
  for (let r = 0; r < rows; r++) {
    const xo = r * inDim;
    for (let o = 0; o < outDim; o++) {
      const wo = o * inDim;
      let s = b ? b[o]! : 0;
      for (let i = 0; i < inDim; i++) s += x[xo + i]! * w[wo + i]!;
      y[r * outDim + o] = s;
    }
  }
  return y;
}

function add(a: Float32Array, b: Float32Array): Float32Array {
  const y = new Float32Array(a.length);
  for (let i = 0; i < a.length; i++) y[i] = a[i]! + b[i]!;
  return y;
}

/** Gathers token embeddings (and project_in) and adds learned positions (positions already include offset 2). */
export function referenceEmbed(d: ModelDescription, w: EmbeddingWeights, ids: Int32Array, positions: Int32Array): Float32Array {
  const c = optConfigOfDescription(d, 'referenceEmbed');
  const n = ids.length;
  const W = c.wordEmbedProjDim;
  const E = c.hiddenSize;
  // tok [n, W]
  let tok: Float32Array = new Float32Array(n * W);
  for (let t = 0; t < n; t++) tok.set(w.tokens.subarray(ids[t]! * W, ids[t]! * W + W), t * W);
  // project_in: [n, W] → [n, E]
  if (w.projectIn) tok = linear(tok, n, W, w.projectIn, E);
  const out = new Float32Array(n * E);
  const table = positionTable(w);
  for (let t = 0; t < n; t++) {
    const p = positions[t]!;
    for (let i = 0; i < E; i++) out[t * E + i] = tok[t * E + i]! + table[p * E + i]!;
  }
  return out;
}

/**
 * Causal self-attention with a KV cache. q, k, v `[B, S, E]` (q already scaled); past k/v `[B, H, P, D]`.
 * Returns the attention output `[B, S, E]` and present k/v `[B, H, T, D]`.
 */
function attention(c: OptConfig, step: StepShape, q: Float32Array, k: Float32Array, v: Float32Array, past: KvPair): { out: Float32Array; present: KvPair } {
  const { batch: B, seq: S, pastLen: P, maskBias } = step;
  const E = c.hiddenSize;
  const H = c.numAttentionHeads;
  const D = headDim(c);
  const T = P + S;
  // present[b, h, t, d] = past for t < P, the new k/v (reshaped [B, S, H, D] → [B, H, S, D]) after.
  const pk = new Float32Array(B * H * T * D);
  const pv = new Float32Array(B * H * T * D);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const dst = (b * H + h) * T * D;
      pk.set(past.k.subarray((b * H + h) * P * D, (b * H + h + 1) * P * D), dst);
      pv.set(past.v.subarray((b * H + h) * P * D, (b * H + h + 1) * P * D), dst);
      for (let s = 0; s < S; s++) {
        for (let d = 0; d < D; d++) {
          pk[dst + (P + s) * D + d] = k[(b * S + s) * E + h * D + d]!;
          pv[dst + (P + s) * D + d] = v[(b * S + s) * E + h * D + d]!;
        }
      }
    }
  }
  const out = new Float32Array(B * S * E);
  const scores = new Float64Array(T);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const kv = (b * H + h) * T * D;
      for (let s = 0; s < S; s++) {
        // scores[t] = q · k_t + mask; softmax over t; out = Σ p_t v_t
        let max = -Infinity;
        for (let t = 0; t < T; t++) {
          let dot = 0;
          for (let d = 0; d < D; d++) dot += q[(b * S + s) * E + h * D + d]! * pk[kv + t * D + d]!;
          scores[t] = dot + maskBias[(b * S + s) * T + t]!;
          if (scores[t]! > max) max = scores[t]!;
        }
        let sum = 0;
        for (let t = 0; t < T; t++) {
          scores[t] = Math.exp(scores[t]! - max);
          sum += scores[t]!;
        }
        for (let d = 0; d < D; d++) {
          let acc = 0;
          for (let t = 0; t < T; t++) acc += scores[t]! * pv[kv + t * D + d]!;
          out[(b * S + s) * E + h * D + d] = acc / sum;
        }
      }
    }
  }
  return { out, present: { k: pk, v: pv } };
}

/** One OPT decoder layer: x `[B, S, E]` → `[B, S, E]`, pre-LN or post-LN per the description. */
export function referenceLayer(d: ModelDescription, w: LayerWeights, step: StepShape, x: Float32Array, past: KvPair): { hidden: Float32Array; present: KvPair } {
  const c = optConfigOfDescription(d, 'referenceLayer');
  const N = step.batch * step.seq;
  const E = c.hiddenSize;
  const F = c.ffnDim;
  const eps = c.layerNormEps;
  const pre = c.doLayerNormBefore;
  // Attention block
  const h1 = pre ? layerNorm(x, N, E, w.ln1W, w.ln1B, eps) : x;
  const q = linear(h1, N, E, w.qW, E, w.qB);
  const scale = headDim(c) ** -0.5;
  for (let i = 0; i < q.length; i++) q[i] = q[i]! * scale;
  const k = linear(h1, N, E, w.kW, E, w.kB);
  const v = linear(h1, N, E, w.vW, E, w.vB);
  const { out, present } = attention(c, step, q, k, v, past);
  let r = add(x, linear(out, N, E, w.oW, E, w.oB));
  if (!pre) r = layerNorm(r, N, E, w.ln1W, w.ln1B, eps);
  // MLP block: fc2(relu(fc1(·)))
  const h2 = pre ? layerNorm(r, N, E, w.ln2W, w.ln2B, eps) : r;
  const f = linear(h2, N, E, w.fc1W, F, w.fc1B);
  for (let i = 0; i < f.length; i++) if (f[i]! < 0) f[i] = 0;
  let y = add(r, linear(f, N, F, w.fc2W, E, w.fc2B));
  if (!pre) y = layerNorm(y, N, E, w.ln2W, w.ln2B, eps);
  return { hidden: y, present };
}

/** Final LayerNorm (pre-LN only), project_out, then logits = h · lm_headᵀ: `[rows, E]` → `[rows, V]`. */
export function referenceHead(d: ModelDescription, w: HeadWeights, hidden: Float32Array, rows: number): Float32Array {
  const c = optConfigOfDescription(d, 'referenceHead');
  let h = hidden;
  if (w.finalLnW && w.finalLnB) h = layerNorm(h, rows, c.hiddenSize, w.finalLnW, w.finalLnB, c.layerNormEps);
  let dim = c.hiddenSize;
  if (w.projectOut) {
    h = linear(h, rows, c.hiddenSize, w.projectOut, c.wordEmbedProjDim);
    dim = c.wordEmbedProjDim;
  }
  return linear(h, rows, dim, w.lmHead, c.vocabSize);
}
