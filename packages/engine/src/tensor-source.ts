import { bf16ToF32, f16ToF32, halfToFloatValues } from '@flexhelm/python-compat';
import { readSync } from 'node:fs';
import { ModelFileError } from './model-file-error.js';

/** Element types the weight readers accept; everything is converted to float32 on load. */
export type WeightDtype = 'F32' | 'F16' | 'BF16';

/** Where one tensor lives and what it holds, as declared by its file. */
export interface TensorInfo {
  name: string;
  dtype: WeightDtype;
  shape: number[];
  /** File the tensor is read from (for error messages). */
  file: string;
}

/**
 * A lazily read set of named tensors (a checkpoint). `read` loads one tensor from disk on demand, so a caller can
 * stream a model layer by layer.
 */
export interface TensorSource {
  /** Every tensor the checkpoint declares, by its name in the files. */
  readonly tensors: ReadonlyMap<string, TensorInfo>;
  /** Reads one tensor, converted to float32. */
  read(name: string): Float32Array;
  /** Reads a 2-D tensor `[rows, cols]` as float32 `[cols, rows]` (decoded and transposed in one pass), when supported. */
  readTransposed?(name: string): Float32Array;
  close(): void;
}

export function elementCount(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

export function bytesPerElement(dtype: WeightDtype): number {
  return dtype === 'F32' ? 4 : 2;
}

/**
 * Reads up to `length` bytes at `position` (fewer only at the end of the file) into a buffer of their own, at offset 0
 * of its memory, so `decodeTensor` can view F32 data in place.
 */
export function readAt(fd: number, length: number, position: number): Buffer {
  const buf = Buffer.allocUnsafeSlow(length);
  let got = 0;
  while (got < length) {
    const n = readSync(fd, buf, got, length - got, position + got);
    if (n === 0) break;
    got += n;
  }
  return buf.subarray(0, got);
}

/** The error for a NaN/±Inf value of a checkpoint tensor, at its flat index in the file's order. */
export function nonFinite(info: TensorInfo, index: number, value: number): ModelFileError {
  return new ModelFileError(`${info.file}: tensor ${info.name} holds ${value} at flat index ${index} (shape ${JSON.stringify(info.shape)}); the checkpoint is corrupt — download or convert it again`);
}

/** The first value of `words` whose exponent bits (`mask`) are all ones: a NaN or an infinity. */
function firstNonFinite(words: Int32Array | Uint16Array, mask: number): number {
  for (let i = 0; i < words.length; i++) if ((words[i]! & mask) === mask) return i;
  return -1;
}

/**
 * Little-endian F32/F16/BF16 bytes → float32 values. With `check` (the tensor's description) every value is tested
 * for NaN/±Inf inside the conversion loop, on the encoded bits, and the first one is reported naming the tensor. The
 * test is branch-free: an exponent of all ones plus one carries into the bit above it, and the carries are OR-ed
 * together (about 0.3 ns a value). Aligned F32 bytes are used in place (the result views them): pass bytes no one
 * else reuses.
 */
export function decodeTensor(bytes: Uint8Array, dtype: WeightDtype, check?: TensorInfo): Float32Array {
  const n = bytes.length / bytesPerElement(dtype);
  let buffer = bytes.buffer;
  let offset = bytes.byteOffset;
  if (offset % bytesPerElement(dtype) !== 0) {
    const aligned = new Uint8Array(bytes.length);
    aligned.set(bytes);
    buffer = aligned.buffer;
    offset = 0;
  }
  if (dtype === 'F32') {
    const out = new Float32Array(buffer, offset, n);
    if (check) {
      const words = new Int32Array(buffer, offset, n);
      let carry = 0;
      for (let i = 0; i < n; i++) carry |= ((words[i]! >> 23) & 0xff) + 1;
      if (carry & 0x100) {
        const i = firstNonFinite(words, 0x7f800000);
        throw nonFinite(check, i, out[i]!);
      }
    }
    return out;
  }
  const halves = new Uint16Array(buffer, offset, n);
  if (!check) return dtype === 'F16' ? f16ToF32(halves) : bf16ToF32(halves);
  const out = new Float32Array(n);
  let carry = 0;
  if (dtype === 'F16') {
    const t = halfToFloatValues();
    for (let i = 0; i < n; i++) {
      const h = halves[i]!;
      carry |= (h & 0x7c00) + 0x0400;
      out[i] = t[h]!;
    }
  } else {
    const bits = new Uint32Array(out.buffer);
    for (let i = 0; i < n; i++) {
      const h = halves[i]!;
      carry |= (h & 0x7f80) + 0x0080;
      bits[i] = h << 16;
    }
  }
  if (carry & 0x8000) {
    const i = firstNonFinite(halves, dtype === 'F16' ? 0x7c00 : 0x7f80);
    throw nonFinite(check, i, out[i]!);
  }
  return out;
}

/** Piece of a checked F32 read that is scanned right after the kernel copied it, while it is still in cache. */
const SCAN_CHUNK = 1 << 20;

/**
 * Reads `byteLength` bytes of one tensor at `position` and decodes them like `decodeTensor`; `truncated(got)` makes
 * the error for a file that ends early. Checked F32 data has no conversion loop to test in, and a separate pass over
 * a large tensor would wait on memory again: it is read in 1 MiB pieces and each is tested right after it arrives.
 */
export function readTensor(fd: number, position: number, byteLength: number, dtype: WeightDtype, check: TensorInfo | undefined, truncated: (got: number) => Error): Float32Array {
  if (dtype !== 'F32' || !check) {
    const bytes = readAt(fd, byteLength, position);
    if (bytes.length < byteLength) throw truncated(bytes.length);
    return decodeTensor(bytes, dtype, check);
  }
  const buf = Buffer.allocUnsafeSlow(byteLength);
  const words = new Int32Array(buf.buffer, 0, byteLength >> 2);
  let got = 0;
  let scanned = 0;
  let carry = 0;
  while (got < byteLength) {
    const n = readSync(fd, buf, got, Math.min(SCAN_CHUNK, byteLength - got), position + got);
    if (n === 0) throw truncated(got);
    got += n;
    const end = got >> 2;
    for (let i = scanned; i < end; i++) carry |= ((words[i]! >> 23) & 0xff) + 1;
    scanned = end;
  }
  const out = new Float32Array(buf.buffer, 0, byteLength >> 2);
  if (carry & 0x100) {
    const i = firstNonFinite(words, 0x7f800000);
    throw nonFinite(check, i, out[i]!);
  }
  return out;
}
