import { closeSync, existsSync, fstatSync, openSync, statSync } from 'node:fs';
import { writeAll, writeFileAtomicWith } from '@flexhelm/atomic-write';
import { basename, dirname, join } from 'node:path';
import { ReadScratch, readTensorTransposed } from './decode-transposed.js';
import { ModelFileError } from './model-file-error.js';
import { readModelJson } from './read-model-text.js';
import { bytesPerElement, elementCount, readAt, readTensor, type TensorInfo, type TensorSource, type WeightDtype } from './tensor-source.js';

interface Entry extends TensorInfo {
  fd: number;
  /** Absolute byte offset of the tensor's data in its file. */
  start: number;
  byteLength: number;
}

const DTYPES = new Set<WeightDtype>(['F32', 'F16', 'BF16']);
/** Headers larger than this are refused (the format's own readers cap it at 100 MB). */
const MAX_HEADER = 100_000_000;

function readExactly(fd: number, length: number, position: number, file: string, what: string): Buffer {
  const buf = readAt(fd, length, position);
  if (buf.length < length) throw new ModelFileError(`${file}: file ends before ${what} (needed ${length} bytes at offset ${position}, got ${buf.length}); the file is truncated`);
  return buf;
}

/** A file name with no folder part (no `/`, `\\`, `..` or NUL), so it stays in the folder it is joined to. */
function isPlainFileName(name: string): boolean {
  return name !== '' && name !== '.' && name !== '..' && !/[/\\\0]/.test(name);
}

