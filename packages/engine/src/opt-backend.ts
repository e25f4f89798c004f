import type { OptConfig } from './opt-config.js';
import type { EmbeddingWeights, HeadWeights, LayerWeights } from './opt-weights.js';
import type { TransposedLayerWeights } from './streamed-layer.js';

/** Keys and values of one layer for a batch: `[batch, heads, tokens, headDim]` each, float32. */
export interface KvPair {
  k: Float32Array;
  v: Float32Array;
}

/** What every layer call of one forward step shares. */
export interface StepShape {
  batch: number;
  /** New tokens per row in this call. */
  seq: number;
  /** Cached tokens per row before this call. */
  pastLen: number;
  /**
   * Additive attention bias `[batch, seq, pastLen + seq]`: 0 where query i may see key j (causal and not a pad),
   * a large negative number elsewhere.
   */
  maskBias: Float32Array;
}

/**
 * A batch's KV cache kept by the backend instead of the engine (`OptBackend.openKvCache`), e.g. spread over memory
 * tiers in a storage form. The engine then calls `layer` instead of `OptBackend.layer`, after `setStep` and `embed` as
 * usual; the cache appends each call's new keys and values itself.
 */
export interface BackendKvCache {
  /** One decoder layer for this batch: hidden `[batch, seq, hidden]` → new hidden; the step's new K/V are stored. */
  layer(index: number, hidden: Float32Array): Promise<Float32Array>;
  /** Optional: embedding and every layer of one step in one call (what `setStep`, `embed` and each `layer` give). */
  forward?(ids: Int32Array, positions: Int32Array, step: StepShape): Promise<Float32Array>;
  /** Bytes the cache holds in RAM now (for memory reports). */
  readonly bytes: number;
  /** Frees the cache's memory and files; the batch cannot step afterwards. */
  close(): Promise<void>;
}

/**
 * The compute an OPT forward pass needs, one call per stage. The engine owns the schedule and, unless the backend
 * offers `openKvCache`, the KV cache (passed in and out per layer); a backend owns its weights in whatever packed form
 * it computes with.
 *
 * Ownership: arrays passed in may be transferred (detached) by the backend; the caller must not reuse them.
 */
export interface OptBackend {
  readonly name: string;
  init(config: OptConfig): Promise<void>;
  loadEmbedding(weights: EmbeddingWeights): Promise<void>;
  loadLayer(index: number, weights: LayerWeights): Promise<void>;
  loadHead(weights: HeadWeights): Promise<void>;
  /** Token + position embeddings (and project_in): ids and positions `[batch * seq]` → hidden `[batch, seq, hidden]`. */
  embed(ids: Int32Array, positions: Int32Array, batch: number, seq: number): Promise<Float32Array>;
  /** Sets the step shape and attention mask for the following `layer` calls. */
  setStep(step: StepShape): Promise<void>;
  /** One decoder layer: hidden `[batch, seq, hidden]` and the past KV → new hidden and the present KV (past + new). */
  layer(index: number, hidden: Float32Array, past: KvPair): Promise<{ hidden: Float32Array; present: KvPair }>;
  /**
   * Optional fast path: embedding and every layer of one step in a single call (same result as `embed` + `layer` for
   * each layer). Backends whose stages are cheap to chain (one worker round trip instead of one per layer) offer it;
   * an offloading backend that streams weights per layer simply leaves it out.
   */
  forwardStack?(ids: Int32Array, positions: Int32Array, step: StepShape, past: KvPair[]): Promise<{ hidden: Float32Array; present: KvPair[] }>;
  /** Final LayerNorm, project_out and output projection: hidden `[rows, hidden]` → logits `[rows, vocab]`. */
  head(hidden: Float32Array, rows: number): Promise<Float32Array>;
  dispose(): Promise<void>;
  /**
   * Optional, for offloading: makes layer `index` a streamed layer. `resident` (transposed layout) stays in the backend;
   * the remaining tensors are handed in before each use with `setStreamedWeights`, and `layer(index, …)` computes with both.
   */
  loadStreamedLayer?(index: number, resident: Partial<TransposedLayerWeights>): Promise<void>;
  /** The non-resident tensors of streamed layer `index` for the following `layer(index, …)` calls (may be transferred). */
  setStreamedWeights?(index: number, weights: Partial<TransposedLayerWeights>): Promise<void>;
  /**
   * Optional, for offloading: arrays handed over with `setStreamedWeights` that the backend no longer reads (their
   * layer was replaced), each returned once. The caller converts later layers' weights into them: on VMs first
   * touching fresh memory costs ~30x a warm write (110 vs 4 ms per 64 MiB here). A backend that transfers the arrays
   * elsewhere (a worker) leaves it out.
   */
  reclaimStreamedArrays?(): Float32Array[];
  /**
   * Optional, for offloading: makes the output head a streamed head (FlexLLMGen's OutputEmbed follows the weight
   * percents like a layer). Called instead of `loadHead`: `resident` stays in the backend; the missing tensors are
   * handed in with `setStreamedHead` before each `head` call. A backend without these hooks keeps its head resident.
   */
  loadStreamedHead?(resident: Partial<HeadWeights>): Promise<void>;
  /**
   * The non-resident head tensors for the following `head` calls (may be transferred). They hold one slot with the
   * streamed layer weights: a backend may free the head's tensors when `setStreamedWeights` comes and a layer's when
   * this comes, so the caller sets them again before the next use (an offloaded step runs every layer, then the head).
   */
  setStreamedHead?(weights: Partial<HeadWeights>): Promise<void>;
  /**
   * Optional, for offloading: the backend keeps the KV cache of a new batch of `batch` rows itself (its own tiers and
   * storage form). When present, the engine's BatchRun neither holds K/V nor calls `layer`/`forwardStack`; it steps
   * through `BackendKvCache.layer`. Backends without it keep the engine's plain in-RAM float32 cache.
   */
  openKvCache?(batch: number): BackendKvCache;
}

/** Bias used for masked attention scores (finite, so a row with every key masked stays a valid, uniform softmax). */
export const MASK_BIAS = -1e30;
