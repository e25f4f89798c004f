import type { GroupLayout } from './group-layout.js';

export type IoEngine = 'auto' | 'pread' | 'io_uring';

export interface ResolvedIoOptions {
  direct: boolean;
  queueDepth: number;
  chunkSize: number;
  engine: IoEngine;
  allowShort: boolean;
}

export interface IoResult {
  /** Bytes transferred. */
  bytes: number;
  /** Whether O_DIRECT was actually used (it falls back to buffered I/O where the filesystem refuses it). */
  direct: boolean;
  /** What issued the requests: io_uring, pread/pwrite threads, or the JS fallback's fs.promises. */
  engine: 'io_uring' | 'pread' | 'js';
}

export interface PinnedAllocation {
  buffer: ArrayBuffer;
  locked: boolean;
  /** errno of the failed mlock, 0 when locked (or in the fallback, where nothing is locked). */
  lockErrno: number;
}

/** The two leading axes of a conversion's source, swapped in its destination (`ConvertOptions.swap`). */
export interface AxisSwap {
  outer: number;
  inner: number;
}

/** One implementation of every operation, called with arguments the public API has already validated. */
export interface Backend {
  readonly kind: 'native' | 'js';
  allocPinned(bytes: number): Promise<PinnedAllocation>;
  copy(dst: Uint8Array, src: Uint8Array, threads: number): Promise<void>;
  readFile(path: string, dst: Uint8Array, offset: number, options: ResolvedIoOptions): Promise<IoResult>;
  /** offset undefined: replace the whole file atomically. */
  writeFile(path: string, src: Uint8Array, offset: number | undefined, options: ResolvedIoOptions): Promise<IoResult>;
  /** With `swap`, src is read as [outer, inner, block] and dst written as [inner, outer, block]. */
  f16ToF32(src: Uint16Array, dst: Float32Array, threads: number, swap?: AxisSwap): Promise<void>;
  bf16ToF32(src: Uint16Array, dst: Float32Array, threads: number, swap?: AxisSwap): Promise<void>;
  f32ToF16(src: Float32Array, dst: Uint16Array, threads: number, swap?: AxisSwap): Promise<void>;
  quantize4(src: Float32Array | Uint16Array, layout: GroupLayout, packed: Uint8Array, scale: Uint16Array, threads: number): Promise<void>;
  dequantize4(packed: Uint8Array, scale: Uint16Array, layout: GroupLayout, dst: Float32Array, threads: number): Promise<void>;
}
