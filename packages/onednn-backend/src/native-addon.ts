import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Compute dtype of the oneDNN GEMMs (activations stay float32 between them). */
export type ComputeDtype = 'fp32' | 'bf16' | 'int8';

export interface LinearOptions {
  dtype: ComputeDtype;
  relu?: boolean;
  /** Column blocks hold at most this many packed bytes (0 = one block). Default 16 MiB. */
  chunkBytes?: number;
  /** int8: one activation scale per row (`token`, default) or per call (`tensor`). */
  activationScale?: 'token' | 'tensor';
  /** Weights given as `[in, out]` (the offloading tiers' layout) instead of PyTorch's `[out, in]`; packed as they are. */
  transposed?: boolean;
  /**
   * Take the packed blocks from a process-wide free list and give them back when the layer is freed (streamed layers,
   * packed at every step: fresh memory is slow to touch on VMs).
   */
  recycle?: boolean;
  /**
   * Streamed layers (with `transposed`): keep the weight arrays where they are and pack them only on the first run of
   * at least this many rows; runs of fewer rows (decode steps) multiply the unpacked weights (fp32, or f16 given as
   * Uint16Array, read as they are). The layer holds the arrays until it is released. 0 (default) packs at once.
   */
  packAtRows?: number;
  /**
   * Unpacked runs of at most 8 rows (decode steps of streamed layers) use the one-pass AVX-512 kernel (default true);
   * false runs oneDNN's fp32 GEMM on the plain layout instead (for benchmarks).
   */
  skinnyGemm?: boolean;
  /**
   * Packed bf16 runs of at most 8 rows (decode steps) read the packed panels in one sequential pass of their own
   * (`vdpbf16ps`, default true); false keeps oneDNN's matmul (for benchmarks).
   */
  packedGemv?: boolean;
  /**
   * Resident bf16 blocks are held in 12 bits a weight, losslessly (a sign-mantissa byte and a 4-bit code into the
   * block's 15 most frequent exponents; the rare others listed apart): decode steps read a quarter fewer bytes, prompt
   * rows widen each block back before oneDNN's matmul. Default true where AVX-512 bf16 and VBMI2 run and
   * FLEXHELM_COMPACT_BF16 is not 0; not for streamed layers (`recycle`, `packAtRows`) nor with `packedGemv: false`;
   * false keeps 16 bits (for benchmarks).
   */
  compact?: boolean;
}

export interface NativeLinear {
  run(x: Float32Array, rows: number, y: Float32Array, accumulate?: boolean): Promise<void>;
  readonly packedBytes: number;
  readonly chunks: number;
  /** Column blocks held in 12 bits a weight (`compact`). */
  readonly compactChunks: number;
  /** oneDNN's implementation name, e.g. `brg:avx512_core_amx_bf16`. */
  readonly impl: string;
}

/**
 * ggml block types a `NativeQuantLinear` multiplies as they are: Q8_0 / Q4_0 (32 values a block: 34 / 18 bytes) and
 * the K-quants Q4_K / Q5_K / Q6_K (256 values a super-block: 144 / 176 / 210 bytes).
 */
export type QuantType = 'Q8_0' | 'Q4_0' | 'Q4_K' | 'Q5_K' | 'Q6_K';

/**
 * The code a quantized linear runs: `best` for this CPU and row count, or one on purpose. `avx512vnni`, `avx2`,
 * `scalar`: integer dot products on q8-quantized activations (`best` up to 8 rows; K-quants have no `avx2` kernel); `vnni-gemm`: the same integer
 * arithmetic register-tiled over columns on Q8_0 / Q4_0 blocks interleaved at load, on AVX-512 VNNI unless
 * FLEXHELM_QUANT_GEMM=0 (`best` at every row count there, INT8_ACTIVATION_GATE; above 8 rows the widened bf16 path with
 * FLEXHELM_QUANT_INT8_PREFILL=0), and on K-quant super-blocks decoded per call into panels (`best` from 8 rows,
 * Q8K_ACTIVATION_GATE); `bf16`: the blocks widened to a scratch bf16 copy for that call and oneDNN's bf16
 * matmul (`best` above 8 rows on AVX-512 for the other types and layouts: ACCURACY_GATE); `amx-bf16`: the blocks widened
 * to bf16 a cache-sized panel at a time inside an AMX tile GEMM (`best` above 8 rows for every type and layout on an
 * AMX host, `features().amxBf16`; ACCURACY_GATE).
 */
export type QuantKernel = 'best' | 'avx512vnni' | 'avx2' | 'scalar' | 'bf16' | 'vnni-gemm' | 'amx-bf16';

