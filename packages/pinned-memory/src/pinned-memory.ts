import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';

import { z } from 'zod';

import type { AxisSwap, Backend, IoEngine, IoResult, ResolvedIoOptions } from './backend.js';
import { groupLayout, type GroupLayout } from './group-layout.js';

/** Any binary buffer: an ArrayBuffer, a TypedArray or Buffer, or a DataView (the bytes it covers). */
export type BufferLike = ArrayBufferLike | ArrayBufferView;

export interface ThreadOptions {
  /** Threads for the work (default: up to 2 for large inputs, 1 for small ones). */
  threads?: number;
}

export interface ConvertOptions extends ThreadOptions {
  /**
   * Swap the two leading axes while converting: src is read as `[outer, inner, block]` (block = length ÷ (outer ×
   * inner)) and dst written as `[inner, outer, block]` — e.g. a token-major KV cache made head-major in one pass.
   */
  swap?: { outer: number; inner: number };
}

export interface ReadOptions {
  /** File position of the first byte (default 0). */
  offset?: number;
  /** Use O_DIRECT (bypass the page cache); falls back to buffered reads where the filesystem refuses it. */
  direct?: boolean;
  /** Accept a file that ends before dst is full; the result's `bytes` says how much was read. */
  allowShort?: boolean;
  /** Requests in flight (default 4). */
  queueDepth?: number;
  /** Bytes per request, a multiple of 4096 (default 8 MiB). */
  chunkSize?: number;
  /**
   * 'auto' (the default) and 'pread' use pread threads; 'io_uring' only when asked for by name (addon built with
   * liburing): it was measured no faster (bench/RESULTS.md) and a read was seen never to complete on a 6.18 kernel.
   */
  engine?: IoEngine;
}

export type WriteOptions = Omit<ReadOptions, 'allowShort'>;

export interface Quantize4Options extends ThreadOptions {
  /** Tensor shape; its product must equal src.length (default [src.length]). */
  shape?: readonly number[];
  /** Values per group, even (default 64, FlexLLMGen's setting). */
  groupSize?: number;
  /** Dimension the groups run along; negative counts from the end (default 0: FlexLLMGen's weights). */
  groupDim?: number;
}

/** A tensor in FlexLLMGen's 4-bit group-wise format (TorchCompressedDevice's data and scale tensors). */
export interface Quantized4 {
  shape: number[];
  groupSize: number;
  groupDim: number;
  /** Two codes per byte along groupDim: even index in the high nibble, odd index in the low nibble. */
  packed: Uint8Array;
  packedShape: number[];
  /** f16 bit patterns, shape packedShape-like with [groups, 2] at groupDim: (scale, min) per group. */
  scale: Uint16Array;
  scaleShape: number[];
}

export interface Dequantize4Options extends ThreadOptions {
  /** Where to write the f32 result (default: a new Float32Array). */
  dst?: Float32Array;
}

const threadsSchema = z.number().int().min(1).max(256).optional();
const ioFields = {
  offset: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  direct: z.boolean().optional(),
  queueDepth: z.number().int().min(1).max(64).optional(),
  chunkSize: z
    .number()
    .int()
    .min(4096)
    .max(2 ** 30)
    .refine((value) => value % 4096 === 0, 'must be a multiple of 4096')
    .optional(),
  engine: z.enum(['auto', 'pread', 'io_uring']).optional(),
};
const readOptionsSchema = z.strictObject({ ...ioFields, allowShort: z.boolean().optional() });
const writeOptionsSchema = z.strictObject(ioFields);
const threadOptionsSchema = z.strictObject({ threads: threadsSchema });
const axisLength = z.number().int().min(1).max(Number.MAX_SAFE_INTEGER);
const convertOptionsSchema = threadOptionsSchema.extend({ swap: z.strictObject({ outer: axisLength, inner: axisLength }).optional() });
const quantizeOptionsSchema = z.strictObject({
  threads: threadsSchema,
  shape: z.array(z.number()).optional(),
  groupSize: z.number().optional(),
  groupDim: z.number().optional(),
});
const dequantizeOptionsSchema = z.strictObject({ threads: threadsSchema, dst: z.instanceof(Float32Array).optional() });

function parseOptions<T>(schema: z.ZodType<T>, value: unknown, where: string): T {
  const result = schema.safeParse(value ?? {});
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => `${issue.path.length ? issue.path.join('.') : 'options'}: ${issue.message}`);
  throw new TypeError(`${where}: invalid options (${problems.join('; ')})`);
}

function bytesOf(value: unknown, what: string, where: string): Uint8Array {
  if (value instanceof ArrayBuffer || (typeof SharedArrayBuffer !== 'undefined' && value instanceof SharedArrayBuffer)) return new Uint8Array(value);
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  throw new TypeError(`${where}: ${what} must be an ArrayBuffer, TypedArray, Buffer or DataView, got ${describe(value)}`);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'object') return (value as object).constructor?.name ?? 'object';
  return typeof value;
}

