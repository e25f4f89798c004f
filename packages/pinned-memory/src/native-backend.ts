import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import type { Backend, IoResult, PinnedAllocation, ResolvedIoOptions } from './backend.js';
import type { GroupLayout } from './group-layout.js';
import { shortFileError, systemIoError } from './pinned-io-error.js';

/** What the compiled addon reports about itself and the CPU it runs on. */
export interface NativeFeatures {
  ioUring: boolean;
  avx2: boolean;
  f16c: boolean;
  avx512: boolean;
  hardwareThreads: number;
}

interface NativeLayout {
  outer: number;
  dim: number;
  inner: number;
  group: number;
}

interface NativeIoOptions {
  direct: boolean;
  allowShort: boolean;
  queueDepth: number;
  chunkSize: number;
  engine: number;
}

interface NativeBinding {
  features: NativeFeatures;
  allocPinned(bytes: number): Promise<PinnedAllocation>;
  copy(dst: Uint8Array, src: Uint8Array, threads: number): Promise<void>;
  readFile(path: string, dst: Uint8Array, offset: number, options: NativeIoOptions): Promise<IoResult>;
  writeFile(path: string, src: Uint8Array, offset: number, options: NativeIoOptions): Promise<IoResult>;
  f16ToF32(src: Uint16Array, dst: Float32Array, threads: number, outer?: number, inner?: number): Promise<void>;
  bf16ToF32(src: Uint16Array, dst: Float32Array, threads: number, outer?: number, inner?: number): Promise<void>;
  f32ToF16(src: Float32Array, dst: Uint16Array, threads: number, outer?: number, inner?: number): Promise<void>;
  quantize4(src: Float32Array | Uint16Array, isF16: boolean, layout: NativeLayout, packed: Uint8Array, scale: Uint16Array, threads: number): Promise<void>;
  dequantize4(packed: Uint8Array, scale: Uint16Array, layout: NativeLayout, dst: Float32Array, threads: number): Promise<void>;
}

interface NativeIoFailure {
  errno: number;
  syscall: string;
  offset: number;
  fileSize: number;
}

const engineCodes = { auto: 0, pread: 1, io_uring: 2 } as const;

function nativeOptions(options: ResolvedIoOptions): NativeIoOptions {
  return { ...options, engine: engineCodes[options.engine] };
}

function nativeLayout(layout: GroupLayout): NativeLayout {
  return { outer: layout.outer, dim: layout.dim, inner: layout.inner, group: layout.groupSize };
}

/** Turns the addon's {errno, syscall, offset, fileSize} rejection into the same PinnedIoError the fallback throws. */
function ioFailure(error: unknown, operation: string, path: string, requested: number, offset: number): Error {
  const failure = error as Partial<NativeIoFailure> | undefined;
  if (failure && typeof failure.errno === 'number' && typeof failure.syscall === 'string') {
    if (failure.errno === 0) return shortFileError(path, offset, requested, failure.fileSize ?? 0);
    return systemIoError(operation, path, failure.syscall, failure.offset ?? offset, failure.errno);
  }
  return error instanceof Error ? error : new Error(String(error));
}

export const addonPath = join(dirname(fileURLToPath(import.meta.url)), '..', 'build', 'Release', 'pinned_memory.node');

/** Loads build/Release/pinned_memory.node; undefined when it was not built. A broken build is reported once. */
export function loadNativeBinding(): NativeBinding | undefined {
  if (!existsSync(addonPath)) return undefined;
  try {
    return createRequire(import.meta.url)(addonPath) as NativeBinding;
  } catch (error) {
    process.emitWarning(`@flexhelm/pinned-memory: cannot load ${addonPath} (${error instanceof Error ? error.message : String(error)}); using the pure-JS fallback. Rebuild it with \`pnpm --filter @flexhelm/pinned-memory build:native\``);
    return undefined;
  }
}

export function nativeBackend(binding: NativeBinding): Backend {
  return {
    kind: 'native',
    allocPinned: (bytes) => binding.allocPinned(bytes),
    copy: (dst, src, threads) => binding.copy(dst, src, threads),
    async readFile(path, dst, offset, options) {
      try {
        return await binding.readFile(path, dst, offset, nativeOptions(options));
      } catch (error) {
        throw ioFailure(error, 'readFile', path, dst.length, offset);
      }
    },
    async writeFile(path, src, offset, options) {
      try {
        return await binding.writeFile(path, src, offset ?? -1, nativeOptions(options));
      } catch (error) {
        throw ioFailure(error, 'writeFile', path, src.length, offset ?? 0);
      }
    },
    f16ToF32: (src, dst, threads, swap) => binding.f16ToF32(src, dst, threads, swap?.outer, swap?.inner),
    bf16ToF32: (src, dst, threads, swap) => binding.bf16ToF32(src, dst, threads, swap?.outer, swap?.inner),
    f32ToF16: (src, dst, threads, swap) => binding.f32ToF16(src, dst, threads, swap?.outer, swap?.inner),
    quantize4: (src, layout, packed, scale, threads) => binding.quantize4(src, src instanceof Uint16Array, nativeLayout(layout), packed, scale, threads),
    dequantize4: (packed, scale, layout, dst, threads) => binding.dequantize4(packed, scale, nativeLayout(layout), dst, threads),
  };
}
