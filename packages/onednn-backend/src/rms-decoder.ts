import { layerHasWindow, MASK_BIAS, modelKinds, requireKinds, ropeInvFreq, stepInvFreq, type ModelDescription, type ModelKind, type StepShape } from '@flexhelm/engine';
import type { LinearOptions, NativeBinding } from './native-addon.js';
import type { LlamaLayerPart, NativeLlamaBinding, NativeLlamaLayer, NativeLlamaShape } from './native-llama.js';

/**
 * The kinds the native rotary decoder layer computes: every rotary family of the registry (Llama 2/3, Mistral, Qwen2,
 * Phi-3, Gemma 2, OLMo 2). OPT (`norm:layernorm`, `positions:learned`, `mlp:relu`) has its own native layer.
 */
export const RMS_DECODER_KINDS: readonly ModelKind[] = [
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
export class RmsDecoder {
  readonly shape: NativeLlamaShape;
  private readonly native: NativeBinding & NativeLlamaBinding;
  /** Inverse frequencies when they do not depend on the call (every scaling but `dynamic` and `longrope`). */
  private readonly fixedInvFreq?: Float32Array;
  /** The step whose even-layer window mask `windowed` holds. */
  private windowedFor?: Float32Array;
  private windowed?: Float32Array;
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
    if (this.windowedFor === step.maskBias && this.windowed) return this.windowed;
    const { batch: B, seq: S, pastLen: P } = step;
    const T = P + S;
    const window = d.attention.slidingWindow!;
    const mask = Float32Array.from(step.maskBias);
    for (let r = 0; r < B * S; r++) {
      const s = r % S;
      for (let j = 0; j <= P + s - window; j++) mask[r * T + j] = MASK_BIAS;
    }
    this.windowedFor = step.maskBias;
    this.windowed = mask;
    return mask;
  }

  /** Float32 values one cache row holds per token and layer, for K and for V each. */
  get kvRow(): number {
    return this.shape.kvHeads * this.shape.headDim;
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

  /** Packs a layer's `parts` (default all) from `[in, out]` weights keyed like the description's layer tensors. */
  createLayer(weights: Record<string, Float32Array | Uint16Array | undefined>, options: LinearOptions & { parts?: LlamaLayerPart[] }, base?: NativeLlamaLayer): Promise<NativeLlamaLayer> {
    const given = { ...weights };
    for (const key of PLACEMENT_NORMS) {
      const w = given[key];
      if (w instanceof Float32Array) given[key] = this.normWeight(w);
    }
    return this.native.createLlamaLayer(this.shape, given, options, base);
  }

  /** The final RMSNorm of `rows` hidden rows into a new aligned array. */
  async finalNorm(hidden: Float32Array, rows: number, weight: Float32Array): Promise<Float32Array> {
    if (this.finalWeight?.from !== weight) this.finalWeight = { from: weight, weight: this.normWeight(weight) };
    const y = this.native.allocFloat32(rows * this.shape.hidden);
    await this.native.rmsNorm(hidden, rows, this.shape.hidden, this.finalWeight.weight, this.shape.eps, y);
    return y;
  }

  /** Gemma 2's final soft-cap on the logits in place: `cap · tanh(logits / cap)` (float32, as transformers). */
  capLogits(logits: Float32Array): void {
    const cap = this.description.finalLogitSoftcap;
    if (cap === undefined) return;
    for (let i = 0; i < logits.length; i++) logits[i] = cap * Math.tanh(logits[i]! / cap);
  }
}
