import { halfToFloatValues } from '@flexhelm/python-compat';
import { TRANSPOSE_TILE } from './transposed.js';
import { readSync } from 'node:fs';
import { nonFinite, type TensorInfo, type WeightDtype } from './tensor-source.js';

const TILE = TRANSPOSE_TILE;

/**
 * A checkpoint's `[rows, cols]` matrix (Linear weights `[out, in]`) of little-endian F32/F16/BF16 bytes → float32
 * `[cols, rows]`, in one pass: decode and transpose fused, so the model's largest arrays are walked once instead of
 * three times (read, widen, transpose). With `check`, NaN/±Inf are found on the encoded bits inside the same loop
 * (an exponent of all ones plus one carries into the bit above it) and the first one is reported in the file's own
 * flat order, as `decodeTensor` does.
 */
export function decodeTransposed(bytes: Uint8Array, dtype: WeightDtype, rows: number, cols: number, check?: TensorInfo): Float32Array {
  const n = rows * cols;
  const width = dtype === 'F32' ? 4 : 2;
  if (bytes.length !== n * width) throw new Error(`decodeTransposed: ${bytes.length} bytes for a ${dtype} [${rows}, ${cols}] matrix (expected ${n * width})`);
  let buffer = bytes.buffer;
  let offset = bytes.byteOffset;
  if (offset % width !== 0) {
    const aligned = new Uint8Array(bytes.length);
    aligned.set(bytes);
    buffer = aligned.buffer;
    offset = 0;
  }
  const out = new Float32Array(n);
  const bits = new Uint32Array(out.buffer);
  let carry = 0;
  if (dtype === 'F32') {
    const words = new Uint32Array(buffer, offset, n);
    for (let c0 = 0; c0 < cols; c0 += TILE) {
      const c1 = Math.min(cols, c0 + TILE);
      for (let r0 = 0; r0 < rows; r0 += TILE) {
        const r1 = Math.min(rows, r0 + TILE);
        for (let c = c0; c < c1; c++) {
          const d = c * rows;
          for (let r = r0; r < r1; r++) {
            const w = words[r * cols + c]!;
            carry |= ((w >>> 23) & 0xff) + 1;
            bits[d + r] = w;
          }
        }
      }
    }
    if (check && carry & 0x100) throw firstNonFinite(new Uint32Array(buffer, offset, n), 0x7f800000, check, (w) => new Float32Array(new Uint32Array([w]).buffer)[0]!);
    return out;
  }
  const halves = new Uint16Array(buffer, offset, n);
  if (dtype === 'F16') {
    const table = halfToFloatValues();
    for (let c0 = 0; c0 < cols; c0 += TILE) {
      const c1 = Math.min(cols, c0 + TILE);
      for (let r0 = 0; r0 < rows; r0 += TILE) {
        const r1 = Math.min(rows, r0 + TILE);
        for (let c = c0; c < c1; c++) {
          const d = c * rows;
          for (let r = r0; r < r1; r++) {
            const h = halves[r * cols + c]!;
            carry |= (h & 0x7c00) + 0x0400;
            out[d + r] = table[h]!;
          }
        }
      }
    }
    if (check && carry & 0x8000) throw firstNonFinite(halves, 0x7c00, check, (h) => table[h]!);
    return out;
  }
  for (let c0 = 0; c0 < cols; c0 += TILE) {
    const c1 = Math.min(cols, c0 + TILE);
    for (let r0 = 0; r0 < rows; r0 += TILE) {
      const r1 = Math.min(rows, r0 + TILE);
      for (let c = c0; c < c1; c++) {
        const d = c * rows;
        for (let r = r0; r < r1; r++) {
          const h = halves[r * cols + c]!;
          carry |= (h & 0x7f80) + 0x0080;
          bits[d + r] = h << 16;
        }
      }
    }
  }
  if (check && carry & 0x8000) throw firstNonFinite(halves, 0x7f80, check, (h) => new Float32Array(new Uint32Array([h << 16]).buffer)[0]!);
  return out;
}

/** The error for the first value (file order) whose exponent bits `mask` are all ones. */
function firstNonFinite(words: Uint32Array | Uint16Array, mask: number, info: TensorInfo, value: (w: number) => number): Error {
  let i = 0;
  while (i < words.length && (words[i]! & mask) >>> 0 !== mask >>> 0) i++;
  return nonFinite(info, i, value(words[i]!));
}

/**
 * Reads a `[rows, cols]` tensor's `byteLength` bytes at `position` and returns it decoded as float32 `[cols, rows]`
 * (`decodeTransposed`); `truncated(got)` makes the error for a file that ends early.
 */
export function readTensorTransposed(fd: number, position: number, byteLength: number, dtype: WeightDtype, shape: readonly number[], check: TensorInfo | undefined, truncated: (got: number) => Error, scratch?: ReadScratch): Float32Array {
  if (shape.length !== 2) throw new Error(`readTransposed: tensor has shape ${JSON.stringify(shape)}; only 2-D tensors transpose`);
  const buf = scratch ? scratch.take(byteLength) : Buffer.allocUnsafeSlow(byteLength);
  let got = 0;
  while (got < byteLength) {
    const n = readSync(fd, buf, got, byteLength - got, position + got);
    if (n === 0) throw truncated(got);
    got += n;
  }
  return decodeTransposed(buf.subarray(0, byteLength), dtype, shape[0]!, shape[1]!, check);
}

/**
 * One reusable buffer for the encoded bytes of the tensors read in turn (the result is always a fresh array, so the
 * bytes are not needed after the read): a model's reads then touch fresh memory only for what they return, not for
 * a second copy of every tensor (first touches of new pages cost about as much as the conversion here).
 */
export class ReadScratch {
  private buf?: Buffer;

  take(bytes: number): Buffer {
    if (!this.buf || this.buf.length < bytes) this.buf = Buffer.allocUnsafeSlow(bytes);
    return this.buf;
  }

  release(): void {
    this.buf = undefined;
  }
}
