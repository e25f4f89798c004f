import type { Group4Tensor } from '@flexhelm/engine';
import type { KvBuffer, LinearOptions, NativeLinear, NativeQuantLinear, QuantWeight } from './native-addon.js';

/** The parts of a decoder layer packed together: fused q/k/v, o_proj, fused gate/up (fc1), down_proj (fc2), its norms. */
export type DecoderLayerPart = 'qkv' | 'out' | 'gateUp' | 'down' | 'norm';

/** The tensors of each Llama layer part (the description's `layerTensors` keys; biases only where the model has them). */
export const LLAMA_PART_TENSORS: Record<DecoderLayerPart, readonly string[]> = {
  qkv: ['qW', 'qB', 'kW', 'kB', 'vW', 'vB'],
  out: ['oW', 'oB'],
  gateUp: ['gateW', 'gateB', 'upW', 'upB'],
  down: ['downW', 'downB'],
  norm: ['inNormW', 'inNormB', 'postNormW', 'postNormB', 'attnOutNormW', 'mlpOutNormW', 'qNormW', 'kNormW'],
};

export interface NativeDecoderShape {
  hidden: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  ffn: number;
  eps: number;
  /**
   * Where the norms sit (default `pre`); `post-branch` needs attnOutNormW/mlpOutNormW instead of inNormW/postNormW,
   * `pre-and-post-branch` all four; `post` (OPT-350m) norms each residual sum with inNormW, then postNormW.
   */
  placement?: 'pre' | 'post-branch' | 'pre-and-post-branch' | 'post';
  /** `rmsnorm` (default) or `layernorm` (with biases inNormB, postNormB; placement `pre` or `post`). */
  norm?: 'rmsnorm' | 'layernorm';
  /** RoPE on q and k (default true); false: positions were added at embedding, `positions`/`invFreq` may be null. */
  rope?: boolean;
  /** RMSNorm over the whole q and k projections before RoPE (weights qNormW, kNormW). */
  qkNorm?: boolean;
  /** The gate's activation (default `silu`: SwiGLU; `gelu-tanh`: GeGLU), or `relu`: no gate, `relu(up) → down` (OPT's fc1, fc2). */
  activation?: 'silu' | 'gelu-tanh' | 'relu';
  /** Multiplier of q·kᵀ (default headDim^-½). */
  attnScale?: number;
  /** Scores become `cap · tanh(score / cap)` before the mask (default none). */
  logitSoftcap?: number;
  /** RoPE cos and sin are multiplied by it (longrope's cos/sin scale; default 1). */
  ropeScale?: number;
}

/**
 * One decoder layer (any family) on oneDNN. `positions` are the RoPE positions (null without rope) of the step's `[batch, seq]` tokens,
 * `invFreq` the `headDim / 2` inverse frequencies (scaling applied; the host computes them, `dynamic` changes them
 * with the sequence length). The KV cache is `[batch, kvHeads, tokens, headDim]`; `runCached` also takes a bf16 cache
 * (`Uint16Array` of bf16 bits) in a bf16 layer, the new keys and values rounded as they are stored.
 */
export interface NativeDecoderLayer {
  run(
    x: Float32Array, pastK: Float32Array, pastV: Float32Array, maskBias: Float32Array, positions: Int32Array | null, invFreq: Float32Array | null,
    batch: number, seq: number, pastLen: number, y: Float32Array, presentK: Float32Array, presentV: Float32Array,
  ): Promise<void>;
  runCached(
    x: Float32Array, maskBias: Float32Array, positions: Int32Array | null, invFreq: Float32Array | null, batch: number, seq: number, pastLen: number,
    y: Float32Array, cacheK: KvBuffer, cacheV: KvBuffer, capacity: number,
  ): Promise<void>;
  release(): void;
  /** Bytes of the layer's weights as held: packed matrices, or the blocks (and biases) of quantized ones. */
  readonly packedBytes: number;
  readonly lazyPackMs: number;
}

/** One routed expert of `moeExperts`: its three GEMMs (`H → I`, `H → I`, `I → H`) and its rows of `x` with their weights. */
interface RoutedExpertGemms {
  gate: NativeLinear | NativeQuantLinear;
  up: NativeLinear | NativeQuantLinear;
  down: NativeLinear | NativeQuantLinear;
  rows: Int32Array;
  weights: Float32Array;
}

/** The addon's decoder layer of every family and its kernels (beside `NativeBinding`'s linears; `createOptLayer` builds OPT-keyed layers on it). */
export interface NativeDecoderBinding {
  /**
   * Weights `[in, out]` by the description's keys; absent biases may be left out. `parts` / `base` as `createLayer`.
   * A matrix may be a `QuantWeight` (Q8_0 / Q4_0 / Q4_K / Q5_K / Q6_K blocks, multiplied as they are); the matrices
   * of one fused GEMM (q/k/v, gate/up) are all blocks (of one type or several) or none. A matrix may also be a
   * `Group4Tensor` (FlexLLMGen's 4-bit codes of the `[in, out]` matrix, a streamed layer's compressed copy): decode
   * steps multiply it as it is, a prefill widens it to pack.
   */
  createDecoderLayer(shape: NativeDecoderShape, weights: Record<string, Float32Array | Uint16Array | QuantWeight | Group4Tensor | undefined>, options: LinearOptions & { parts?: DecoderLayerPart[] }, base?: NativeDecoderLayer): Promise<NativeDecoderLayer>;
  /**
   * Every layer of a step with its in-place cache (as `runCached`) in one native call: layer i reads layer i − 1's
   * output, `y` and `spare` (both `[batch, seq, hidden]`; no two of `x`, `y`, `spare` may share memory) taking turns so that the last layer
   * writes `y`. `masks`, `cacheK` and `cacheV` hold one entry per layer.
   */
  runDecoderStack(
    layers: NativeDecoderLayer[], x: Float32Array, masks: Float32Array[], positions: Int32Array | null, invFreq: Float32Array | null, batch: number, seq: number, pastLen: number,
    y: Float32Array, spare: Float32Array, cacheK: KvBuffer[], cacheV: KvBuffer[], capacity: number,
  ): Promise<void>;
  /** RMSNorm rows (float32 statistics); `bf16` gives the bf16-rounded output (widened back to float32). */
  rmsNorm(x: Float32Array, rows: number, dim: number, w: Float32Array, eps: number, y: Float32Array, bf16?: boolean): Promise<void>;
  /** Rotates the first `heads · headDim` values of each row (rows `ld` apart) in place, rotate-half layout; cos and sin times `scale`. */
  rope(x: Float32Array, rows: number, ld: number, heads: number, headDim: number, positions: Int32Array | null, invFreq: Float32Array | null, scale?: number): Promise<void>;
  /** out[r, i] = silu(gateUp[r, i]) · gateUp[r, I + i]. */
  swiglu(gateUp: Float32Array, rows: number, I: number, out: Float32Array, bf16?: boolean): Promise<void>;
  /** out[r, i] = act(gateUp[r, i]) · gateUp[r, I + i] (act default `silu`). */
  gated(gateUp: Float32Array, rows: number, I: number, out: Float32Array, bf16?: boolean, activation?: 'silu' | 'gelu-tanh'): Promise<void>;
  /**
   * A mixture-of-experts layer's routed experts in one call: for each entry in order, `out[rows[k]] += weights[k] ·
   * down(silu(gate(x_e)) · up(x_e))` over its rows `x_e` of `x` `[N, H]` (the same bits as one expert at a time).
   */
  moeExperts(x: Float32Array, H: number, I: number, experts: RoutedExpertGemms[], out: Float32Array): Promise<void>;
}