/** Opens one .safetensors file and validates its header against the file's size; returns its entries. */
function openSafetensorsFile(file: string): { fd: number; entries: Entry[] } {
  const fd = openSync(file, 'r');
  try {
    const size = fstatSync(fd).size;
    if (size < 8) throw new ModelFileError(`${file}: only ${size} bytes, too short to be a safetensors file (needs an 8-byte header length)`);
    const headerLen = Number(readExactly(fd, 8, 0, file, 'the header length').readBigUInt64LE(0));
    if (headerLen > MAX_HEADER || 8 + headerLen > size) {
      throw new ModelFileError(`${file}: header length ${headerLen} does not fit in the ${size}-byte file; the file is truncated or not safetensors`);
    }
    const headerText = readExactly(fd, headerLen, 8, file, 'the end of the header').toString('utf8');
    let header: unknown;
    try {
      header = JSON.parse(headerText);
    } catch (err) {
      throw new ModelFileError(`${file}: header is not valid JSON (${(err as Error).message})`);
    }
    if (typeof header !== 'object' || header === null || Array.isArray(header)) throw new ModelFileError(`${file}: header must be a JSON object`);
    const dataStart = 8 + headerLen;
    const dataSize = size - dataStart;
    const entries: Entry[] = [];
    for (const [name, value] of Object.entries(header as Record<string, unknown>)) {
      if (name === '__metadata__') continue;
      // Names appear in one-line error messages and as keys of weights: no control characters.
      // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this check looks for
      if (name === '' || /[\u0000-\u001f\u007f]/.test(name)) throw new ModelFileError(`${file}: tensor name ${JSON.stringify(name)} is empty or holds control characters`);
      const v = value as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
      if (typeof v !== 'object' || v === null) throw new ModelFileError(`${file}: tensor ${name}: header entry must be an object`);
      if (typeof v.dtype !== 'string' || !DTYPES.has(v.dtype as WeightDtype)) {
        throw new ModelFileError(`${file}: tensor ${name} has dtype ${JSON.stringify(v.dtype)}; supported: F32, F16, BF16`);
      }
      const dtype = v.dtype as WeightDtype;
      if (!Array.isArray(v.shape) || !v.shape.every((d) => Number.isInteger(d) && d >= 0)) {
        throw new ModelFileError(`${file}: tensor ${name} has an invalid shape ${JSON.stringify(v.shape)} (expected a list of non-negative integers)`);
      }
      const shape = v.shape as number[];
      const off = v.data_offsets;
      if (!Array.isArray(off) || off.length !== 2 || !off.every((o) => Number.isInteger(o) && o >= 0) || off[1] < off[0]) {
        throw new ModelFileError(`${file}: tensor ${name} has invalid data_offsets ${JSON.stringify(off)} (expected [begin, end] with begin <= end)`);
      }
      const [begin, end] = off as [number, number];
      const expected = elementCount(shape) * bytesPerElement(dtype);
      if (end - begin !== expected) {
        throw new ModelFileError(`${file}: tensor ${name} (${dtype} ${JSON.stringify(shape)}) needs ${expected} bytes but its data_offsets span ${end - begin}; the header is inconsistent`);
      }
      if (end > dataSize) {
        throw new ModelFileError(`${file}: tensor ${name} ends at data offset ${end} but the file holds only ${dataSize} data bytes; the file is truncated`);
      }
      entries.push({ name, dtype, shape, file, fd, start: dataStart + begin, byteLength: expected });
    }
    // The tensors must tile the data section exactly, as the format's own reader demands: a gap or an overlap means
    // the header lies (e.g. a header length off by one shifts every tensor), and the values read would be garbage.
    const sorted = [...entries].sort((a, b) => a.start - b.start || a.byteLength - b.byteLength);
    let covered = dataStart;
    let last: Entry | undefined;
    for (const e of sorted) {
      if (e.start < covered) {
        throw new ModelFileError(`${file}: tensors ${last!.name} and ${e.name} overlap in the data section (data offsets ${last!.start - dataStart}..${covered - dataStart} and ${e.start - dataStart}..${e.start - dataStart + e.byteLength}); the header lies about offsets`);
      }
      if (e.start > covered) {
        throw new ModelFileError(`${file}: ${e.start - covered} bytes of the data section before tensor ${e.name} belong to no tensor (data offsets ${covered - dataStart}..${e.start - dataStart}); the header does not describe the data — is the header length right?`);
      }
      covered = e.start + e.byteLength;
      last = e;
    }
    if (covered !== size) {
      throw new ModelFileError(`${file}: the last ${size - covered} bytes of the data section belong to no tensor (the tensors cover ${covered - dataStart} of ${dataSize} data bytes); the header does not describe the data — is the header length right?`);
    }
    return { fd, entries };
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

/** The error for a tensor whose file ends before its data does. */
function truncatedError(entry: Entry): (got: number) => Error {
  return (got) => new ModelFileError(`${entry.file}: file ends before the data of tensor ${entry.name} (needed ${entry.byteLength} bytes at offset ${entry.start}, got ${got}); the file is truncated`);
}

/**
 * Reads a Hugging Face safetensors checkpoint: one `.safetensors` file, or a sharded one given its
 * `model.safetensors.index.json` (every shard is validated on open; tensors are read on demand).
 */
export class SafetensorsSource implements TensorSource {
  readonly tensors = new Map<string, Entry>();
  private readonly fds: number[] = [];
  private readonly checkFinite: boolean;
  private readonly scratch = new ReadScratch();

  /** `checkFinite: false` skips the NaN/Inf test of every value read (benchmarks only: it costs a few percent). */
  constructor(path: string, options: { checkFinite?: boolean } = {}) {
    this.checkFinite = options.checkFinite ?? true;
    try {
      if (path.endsWith('.json')) this.openIndex(path);
      else this.add(path);
    } catch (err) {
      this.close();
      throw err;
    }
  }

  private openIndex(indexPath: string): void {
    const index = readModelJson(indexPath, 'shard index');
    const map = (index as { weight_map?: unknown } | null)?.weight_map;
    if (typeof map !== 'object' || map === null || Array.isArray(map)) {
      throw new ModelFileError(`${indexPath}: no "weight_map" object (tensor name → shard file); is this a safetensors index file?`);
    }
    const entries = Object.entries(map as Record<string, unknown>);
    for (const [name, shard] of entries) {
      // A shard is a plain file name beside the index: anything else could read files outside the model folder.
      if (typeof shard !== 'string' || !isPlainFileName(shard)) {
        throw new ModelFileError(`${indexPath}: weight_map[${JSON.stringify(name)}] is ${JSON.stringify(shard)}; every value must be the file name of a shard in the same folder (like "model-00001-of-00002.safetensors")`);
      }
    }
    const shards = [...new Set(entries.map(([, shard]) => shard as string))];
    for (const shard of shards) this.add(join(dirname(indexPath), shard), indexPath);
    for (const [name, shard] of entries) {
      const entry = this.tensors.get(name);
      if (!entry) throw new ModelFileError(`${indexPath}: lists tensor ${name} in ${shard}, but that shard does not contain it`);
      if (basename(entry.file) !== shard) throw new ModelFileError(`${indexPath}: lists tensor ${name} in ${shard}, but it is in ${entry.file}`);
    }
    for (const name of this.tensors.keys()) {
      if (!(name in map)) throw new ModelFileError(`${indexPath}: tensor ${name} (in ${this.tensors.get(name)!.file}) is missing from the weight_map`);
    }
  }

  private add(file: string, index?: string): void {
    if (!existsSync(file)) throw new ModelFileError(`weights file ${file} does not exist${index ? ` (named in ${index})` : ''}`);
    // Opening a FIFO or a device would block or never end.
    if (!statSync(file).isFile()) throw new ModelFileError(`weights file ${file} is not a regular file`);
    const { fd, entries } = openSafetensorsFile(file);
    this.fds.push(fd);
    for (const e of entries) {
      const dup = this.tensors.get(e.name);
      if (dup) throw new ModelFileError(`tensor ${e.name} appears in both ${dup.file} and ${e.file}`);
      this.tensors.set(e.name, e);
    }
  }

  private entry(name: string): Entry {
    const entry = this.tensors.get(name);
    if (!entry) throw new Error(`tensor ${name} is not in this checkpoint`);
    return entry;
  }

  read(name: string): Float32Array {
    const entry = this.entry(name);
    return readTensor(entry.fd, entry.start, entry.byteLength, entry.dtype, this.checkFinite ? entry : undefined, truncatedError(entry));
  }

  readTransposed(name: string): Float32Array {
    const entry = this.entry(name);
    return readTensorTransposed(entry.fd, entry.start, entry.byteLength, entry.dtype, entry.shape, this.checkFinite ? entry : undefined, truncatedError(entry), this.scratch);
  }

  close(): void {
    this.scratch.release();
    for (const fd of this.fds.splice(0)) closeSync(fd);
  }
}

/** A tensor to write: float32 values stored as F32, or already-encoded F16 / BF16 bits. */
export interface TensorToWrite {
  name: string;
  shape: number[];
  dtype: 'F32' | 'F16' | 'BF16';
  /** F32 data, or F16/BF16 bit patterns; a function is called when the tensor is written (so big models stream). */
  data: Float32Array | Uint16Array | (() => Float32Array | Uint16Array);
}

/**
 * Writes a safetensors file the way `save_pretrained` does (tensors sorted by name, `{"format": "pt"}` metadata,
 * header padded with spaces to a multiple of 8), all or nothing (`writeFileAtomicWith`: temp file, fsync, rename).
 */
export function writeSafetensors(path: string, tensors: TensorToWrite[]): void {
  const sorted = [...tensors].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const header: Record<string, unknown> = { __metadata__: { format: 'pt' } };
  let offset = 0;
  for (const t of sorted) {
    const bytes = elementCount(t.shape) * bytesPerElement(t.dtype);
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let headerText = JSON.stringify(header);
  headerText += ' '.repeat((8 - (Buffer.byteLength(headerText) % 8)) % 8);
  const headerBytes = Buffer.from(headerText, 'utf8');
  // A tensor of the wrong size is the caller's bug, not the disk's: reported as it is, not as a write error.
  let misfit: Error | undefined;
  try {
    writeFileAtomicWith(path, (fd) => {
      const len = Buffer.alloc(8);
      len.writeBigUInt64LE(BigInt(headerBytes.length));
      writeAll(fd, len);
      writeAll(fd, headerBytes);
      for (const t of sorted) {
        const data = typeof t.data === 'function' ? t.data() : t.data;
        const bytes = elementCount(t.shape) * bytesPerElement(t.dtype);
        if (data.byteLength !== bytes) {
          misfit = new Error(`writeSafetensors: tensor ${t.name} has ${data.byteLength} bytes of data for ${t.dtype} ${JSON.stringify(t.shape)} (expected ${bytes})`);
          throw misfit;
        }
        writeAll(fd, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      }
    });
  } catch (err) {
    throw misfit ?? err;
  }
}
