import type { LogitsMath } from './logits-math.js';
import type { PhaseTotals } from './phase-timings.js';
import type { LayerTensors, ModelDescription } from './model-description.js';
import type { EmbeddingWeights, HeadWeights, LayerWeights } from './weights.js';

export { MASK_BIAS } from './mask-bias.js';

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
   * a large negative number elsewhere. A sliding window on every layer is in it; one on some layers only
   * (`slidingWindowLayers: 'even'`) is not: those layers exclude key j themselves when `pastLen + s − j ≥ window`.
   */
  maskBias: Float32Array;
  /**
   * Model positions of the step's tokens `[batch * seq]`, as `embed` got them (rotary kernels read them in `layer`;
   * OPT's learned table only in `embed`). A cache that splits the batch (micro-batches) slices them with the mask.
   */
  positions?: Int32Array;
}

/**
 * OPT's decoder-layer tensors in the layout the compute multiplies with: Linear weights transposed to `[in, out]`,
 * vectors as in `LayerWeights` (the OPT instance of `LayerTensors`). Streamed (offloaded) layers keep their home
 * copies in this layout, so streaming a layer in is a read and a conversion, never a transpose.
 */
export type TransposedLayerWeights = LayerWeights;

/**
 * A batch's KV cache, always owned by the backend (`DecoderBackend.openKvCache`): in whatever form and place the backend
 * computes with (a worker thread, native buffers, memory tiers, plain arrays). The engine's `BatchRun.step` calls
 * `forward` once per step; the cache appends the step's new keys and values itself.
 */
export interface BackendKvCache {
  /** Embedding and every decoder layer of one step: hidden `[batch, seq, hidden]` after the last layer. */
  forward(ids: Int32Array, positions: Int32Array, step: StepShape): Promise<Float32Array>;
  /** Bytes the cache holds in RAM now (for memory reports). */
  readonly bytes: number;
  /** Frees the cache's memory and files; the batch cannot step afterwards. Idempotent. */
  close(): Promise<void>;
  /**
   * Optional capability: turns a cache of one row into `rows` rows that each hold a copy of that row's keys and values
   * (the following steps have `rows` rows). `generate` uses it to prefill a prompt prefix the batch's rows share once;
   * a cache without it simply has every row prefill its whole prompt.
   */
  expandRows?(rows: number): Promise<void>;
}

/**
 * Per-stage compute with the KV cache passed in and out: what a cache that drives the layers one at a time (the plain
 * `StagedKvCache`, the offloading scheduler's micro-batches) calls. Every backend offers it.
 */
export interface StageCompute {
  /** Token + position embeddings (and project_in): ids and positions `[batch * seq]` → hidden `[batch, seq, hidden]`. */
  embed(ids: Int32Array, positions: Int32Array, batch: number, seq: number): Promise<Float32Array>;
  /** Sets the step shape and attention mask for the following `layer` calls. */
  setStep(step: StepShape): Promise<void>;
  /** One decoder layer: hidden `[batch, seq, hidden]` and the past KV → new hidden and the present KV (past + new). */
  layer(index: number, hidden: Float32Array, past: KvPair): Promise<{ hidden: Float32Array; present: KvPair }>;
}

/** Element type of an in-place KV buffer: float32, or bf16 bits (the upper half of a float32) in a `Uint16Array`. */
export type KvDtype = 'fp32' | 'bf16';

/** A KV buffer in the element type its `KvDtype` names. */
export type KvBuffer = Float32Array | Uint16Array;

/**
 * One layer's caller-owned K/V buffers that grow in place: `k` and `v` are `[batch, kvHeads, capacity, headDim]` each
 * (batch and the step's `pastLen`/`seq` from `setStep`), tokens `0 … pastLen` of every (row, head) filled.
 */
export interface InPlaceKv {
  k: KvBuffer;
  v: KvBuffer;
  /** Tokens per (row, head) the buffers have room for: at least `pastLen + seq`. */
  capacity: number;
}

/**
 * Optional capability: a layer computed over a caller-owned in-place KV buffer pair instead of `layer`'s past →
 * present copy (which copies the whole past into a grown present every step: two 34 MiB copies per opt-1.3b layer
 * at 8 × 512 tokens). The layer writes only the step's new keys and values, at tokens `pastLen … pastLen + seq`, in
 * the element type `kvDtype` names (a bf16 layer's cache in bf16 bits: a decode step reads half the bytes). What the
 * offloading backend's compute-tier cache uses when the inner backend offers it; the caller keeps the capacity (with
 * headroom, so growing is a rare copy) and allocates through `allocKv` / `freeKv`.
 */
