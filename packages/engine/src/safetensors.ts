import { closeSync, existsSync, fstatSync, openSync, readFileSync, renameSync, writeSync, unlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { bytesPerElement, decodeTensor, elementCount, readAt, type TensorInfo, type TensorSource, type WeightDtype } from './tensor-source.js';

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
  if (buf.length < length) throw new Error(`${file}: file ends before ${what} (needed ${length} bytes at offset ${position}, got ${buf.length}); the file is truncated`);
  return buf;
}

/** Opens one .safetensors file and validates its header against the file's size; returns its entries. */
function openSafetensorsFile(file: string): { fd: number; entries: Entry[] } {
  const fd = openSync(file, 'r');
  try {
    const size = fstatSync(fd).size;
    if (size < 8) throw new Error(`${file}: only ${size} bytes, too short to be a safetensors file (needs an 8-byte header length)`);
    const headerLen = Number(readExactly(fd, 8, 0, file, 'the header length').readBigUInt64LE(0));
    if (headerLen > MAX_HEADER || 8 + headerLen > size) {
      throw new Error(`${file}: header length ${headerLen} does not fit in the ${size}-byte file; the file is truncated or not safetensors`);
    }
    const headerText = readExactly(fd, headerLen, 8, file, 'the end of the header').toString('utf8');
    let header: unknown;
    try {
      header = JSON.parse(headerText);
    } catch (err) {
      throw new Error(`${file}: header is not valid JSON (${(err as Error).message})`);
    }
    if (typeof header !== 'object' || header === null || Array.isArray(header)) throw new Error(`${file}: header must be a JSON object`);
    const dataStart = 8 + headerLen;
    const dataSize = size - dataStart;
    const entries: Entry[] = [];
    for (const [name, value] of Object.entries(header as Record<string, unknown>)) {
      if (name === '__metadata__') continue;
      const v = value as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
      if (typeof v !== 'object' || v === null) throw new Error(`${file}: tensor ${name}: header entry must be an object`);
      if (typeof v.dtype !== 'string' || !DTYPES.has(v.dtype as WeightDtype)) {
        throw new Error(`${file}: tensor ${name} has dtype ${JSON.stringify(v.dtype)}; supported: F32, F16, BF16`);
      }
      const dtype = v.dtype as WeightDtype;
      if (!Array.isArray(v.shape) || !v.shape.every((d) => Number.isInteger(d) && d >= 0)) {
        throw new Error(`${file}: tensor ${name} has an invalid shape ${JSON.stringify(v.shape)} (expected a list of non-negative integers)`);
      }
      const shape = v.shape as number[];
      const off = v.data_offsets;
      if (!Array.isArray(off) || off.length !== 2 || !off.every((o) => Number.isInteger(o) && o >= 0) || off[1] < off[0]) {
        throw new Error(`${file}: tensor ${name} has invalid data_offsets ${JSON.stringify(off)} (expected [begin, end] with begin <= end)`);
      }
      const [begin, end] = off as [number, number];
      const expected = elementCount(shape) * bytesPerElement(dtype);
      if (end - begin !== expected) {
        throw new Error(`${file}: tensor ${name} (${dtype} ${JSON.stringify(shape)}) needs ${expected} bytes but its data_offsets span ${end - begin}; the header is inconsistent`);
      }
      if (end > dataSize) {
        throw new Error(`${file}: tensor ${name} ends at data offset ${end} but the file holds only ${dataSize} data bytes; the file is truncated`);
      }
      entries.push({ name, dtype, shape, file, fd, start: dataStart + begin, byteLength: expected });
    }
    const sorted = [...entries].sort((a, b) => a.start - b.start);
    for (let i = 1; i < sorted.length; i++) {
      const prev = sorted[i - 1]!;
      if (sorted[i]!.start < prev.start + prev.byteLength) {
        throw new Error(`${file}: tensors ${prev.name} and ${sorted[i]!.name} overlap in the data section; the header lies about offsets`);
      }
    }
    return { fd, entries };
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}


/**
 * Reads a Hugging Face safetensors checkpoint: one `.safetensors` file, or a sharded one given its
 * `model.safetensors.index.json` (every shard is validated on open; tensors are read on demand).
 */
export class SafetensorsSource implements TensorSource {
  readonly tensors = new Map<string, Entry>();
  private readonly fds: number[] = [];

  constructor(path: string) {
    try {
      if (path.endsWith('.json')) this.openIndex(path);
      else this.add(path);
    } catch (err) {
      this.close();
      throw err;
    }
  }

  private openIndex(indexPath: string): void {
    let index: { weight_map?: Record<string, string> };
    try {
      index = JSON.parse(readFileSync(indexPath, 'utf8'));
    } catch (err) {
      throw new Error(`cannot read shard index ${indexPath}: ${(err as Error).message}`);
    }
    const map = index.weight_map;
    if (!map || typeof map !== 'object') throw new Error(`${indexPath}: no "weight_map" object; is this a safetensors index file?`);
    const shards = [...new Set(Object.values(map))];
    for (const shard of shards) this.add(join(dirname(indexPath), shard));
    for (const [name, shard] of Object.entries(map)) {
      const entry = this.tensors.get(name);
      if (!entry) throw new Error(`${indexPath}: lists tensor ${name} in ${shard}, but that shard does not contain it`);
      if (!entry.file.endsWith(shard)) throw new Error(`${indexPath}: lists tensor ${name} in ${shard}, but it is in ${entry.file}`);
    }
    for (const name of this.tensors.keys()) {
      if (!(name in map)) throw new Error(`${indexPath}: tensor ${name} (in ${this.tensors.get(name)!.file}) is missing from the weight_map`);
    }
  }

  private add(file: string): void {
    if (!existsSync(file)) throw new Error(`weights file ${file} does not exist`);
    const { fd, entries } = openSafetensorsFile(file);
    this.fds.push(fd);
    for (const e of entries) {
      const dup = this.tensors.get(e.name);
      if (dup) throw new Error(`tensor ${e.name} appears in both ${dup.file} and ${e.file}`);
      this.tensors.set(e.name, e);
    }
  }

  read(name: string): Float32Array {
    const entry = this.tensors.get(name);
    if (!entry) throw new Error(`tensor ${name} is not in this checkpoint`);
    return decodeTensor(readExactly(entry.fd, entry.byteLength, entry.start, entry.file, `the data of tensor ${entry.name}`), entry.dtype);
  }

  close(): void {
    for (const fd of this.fds.splice(0)) closeSync(fd);
  }
}

/** A tensor to write: float32 values stored as F32, F16 (rounded) or already-encoded half bits. */
export interface TensorToWrite {
  name: string;
  shape: number[];
  dtype: 'F32' | 'F16';
  /** F32 data, or F16 bit patterns; a function is called when the tensor is written (so big models stream). */
  data: Float32Array | Uint16Array | (() => Float32Array | Uint16Array);
}

/**
 * Writes a safetensors file the way `save_pretrained` does (tensors sorted by name, `{"format": "pt"}` metadata,
 * header padded with spaces to a multiple of 8), atomically (temp file + rename).
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
  const tmp = `${path}.tmp-${process.pid}`;
  const fd = openSync(tmp, 'w');
  try {
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(headerBytes.length));
    writeSync(fd, len);
    writeSync(fd, headerBytes);
    for (const t of sorted) {
      const data = typeof t.data === 'function' ? t.data() : t.data;
      const bytes = elementCount(t.shape) * bytesPerElement(t.dtype);
      if (data.byteLength !== bytes) throw new Error(`writeSafetensors: tensor ${t.name} has ${data.byteLength} bytes of data for ${t.dtype} ${JSON.stringify(t.shape)} (expected ${bytes})`);
      writeSync(fd, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    }
    closeSync(fd);
    renameSync(tmp, path);
  } catch (err) {
    try {
      closeSync(fd);
    } catch {
      /* already closed */
    }
    if (existsSync(tmp)) unlinkSync(tmp);
    throw err;
  }
}
