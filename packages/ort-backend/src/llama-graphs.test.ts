import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { llamaDescriptionFromHf, type LlamaDescription, type LlamaLayerTensorKey, llamaEmbed, llamaHead, llamaLayer, stepInvFreq, descriptionByName, SeededUniform, transposed } from '@flexhelm/engine';
import {
  LLAMA_HEAD_INPUT,
  LLAMA_TABLE_INPUT,
  LLAMA_TENSOR_NAME,
  llamaEmbeddingGraph,
  llamaHeadGraph,
  llamaLayerGraph,
  llamaLayerStageGraphs,
  llamaStreamedHeadGraph,
  llamaStreamedLayerGraph,
  type LlamaLayerTensors,
} from './llama-graphs.js';
import { MASK_BIAS, type LayerTensors, type KvPair } from '@flexhelm/contract';
import { ropeCosSin } from './rope-cos-sin.js';
import { concatRows } from './ort-worker-kv-cache.js';

/** The shapes of the golden models (llama/check.md), a bias-carrying Llama with one kv head, and Qwen2's. */
const CONFIGS: Record<string, Record<string, unknown>> = {
  'llama-a': { model_type: 'llama', hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 4, intermediate_size: 172, vocab_size: 1000, max_position_embeddings: 128, rms_norm_eps: 1e-6 },
  'llama-b': {
    model_type: 'llama', hidden_size: 64, num_hidden_layers: 3, num_attention_heads: 8, num_key_value_heads: 2, head_dim: 8, intermediate_size: 192, vocab_size: 1200,
    max_position_embeddings: 256, rms_norm_eps: 1e-5, rope_theta: 500000,
    rope_scaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 256 },
  },
  'mistral-a': { model_type: 'mistral', hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 160, vocab_size: 1100, max_position_embeddings: 128, rms_norm_eps: 1e-5, sliding_window: 4 },
  'qwen2-kv1': { model_type: 'qwen2', hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 1, intermediate_size: 160, vocab_size: 1500, max_position_embeddings: 128, rope_theta: 1e6, tie_word_embeddings: true },
  'llama-biases-kv1': {
    model_type: 'llama', hidden_size: 48, num_hidden_layers: 2, num_attention_heads: 6, num_key_value_heads: 1, intermediate_size: 100, vocab_size: 700, max_position_embeddings: 8,
    attention_bias: true, mlp_bias: true, rope_scaling: { type: 'dynamic', factor: 2 },
  },
};

/** A model as checkpoints hold it (Linear weights `[out, in]`). */
interface Model {
  d: LlamaDescription;
  embedding: Float32Array;
  layers: LayerTensors[];
  finalNorm: Float32Array;
  /** `[V, H]`: the embedding itself when tied. */
  head: Float32Array;
}

/** Random weights: fan-in linear weights, norms 1 ± 0.25, biases ± 0.1, embeddings ± 1. */
function randomModel(config: Record<string, unknown>, seed: number): Model {
  const d = llamaDescriptionFromHf(config);
  const rng = new SeededUniform(seed);
  const fill = (n: number, centre: number, half: number) => Float32Array.from({ length: n }, () => centre + (2 * rng.next() - 1) * half);
  const H = d.hiddenSize;
  const embedding = fill(d.vocabSize * H, 0, 1);
  const layers: LayerTensors[] = [];
  for (let l = 0; l < d.layers; l++) {
    const w: LayerTensors = {};
    for (const t of d.layerTensors) {
      const n = t.shape.reduce((a, b) => a * b, 1);
      w[t.key] = t.shape.length === 1 ? (t.key.endsWith('NormW') ? fill(n, 1, 0.25) : fill(n, 0, 0.1)) : fill(n, 0, Math.sqrt(3 / t.shape[0]!));
    }
    layers.push(w);
  }
  return { d, embedding, layers, finalNorm: fill(H, 1, 0.25), head: d.embedding.tiedHead ? embedding : fill(d.vocabSize * H, 0, Math.sqrt(3 / H)) };
}

/**
 * What `BatchRun.step` makes of a step of left-padded rows: model positions (0 at a row's first real token, pads −1)
 * and the additive mask `[B, S, W]` over W key slots (causal, no pads, the sliding window; slots ≥ T hidden).
 */
class StepMasks {
  private readonly rows: number[][];
  constructor(
    private readonly d: LlamaDescription,
    batch: number,
  ) {
    this.rows = Array.from({ length: batch }, () => []);
  }

