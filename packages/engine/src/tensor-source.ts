import { bf16ToF32, f16ToF32 } from '@flexhelm/python-compat';
import { readSync } from 'node:fs';

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
  close(): void;
}

export function elementCount(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

export function bytesPerElement(dtype: WeightDtype): number {
  return dtype === 'F32' ? 4 : 2;
}

/** Throws naming the tensor and file if any value is NaN or infinite. */
export function assertFinite(info: TensorInfo, data: Float32Array): void {
  for (let i = 0; i < data.length; i++) {
    if (!Number.isFinite(data[i])) {
      throw new Error(`${info.file}: tensor ${info.name} holds a non-finite value (${data[i]}) at flat index ${i}; the checkpoint is corrupt`);
    }
  }
}

/** Reads up to `length` bytes at `position` (fewer only at the end of the file). */
export function readAt(fd: number, length: number, position: number): Buffer {
  const buf = Buffer.allocUnsafe(length);
  let got = 0;
  while (got < length) {
    const n = readSync(fd, buf, got, length - got, position + got);
    if (n === 0) break;
    got += n;
  }
  return buf.subarray(0, got);
}

/** Little-endian F32/F16/BF16 bytes → float32 values (copied into an aligned buffer first). */
export function decodeTensor(bytes: Uint8Array, dtype: WeightDtype): Float32Array {
  const aligned = new Uint8Array(bytes.length);
  aligned.set(bytes);
  const n = bytes.length / bytesPerElement(dtype);
  if (dtype === 'F32') return new Float32Array(aligned.buffer, 0, n);
  const halves = new Uint16Array(aligned.buffer, 0, n);
  return dtype === 'F16' ? f16ToF32(halves) : bf16ToF32(halves);
}
