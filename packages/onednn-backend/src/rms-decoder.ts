import {
  layerHasWindow, MASK_BIAS, modelKinds, requireKinds, ropeInvFreq, stepInvFreq,
  type BufferPool, type EmbeddingWeights, type HeadWeights, type KvPair, type ModelDescription, type ModelKind, type StepShape,
} from '@flexhelm/engine';
import type { DecoderKind, PackedLayer } from './decoder-kind.js';
import type { KvBuffer, LinearOptions, NativeBinding, QuantWeight } from './native-addon.js';
import { LLAMA_PART_TENSORS, type LlamaLayerPart, type NativeLlamaBinding, type NativeLlamaLayer, type NativeLlamaShape } from './native-llama.js';

/**
 * The kinds the native rotary decoder layer computes: every rotary family of the registry (Llama 2/3, Mistral, Qwen2,
 * Phi-3, Gemma 2, OLMo 2). OPT (`norm:layernorm`, `positions:learned`, `mlp:relu`) has its own native layer.
 */
const RMS_DECODER_KINDS: readonly ModelKind[] = [
  'norm:rmsnorm', 'norm:rmsnorm-plus-one',
  'placement:pre', 'placement:post-branch', 'placement:pre-and-post-branch',
  'rope:default', 'rope:linear', 'rope:dynamic', 'rope:llama3', 'rope:longrope',
  'attention:scale', 'attention:logit-softcap', 'attention:window', 'attention:window-even-layers', 'attention:qk-norm',
  'mlp:swiglu', 'mlp:geglu-tanh',
  'embedding:scale', 'head:logit-softcap',
];

/** The norm weights a placement reads (the q/k projection norms are Llama-style in every family: not among them). */
const PLACEMENT_NORMS = ['inNormW', 'postNormW', 'attnOutNormW', 'mlpOutNormW'];

/**
 * What the oneDNN backend needs to compute a rotary model from its description, by its kinds: the native layer's shape
 * (placement, q/k norm, activation, attention scale and soft-cap, RoPE cos/sin scale), packing a layer (whole, or the
 * resident parts of a streamed one; Gemma's `(1 + w)` norm weights made here), a step's RoPE inverse frequencies
 * (dynamic and longrope change them per call), each layer's mask (Gemma 2's window on even layers only), the embedding
 * scale, the final norm and the final logit soft-cap. The rest (KV cache, pool, dtype decision, head GEMM) is the
 * backend's.
 */
export class RmsDecoder implements DecoderKind {
  readonly shape: NativeLlamaShape;
  readonly partTable = LLAMA_PART_TENSORS;
  private tokens?: Float32Array;
  private finalNormW?: Float32Array;
  /** The positions `embed` got last: the layers' RoPE positions when the step does not carry its own. */
  private embedPositions?: Int32Array;
  private readonly native: NativeBinding & NativeLlamaBinding;
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
    requireKinds(d, 'the oneDNN backend', RMS_DECODER_KINDS, 'the reference or onnxruntime backend may compute it');
    if (!d.norm.final || d.positions.kind !== 'rope') throw new Error(`OneDnnBackend: ${d.name}: the rotary layer needs a final norm and rotary positions`);
    this.native = native as NativeBinding & NativeLlamaBinding;
    const a = d.attention;
    const scaling = d.positions.scaling;
    this.shape = {
      hidden: d.hiddenSize, heads: a.heads, kvHeads: a.kvHeads, headDim: a.headDim, ffn: d.mlp.intermediateSize, eps: d.norm.eps,
      placement: d.norm.placement as NativeLlamaShape['placement'],
      qkNorm: a.qkNorm === 'projection',
      activation: d.mlp.kind === 'geglu-tanh' ? 'gelu-tanh' : 'silu',
      ...(a.scale !== undefined ? { attnScale: a.scale } : {}),
      ...(a.logitSoftcap !== undefined ? { logitSoftcap: a.logitSoftcap } : {}),
      ...(scaling?.kind === 'longrope' ? { ropeScale: scaling.cosSinScale } : {}),
    };
    if (scaling?.kind !== 'dynamic' && scaling?.kind !== 'longrope') this.fixedInvFreq = ropeInvFreq(a.headDim, d.positions.theta, scaling);
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
    return 4 * (H * (heads + 2 * kvHeads) * headDim + heads * headDim * H + 3 * H * ffn);
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
  createLayer(weights: Record<string, Float32Array | Uint16Array | QuantWeight | undefined>, options: LinearOptions & { parts?: string[] }, base?: PackedLayer): Promise<NativeLlamaLayer> {
    const given = { ...weights };
    for (const key of PLACEMENT_NORMS) {
      const w = given[key];
      if (w instanceof Float32Array) given[key] = this.normWeight(w);
    }
    return this.native.createLlamaLayer(this.shape, given, options as LinearOptions & { parts?: LlamaLayerPart[] }, base as NativeLlamaLayer | undefined);
  }