function pathOf(path: unknown, where: string): string {
  const text = path instanceof URL ? fileURLToPath(path) : path;
  if (typeof text !== 'string' || text.length === 0) throw new TypeError(`${where}: path must be a non-empty string or file: URL, got ${describe(path)}`);
  if (text.includes('\0')) throw new TypeError(`${where}: path ${JSON.stringify(text)} contains a NUL character`);
  return text;
}

const hardwareThreads = Math.max(1, availableParallelism());

/** Threads for `work` units: what was asked, or 2 for large jobs (the second core nearly doubles copy speed). */
function threadsFor(requested: number | undefined, work: number, threshold: number): number {
  if (requested !== undefined) return requested;
  return work >= threshold ? Math.min(2, hardwareThreads) : 1;
}

export interface PinnedMemory {
  /** 'native' when the compiled addon is in use, 'js' for the fallback. */
  readonly kind: 'native' | 'js';
  allocPinned(bytes: number): Promise<ArrayBuffer>;
  isPinned(buffer: ArrayBuffer): boolean;
  copy(dst: BufferLike, src: BufferLike, options?: ThreadOptions): Promise<void>;
  readFile(path: string | URL, dst: BufferLike, options?: ReadOptions): Promise<IoResult>;
  writeFile(path: string | URL, src: BufferLike, options?: WriteOptions): Promise<IoResult>;
  f16ToF32(src: Uint16Array, dst?: Float32Array, options?: ConvertOptions): Promise<Float32Array>;
  bf16ToF32(src: Uint16Array, dst?: Float32Array, options?: ConvertOptions): Promise<Float32Array>;
  f32ToF16(src: Float32Array, dst?: Uint16Array, options?: ConvertOptions): Promise<Uint16Array>;
  quantize4(src: Float32Array | Uint16Array, options?: Quantize4Options): Promise<Quantized4>;
  dequantize4(quantized: Quantized4, options?: Dequantize4Options): Promise<Float32Array>;
}

export interface PinnedMemoryConfig {
  /** Whether io_uring may be requested explicitly. */
  ioUring: boolean;
}