export interface InPlaceKvLayers {
  /** The element type layer `index` reads and writes (known after `init`, and for `auto` dtypes after the first batch). */
  kvDtype(index: number): KvDtype;
  /** A buffer of `length` elements of `dtype` (contents undefined); the backend may hand out reused, aligned memory. */
  allocKv(length: number, dtype: KvDtype): KvBuffer;
  /**
   * Gives back a buffer from `allocKv`, or a present K or V that `layer` returned, that nobody reads any more (the
   * backend may reuse it); anything else is ignored.
   */
  freeKv(buffer: KvBuffer): void;
  /**
   * Layer `index` after `setStep`: hidden `[batch, seq, hidden]` (handed over, as for `layer`) → the new hidden, with
   * the step's keys and values written into `kv` in place. Everything else in `kv` is left as it was.
   */
  layerInPlace(index: number, hidden: Float32Array, kv: InPlaceKv): Promise<Float32Array>;
}

/**
 * A weight matrix in FlexLLMGen's 4-bit group-wise format, as the offloading tiers keep compressed weights
 * (`@flexhelm/pinned-memory`'s `quantize4` of the `[in, out]` tensor with `groupDim` 1): codes two to a byte, and per
 * group of `groupSize` output features an f16 scale and minimum; weight = code / scale + minimum in fp32.
 */
export interface Group4Tensor {
  readonly packed: Uint8Array;
  readonly scale: Uint16Array;
  readonly shape: readonly number[];
  readonly groupSize: number;
  readonly groupDim: number;
}

/**
 * A weight matrix in a backend's own stored form (`StreamedLayers.ownTensors`: a GGUF file's ggml blocks, laid out as
 * its kernels read them): bytes the caller keeps on its tiers and hands back unchanged, never widened. `format` is the
 * backend's to read; the bytes are valid in the process that made them only.
 */
export interface OwnTensor {
  readonly format: string;
  readonly bytes: Uint8Array;
}

/**
 * A streamed tensor as handed over: float32, IEEE half bits (a weight matrix, to a backend that `acceptsF16`), 4-bit
 * codes (a compressed weight matrix, to a backend that `acceptsGroup4`), or a backend's own stored form (`OwnTensor`).
 */
export type StreamedTensor = Float32Array | Uint16Array | Group4Tensor | OwnTensor;

/** Whether a streamed tensor is 4-bit codes. */
export function isGroup4Tensor(t: StreamedTensor | undefined): t is Group4Tensor {
  return t !== undefined && !ArrayBuffer.isView(t) && 'packed' in t;
}

/** Whether a streamed tensor is a backend's own stored form. */
export function isOwnTensor(t: StreamedTensor | undefined): t is OwnTensor {
  return t !== undefined && !ArrayBuffer.isView(t) && 'format' in t;
}

/** The non-resident tensors of a streamed layer, keyed as `LayerTensors`. */
export type StreamedLayerTensors = Partial<Record<string, StreamedTensor>>;

/**
 * Where a streamed sparse layer's experts come from when `setLayer` handed over only the rest of the layer: the
 * offloading backend reads only the experts the router picks (the expert is the unit of offloading). Tensors are keyed
 * as `LayerTensors` (`expert.<e>.gateW`, `upW`, `downW`) in the streamed layout and follow `setLayer`'s rules (the
 * backend gives them back through `reclaim`).
 */
export interface ExpertSource {
  /**
   * Experts `ids` of layer `index`, one promise each in the order asked; all start reading at once, so the backend
   * computes one expert while the next arrive. Asking again for an expert of the same layer visit costs no read.
   */
  read(index: number, ids: readonly number[]): Promise<StreamedLayerTensors>[];
}

/**
 * The capability to compute layers whose weights live elsewhere (offloading): `loadLayer` keeps a layer's resident
 * tensors in the backend, `setLayer` hands in the rest before each use, and the backend's `layer(index, …)` computes
 * with both.
 */
export interface StreamedLayers {
  /**
   * The backend takes streamed weight matrices (rank ≥ 2 tensors, `[in, out]`) as IEEE half bits in a `Uint16Array`
   * and reads them as they are (decode GEMMs then read half the bytes of fp32). The caller then hands over its f16
   * copies without widening them; vectors (biases, norms) stay `Float32Array`. Absent or false: fp32 only.
   */
  readonly acceptsF16?: boolean;
  /**
   * The backend takes compressed streamed weight matrices (FlexLLMGen's 4-bit format) as `Group4Tensor`s and multiplies
   * them without widening them in memory. The caller then hands over its 4-bit copies as they are. Absent or false:
   * compressed weights are dequantized to fp32 first.
   */
  readonly acceptsGroup4?: boolean;
  /**
   * Optional: layer `index`'s matrices that `DecoderBackend.ownLayerWeights` names, in the backend's stored form, for
   * the caller's tiers. They come back unchanged, as `OwnTensor`s whose bytes start 64-byte aligned (a pinned home
   * copy, a disk file's range read into a staging slot, or these arrays themselves on the compute tier): with
   * `setLayer` for a streamed layer's, in `loadLayer`'s `resident` for those that stay. A caller that offloads the
   * backend forwards `ownLayerWeights` only when this exists.
   */
  ownTensors?(index: number): Promise<Record<string, OwnTensor>>;
  /** Makes layer `index` a streamed layer; `resident` (transposed layout) stays in the backend. */
  loadLayer(index: number, resident: Partial<Record<string, Float32Array | OwnTensor>>): Promise<void>;
  /**
   * The non-resident tensors of streamed layer `index` for the following `layer(index, …)` calls (may be transferred).
   * The backend reads them until `reclaim` returns them: the caller must not change or reuse them before.
   */
  setLayer(index: number, weights: StreamedLayerTensors, experts?: ExpertSource): Promise<void>;
  /**
   * The backend routes a sparse layer's tokens before it needs the experts, so `setLayer` may hand over a sparse layer
   * without its experts and an `ExpertSource` instead: the backend reads from it the experts its router chose.
   */
  readonly routedExperts?: boolean;
  /**
   * Arrays handed over with `setLayer` that the backend no longer reads (their layer was replaced and no run still
   * reads it), each returned once: the caller may then reuse them (convert later layers' weights into fp32 ones —
   * on VMs first touching fresh memory costs ~30x a warm write — or read the next file into an f16 one's buffer).
   * A backend that transfers the arrays elsewhere (a worker) returns none.
   */
  reclaim(): StreamedTensor[];
}