  /** Tokens held before the next step. */
  get length(): number {
    return this.rows[0]!.length;
  }

  next(mask: number[][]): { positions: Int32Array; bias: (W: number) => Float32Array } {
    const B = this.rows.length;
    const S = mask[0]!.length;
    const P = this.length;
    const positions = new Int32Array(B * S);
    for (let b = 0; b < B; b++) {
      let seen = this.rows[b]!.reduce((a, m) => a + m, 0);
      for (let s = 0; s < S; s++) {
        this.rows[b]!.push(mask[b]![s]!);
        seen += mask[b]![s]!;
        positions[b * S + s] = seen * mask[b]![s]! - 1;
      }
    }
    const window = this.d.attention.slidingWindow ?? Infinity;
    const bias = (W: number) => {
      const m = new Float32Array(B * S * W).fill(MASK_BIAS);
      for (let b = 0; b < B; b++) {
        for (let s = 0; s < S; s++) {
          const i = P + s;
          for (let j = 0; j <= i; j++) if (this.rows[b]![j] && i - j < window) m[(b * S + s) * W + j] = 0;
        }
      }
      return m;
    };
    return { positions, bias };
  }
}

/** llama-reference.ts's functions, stage by stage over a KV cache kept here: the yardstick. */
class ReferenceForward {
  private readonly past: KvPair[];
  private readonly masks: StepMasks;
  constructor(
    private readonly m: Model,
    private readonly batch: number,
  ) {
    this.past = m.layers.map(() => ({ k: new Float32Array(0), v: new Float32Array(0) }));
    this.masks = new StepMasks(m.d, batch);
  }

  /** Logits `[B, S, V]` of one step. */
  forward(ids: number[][], mask: number[][]): Float32Array {
    const d = this.m.d;
    const B = this.batch;
    const S = ids[0]!.length;
    const P = this.masks.length;
    const { positions, bias } = this.masks.next(mask);
    const step = { batch: B, seq: S, pastLen: P, maskBias: bias(P + S), positions };
    const invFreq = stepInvFreq(d, positions);
    let h = llamaEmbed(d, this.m.embedding, Int32Array.from(ids.flat()));
    this.m.layers.forEach((w, l) => {
      const out = llamaLayer(d, w, step, invFreq, h, this.past[l]!);
      h = out.hidden;
      this.past[l] = out.present;
    });
    return llamaHead(d, { finalLnW: this.m.finalNorm, lmHead: this.m.head }, h, B * S);
  }
}

/** `[out, in]` checkpoint tensors → the description's `[in, out]` layout. */
function graphLayout(d: LlamaDescription, w: LayerTensors): LlamaLayerTensors {
  const out: LlamaLayerTensors = {};
  for (const t of d.layerTensors) out[t.key] = t.shape.length === 2 ? transposed(w[t.key]!, t.shape[1]!, t.shape[0]!) : w[t.key];
  return out;
}

type Form = 'stages' | 'single' | 'streamed';

/**
 * The reference's forward computed by the graphs of one form, with a KV cache kept here: `stages` (the worker's
 * resident layers: qkv, then rest over a cache buffer with unused, masked slots), `single` (one resident graph with
 * past and present), `streamed` (weights fed as inputs, head too).
 */
class GraphForward {
  private readonly past: KvPair[];
  private readonly masks: StepMasks;

  private constructor(
    private readonly m: Model,
    private readonly form: Form,
    private readonly embed: ort.InferenceSession,
    private readonly layers: (ort.InferenceSession | { qkv: ort.InferenceSession; rest: ort.InferenceSession })[],
    private readonly head: ort.InferenceSession,
    private readonly batch: number,
  ) {
    this.past = m.layers.map(() => ({ k: new Float32Array(0), v: new Float32Array(0) }));
    this.masks = new StepMasks(m.d, batch);
  }

