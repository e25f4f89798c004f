import { closeSync, fstatSync, openSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ModelFileError } from './model-file-error.js';
import { bytesPerElement, elementCount, readAt, readTensor, type TensorInfo, type TensorSource, type WeightDtype } from './tensor-source.js';

interface NpyEntry extends TensorInfo {
  dataStart: number;
  byteLength: number;
}

/** numpy itself refuses headers above 10,000 bytes unless told otherwise; a weight file's is under 200. */
const MAX_NPY_HEADER = 65_536;
const MAGIC = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]);

/** Parses the header of a `.npy` file (format versions 1–3) and checks the file holds all the data it declares. */
export function readNpyHeader(file: string, name: string): NpyEntry {
  const fd = openSync(file, 'r');
  try {
    const size = fstatSync(fd).size;
    const pre = readAt(fd, 12, 0);
    if (pre.length < 10 || !pre.subarray(0, 6).equals(MAGIC)) throw new ModelFileError(`${file}: not a numpy .npy file (bad magic bytes)`);
    const major = pre[6]!;
    if (major < 1 || major > 3) throw new ModelFileError(`${file}: unsupported .npy format version ${major}`);
    const headerLen = major === 1 ? pre.readUInt16LE(8) : pre.readUInt32LE(8);
    const headerStart = major === 1 ? 10 : 12;
    // Check the declared length against the file before reading: a hostile one could ask for gigabytes.
    if (headerLen > size - headerStart) throw new ModelFileError(`${file}: .npy header length ${headerLen} does not fit in the ${size}-byte file; the file is truncated`);
    if (headerLen > MAX_NPY_HEADER) throw new ModelFileError(`${file}: .npy header length ${headerLen} is more than ${MAX_NPY_HEADER} bytes; not a weight file numpy writes`);
    const headerBytes = readAt(fd, headerLen, headerStart);
    if (headerBytes.length < headerLen) throw new ModelFileError(`${file}: truncated .npy header`);
    const header = headerBytes.toString('latin1');
    const descr = /'descr':\s*'([^']*)'/.exec(header)?.[1];
    const fortran = /'fortran_order':\s*(True|False)/.exec(header)?.[1];
    const shapeText = /'shape':\s*\(([^)]*)\)/.exec(header)?.[1];
    if (descr === undefined || fortran === undefined || shapeText === undefined) throw new ModelFileError(`${file}: malformed .npy header ${JSON.stringify(header.trim())}`);
    if (fortran === 'True') throw new ModelFileError(`${file}: Fortran-ordered arrays are not supported; save with np.ascontiguousarray`);
    let dtype: WeightDtype;
    if (descr === '<f4') dtype = 'F32';
    else if (descr === '<f2') dtype = 'F16';
    else throw new ModelFileError(`${file}: dtype ${descr} is not supported (use little-endian float16 '<f2' or float32 '<f4')`);
    const shape = shapeText
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '')
      .map(Number);
    if (!shape.every((d) => Number.isInteger(d) && d >= 0)) throw new ModelFileError(`${file}: invalid shape (${shapeText}) in the .npy header`);
    const dataStart = headerStart + headerLen;
    const byteLength = elementCount(shape) * bytesPerElement(dtype);
    if (size - dataStart < byteLength) {
      throw new ModelFileError(`${file}: tensor ${name} (${descr} ${JSON.stringify(shape)}) needs ${byteLength} data bytes but the file has ${size - dataStart}; the file is truncated`);
    }
    if (size - dataStart > byteLength) throw new ModelFileError(`${file}: ${size - dataStart - byteLength} bytes of unexpected data after tensor ${name}`);
    return { name, dtype, shape, file, dataStart, byteLength };
  } finally {
    closeSync(fd);
  }
}

/**
 * FlexLLMGen's weight folder (`<model>-np/`): one numpy file per tensor, named by the parameter name without the
 * `model.` prefix and without extension (`decoder.layers.0.fc1.weight`). Headers are read up front, data on demand.
 */
export class NpyFolderSource implements TensorSource {
  readonly tensors = new Map<string, NpyEntry>();

  private readonly checkFinite: boolean;

  /** `checkFinite: false` skips the NaN/Inf test of every value read (benchmarks only). */
  constructor(
    readonly dir: string,
    options: { checkFinite?: boolean } = {},
  ) {
    this.checkFinite = options.checkFinite ?? true;
    for (const file of readdirSync(dir).sort()) {
      const path = join(dir, file);
      if (!statSync(path).isFile()) continue;
      const name = file.endsWith('.npy') ? file.slice(0, -4) : file;
      this.tensors.set(name, readNpyHeader(path, name));
    }
    if (this.tensors.size === 0) throw new ModelFileError(`${dir} holds no weight files`);
  }

  read(name: string): Float32Array {
    const e = this.tensors.get(name);
    if (!e) throw new Error(`tensor ${name} is not in ${this.dir}`);
    const fd = openSync(e.file, 'r');
    try {
      const truncated = () => new ModelFileError(`${e.file}: file ends inside tensor ${name}; it is truncated`);
      return readTensor(fd, e.dataStart, e.byteLength, e.dtype, this.checkFinite ? e : undefined, truncated);
    } finally {
      closeSync(fd);
    }
  }

  close(): void {}
}