/** The public API over one backend: validates every argument, then delegates. */
export function createPinnedMemory(backend: Backend, config: PinnedMemoryConfig): PinnedMemory {
  const locked = new WeakSet<ArrayBuffer>();
  let lockWarned = false;

  function ioOptions(options: ReadOptions, where: string): ResolvedIoOptions {
    const engine = options.engine ?? 'auto';
    if (engine === 'io_uring' && !config.ioUring) {
      throw new RangeError(
        `${where}: engine 'io_uring' is not available (${backend.kind === 'js' ? 'the pure-JS fallback is in use' : 'the addon was built without liburing: install liburing-dev and rebuild'}); use 'auto' or 'pread'`,
      );
    }
    return {
      direct: options.direct ?? false,
      queueDepth: options.queueDepth ?? 4,
      chunkSize: options.chunkSize ?? 8 << 20,
      engine,
      allowShort: options.allowShort ?? false,
    };
  }

  function conversion<S extends Uint16Array | Float32Array, D extends Uint16Array | Float32Array>(
    name: string,
    SrcType: new (length: number) => S,
    DstType: new (length: number) => D,
    run: (src: S, dst: D, threads: number, swap?: AxisSwap) => Promise<void>,
  ) {
    return async (src: S, dst?: D, options?: ConvertOptions): Promise<D> => {
      if (!(src instanceof SrcType)) throw new TypeError(`${name}: src must be a ${SrcType.name}, got ${describe(src)}${SrcType.name === 'Uint16Array' ? ' (wrap raw bytes with new Uint16Array(buffer, byteOffset, count))' : ''}`);
      if (dst !== undefined && !(dst instanceof DstType)) throw new TypeError(`${name}: dst must be a ${DstType.name}, got ${describe(dst)}`);
      const out = dst ?? new DstType(src.length);
      if (out.length < src.length) throw new RangeError(`${name}: dst holds ${out.length} elements but src has ${src.length}; pass a dst at least as long as src`);
      const { threads, swap } = parseOptions(convertOptionsSchema, options, name);
      if (swap && src.length % (swap.outer * swap.inner) !== 0) {
        throw new RangeError(`${name}: swap.outer × swap.inner (${swap.outer} × ${swap.inner}) must divide src's ${src.length} elements`);
      }
      await run(src, out, threadsFor(threads, src.length, 1 << 20), swap);
      return out;
    };
  }

  return {
    kind: backend.kind,

    async allocPinned(bytes) {
      if (!Number.isSafeInteger(bytes) || bytes < 0) throw new RangeError(`allocPinned: bytes is ${String(bytes)}; pass a non-negative integer byte count`);
      const allocation = await backend.allocPinned(bytes);
      if (allocation.locked) locked.add(allocation.buffer);
      else if (backend.kind === 'native' && !lockWarned) {
        lockWarned = true;
        const [code, text] = lockErrorText(allocation.lockErrno);
        process.emitWarning(
          `allocPinned: mlock failed (${code}: ${text}); the memory is usable but may be swapped out. Raise the locked-memory limit (ulimit -l, systemd LimitMEMLOCK) or grant CAP_IPC_LOCK to pin it`,
          { code: 'FLEXHELM_MLOCK_FAILED' },
        );
      }
      return allocation.buffer;
    },

    isPinned(buffer) {
      return locked.has(buffer);
    },

    async copy(dst, src, options) {
      const to = bytesOf(dst, 'dst', 'copy');
      const from = bytesOf(src, 'src', 'copy');
      if (to.length < from.length) throw new RangeError(`copy: dst has ${to.length} bytes but src has ${from.length}; pass a dst at least as large as src (or copy a subarray of src)`);
      const { threads } = parseOptions(threadOptionsSchema, options, 'copy');
      await backend.copy(to, from, threadsFor(threads, from.length, 16 << 20));
    },

    async readFile(path, dst, options) {
      const file = pathOf(path, 'readFile');
      const bytes = bytesOf(dst, 'dst', 'readFile');
      const parsed = parseOptions(readOptionsSchema, options, 'readFile');
      return backend.readFile(file, bytes, parsed.offset ?? 0, ioOptions(parsed, 'readFile'));
    },

    async writeFile(path, src, options) {
      const file = pathOf(path, 'writeFile');
      const bytes = bytesOf(src, 'src', 'writeFile');
      const parsed = parseOptions(writeOptionsSchema, options, 'writeFile');
      return backend.writeFile(file, bytes, parsed.offset, ioOptions(parsed, 'writeFile'));
    },

    f16ToF32: conversion('f16ToF32', Uint16Array, Float32Array, (s, d, t, w) => backend.f16ToF32(s, d, t, w)),
    bf16ToF32: conversion('bf16ToF32', Uint16Array, Float32Array, (s, d, t, w) => backend.bf16ToF32(s, d, t, w)),
    f32ToF16: conversion('f32ToF16', Float32Array, Uint16Array, (s, d, t, w) => backend.f32ToF16(s, d, t, w)),

    async quantize4(src, options) {
      if (!(src instanceof Float32Array) && !(src instanceof Uint16Array)) {
        throw new TypeError(`quantize4: src must be a Float32Array (f32) or a Uint16Array of f16 bit patterns, got ${describe(src)}`);
      }
      const parsed = parseOptions(quantizeOptionsSchema, options, 'quantize4');
      const layout = groupLayout(parsed.shape ?? [src.length], parsed.groupSize ?? 64, parsed.groupDim ?? 0, 'quantize4');
      if (layout.elements !== src.length) throw new RangeError(`quantize4: shape [${layout.shape.join(', ')}] has ${layout.elements} elements but src has ${src.length}`);
      const packed = new Uint8Array(layout.packedLength);
      const scale = new Uint16Array(layout.scaleLength);
      await backend.quantize4(src, layout, packed, scale, threadsFor(parsed.threads, src.length, 1 << 20));
      return { shape: layout.shape, groupSize: layout.groupSize, groupDim: layout.groupDim, packed, packedShape: layout.packedShape, scale, scaleShape: layout.scaleShape };
    },

    async dequantize4(quantized, options) {
      const layout = checkQuantized(quantized);
      const parsed = parseOptions(dequantizeOptionsSchema, options, 'dequantize4');
      const dst = parsed.dst ?? new Float32Array(layout.elements);
      if (dst.length < layout.elements) throw new RangeError(`dequantize4: dst holds ${dst.length} elements but the tensor has ${layout.elements}`);
      await backend.dequantize4(quantized.packed, quantized.scale, layout, dst, threadsFor(parsed.threads, layout.elements, 1 << 20));
      return dst;
    },
  };
}

function checkQuantized(quantized: Quantized4): GroupLayout {
  if (typeof quantized !== 'object' || quantized === null) throw new TypeError(`dequantize4: expected a Quantized4 object from quantize4, got ${describe(quantized)}`);
  const layout = groupLayout(quantized.shape, quantized.groupSize, quantized.groupDim, 'dequantize4');
  if (!(quantized.packed instanceof Uint8Array)) throw new TypeError(`dequantize4: packed must be a Uint8Array, got ${describe(quantized.packed)}`);
  if (!(quantized.scale instanceof Uint16Array)) throw new TypeError(`dequantize4: scale must be a Uint16Array of f16 bits, got ${describe(quantized.scale)}`);
  const where = `shape [${layout.shape.join(', ')}] grouped by ${layout.groupSize} along dimension ${layout.groupDim}`;
  if (quantized.packed.length !== layout.packedLength) throw new RangeError(`dequantize4: packed has ${quantized.packed.length} bytes but ${where} needs ${layout.packedLength}`);
  if (quantized.scale.length !== layout.scaleLength) throw new RangeError(`dequantize4: scale has ${quantized.scale.length} values but ${where} needs ${layout.scaleLength}`);
  return layout;
}

function lockErrorText(errno: number): [string, string] {
  const codes: Record<number, [string, string]> = {
    1: ['EPERM', 'not permitted'],
    11: ['EAGAIN', 'some pages could not be locked'],
    12: ['ENOMEM', 'over the RLIMIT_MEMLOCK limit'],
  };
  return codes[errno] ?? [`errno ${errno}`, 'mlock refused'];
}
