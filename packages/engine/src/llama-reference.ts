/**
 * The Llama-family forward pass (Llama 2/3, Mistral, Qwen2) in plain TypeScript, as transformers 4.47.1's
 * modeling_llama.py / modeling_mistral.py / modeling_qwen2.py compute it: float32 storage, float64 accumulation. It
 * is the check for later fast backends, not the fast path.
 *
 * Shapes: B batch, S new tokens, P cached tokens, T = P + S, H hidden, nh query heads, nkv key/value heads,
 * hd head_dim, Q = nh·hd, KV = nkv·hd, I intermediate, V vocab. Linear weights stay in the checkpoint's `[out, in]`.
 */
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { llamaDescriptionFromHf, readModelDescription, type LlamaDescription, type LlamaLayerTensorKey } from './llama-description.js';
import { ModelFileError } from './model-file-error.js';
import { linear } from './opt-reference.js';
import { openTensorSource } from './opt-weights.js';
import { ropeInvFreq } from './rope-inv-freq.js';
import { elementCount, type TensorSource } from './tensor-source.js';

/** One layer's tensors by key (`[out, in]` Linear weights; absent biases are undefined). */
export type LlamaLayerWeights = Partial<Record<LlamaLayerTensorKey, Float32Array>>;

export interface LlamaWeights {
  embedding: Float32Array;
  layers: LlamaLayerWeights[];
  finalNorm: Float32Array;
  /** `lm_head.weight`, or the embedding itself when the head is tied. */
  head: Float32Array;
}

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

/** A batch's KV cache: per layer keys and values `[B, nkv, T, hd]` (after RoPE) and the attention mask `[B][T]`. */
export class LlamaKvCache {
  readonly k: Float32Array[];
  readonly v: Float32Array[];
  readonly mask: number[][];
  /** Tokens per row so far (T). */
  length = 0;

  constructor(
    readonly batch: number,
    layers: number,
  ) {
    this.k = Array.from({ length: layers }, () => new Float32Array(0));
    this.v = Array.from({ length: layers }, () => new Float32Array(0));
    this.mask = Array.from({ length: batch }, () => []);
  }
}

/** Reads and checks every tensor a description names: no missing, misshapen or unused ones. */
export function loadLlamaWeights(d: LlamaDescription, source: TensorSource): LlamaWeights {
  const names = d.checkpointNames!;
  const H = d.hiddenSize;
  const used = new Set<string>();
  const read = (name: string, shape: number[]): Float32Array => {
    const info = source.tensors.get(name);
    if (!info) throw new ModelFileError(`the checkpoint has no tensor ${name} (a ${d.family} model with this config.json needs it)`);
    if (info.shape.join(',') !== shape.join(',')) throw new ModelFileError(`${info.file}: tensor ${name} has shape [${info.shape.join(', ')}], config.json implies [${shape.join(', ')}]`);
    used.add(name);
    const data = source.read(name);
    if (data.length !== elementCount(shape)) throw new ModelFileError(`${info.file}: tensor ${name} holds ${data.length} values, expected ${elementCount(shape)}`);
    return data;
  };
  const embedding = read(names.embedding, [d.vocabSize, H]);
  const layers: LlamaLayerWeights[] = [];
  for (let i = 0; i < d.layers; i++) {
    const w: LlamaLayerWeights = {};
    // The description's shapes are `[in, out]`; checkpoints hold Linear weights as `[out, in]`.
    for (const t of d.layerTensors) w[t.key] = read(`${names.layerPrefix}${i}.${t.checkpointSuffix}`, [...t.shape].reverse());
    layers.push(w);
  }
  const finalNorm = read(names.finalNorm, [H]);
  const head = names.head ? read(names.head, [d.vocabSize, H]) : embedding;
  for (const name of source.tensors.keys()) {
    // Tied checkpoints may still carry the lm_head alias; old ones carry rotary inv_freq buffers. Both are derived.
    if (used.has(name) || (d.embedding.tiedHead && name === 'lm_head.weight') || name.endsWith('.rotary_emb.inv_freq')) continue;
    throw new ModelFileError(`${source.tensors.get(name)!.file}: tensor ${name} is not part of a ${d.family} model with this config.json (wrong model folder or config?)`);
  }
  return { embedding, layers, finalNorm, head };
}

/**
 * A loaded Llama-family model with the reference forward. `forward` runs one step for a left-padded batch through a
 * KV cache and returns logits for every new position; a no-cache forward is one step over a fresh cache.
 */
export class LlamaReference {
  constructor(
    readonly description: LlamaDescription,
    readonly weights: LlamaWeights,
  ) {}

  /** Loads a folder with config.json and model.safetensors (F32/F16/BF16) or a sharded model.safetensors.index.json. */
  static load(dir: string): LlamaReference {
    if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new ModelFileError(`model folder ${dir} does not exist or is not a folder`);
    const d = readModelDescription(dir);
    if (d.family === 'opt') throw new ModelFileError(`${join(dir, 'config.json')}: model_type is opt; load OPT models with OptEngine`);
    const description = d as LlamaDescription;
    const source = openTensorSource(dir);
    try {
      return new LlamaReference(description, loadLlamaWeights(description, source));
    } finally {
      source.close();
    }
  }

  /** A model from a config object and tensors (tests). */
  static fromSource(config: unknown, source: TensorSource): LlamaReference {
    const d = llamaDescriptionFromHf(config);
    return new LlamaReference(d, loadLlamaWeights(d, source));
  }

  newCache(batch: number): LlamaKvCache {
    return new LlamaKvCache(batch, this.description.layers);
  }

