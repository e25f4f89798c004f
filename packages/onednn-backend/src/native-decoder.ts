import {
  layerHasWindow, MASK_BIAS, modelKinds, requireKinds, ropeInvFreq, stepInvFreq,
  type BufferPool, type EmbeddingWeights, type Group4Tensor, type HeadWeights, type KvPair, type ModelDescription, type ModelKind, type StepShape,
} from '@flexhelm/engine';
import type { KvBuffer, LinearOptions, NativeBinding, NativeLinear, QuantWeight } from './native-addon.js';
import { LLAMA_PART_TENSORS, type DecoderLayerPart, type NativeDecoderBinding, type NativeDecoderLayer, type NativeDecoderShape } from './native-decoder-layer.js';
import { OPT_TENSOR_KEYS } from './opt-shaped-layer.js';

/** A packed decoder layer (every family's: the one native layer). */
export type PackedLayer = NativeDecoderLayer;

/** Packs an fp32 linear layer (`project_in` / `project_out`) with the backend's options. */
export type Fp32Linear = (weight: Float32Array, inFeatures: number, outFeatures: number) => Promise<NativeLinear>;

/**
 * The kinds the native decoder layer computes: every family of the registry (OPT, Llama 2/3, Mistral, Qwen2, Phi-3,
 * Gemma 2, OLMo 2) but the mixtures' routed MLPs, which `MoeMlp` computes beside it.
 */
const NATIVE_DECODER_KINDS: readonly ModelKind[] = [
  'norm:layernorm', 'norm:rmsnorm', 'norm:rmsnorm-plus-one',
  'placement:pre', 'placement:post', 'placement:post-branch', 'placement:pre-and-post-branch',
  'positions:learned', 'rope:default', 'rope:linear', 'rope:dynamic', 'rope:llama3', 'rope:longrope',
  'attention:scale', 'attention:logit-softcap', 'attention:window', 'attention:window-even-layers', 'attention:qk-norm',
  'mlp:relu', 'mlp:swiglu', 'mlp:geglu-tanh',
  'embedding:scale', 'head:logit-softcap',
];

/** The layer's key of a description's tensor key (OPT names its tensors after its checkpoint: ln1W, fc1W, …). */
const layerKey = (key: string): string => OPT_TENSOR_KEYS[key] ?? key;

/** Each part's tensors by the layer's keys and by the description's other names for them. */
const PART_TENSORS: Readonly<Record<string, readonly string[]>> = Object.fromEntries(
  Object.entries(LLAMA_PART_TENSORS).map(([part, keys]) => [part, [...keys, ...Object.keys(OPT_TENSOR_KEYS).filter((k) => keys.includes(OPT_TENSOR_KEYS[k]!))]]),
);

/** The tensors of each part the native layer packs together, as far as `view` declares them (biases may be absent). */
export function partTensorsOf(view: ModelDescription): Record<string, string[]> {
  const declared = new Set(view.layerTensors.map((t) => t.key));
  return Object.fromEntries(Object.entries(PART_TENSORS).map(([part, keys]) => [part, keys.filter((k) => declared.has(k))]));
}

/** The norm weights a placement reads (the q/k projection norms are Llama-style in every family: not among them). */
const PLACEMENT_NORMS = ['inNormW', 'postNormW', 'attnOutNormW', 'mlpOutNormW'];

/**
 * What the oneDNN backend needs to compute a model from its description, by its kinds: the native layer's shape (norm
 * kind and placement, RoPE or none, q/k norm, MLP activation, attention scale and soft-cap, RoPE cos/sin scale),
 * packing a layer (whole, or the resident parts of a streamed one; Gemma's `(1 + w)` norm weights made here), a step's
 * RoPE inverse frequencies (dynamic and longrope change them per call), each layer's mask (Gemma 2's window on even
 * layers only), the embedding (scale; learned positions and `project_in`), the final norm (RMSNorm or LayerNorm, then
 * `project_out`) and the final logit soft-cap. The rest (KV cache, pool, dtype decision, head GEMM) is the backend's.
 */
