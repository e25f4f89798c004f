// @flexhelm/pinned-memory: the native addon when it was built (build/Release/pinned_memory.node), otherwise a pure-JS
// fallback with identical results. FLEXHELM_NATIVE_DISABLE=1 forces the fallback.
import type { Backend } from './backend.js';
import { jsBackend } from './js-backend.js';
import { loadNativeBinding, nativeBackend, type NativeFeatures } from './native-backend.js';
import { createPinnedMemory } from './pinned-memory.js';

export type { IoEngine, IoResult } from './backend.js';
export type { NativeFeatures } from './native-backend.js';
export { PinnedIoError } from './pinned-io-error.js';
export type { BufferLike, ConvertOptions, Dequantize4Options, PinnedMemory, Quantize4Options, Quantized4, ReadOptions, ThreadOptions, WriteOptions } from './pinned-memory.js';

const binding = process.env.FLEXHELM_NATIVE_DISABLE === '1' ? undefined : loadNativeBinding();
const backend: Backend = binding ? nativeBackend(binding) : jsBackend;

/** True when the compiled addon is in use. */
export const isNative: boolean = binding !== undefined;
/** The addon's build and CPU features (undefined in the fallback). */
export const nativeFeatures: NativeFeatures | undefined = binding?.features;

const api = createPinnedMemory(backend, { ioUring: binding?.features.ioUring ?? false });

/** Page-aligned memory locked with mlock (a failed lock is a one-time warning); a plain ArrayBuffer in the fallback. */
export const allocPinned = api.allocPinned;
/** Whether `buffer` came from allocPinned and its mlock succeeded. */
export const isPinned = api.isPinned;
/** Copies src into dst (dst may be larger) with several threads; overlapping views are handled. */
export const copy = api.copy;
/** Reads dst.byteLength bytes of a file (O_DIRECT, io_uring or pread, several requests in flight). */
export const readFile = api.readFile;
/** Writes src to a file: atomically replacing it (temp + fsync + rename), or in place at `offset` when given. */
export const writeFile = api.writeFile;
/** f16 bit patterns to f32, bit-exact (SIMD in the addon). */
export const f16ToF32 = api.f16ToF32;
/** bfloat16 bit patterns to f32, bit-exact. */
export const bf16ToF32 = api.bf16ToF32;
/** f32 to f16 bit patterns, rounding to nearest-even. */
export const f32ToF16 = api.f32ToF16;
/** FlexLLMGen 4-bit group-wise quantisation (compression.py, CPU path), byte-compatible. */
export const quantize4 = api.quantize4;
/** Inverse of quantize4, to f32. */
export const dequantize4 = api.dequantize4;
