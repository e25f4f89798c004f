import { bf16ToF32, f16ToF32, f32ToF16 } from '@flexhelm/python-compat';
import { constants, promises as fs } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { constants as osConstants } from 'node:os';

import type { AxisSwap, Backend, IoResult, ResolvedIoOptions } from './backend.js';
import { PinnedIoError, shortFileError, systemIoError } from './pinned-io-error.js';
import { dequantize4Js, quantize4Js } from './quantize4-kernel.js';
import { tempPathFor } from './temp-path.js';

// The pure-JS fallback: same results as the addon, without pinning, threads, O_DIRECT or SIMD.

function asIoError(error: unknown, operation: string, path: string, syscall: string, offset: number): Error {
  if (error instanceof PinnedIoError) return error;
  const errno = (error as NodeJS.ErrnoException | undefined)?.errno;
  if (typeof errno === 'number') return systemIoError(operation, path, (error as NodeJS.ErrnoException).syscall ?? syscall, offset, errno);
  return error instanceof Error ? error : new Error(String(error));
}

/** Runs `count` chunk jobs with at most `depth` in flight; the first failure stops new jobs and is rethrown. */
async function inFlight(count: number, depth: number, job: (index: number) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: unknown;
  const lane = async () => {
    while (failure === undefined && next < count) {
      const index = next++;
      try {
        await job(index);
      } catch (error) {
        failure ??= error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(depth, count) }, lane));
  if (failure !== undefined) throw failure;
}

async function readChunk(handle: FileHandle, path: string, dst: Uint8Array, start: number, length: number, position: number, fileSize: number, requested: number, offset: number) {
  let done = 0;
  while (done < length) {
    let bytesRead: number;
    try {
      ({ bytesRead } = await handle.read(dst, start + done, length - done, position + done));
    } catch (error) {
      throw asIoError(error, 'readFile', path, 'read', position + done);
    }
    if (bytesRead === 0) throw shortFileError(path, offset, requested, Math.min(fileSize, position + done));
    done += bytesRead;
  }
}

async function writeChunks(handle: FileHandle, path: string, src: Uint8Array, offset: number, options: ResolvedIoOptions): Promise<void> {
  const chunks = Math.ceil(src.length / options.chunkSize);
  await inFlight(chunks, options.queueDepth, async (index) => {
    const start = index * options.chunkSize;
    const end = Math.min(src.length, start + options.chunkSize);
    let done = start;
    while (done < end) {
      try {
        const { bytesWritten } = await handle.write(src, done, end - done, offset + done);
        done += bytesWritten;
      } catch (error) {
        throw asIoError(error, 'writeFile', path, 'write', offset + done);
      }
    }
  });
}

export const jsBackend: Backend = {
  kind: 'js',

  async allocPinned(bytes) {
    return { buffer: new ArrayBuffer(bytes), locked: false, lockErrno: 0 };
  },

  async copy(dst, src) {
    dst.set(src); // TypedArray.set copies as if through a temporary, so overlapping views are safe
  },

  async readFile(path, dst, offset, options): Promise<IoResult> {
    let handle: FileHandle;
    try {
      handle = await fs.open(path, 'r');
    } catch (error) {
      throw asIoError(error, 'readFile', path, 'open', offset);
    }
    try {
      let fileSize: number;
      try {
        const info = await handle.stat();
        if (info.isDirectory()) throw systemIoError('readFile', path, 'open', offset, osConstants.errno.EISDIR);
        fileSize = info.size;
      } catch (error) {
        throw asIoError(error, 'readFile', path, 'fstat', offset);
      }
      const n = Math.min(dst.length, Math.max(0, fileSize - offset));
      if (n < dst.length && !options.allowShort) throw shortFileError(path, offset, dst.length, fileSize);
      const chunks = Math.ceil(n / options.chunkSize);
      await inFlight(chunks, options.queueDepth, (index) => {
        const start = index * options.chunkSize;
        return readChunk(handle, path, dst, start, Math.min(options.chunkSize, n - start), offset + start, fileSize, dst.length, offset);
      });
      return { bytes: n, direct: false, engine: 'js' };
    } finally {
      await handle.close();
    }
  },

  async writeFile(path, src, offset, options): Promise<IoResult> {
    if (offset !== undefined) {
      let handle: FileHandle;
      try {
        handle = await fs.open(path, constants.O_WRONLY | constants.O_CREAT, 0o644);
      } catch (error) {
        throw asIoError(error, 'writeFile', path, 'open', offset);
      }
      try {
        await writeChunks(handle, path, src, offset, options);
      } finally {
        await handle.close();
      }
      return { bytes: src.length, direct: false, engine: 'js' };
    }
    const temp = tempPathFor(path);
    let handle: FileHandle | undefined;
    try {
      try {
        handle = await fs.open(temp, 'wx', 0o644);
      } catch (error) {
        throw asIoError(error, 'writeFile', path, 'open', 0);
      }
      await writeChunks(handle, path, src, 0, options);
      try {
        await handle.sync();
      } catch (error) {
        throw asIoError(error, 'writeFile', path, 'fsync', 0);
      }
      await handle.close();
      handle = undefined;
      try {
        await fs.rename(temp, path);
      } catch (error) {
        throw asIoError(error, 'writeFile', path, 'rename', 0);
      }
    } catch (error) {
      await handle?.close().catch(() => undefined);
      await fs.rm(temp, { force: true }).catch(() => undefined); // e.g. the directory itself is missing
      throw error;
    }
    return { bytes: src.length, direct: false, engine: 'js' };
  },

  async f16ToF32(src, dst, _threads, swap) {
    f16ToF32(swapAxes(src, swap), dst);
  },

  async bf16ToF32(src, dst, _threads, swap) {
    bf16ToF32(swapAxes(src, swap), dst);
  },

  async f32ToF16(src, dst, _threads, swap) {
    f32ToF16(swapAxes(src, swap), dst);
  },

  async quantize4(src, layout, packed, scale) {
    quantize4Js(src, layout, packed, scale);
  },

  async dequantize4(packed, scale, layout, dst) {
    dequantize4Js(packed, scale, layout, dst);
  },
};

/** `src` as [outer, inner, block] → a copy laid out [inner, outer, block] (the native backend does it while converting). */
function swapAxes<A extends Uint16Array | Float32Array>(src: A, swap: AxisSwap | undefined): A {
  if (!swap) return src;
  const { outer, inner } = swap;
  const block = src.length / (outer * inner);
  const out = new (src.constructor as new (n: number) => A)(src.length);
  for (let t = 0; t < outer; t++)
    for (let r = 0; r < inner; r++) out.set(src.subarray((t * inner + r) * block, (t * inner + r + 1) * block), (r * outer + t) * block);
  return out;
}