export class NativeDecoder {
  readonly shape: NativeDecoderShape;
  /** The tensors of each part the native layer packs together, by the description's keys (the backend keeps those it declares). */
  readonly partTable = PART_TENSORS;
  private embedding?: EmbeddingWeights;
  /** The token table kept as a GGUF file's blocks, rows widened on use (the embedding's `tokens` is then empty). */
  tokenRows?: { gather(ids: Int32Array, out: Float32Array): void; close?(): void };
  private projectIn?: NativeLinear;
  private projectOut?: NativeLinear;
  private finalNormW?: Float32Array;
  private finalNormB?: Float32Array;
  /** The positions `embed` got last: the layers' RoPE positions when the step does not carry its own. */
  private embedPositions?: Int32Array;
  private readonly native: NativeBinding & NativeDecoderBinding;
  /** Inverse frequencies when they do not depend on the call (every scaling but `dynamic` and `longrope`). */
  private readonly fixedInvFreq?: Float32Array;
  /** The step whose even-layer window mask `windowed` holds. */
  private windowedFor?: Float32Array;
  private windowed?: Float32Array;
  private windowedShape = '';
  /** The final norm's weight as the kernel multiplies it (`1 + w` for Gemma), made once per weight array. */
  private finalWeight?: { from: Float32Array; weight: Float32Array };

  constructor(
    readonly description: ModelDescription,
    native: NativeBinding,
  ) {
    const d = description;
    requireKinds(d, 'the oneDNN backend', NATIVE_DECODER_KINDS, 'the reference or onnxruntime backend may compute it');
    if (d.norm.kind === 'layernorm' && d.norm.placement !== 'pre' && d.norm.placement !== 'post') {
      throw new Error(`OneDnnBackend: ${d.name}: the native layer has LayerNorm before (pre) or after (post) the residual add, not placement ${d.norm.placement}; the reference backend computes it`);
    }
    this.native = native as NativeBinding & NativeDecoderBinding;
    const a = d.attention;
    const scaling = d.positions.kind === 'rope' ? d.positions.scaling : undefined;
    this.shape = {
      hidden: d.hiddenSize, heads: a.heads, kvHeads: a.kvHeads, headDim: a.headDim, ffn: d.mlp.intermediateSize, eps: d.norm.eps,
      placement: d.norm.placement as NativeDecoderShape['placement'],
      ...(d.norm.kind === 'layernorm' ? { norm: 'layernorm' as const } : {}),
      ...(d.positions.kind === 'rope' ? {} : { rope: false }),
      qkNorm: a.qkNorm === 'projection',
      activation: d.mlp.kind === 'geglu-tanh' ? 'gelu-tanh' : d.mlp.kind === 'relu' ? 'relu' : 'silu',
      ...(a.scale !== undefined ? { attnScale: a.scale } : {}),
      ...(a.logitSoftcap !== undefined ? { logitSoftcap: a.logitSoftcap } : {}),
      ...(scaling?.kind === 'longrope' ? { ropeScale: scaling.cosSinScale } : {}),
    };
    if (d.positions.kind === 'rope' && scaling?.kind !== 'dynamic' && scaling?.kind !== 'longrope') this.fixedInvFreq = ropeInvFreq(a.headDim, d.positions.theta, scaling);
  }

  /** The kinds of the description (for messages and tests). */
  get kinds(): ModelKind[] {
    return modelKinds(this.description);
  }

  /**
   * The RoPE inverse frequencies for a step at these positions: dynamic NTK grows its base with the longest one,
   * longrope picks its long factors once the call's key count (`pastLen + seq`, padding included) exceeds the original
   * context, as the reference backend and transformers do.
   */
  invFreq(positions: Int32Array, keys: number): Float32Array {
    return this.fixedInvFreq ?? stepInvFreq(this.description, positions, keys);
  }

  /**
   * The additive mask layer `index` attends with: the step's, or for a window on some layers only (Gemma 2's even
   * layers) the step's with keys j where `pastLen + s − j ≥ window` masked too (made once per step).
   */
  maskFor(index: number, step: StepShape): Float32Array {
    const d = this.description;
    if (d.attention.slidingWindowLayers !== 'even' || !layerHasWindow(d, index)) return step.maskBias;
    const { batch: B, seq: S, pastLen: P } = step;
    // The same mask array of a step of the same shape (every even layer of one step): made once.
    if (this.windowedFor === step.maskBias && this.windowed?.length === step.maskBias.length && this.windowedShape === `${B}×${S}+${P}`) return this.windowed;
    const T = P + S;
    const window = d.attention.slidingWindow!;
    const mask = Float32Array.from(step.maskBias);
    for (let r = 0; r < B * S; r++) {
      const s = r % S;
      for (let j = 0; j <= P + s - window; j++) mask[r * T + j] = MASK_BIAS;
    }
    this.windowedFor = step.maskBias;
    this.windowedShape = `${B}×${S}+${P}`;
    this.windowed = mask;
    return mask;
  }