  async loadEmbedding(weights: EmbeddingWeights): Promise<void> {
    this.tokens = weights.tokens;
  }

  async loadHead(weights: HeadWeights): Promise<void> {
    if (!weights.finalLnW) throw new Error(`OneDnnBackend: ${this.description.name}'s head has no final norm weight (model.norm.weight)`);
    this.finalNormW = weights.finalLnW;
  }

  /** Token rows only (times the embedding scale): rotary positions enter in each layer. */
  async embed(ids: Int32Array, positions: Int32Array, pool: BufferPool): Promise<Float32Array> {
    const tokens = this.tokens;
    if (!tokens) throw new Error('OneDnnBackend: loadEmbedding was not called');
    this.embedPositions = positions;
    const H = this.description.hiddenSize;
    const tok = pool.take(ids.length * H);
    for (let t = 0; t < ids.length; t++) tok.set(tokens.subarray(ids[t]! * H, (ids[t]! + 1) * H), t * H);
    this.scaleEmbedding(tok);
    return tok;
  }

  /** The step's rotary positions (the step's own, else what `embed` got), their inverse frequencies and layer `index`'s mask. */
  private rotary(s: StepShape, index: number): { positions: Int32Array; invFreq: Float32Array; mask: Float32Array } {
    const positions = s.positions ?? this.embedPositions;
    if (!positions || positions.length !== s.batch * s.seq) {
      throw new Error(`OneDnnBackend: a ${this.description.family} layer needs the step's ${s.batch * s.seq} positions (StepShape.positions, or embed() for this step first)`);
    }
    return { positions, invFreq: this.invFreq(positions, s.pastLen + s.seq), mask: this.maskFor(index, s) };
  }

  run(layer: PackedLayer, index: number, s: StepShape, hidden: Float32Array, past: KvPair, y: Float32Array, k: Float32Array, v: Float32Array): Promise<void> {
    const { positions, invFreq, mask } = this.rotary(s, index);
    return (layer as NativeLlamaLayer).run(hidden, past.k, past.v, mask, positions, invFreq, s.batch, s.seq, s.pastLen, y, k, v);
  }

  /** The buffers hold kvDtypeOf's element type (the backend checks a caller's): bf16 bits for bf16 layers. */
  runCached(layer: PackedLayer, index: number, s: StepShape, hidden: Float32Array, y: Float32Array, k: KvBuffer, v: KvBuffer, capacity: number): Promise<void> {
    const { positions, invFreq, mask } = this.rotary(s, index);
    return (layer as NativeLlamaLayer).runCached(hidden, mask, positions, invFreq, s.batch, s.seq, s.pastLen, y, k, v, capacity);
  }

  /** The final RMSNorm of `rows` hidden rows into a new aligned array. */
  async headInput(hidden: Float32Array, rows: number): Promise<Float32Array> {
    const weight = this.finalNormW;
    if (!weight) throw new Error('OneDnnBackend: loadHead was not called');
    if (this.finalWeight?.from !== weight) this.finalWeight = { from: weight, weight: this.normWeight(weight) };
    const y = this.native.allocFloat32(rows * this.shape.hidden);
    await this.native.rmsNorm(hidden, rows, this.shape.hidden, this.finalWeight.weight, this.shape.eps, y);
    return y;
  }

  dispose(): void {
    this.tokens = undefined;
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