/**
 * A linear layer on ggml weight blocks kept as GGUF stores them: each run quantizes the activation rows to int8 (per
 * 32 values as ggml's q8_0 for Q8_0/Q4_0, per 256 as its q8_K for the K-quants) and sums integer dot products per
 * block times the scales.
 */
export interface NativeQuantLinear {
  /**
   * y [rows, N] = x [rows, K] · Wᵀ (+ y with `accumulate`). A `kernel` this CPU lacks is an error. x may be bf16 bits
   * (a Uint16Array, a bf16 layer's rows; the best kernel only): the results of its widened floats.
   */
  run(x: Float32Array | Uint16Array, rows: number, y: Float32Array, accumulate?: boolean, kernel?: QuantKernel): Promise<void>;
  /** Bytes of weight blocks held (the GGUF tensor's size). */
  readonly bytes: number;
}

/**
 * A weight matrix given to a rotary layer as ggml blocks (`[out, in]` rows of blocks, as GGUF stores it):
 * the layer multiplies the blocks (QuantLinear) and never widens them in memory.
 */
export interface QuantWeight {
  type: QuantType;
  blocks: Uint8Array;
  /**
   * `blocks` are `quantStore`'s form of them (made on this host), read where they lie instead of copied: a streamed
   * layer's home copy, which must stay unchanged while the layer lives.
   */
  stored?: boolean;
}

/** The parts of a decoder layer that are packed together: the fused q/k/v, out_proj, fc1, fc2 and the LayerNorms. */
export type LayerPart = 'qkv' | 'out' | 'fc1' | 'fc2' | 'ln';

/** A KV cache buffer: floats, or bf16 bits (a bf16 layer's cache). */
export type KvBuffer = Float32Array | Uint16Array;

export interface NativeLayer {
  run(
    x: Float32Array, pastK: Float32Array, pastV: Float32Array, maskBias: Float32Array,
    batch: number, seq: number, pastLen: number,
    y: Float32Array, presentK: Float32Array, presentV: Float32Array,
  ): Promise<void>;
  /**
   * The same layer with a KV cache that grows in place: `cacheK`/`cacheV` are `[batch, heads, capacity, headDim]`
   * with the first `pastLen` tokens filled; the step's keys and values are written after them. A bf16 layer also
   * takes a bf16 cache (`Uint16Array` of bf16 bits): the new keys and values are rounded as they are stored.
   */
  runCached(
    x: Float32Array, maskBias: Float32Array, batch: number, seq: number, pastLen: number,
    y: Float32Array, cacheK: KvBuffer, cacheV: KvBuffer, capacity: number,
  ): Promise<void>;
  /** Frees the packed weights now (a run in flight finishes first); `run` throws afterwards. */
  release(): void;
  readonly packedBytes: number;
  /** Milliseconds its lazily packed parts (`packAtRows`) spent packing inside runs so far. */
  readonly lazyPackMs: number;
}

export interface OneDnnFeatures {
  version: string;
  /** Highest ISA oneDNN dispatches to (`avx512_core_amx`, `avx512_core_bf16`, …). */
  isa: string;
  threads: number;
  /** The quantized linears' integer kernel on this CPU (`avx512vnni`, `avx2` or `scalar`). */
  quantKernel: Exclude<QuantKernel, 'best' | 'bf16' | 'vnni-gemm' | 'amx-bf16'>;
  /** Whether quantized layers' prompt rows run the AMX tile GEMM (`amx-bf16`: AMX-BF16 host, FLEXHELM_QUANT_AMX not 0). */
  amxBf16: boolean;
  f32Impl: string;
  bf16Impl: string;
  int8Impl: string;
}

