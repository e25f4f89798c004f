/** Messages between the main thread and the onnxruntime worker (ort-session-worker.ts). */

/**
 * The worker runs the rows of a large step in chunks of about this many tokens: bounding the largest intermediates
 * (attention probabilities [rows, H, S, T], the fc1 output) bounds the memory a step takes; GEMMs with ~1000 rows also
 * run at least as fast here as with several thousand.
 */
export const ORT_CHUNK_TOKENS = 1024;

/**
 * Attention scores (float32) one layer run may hold, rows × heads × S × T: 2²² (16 MiB), under glibc's largest mmap
 * threshold, so the scratch of every run is recycled from the heap instead of mapped (and first touched) afresh.
 */
const ORT_CHUNK_SCORES = 2 ** 22;

/**
 * Rows per chunk for a step of `seq` tokens per row: `ORT_CHUNK_TOKENS` tokens, and, given the query `heads` and the
 * `total` keys attended over, at most `ORT_CHUNK_SCORES` attention scores (at least one row).
 */
export function ortChunkRows(seq: number, heads = 1, total = seq): number {
  return Math.max(1, Math.min(Math.floor(ORT_CHUNK_TOKENS / seq), Math.floor(ORT_CHUNK_SCORES / (heads * seq * total))));
}
export interface WireTensor {
  type: 'float32' | 'int64' | 'int32';
  data: Float32Array | BigInt64Array | Int32Array;
  dims: number[];
}

/** One session run: feeds sent along, shared tensors by name, and which outputs to return (default: all). */
export interface SessionRun {
  key: string;
  feeds: Record<string, WireTensor>;
  shared: string[];
  /** Feed name → shared tensor name. */
  sharedAs?: Record<string, string>;
  fetch?: string[];
}

/**
 * A layer run against a worker-held KV cache: a resident layer's two sessions `<key>.qkv` and `<key>.rest`
 * (`llamaLayerStageGraphs`), or a streamed layer's single session `key` with its weights named by `sharedAs`.
 */
export interface CachedLayer {
  key: string;
  sharedAs?: Record<string, string>;
}

/**
 * Rotary models' cos and sin `[batch * seq, headDim]` of one step (`ropeCosSin`), fed to every layer's q/k stage (the
 * `qkv` session of a resident layer, the single session of a streamed one) as inputs `cos` and `sin`.
 */
export interface RopeTables<T = WireTensor> {
  cos: T;
  sin: T;
}

/** A resident layer with the past sent along (the engine-held cache); replies y, present_k, present_v. */
export interface PastLayer {
  key: string;
  /** Heads of the cache: the key/value heads. */
  heads: number;
  headDim: number;
  pastLen: number;
  x: WireTensor;
  pastK: Float32Array;
  pastV: Float32Array;
  /** Shared tensor name of the step's mask `[B, 1, S, P + S]`. */
  mask: string;
  /** Shared tensor names of the step's RoPE tables (rotary models). */
  rope?: RopeTables<string>;
}

/**
 * One forward step of a batch whose KV cache the worker keeps (`cache` id): the embedding run, then the listed layers
 * in order, each reading its past K/V from the cache and appending the step's new K/V. Replies with the last hidden
 * state as `y`.
 */
export interface KvStep {
  cache: number;
  batch: number;
  /** Heads of the cache: the key/value heads. */
  heads: number;
  /** Query heads (attention scores are rows × queryHeads × S × T; default `heads`). */
  queryHeads?: number;
  headDim: number;
  embed: SessionRun;
  mask: WireTensor;
  /** The step's mask with the sliding window added, for the layers marked `windowed` (Gemma 2's even layers). */
  windowMask?: WireTensor;
  /** Rotary models: the step's cos/sin, split by row chunks like the mask. */
  rope?: RopeTables;
  layers: { index: number; layer: CachedLayer; windowed?: boolean }[];
}

export type WorkerRequest =
  | { id: number; kind: 'create'; key: string; model: Uint8Array }
  | ({ id: number; kind: 'run' } & SessionRun)
  | { id: number; kind: 'setShared'; name: string; tensor: WireTensor }
  | { id: number; kind: 'release'; key: string }
  | ({ id: number; kind: 'kvStep' } & KvStep)
  | ({ id: number; kind: 'pastLayer' } & PastLayer)
  | { id: number; kind: 'kvClose'; cache: number }
  | { id: number; kind: 'kvExpand'; cache: number; rows: number };

/** The worker's first message, once onnxruntime's binding has loaded. */
export type WorkerReady = { ready: true };

export type WorkerReply = { id: number; ok: true; outputs?: Record<string, WireTensor> } | { id: number; ok: false; error: string };