/**
 * The capability to stream the output head (FlexLLMGen's OutputEmbed follows the weight percents like a layer). Used
 * instead of `loadHead`; the streamed tensors share one slot with the streamed layers': the backend may free the
 * head's when a layer's arrive and the other way round, so the caller sets them again before each use.
 */
export interface StreamedHead {
  /** `resident` stays in the backend; the missing tensors come with `set` before each `head` call. */
  load(resident: Partial<HeadWeights>): Promise<void>;
  set(weights: Partial<HeadWeights>): Promise<void>;
}

/** The end tensors a backend may hold from a source of its own (`DecoderBackend.ownEndWeights`). */
export type OwnEndWeight = 'tokens' | 'lmHead';

/**
 * The compute a decoder-only forward pass needs, for any family a `ModelDescription` describes. A backend owns its
 * weights in whatever packed form it computes with and the KV cache of every batch (`openKvCache`); the engine owns
 * the schedule of steps and the sampling. A backend that does not compute a family throws at `init`, naming it.
 *
 * Ownership: arrays passed in may be transferred (detached) by the backend; the caller must not reuse them.
 */
export interface DecoderBackend extends StageCompute {
  readonly name: string;
  /** Sizes, norm, positions, attention, MLP and the layer tensors all come from the description. */
  init(model: ModelDescription): Promise<void>;
  loadEmbedding(weights: EmbeddingWeights): Promise<void>;
  /**
   * Layer `index`'s tensors keyed by `model.layerTensors[].key`, Linear weights `[in, out]`; the keys
   * `ownLayerWeights(index)` names are left out.
   */
  loadLayer(index: number, weights: LayerTensors): Promise<void>;
  /**
   * Optional: the keys of layer `index` this backend holds from a source of its own (a GGUF file's ggml blocks,
   * multiplied as stored). The engine neither reads them from the checkpoint nor passes them to `loadLayer`: widening a
   * 4-bit matrix to float32 only to drop it costs most of a quantized model's load. Asked after `init`.
   */
  ownLayerWeights?(index: number): ReadonlySet<string>;
  /**
   * Optional, the same for the ends: `tokens` (the token table) and `lmHead` (the output projection, tied or not) when
   * the backend holds them itself; the engine reads neither and passes an empty array in its place. Asked after `init`.
   */
  ownEndWeights?(): ReadonlySet<OwnEndWeight>;
  loadHead(weights: HeadWeights): Promise<void>;
  /** The KV cache of a new batch of `batch` rows; `BatchRun` steps only through it. */
  openKvCache(batch: number): BackendKvCache;
  /** Final norm, project_out and output projection: hidden `[rows, hidden]` → logits `[rows, vocab]`. */
  head(hidden: Float32Array, rows: number): Promise<Float32Array>;
  /** Optional: the per-row logits arithmetic of generation computed natively, exactly as `jsLogitsMath` (logits-math.ts). */
  readonly logitsMath?: LogitsMath;
  dispose(): Promise<void>;
  /** Present when layer weights can stream in per use (what the offloading backend needs of its inner backend). */
  readonly streamedLayers?: StreamedLayers;
  /**
   * Present when layers can run over caller-owned in-place KV buffers (`InPlaceKvLayers`); without it a cache that
   * drives the layers itself uses `layer`'s past → present copy.
   */
  readonly inPlaceKv?: InPlaceKvLayers;
  /** Present when the output head can stream too; without it an offloaded model keeps its head resident. */
  readonly streamedHead?: StreamedHead;
  /** Sub-phases of loading the backend measured (FLEXHELM_TIMINGS), reported with the engine's own. */
  readonly loadTimings?: PhaseTotals;
}