  static async create(m: Model, form: Form, batch: number): Promise<GraphForward> {
    const d = m.d;
    const s = (bytes: Uint8Array) => ort.InferenceSession.create(bytes);
    const streamedLayer = form === 'streamed' ? await s(llamaStreamedLayerGraph(d)) : undefined;
    const layers = await Promise.all(
      m.layers.map(async (lw) => {
        if (streamedLayer) return streamedLayer;
        if (form === 'single') return s(llamaLayerGraph(d, graphLayout(d, lw)));
        const { qkv, rest } = llamaLayerStageGraphs(d, graphLayout(d, lw));
        return { qkv: await s(qkv), rest: await s(rest) };
      }),
    );
    const head = form === 'streamed' ? await s(llamaStreamedHeadGraph(d)) : await s(llamaHeadGraph(d, { finalNorm: m.finalNorm, head: m.head }));
    // The streamed form also reads the token table as an input (how a tied head shares it).
    return new GraphForward(m, form, await s(form === 'streamed' ? llamaEmbeddingGraph(d) : llamaEmbeddingGraph(d, m.embedding)), layers, head, batch);
  }

  /** Logits `[B, S, V]` of one step, as `ReferenceForward.forward`. */
  async forward(ids: number[][], mask: number[][]): Promise<Float32Array> {
    const d = this.m.d;
    const { kvHeads: nkv, headDim: hd } = d.attention;
    const B = this.batch;
    const S = ids[0]!.length;
    const P = this.masks.length;
    const T = P + S;
    const { positions, bias } = this.masks.next(mask);
    const { cos, sin } = ropeCosSin(positions, stepInvFreq(d, positions));
    const tensor = (data: Float32Array, dims: number[]) => new ort.Tensor('float32', data, dims);
    const maskOver = (W: number) => tensor(bias(W), [B, 1, S, W]);
    const cosT = tensor(cos, [B * S, hd]);
    const sinT = tensor(sin, [B * S, hd]);
    const idsT = new ort.Tensor('int64', BigInt64Array.from(ids.flat().map(BigInt)), [B, S]);
    const table: Record<string, ort.Tensor> = this.form === 'streamed' ? { [LLAMA_TABLE_INPUT]: tensor(this.m.embedding, [d.vocabSize, d.hiddenSize]) } : {};
    let x = (await this.embed.run({ ids: idsT, ...table })).hidden!;
    for (const [l, session] of this.layers.entries()) {
      const past = this.past[l]!;
      const pastDims = [B, nkv, P, hd];
      if ('qkv' in session) {
        const a = await session.qkv.run({ x, cos: cosT, sin: sinT });
        const present = { k: concatRows(past.k, a.k!.data as Float32Array, B * nkv, hd), v: concatRows(past.v, a.v!.data as Float32Array, B * nkv, hd) };
        this.past[l] = present;
        // As the worker's cache: a buffer with 3 unused zero slots per row, hidden by the mask.
        const cap = T + 3;
        const slots = (t: Float32Array) => tensor(concatRows(t, new Float32Array(B * nkv * 3 * hd), B * nkv, hd), [B, nkv, cap, hd]);
        x = (await session.rest.run({ x, q: a.q!, cache_k: slots(present.k), cache_v: slots(present.v), mask: maskOver(cap) })).y!;
      } else {
        const weights: Record<string, ort.Tensor> = {};
        if (this.form === 'streamed') {
          const lw = graphLayout(d, this.m.layers[l]!);
          for (const t of d.layerTensors) weights[LLAMA_TENSOR_NAME[t.key as LlamaLayerTensorKey]] = tensor(lw[t.key as LlamaLayerTensorKey]!, t.shape);
        }
        const out = await session.run({ x, mask: maskOver(T), past_k: tensor(past.k, pastDims), past_v: tensor(past.v, pastDims), cos: cosT, sin: sinT, ...weights });
        expect(out.new_k!.dims).toEqual([B, nkv, S, hd]);
        this.past[l] = { k: out.present_k!.data as Float32Array, v: out.present_v!.data as Float32Array };
        x = out.y!;
      }
    }
    const headWeights: Record<string, ort.Tensor> =
      this.form === 'streamed' ? { [LLAMA_HEAD_INPUT.finalNorm]: tensor(this.m.finalNorm, [d.hiddenSize]), [LLAMA_HEAD_INPUT.head]: tensor(this.m.head, [d.vocabSize, d.hiddenSize]) } : {};
    const logits = await this.head.run({ x: tensor(x.data as Float32Array, [B * S, d.hiddenSize]), ...headWeights });
    return logits.logits!.data as Float32Array;
  }
}

function argmaxRow(x: Float32Array, row: number, V: number): number {
  let best = 0;
  for (let i = 1; i < V; i++) if (x[row * V + i]! > x[row * V + best]!) best = i;
  return best;
}

