import { requireKinds, ropeInvFreq, type ModelDescription, type ModelKind, type RopeScaling } from '@flexhelm/engine';

/** The kinds the native Llama-family layer computes (longrope's per-call factor switch and cos/sin scale are not in it yet). */
export const LLAMA_FAMILY_KINDS: readonly ModelKind[] = [
  'norm:rmsnorm', 'placement:pre', 'rope:default', 'rope:linear', 'rope:dynamic', 'rope:llama3', 'attention:window', 'mlp:swiglu',
];
import type { LinearOptions, NativeBinding } from './native-addon.js';
import type { LlamaLayerPart, NativeLlamaBinding, NativeLlamaLayer, NativeLlamaShape } from './native-llama.js';

/**
 * What the oneDNN backend needs to compute a Llama-family model (Llama 2/3, Mistral, Qwen2) from its description: the
 * native layer's shape, packing a layer (whole, or the resident parts of a streamed one), the RoPE inverse
 * frequencies of a step and the final RMSNorm. The rest (KV cache, pool, dtype decision, head GEMM) is the backend's.
 */
export class LlamaFamily {
  readonly shape: NativeLlamaShape;
  private readonly theta: number;
  private readonly scaling?: RopeScaling;
  private readonly native: NativeBinding & NativeLlamaBinding;
  /** Inverse frequencies when they do not depend on the sequence length (every scaling but `dynamic`). */
  private readonly fixedInvFreq?: Float32Array;

  constructor(
    readonly description: ModelDescription,
    native: NativeBinding,
  ) {
    const d = description;
    requireKinds(d, 'the oneDNN backend', LLAMA_FAMILY_KINDS, 'the reference or onnxruntime backend may compute it');
    if (!d.norm.final || d.positions.kind !== 'rope') throw new Error(`OneDnnBackend: ${d.name}: the Llama family is pre-norm with a final norm and rotary positions`);
    this.native = native as NativeBinding & NativeLlamaBinding;
    const a = d.attention;
    this.shape = { hidden: d.hiddenSize, heads: a.heads, kvHeads: a.kvHeads, headDim: a.headDim, ffn: d.mlp.intermediateSize, eps: d.norm.eps };
    this.theta = d.positions.theta;
    this.scaling = d.positions.scaling;
    if (this.scaling?.kind !== 'dynamic') this.fixedInvFreq = ropeInvFreq(a.headDim, this.theta, this.scaling);
  }

  /** The RoPE inverse frequencies for a step at these positions (dynamic NTK grows its base with the longest one). */
  invFreq(positions: Int32Array): Float32Array {
    if (this.fixedInvFreq) return this.fixedInvFreq;
    let max = 0;
    for (const p of positions) max = Math.max(max, p);
    return ropeInvFreq(this.shape.headDim, this.theta, this.scaling, max + 1);
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

  /** Packs a layer's `parts` (default all) from `[in, out]` weights keyed like the description's layer tensors. */
  createLayer(weights: Record<string, Float32Array | Uint16Array | undefined>, options: LinearOptions & { parts?: LlamaLayerPart[] }, base?: NativeLlamaLayer): Promise<NativeLlamaLayer> {
    return this.native.createLlamaLayer(this.shape, weights, options, base);
  }

  /** The final RMSNorm of `rows` hidden rows into a new aligned array. */
  async finalNorm(hidden: Float32Array, rows: number, weight: Float32Array): Promise<Float32Array> {
    const y = this.native.allocFloat32(rows * this.shape.hidden);
    await this.native.rmsNorm(hidden, rows, this.shape.hidden, weight, this.shape.eps, y);
    return y;
  }
}