  /**
   * One step: `ids`/`mask` `[B][S]` are the new tokens of each row (mask 0 marks left padding). Positions count the
   * real tokens before each one (`cumsum(mask) − 1`, pads 1, as `generate()` does). Returns logits `[B, S, V]`.
   */
  forward(cache: LlamaKvCache, ids: number[][], mask: number[][]): Float32Array {
    const d = this.description;
    const B = cache.batch;
    if (ids.length !== B || mask.length !== B) throw new Error(`forward: ${ids.length} id rows and ${mask.length} mask rows for a cache of ${B} rows`);
    const S = ids[0]?.length ?? 0;
    if (S === 0) throw new Error('forward: at least one token per row is required');
    for (let b = 0; b < B; b++) {
      if (ids[b]!.length !== S || mask[b]!.length !== S) throw new Error(`forward: row ${b} has ${ids[b]!.length} ids and ${mask[b]!.length} mask entries, row 0 has ${S}`);
      for (const id of ids[b]!) if (!Number.isInteger(id) || id < 0 || id >= d.vocabSize) throw new Error(`forward: token id ${id} is outside the vocabulary (0 … ${d.vocabSize - 1})`);
    }
    const H = d.hiddenSize;
    const N = B * S;
    const P = cache.length;
    const positions = new Int32Array(N);
    for (let b = 0; b < B; b++) {
      let seen = cache.mask[b]!.reduce((a, m) => a + m, 0);
      for (let s = 0; s < S; s++) {
        const m = mask[b]![s] ? 1 : 0;
        cache.mask[b]!.push(m);
        seen += m;
        positions[b * S + s] = m ? seen - 1 : 1;
      }
    }
    cache.length = P + S;
    const rope = d.positions.kind === 'rope' ? d.positions : undefined;
    if (!rope) throw new Error('LlamaReference needs rotary positions');
    let maxPos = 0;
    for (const p of positions) maxPos = Math.max(maxPos, p);
    const invFreq = ropeInvFreq(d.attention.headDim, rope.theta, rope.scaling, maxPos + 1);
    // h = embed_tokens[ids]: [N, H] (no scaling, no position table)
    let h: Float32Array = new Float32Array(N * H);
    for (let b = 0; b < B; b++) for (let s = 0; s < S; s++) h.set(this.weights.embedding.subarray(ids[b]![s]! * H, (ids[b]![s]! + 1) * H), (b * S + s) * H);
    for (let l = 0; l < d.layers; l++) h = this.layer(l, h, cache, S, positions, invFreq);
    const x = rmsNorm(h, N, H, this.weights.finalNorm, d.norm.eps);
    return linear(x, N, H, this.weights.head, d.vocabSize);
  }

  /** One pre-norm decoder layer: h + o_proj(attn(norm(h))), then + down(silu(gate(x)) · up(x)). */
  private layer(l: number, h: Float32Array, cache: LlamaKvCache, S: number, positions: Int32Array, invFreq: Float32Array): Float32Array {
    const d = this.description;
    const w = this.weights.layers[l]!;
    const { heads: nh, kvHeads: nkv, headDim: hd, slidingWindow } = d.attention;
    const B = cache.batch;
    const H = d.hiddenSize;
    const I = d.mlp.intermediateSize;
    const N = B * S;
    const P = cache.length - S;
    const T = cache.length;
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
        pk.set(cache.k[l]!.subarray((b * nkv + g) * P * hd, (b * nkv + g + 1) * P * hd), dst);
        pv.set(cache.v[l]!.subarray((b * nkv + g) * P * hd, (b * nkv + g + 1) * P * hd), dst);
        for (let s = 0; s < S; s++) {
          const src = ((b * S + s) * nkv + g) * hd;
          pk.set(k.subarray(src, src + hd), dst + (P + s) * hd);
          pv.set(v.subarray(src, src + hd), dst + (P + s) * hd);
        }
      }
    }
    cache.k[l] = pk;
    cache.v[l] = pv;
    // GQA (repeat_kv): consecutive query heads share a kv head, q head hq reads kv head floor(hq / (nh / nkv)).
    const group = nh / nkv;
    const scale = 1 / Math.sqrt(hd);
    const attn = new Float32Array(N * nh * hd);
    const scores = new Float64Array(T);
    for (let b = 0; b < B; b++) {
      const rowMask = cache.mask[b]!;
      for (let s = 0; s < S; s++) {
        const i = P + s;
        for (let hq = 0; hq < nh; hq++) {
          const kv = (b * nkv + Math.floor(hq / group)) * T * hd;
          const qo = ((b * S + s) * nh + hq) * hd;
          let max = -Infinity;
          for (let j = 0; j < T; j++) {
            // Causal, no pad keys, and (Mistral) the sliding window: i − j < window, the query itself included.
            if (j > i || !rowMask[j] || (slidingWindow !== undefined && i - j >= slidingWindow)) {
              scores[j] = -Infinity;
              continue;
            }
            let dot = 0;
            for (let e = 0; e < hd; e++) dot += q[qo + e]! * pk[kv + j * hd + e]!;
            scores[j] = dot * scale;
            if (scores[j]! > max) max = scores[j]!;
          }
          // A pad query with no visible key: its output is unused; leave it 0 instead of NaN.
          if (max === -Infinity) continue;
          let sum = 0;
          for (let j = 0; j < T; j++) {
            scores[j] = scores[j] === -Infinity ? 0 : Math.exp(scores[j]! - max);
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
    return y;
  }
}