describe('Llama-family onnxruntime graphs against LlamaReference', () => {
  // Left-padded rows of 7, 4 and 1 tokens (10 tokens then 4 decode steps: past the sliding window of 4).
  const prompts = [
    [1, 17, 250, 33, 600, 5, 90],
    [1, 44, 45, 46],
    [1],
  ];
  const L = 7;
  const ids = prompts.map((p) => [...Array<number>(L - p.length).fill(0), ...p]);
  const mask = prompts.map((p) => [...Array<number>(L - p.length).fill(0), ...p.map(() => 1)]);

  for (const [name, config] of Object.entries(CONFIGS)) {
    for (const form of ['stages', 'single', 'streamed'] as const) {
      it(`${name}, ${form}: prompt and 4 cached decode steps within 1e-4 of the reference (real positions)`, async () => {
        const m = randomModel(config, name.length * 7 + 1);
        const V = m.d.vocabSize;
        const graphs = await GraphForward.create(m, form, prompts.length);
        const ref = new ReferenceForward(m, prompts.length);
        let want = ref.forward(ids, mask);
        let got = await graphs.forward(ids, mask);
        let worst = 0;
        for (let b = 0; b < prompts.length; b++) {
          for (let t = 0; t < L; t++) {
            if (!mask[b]![t]) continue;
            for (let v = 0; v < V; v++) worst = Math.max(worst, Math.abs(got[(b * L + t) * V + v]! - want[(b * L + t) * V + v]!));
          }
        }
        let next = prompts.map((_, b) => argmaxRow(want, b * L + L - 1, V));
        for (let step = 0; step < 4; step++) {
          want = ref.forward(next.map((id) => [id]), prompts.map(() => [1]));
          got = await graphs.forward(next.map((id) => [id]), prompts.map(() => [1]));
          for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i]! - want[i]!));
          next = prompts.map((_, b) => argmaxRow(want, b, V));
        }
        // Logits here reach a few units: the tolerance of check.md's float32 engines, far below any bug's size there.
        expect(worst).toBeLessThan(1e-4);
      });
    }
  }

  it('the sliding window matters in these tests: without it the mistral-shaped model differs', async () => {
    const windowed = randomModel(CONFIGS['mistral-a']!, 5);
    const open: Model = { ...windowed, d: { ...windowed.d, attention: { ...windowed.d.attention, slidingWindow: undefined } } };
    const graphs = await GraphForward.create(windowed, 'stages', prompts.length);
    const got = await graphs.forward(ids, mask);
    const wrong = new ReferenceForward(open, prompts.length).forward(ids, mask);
    const right = new ReferenceForward(windowed, prompts.length).forward(ids, mask);
    const diff = (a: Float32Array, b: Float32Array) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i]!)), 0);
    // Row 0 has no pads; its last position sees 7 keys, the window only the last 4.
    const V = windowed.d.vocabSize;
    const row0Last = (x: Float32Array) => x.subarray((L - 1) * V, L * V);
    expect(diff(row0Last(got), row0Last(right))).toBeLessThan(1e-4);
    expect(diff(row0Last(wrong), row0Last(right))).toBeGreaterThan(1e-2);
  });
});

describe('Llama-family graph inputs are checked', () => {
  it('refuses a description with kinds the layer lacks, naming what does not fit', () => {
    const opt = descriptionByName('opt-125m');
    expect(() => llamaStreamedLayerGraph({ ...opt, mlp: { ...opt.mlp, kind: 'gelu' } })).toThrow(/onnxruntime does not compute mlp:gelu yet \(opt-125m is a opt model\)/);
  });

  it('refuses weights of the wrong size or missing, naming the tensor', () => {
    const m = randomModel(CONFIGS['qwen2-kv1']!, 1);
    const d = m.d;
    const w = graphLayout(d, m.layers[0]!);
    expect(() => llamaLayerStageGraphs(d, { ...w, kW: new Float32Array(10) })).toThrow(/kW holds 10 values, its shape \[64, 16\] needs 1024/);
    expect(() => llamaLayerGraph(d, { ...w, qB: undefined })).toThrow(/qB \(self_attn\.q_proj\.bias\) is missing/);
    expect(() => llamaHeadGraph(d, { finalNorm: m.finalNorm, head: new Float32Array(5) })).toThrow(/output projection holds 5 values, \[1500, 64\] needs 96000/);
    expect(() => llamaEmbeddingGraph(d, new Float32Array(3))).toThrow(/table holds 3 values/);
  });
});