  /** Bytes of a layer's fp32 weights (the accuracy gate holds fp32 and bf16 copies side by side). */
  get layerWeightBytes(): number {
    const { hidden: H, heads, kvHeads, headDim, ffn } = this.shape;
    const mlpMatrices = this.shape.activation === 'relu' ? 2 : 3;
    return 4 * (H * (heads + 2 * kvHeads) * headDim + heads * headDim * H + mlpMatrices * H * ffn);
  }

  /** Token rows times the embedding scale (Gemma: sqrt(hidden), the factor rounded to float32, the compute dtype of activations). */
  scaleEmbedding(rows: Float32Array): void {
    const scale = this.description.embedding.scale;
    if (scale === undefined || scale === 1) return;
    const s = Math.fround(scale);
    for (let i = 0; i < rows.length; i++) rows[i] = rows[i]! * s;
  }

  /** A norm weight as the kernel multiplies it: Gemma's `rmsnorm-plus-one` is `(x / rms) · (1 + w)`, so `1 + w` in float32. */
  private normWeight(w: Float32Array): Float32Array {
    if (this.description.norm.kind !== 'rmsnorm-plus-one') return w;
    return w.map((v) => 1 + v);
  }

  /** Packs a layer's `parts` (default all) from `[in, out]` weights keyed like the description's layer tensors (matrices may be ggml blocks). */
  createLayer(weights: Record<string, Float32Array | Uint16Array | QuantWeight | Group4Tensor | undefined>, options: LinearOptions & { parts?: string[] }, base?: PackedLayer): Promise<NativeDecoderLayer> {
    const given = Object.fromEntries(Object.entries(weights).map(([key, w]) => [layerKey(key), w]));
    for (const key of PLACEMENT_NORMS) {
      const w = given[key];
      if (w instanceof Float32Array) given[key] = this.normWeight(w);
    }
    return this.native.createDecoderLayer(this.shape, given, options as LinearOptions & { parts?: DecoderLayerPart[] }, base as NativeDecoderLayer | undefined);
  }

  async loadEmbedding(weights: EmbeddingWeights, linear: Fp32Linear): Promise<void> {
    const d = this.description;
    if (d.positions.kind === 'learned' && !weights.positions) throw new Error(`OneDnnBackend: ${d.name}'s embedding has no learned position table (decoder.embed_positions.weight)`);
    this.embedding = weights;
    if (weights.projectIn) this.projectIn = await linear(weights.projectIn, d.embedding.dim, d.hiddenSize);
  }

  async loadHead(weights: HeadWeights, linear: Fp32Linear): Promise<void> {
    const d = this.description;
    if (d.norm.final && !weights.finalLnW) throw new Error(`OneDnnBackend: ${d.name}'s head has no final norm weight (model.norm.weight)`);
    if (d.norm.final && d.norm.kind === 'layernorm' && !weights.finalLnB) throw new Error(`OneDnnBackend: ${d.name}'s head has no final LayerNorm bias`);
    this.finalNormW = d.norm.final ? weights.finalLnW : undefined;
    this.finalNormB = d.norm.final ? weights.finalLnB : undefined;
    if (weights.projectOut) this.projectOut = await linear(weights.projectOut, d.hiddenSize, d.embedding.dim);
  }

  /**
   * Token rows (times the embedding scale; through `project_in` where the embedding is narrower), plus the learned
   * position rows at `positions` (OPT); rotary positions enter in each layer instead.
   */
  async embed(ids: Int32Array, positions: Int32Array, pool: BufferPool): Promise<Float32Array> {
    const e = this.embedding;
    if (!e) throw new Error('OneDnnBackend: loadEmbedding was not called');
    this.embedPositions = positions;
    const W = this.description.embedding.dim;
    const H = this.description.hiddenSize;
    let tok = pool.take(ids.length * W);
    if (this.tokenRows) this.tokenRows.gather(ids, tok);
    else for (let t = 0; t < ids.length; t++) tok.set(e.tokens.subarray(ids[t]! * W, (ids[t]! + 1) * W), t * W);
    this.scaleEmbedding(tok);
    if (this.projectIn) {
      const projected = pool.take(ids.length * H);
      await this.projectIn.run(tok, ids.length, projected);
      pool.give(tok);
      tok = projected;
    }
    const table = e.positions;
    if (this.description.positions.kind === 'learned' && table) {
      for (let t = 0; t < ids.length; t++) {
        const p = positions[t]! * H;
        const o = t * H;
        for (let i = 0; i < H; i++) tok[o + i]! += table[p + i]!;
      }
    }
    return tok;
  }

