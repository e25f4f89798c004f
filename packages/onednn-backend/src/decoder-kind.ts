import type { BufferPool, EmbeddingWeights, HeadWeights, KvPair, StepShape } from '@flexhelm/engine';
import type { KvBuffer, LinearOptions, NativeLayer, NativeLinear, QuantWeight } from './native-addon.js';
import type { NativeLlamaLayer } from './native-llama.js';

/** A packed decoder layer of either native kind (OPT's LayerNorm/ReLU layer or the rotary RMSNorm layer). */
export type PackedLayer = NativeLayer | NativeLlamaLayer;

/** Packs an fp32 linear layer (`project_in` / `project_out`) with the backend's options. */
export type Fp32Linear = (weight: Float32Array, inFeatures: number, outFeatures: number) => Promise<NativeLinear>;

/**
 * What differs between the model kinds the oneDNN backend computes, behind one interface so that the backend (dtype
 * decision, KV caches, pool, streamed layers, head GEMM) has no per-family branches: OPT (`OptDecoder`) and every
 * rotary family by its kinds (`RmsDecoder`). Layers read the step's mask, positions and frequencies themselves.
 */
export interface DecoderKind {
  /** The tensors of each part the native layer packs together (biases and norms the description lacks are dropped). */
  readonly partTable: Record<string, readonly string[]>;
  /** Bytes of a layer's fp32 weights (the accuracy gate holds fp32 and bf16 copies side by side). */
  readonly layerWeightBytes: number;
  /** Packs a layer's `parts` (default all) from `[in, out]` weights keyed like the description's layer tensors. */
  createLayer(weights: Record<string, Float32Array | Uint16Array | QuantWeight | undefined>, options: LinearOptions & { parts?: string[] }, base?: PackedLayer): Promise<PackedLayer>;
  loadEmbedding(weights: EmbeddingWeights, linear: Fp32Linear): Promise<void>;
  loadHead(weights: HeadWeights, linear: Fp32Linear): Promise<void>;
  /** The hidden rows of `ids` at `positions` (from `pool`). */
  embed(ids: Int32Array, positions: Int32Array, pool: BufferPool): Promise<Float32Array>;
  /** Layer `index` of a step, the past passed in and the present written out (`[batch, kvHeads, P + S, headDim]`). */
  run(layer: PackedLayer, index: number, step: StepShape, hidden: Float32Array, past: KvPair, y: Float32Array, k: Float32Array, v: Float32Array): Promise<void>;
  /** Layer `index` of a step over an in-place cache `[batch, kvHeads, capacity, headDim]`. */
  runCached(layer: PackedLayer, index: number, step: StepShape, hidden: Float32Array, y: Float32Array, k: KvBuffer, v: KvBuffer, capacity: number): Promise<void>;
  /** The head GEMM's input for `rows` final hidden rows: the final norm (and OPT's project_out). */
  headInput(hidden: Float32Array, rows: number): Promise<Float32Array>;
  /** Post-processing of the head's logits in place (Gemma 2's final soft-cap; nothing for the others). */
  capLogits(logits: Float32Array): void;
  /** Drops what the loads kept. */
  dispose(): void;
}
