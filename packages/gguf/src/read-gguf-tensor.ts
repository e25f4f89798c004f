import { closeSync, openSync, readSync } from 'node:fs';
import { ModelFileError } from '@flexhelm/engine';
import { dequantize } from './dequantize.js';
import type { GgufFile, GgufTensorInfo } from './read-gguf.js';

/** One of `of` equal outermost slices of a tensor (expert `index` of a merged 3-D expert tensor). */
export interface TensorSlice {
  index: number;
  of: number;
}

/** Where a tensor's bytes (or one slice of them) lie in the file; a slice must be whole bytes of whole blocks. */
function byteRange(file: GgufFile, tensor: GgufTensorInfo, slice?: TensorSlice): { start: number; length: number } {
  if (!slice) return { start: tensor.position, length: tensor.byteLength };
  const length = tensor.byteLength / slice.of;
  if (!Number.isInteger(length) || !Number.isInteger(slice.index) || slice.index < 0 || slice.index >= slice.of) {
    throw new ModelFileError(`${file.path}: tensor ${tensor.name} (${tensor.byteLength} bytes) does not split into ${slice.of} equal slices`);
  }
  return { start: tensor.position + slice.index * length, length };
}

/** The raw bytes of one tensor (or of one slice), read from the file when asked (the header reader never loads tensor data). */
export function readGgufTensorBytes(file: GgufFile, tensor: GgufTensorInfo, slice?: TensorSlice): Uint8Array {
  const { start, length } = byteRange(file, tensor, slice);
  const fd = openSync(file.path, 'r');
  try {
    const out = Buffer.alloc(length);
    let got = 0;
    while (got < out.length) {
      const n = readSync(fd, out, got, out.length - got, start + got);
      if (n === 0) throw new ModelFileError(`${file.path}: tensor ${tensor.name} ends early (the file shrank while being read?)`);
      got += n;
    }
    return out;
  } finally {
    closeSync(fd);
  }
}

/**
 * One tensor (or one slice) dequantised to float32, in ggml's element order (`dims[0]` fastest: a GGUF `[in, out]`
 * matrix comes out as the row-major `[out, in]` matrix of a Hugging Face checkpoint). Non-finite values are refused,
 * naming the index.
 */
export function readGgufTensor(file: GgufFile, tensor: GgufTensorInfo, slice?: TensorSlice): Float32Array {
  const values = dequantize(tensor.type, readGgufTensorBytes(file, tensor, slice), tensor.elements / (slice?.of ?? 1));
  for (let i = 0; i < values.length; i++) {
    if (!Number.isFinite(values[i]!)) throw new ModelFileError(`${file.path}: tensor ${tensor.name} (${tensor.type}) has a non-finite value (${values[i]}) at index ${i}${slice ? ` of slice ${slice.index}` : ''}`);
  }
  return values;
}