export interface NativeBinding {
  features(): OneDnnFeatures;
  /** `weight` may be a Uint16Array of IEEE half bits with `transposed` (a streamed layer's f16 copy, read as it is). */
  createLinear(weight: Float32Array | Uint16Array, bias: Float32Array | null, inFeatures: number, outFeatures: number, options: LinearOptions): Promise<NativeLinear>;
  /** `blocks`: a GGUF tensor's bytes, `[outFeatures, inFeatures]` (copied); `inFeatures` a multiple of 32. */
  /** `stored`: `blocks` are `quantStore`'s form (made on this host), read where they lie (the linear keeps them alive). */
  createQuantLinear(type: QuantType, blocks: Uint8Array, inFeatures: number, outFeatures: number, stored?: boolean): Promise<NativeQuantLinear>;
  /**
   * The `[out, in]` blocks in the form QuantLinear keeps them on this host (Q8_0's quant bytes +128; reordered into
   * 16-column groups with VNNI), 64-byte aligned: what a layer reads in place as `{ type, blocks, stored: true }`.
   */
  quantStore(type: QuantType, blocks: Uint8Array, inFeatures: number, outFeatures: number): Promise<Uint8Array>;
  layerNorm(x: Float32Array, rows: number, dim: number, w: Float32Array, b: Float32Array, eps: number, y: Float32Array): Promise<void>;
  allocFloat32(length: number): Float32Array;
  /** Reads the array's bytes once on every core (memory-bandwidth benchmarks); the result only proves the read. */
  streamRead(data: ArrayBufferView): Promise<number>;
  /** `y` = `x` rounded to bf16 bits (nearest even), on the compute thread. */
  narrowBf16(x: Float32Array, y: Uint16Array): Promise<void>;
  /**
   * Generation's logits arithmetic (contract's `jsLogitsMath`) computed natively and synchronously, with exactly the
   * JavaScript's results; `null` where the JavaScript must run. `scalar`: the plain loops on AVX-512 hosts too (tests).
   * `logSumExpParts`: `[max, Σ exp(row − max)]` with `logSumExp`'s bits (fdlibm's exp, added in index order); declines
   * non-finite values and a span ≥ 700. `logitsArgmax` declines NaN. `logitsTopK`: `[id, value, …]`, highest first,
   * ties by lower id; declines NaN and k above 64.
   */
  logSumExpParts(row: Float32Array, scalar?: boolean): [number, number] | null;
  logitsArgmax(row: Float32Array, scalar?: boolean): number | null;
  logitsTopK(row: Float32Array, k: number, scalar?: boolean): number[] | null;
  /** Whether no value is NaN or infinite. */
  logitsAllFinite(row: Float32Array, scalar?: boolean): boolean;
  /** Per-part milliseconds of decoder-layer runs since the last call (which resets them); `enable` switches timing. */
  layerProfile(enable?: boolean): { calls: number; ms: Record<string, number> };
}

export const addonPath = join(dirname(fileURLToPath(import.meta.url)), '..', 'build', 'Release', 'onednn_backend.node');

/** Whether the addon loaded, and why not. */
export type OneDnnStatus = { available: true; binding: NativeBinding; features: OneDnnFeatures } | { available: false; reason: string };

let cached: OneDnnStatus | undefined;

/**
 * Loads the addon once. `FLEXHELM_ONEDNN_DISABLE=1` reports it unavailable (to exercise the fallback); a missing
 * build or a missing libdnnl.so.2 gives the reason and how to fix it.
 */
export function oneDnnStatus(): OneDnnStatus {
  if (process.env.FLEXHELM_ONEDNN_DISABLE === '1') return { available: false, reason: 'disabled by FLEXHELM_ONEDNN_DISABLE=1' };
  if (cached) return cached;
  if (!existsSync(addonPath)) {
    cached = { available: false, reason: 'the native addon is not built (install libdnnl-dev and a C++ compiler, then `pnpm --filter @flexhelm/onednn-backend build:native`)' };
    return cached;
  }
  try {
    // libgomp reads this when the addon loads it. Spinning OpenMP threads (its default) make every parallel region wait
    // for a descheduled peer on a busy machine: measured 45 ms vs 6 ms per opt-125m decode layer under load.
    process.env.OMP_WAIT_POLICY ??= 'passive';
    const binding = createRequire(import.meta.url)(addonPath) as NativeBinding;
    cached = { available: true, binding, features: binding.features() };
  } catch (error) {
    const message = error instanceof Error ? error.message.split('\n')[0]! : String(error);
    cached = { available: false, reason: `cannot load the native addon (${message}); install libdnnl2 (apt-get install libdnnl-dev) or rebuild it` };
  }
  return cached;
}

/** The binding, or an error saying why it is unavailable. */
export function requireBinding(): NativeBinding {
  const status = oneDnnStatus();
  if (!status.available) throw new Error(`the oneDNN backend is unavailable: ${status.reason}`);
  return status.binding;
}

/** Whether oneDNN runs on AMX or AVX-512 here (where it beats onnxruntime); AVX2-only CPUs gain little. */
export function hasFastIsa(features: OneDnnFeatures): { fast: boolean; what: string } {
  if (features.isa === 'avx512_core_amx' || /amx/.test(features.bf16Impl)) return { fast: true, what: 'AMX' };
  if (features.isa.startsWith('avx512')) return { fast: true, what: features.isa === 'avx512_core_bf16' ? 'AVX-512 with bf16' : 'AVX-512' };
  return { fast: false, what: features.isa };
}