  /**
   * The step's rotary positions (the step's own, else what `embed` got), their inverse frequencies and layer
   * `index`'s mask; without rope (learned positions, added at embedding) only the mask.
   */
  private rotary(s: StepShape, index: number): { positions: Int32Array | null; invFreq: Float32Array | null; mask: Float32Array } {
    if (this.shape.rope === false) return { positions: null, invFreq: null, mask: this.maskFor(index, s) };
    const positions = s.positions ?? this.embedPositions;
    if (!positions || positions.length !== s.batch * s.seq) {
      throw new Error(`OneDnnBackend: a ${this.description.family} layer needs the step's ${s.batch * s.seq} positions (StepShape.positions, or embed() for this step first)`);
    }
    return { positions, invFreq: this.invFreq(positions, s.pastLen + s.seq), mask: this.maskFor(index, s) };
  }

  run(layer: PackedLayer, index: number, s: StepShape, hidden: Float32Array, past: KvPair, y: Float32Array, k: Float32Array, v: Float32Array): Promise<void> {
    const { positions, invFreq, mask } = this.rotary(s, index);
    return (layer as NativeDecoderLayer).run(hidden, past.k, past.v, mask, positions, invFreq, s.batch, s.seq, s.pastLen, y, k, v);
  }

  /** The buffers hold kvDtypeOf's element type (the backend checks a caller's): bf16 bits for bf16 layers. */
  runCached(layer: PackedLayer, index: number, s: StepShape, hidden: Float32Array, y: Float32Array, k: KvBuffer, v: KvBuffer, capacity: number): Promise<void> {
    const { positions, invFreq, mask } = this.rotary(s, index);
    return (layer as NativeDecoderLayer).runCached(hidden, mask, positions, invFreq, s.batch, s.seq, s.pastLen, y, k, v, capacity);
  }

  /**
   * Every layer of the step in one native call (their caches in place, as `runCached`), the last writing `y`; `spare`
   * is scratch of `y`'s size. One call instead of one per layer: each crosses threads three times.
   */
  runCachedStack(layers: readonly PackedLayer[], s: StepShape, hidden: Float32Array, y: Float32Array, spare: Float32Array, k: readonly KvBuffer[], v: readonly KvBuffer[], capacity: number): Promise<void> {
    const { positions, invFreq } = this.rotary(s, 0);
    const masks = layers.map((_, i) => this.maskFor(i, s));
    return this.native.runDecoderStack([...layers], hidden, masks, positions, invFreq, s.batch, s.seq, s.pastLen, y, spare, [...k], [...v], capacity);
  }

  /** The head GEMM's input for `rows` final hidden rows: the final norm (RMSNorm or LayerNorm) into a new aligned array, then `project_out`. */
  async headInput(hidden: Float32Array, rows: number): Promise<Float32Array> {
    const d = this.description;
    const weight = this.finalNormW;
    if (d.norm.final && !weight) throw new Error('OneDnnBackend: loadHead was not called');
    let h = hidden;
    if (weight) {
      h = this.native.allocFloat32(rows * this.shape.hidden);
      if (d.norm.kind === 'layernorm') {
        await this.native.layerNorm(hidden, rows, this.shape.hidden, weight, this.finalNormB!, this.shape.eps, h);
      } else {
        if (this.finalWeight?.from !== weight) this.finalWeight = { from: weight, weight: this.normWeight(weight) };
        await this.native.rmsNorm(hidden, rows, this.shape.hidden, this.finalWeight.weight, this.shape.eps, h);
      }
    }
    if (this.projectOut) {
      const y = this.native.allocFloat32(rows * d.embedding.dim);
      await this.projectOut.run(h, rows, y);
      h = y;
    }
    return h;
  }

  dispose(): void {
    // A token table read from its file lets the file go.
    this.tokenRows?.close?.();
    this.tokenRows = undefined;
    this.embedding = undefined;
    this.projectIn = this.projectOut = undefined;
    this.embedPositions = undefined;
    this.windowed = this.windowedFor = undefined;
  }

  /** Gemma 2's final soft-cap on the logits in place: `cap · tanh(logits / cap)` (float32, as transformers). */
  capLogits(logits: Float32Array): void {
    const cap = this.description.finalLogitSoftcap;
    if (cap === undefined) return;
    for (let i = 0; i < logits.length; i++) logits[i] = cap * Math.tanh(logits[i]! / cap);
  }
}
