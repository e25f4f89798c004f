import { closeSync, openSync, readSync } from 'node:fs';
import { ModelFileError } from '@flexhelm/engine';
import { dequantize } from './dequantize.js';
import type { GgufFile, GgufTensorInfo } from './read-gguf.js';

/** The raw bytes of one tensor, read from the file when asked (the header reader never loads tensor data). */
export function readGgufTensorBytes(file: GgufFile, tensor: GgufTensorInfo): Uint8Array {
  const fd = openSync(file.path, 'r');
  try {
    const out = Buffer.alloc(tensor.byteLength);
    let got = 0;
    while (got < out.length) {
      const n = readSync(fd, out, got, out.length - got, tensor.position + got);
      if (n === 0) throw new ModelFileError(`${file.path}: tensor ${tensor.name} ends early (the file shrank while being read?)`);
      got += n;
    }
    return out;
  } finally {
    closeSync(fd);
  }
}

/**
 * One tensor dequantised to float32, in ggml's element order (`dims[0]` fastest: a GGUF `[in, out]` matrix comes out
 * as the row-major `[out, in]` matrix of a Hugging Face checkpoint). Non-finite values are refused, naming the index.
 */
export function readGgufTensor(file: GgufFile, tensor: GgufTensorInfo): Float32Array {
  const values = dequantize(tensor.type, readGgufTensorBytes(file, tensor), tensor.elements);
  for (let i = 0; i < values.length; i++) {
    if (!Number.isFinite(values[i]!)) throw new ModelFileError(`${file.path}: tensor ${tensor.name} (${tensor.type}) has a non-finite value (${values[i]}) at index ${i}`);
  }
  return values;
}
