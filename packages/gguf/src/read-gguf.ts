import { createHash } from 'node:crypto';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { ModelFileError } from '@flexhelm/engine';
import { describeGgmlType, GGML_TYPES, ggmlByteSize, ggmlTypeById, type GgmlTypeName } from './ggml-types.js';

/** A metadata value: numbers (64-bit integers as bigint), booleans, strings, and arrays of any of them. */
export type GgufValue = number | bigint | boolean | string | GgufValue[];

export interface GgufTensorInfo {
  name: string;
  /** ggml's order: `dims[0]` varies fastest (a `[out, in]` matrix is `[in, out]` here). */
  dims: number[];
  type: GgmlTypeName;
  /** Absolute byte position of the data in the file. */
  position: number;
  byteLength: number;
  elements: number;
}

/** A GGUF file's header. Read-only: `readGguf` hands the same object to every caller while the file is unchanged. */
export interface GgufFile {
  readonly path: string;
  readonly version: 2 | 3;
  readonly metadata: ReadonlyMap<string, GgufValue>;
  readonly tensors: readonly Readonly<GgufTensorInfo>[];
  readonly alignment: number;
  /** Where the tensor data section starts. */
  readonly dataOffset: number;
  readonly fileSize: number;
}

/** GGUF value type ids (gguf.h `enum gguf_type`) and the bytes of their fixed-size values. */
const VALUE_TYPES: Record<number, { name: string; bytes: number }> = {
  0: { name: 'uint8', bytes: 1 }, 1: { name: 'int8', bytes: 1 }, 2: { name: 'uint16', bytes: 2 }, 3: { name: 'int16', bytes: 2 },
  4: { name: 'uint32', bytes: 4 }, 5: { name: 'int32', bytes: 4 }, 6: { name: 'float32', bytes: 4 }, 7: { name: 'bool', bytes: 1 },
  // A string or an array takes at least its 8-byte length.
  8: { name: 'string', bytes: 8 }, 9: { name: 'array', bytes: 12 }, 10: { name: 'uint64', bytes: 8 }, 11: { name: 'int64', bytes: 8 },
  12: { name: 'float64', bytes: 8 },
};

// Limits no real file comes near; they keep a garbage length from asking for gigabytes before the file runs out.
const MAX_KEY_BYTES = 65_535;
const MAX_STRING_BYTES = 64 << 20;
const MAX_ARRAY_DEPTH = 4;
const MAX_DIMS = 4;
const CHUNK = 1 << 20;

/**
 * A float32 as the shortest decimal that rounds back to it (numpy's float32 repr): an epsilon stored as float32 1e-6
 * reads as 1e-6, not 9.999999974752427e-7, so the config written from it says what the model's config said.
 */
export function shortestFloat32(v: number): number {
  if (!Number.isFinite(v)) return v;
  for (let digits = 1; digits < 17; digits++) {
    const d = Number(v.toPrecision(digits));
    if (Math.fround(d) === v) return d;
  }
  return v;
}

/** Reads the header region sequentially from a file descriptor, a chunk at a time, never past the file's end. */
class Cursor {
  pos: number;
  private buf = Buffer.alloc(0);
  private bufStart = 0;
  constructor(
    private readonly fd: number,
    readonly size: number,
    private readonly path: string,
  ) {
    this.pos = 0;
  }

  fail(what: string): ModelFileError {
    return new ModelFileError(`${this.path}: not a valid GGUF file: ${what} (at byte ${this.pos} of ${this.size})`);
  }

  /** Makes `n` bytes from `pos` available, or says what ran past the end. */
  private need(n: number, what: string): Buffer {
    if (this.pos + n > this.size) throw this.fail(`${what} needs ${n} bytes but the file ends after ${this.size - this.pos} (truncated?)`);
    const offset = this.pos - this.bufStart;
    if (offset + n > this.buf.length) {
      const len = Math.min(Math.max(n, CHUNK), this.size - this.pos);
      const b = Buffer.alloc(len);
      let got = 0;
      while (got < len) {
        const r = readSync(this.fd, b, got, len - got, this.pos + got);
        if (r === 0) throw this.fail(`${what}: the file ended early while reading`);
        got += r;
      }
      this.buf = b;
      this.bufStart = this.pos;
    }
    const start = this.pos - this.bufStart;
    this.pos += n;
    return this.buf.subarray(start, start + n);
  }

  u8(what: string): number {
    return this.need(1, what)[0]!;
  }
  u32(what: string): number {
    return this.need(4, what).readUInt32LE(0);
  }
  /** A u64 that must fit a safe integer (every count, size and offset in a file we can read does). */
  u64(what: string): number {
    const v = this.need(8, what).readBigUInt64LE(0);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw this.fail(`${what} is ${v}, larger than any file`);
    return Number(v);
  }
  string(what: string, max = MAX_STRING_BYTES): string {
    const len = this.u64(`${what} length`);
    if (len > max) throw this.fail(`${what} is ${len} bytes long; at most ${max} are allowed`);
    return this.need(len, what).toString('utf8');
  }

  value(type: number, what: string, depth = 0): GgufValue {
    switch (type) {
      case 0: return this.need(1, what).readUInt8(0);
      case 1: return this.need(1, what).readInt8(0);
      case 2: return this.need(2, what).readUInt16LE(0);
      case 3: return this.need(2, what).readInt16LE(0);
      case 4: return this.need(4, what).readUInt32LE(0);
      case 5: return this.need(4, what).readInt32LE(0);
      case 6: return shortestFloat32(this.need(4, what).readFloatLE(0));
      case 7: {
        const b = this.u8(what);
        if (b > 1) throw this.fail(`${what} is a bool of value ${b}; it must be 0 or 1`);
        return b === 1;
      }
      case 8: return this.string(what);
      case 9: {
        if (depth >= MAX_ARRAY_DEPTH) throw this.fail(`${what} nests arrays more than ${MAX_ARRAY_DEPTH} deep`);
        const itemType = this.u32(`${what} item type`);
        const item = VALUE_TYPES[itemType];
        if (!item) throw this.fail(`${what} has items of unknown value type ${itemType}`);
        const count = this.u64(`${what} count`);
        // Every item takes at least item.bytes: a count the rest of the file cannot hold is garbage, refused before allocating.
        if (count * item.bytes > this.size - this.pos) throw this.fail(`${what} claims ${count} ${item.name} items, more than the ${this.size - this.pos} bytes left can hold`);
        const out: GgufValue[] = new Array(count);
        for (let i = 0; i < count; i++) out[i] = this.value(itemType, `${what}[${i}]`, depth + 1);
        return out;
      }
      case 10: return this.need(8, what).readBigUInt64LE(0);
      case 11: return this.need(8, what).readBigInt64LE(0);
      case 12: return this.need(8, what).readDoubleLE(0);
      default: throw this.fail(`${what} has unknown value type ${type}`);
    }
  }
}

/**
 * Reads a GGUF file's header (v2 or v3, little-endian): metadata, tensor infos, alignment and the data offset.
 * Every length, count and offset is checked against the file size before it is used, so a garbage or truncated file
 * is a `ModelFileError` naming what is wrong, never a hang or a huge allocation. Tensor data is not read here.
 */
export function readGguf(path: string): GgufFile {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    throw new ModelFileError(`${path}: cannot open (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new ModelFileError(`${path}: not a regular file`);
    const key = [path, st.dev, st.ino, st.size].join('\0');
    const known = recentHeaders.get(key);
    const file = known?.file.deref();
    if (known && file && headerDigest(fd, file.dataOffset) === known.digest) return file;
    const read = readHeader(new Cursor(fd, st.size, path), path);
    for (const [k, entry] of recentHeaders) if (!entry.file.deref()) recentHeaders.delete(k);
    recentHeaders.set(key, { file: new WeakRef(read), digest: headerDigest(fd, read.dataOffset) });
    return read;
  } finally {
    closeSync(fd);
  }
}

/**
 * Headers read lately, by path and file (device, inode, size): a run start asks for the same file's header three or
 * four times (import, plan, quantized weights, tensor source), each a tenth of a second for a 128k-token vocabulary.
 * An entry is used only while the header's bytes are the ones it was parsed from (a digest of them, ~4 ms for 4 MB
 * where parsing takes ~100: a file rewritten in place within the file system's timestamp granularity is still read
 * again), and is weak: a header nobody holds any more goes with the next collection.
 */
const recentHeaders = new Map<string, { file: WeakRef<GgufFile>; digest: string }>();

/** SHA-1 of the file's first `bytes` bytes (the header and tensor infos: what `readHeader` parses). */
function headerDigest(fd: number, bytes: number): string {
  const hash = createHash('sha1');
  const chunk = Buffer.allocUnsafe(Math.min(CHUNK * 4, Math.max(bytes, 1)));
  for (let at = 0; at < bytes; ) {
    const n = readSync(fd, chunk, 0, Math.min(chunk.length, bytes - at), at);
    if (n === 0) break;
    hash.update(chunk.subarray(0, n));
    at += n;
  }
  return hash.digest('hex');
}

function readHeader(c: Cursor, path: string): GgufFile {
  const magic = c.size >= 4 ? c.u32('magic') : -1;
  if (magic !== 0x46554747) throw new ModelFileError(`${path}: not a GGUF file (it does not start with the bytes "GGUF")`);
  const version = c.u32('version');
  if (version === 1) throw c.fail('GGUF version 1 (32-bit counts, from before August 2023) is not read; convert the model again with a current llama.cpp');
  // A big-endian file has its version byte-swapped (0x03000000): say so rather than "unknown version 50331648".
  if (version >= 0x01000000) throw c.fail(`version ${version} looks byte-swapped: big-endian GGUF files are not read`);
  if (version !== 2 && version !== 3) throw c.fail(`GGUF version ${version} is not read (versions 2 and 3 are)`);
  const tensorCount = c.u64('tensor count');
  const kvCount = c.u64('metadata count');
  // A key-value pair takes at least 8 + 4 + 1 bytes, a tensor info 8 + 4 + 8 + 4 + 8.
  if (kvCount * 13 > c.size - c.pos) throw c.fail(`${kvCount} metadata entries cannot fit in the file`);
  if (tensorCount * 32 > c.size - c.pos) throw c.fail(`${tensorCount} tensors cannot fit in the file`);
  const metadata = new Map<string, GgufValue>();
  for (let i = 0; i < kvCount; i++) {
    const key = c.string(`metadata key ${i}`, MAX_KEY_BYTES);
    if (metadata.has(key)) throw c.fail(`metadata key ${JSON.stringify(key)} appears twice`);
    const type = c.u32(`type of ${key}`);
    metadata.set(key, c.value(type, key));
  }
  const alignValue = metadata.get('general.alignment') ?? 32;
  if (typeof alignValue !== 'number' || !Number.isInteger(alignValue) || alignValue < 1 || (alignValue & (alignValue - 1)) !== 0) {
    throw c.fail(`general.alignment is ${String(alignValue)}; it must be a power of two (an unsigned 32-bit integer)`);
  }
  const alignment = alignValue;
  const tensors: GgufTensorInfo[] = [];
  const names = new Set<string>();
  const relOffsets: number[] = [];
  for (let i = 0; i < tensorCount; i++) {
    const name = c.string(`tensor ${i} name`, MAX_KEY_BYTES);
    if (names.has(name)) throw c.fail(`tensor ${JSON.stringify(name)} appears twice`);
    names.add(name);
    const nDims = c.u32(`${name} dimension count`);
    if (nDims < 1 || nDims > MAX_DIMS) throw c.fail(`tensor ${name} has ${nDims} dimensions; ggml tensors have 1 to ${MAX_DIMS}`);
    const dims: number[] = [];
    let elements = 1;
    for (let d = 0; d < nDims; d++) {
      const n = c.u64(`${name} dimension ${d}`);
      if (n < 1) throw c.fail(`tensor ${name} has dimension ${d} of size 0`);
      elements *= n;
      if (elements > c.size * 8) throw c.fail(`tensor ${name} has ${dims.concat(n).join(' × ')}… elements, more than the file can hold`);
      dims.push(n);
    }
    const typeId = c.u32(`${name} type`);
    const type = ggmlTypeById(typeId);
    if (!type) throw new ModelFileError(`${path}: tensor ${name} is ${describeGgmlType(typeId)}; flexhelm reads ${Object.keys(GGML_TYPES).join(', ')}`);
    const block = GGML_TYPES[type].blockValues;
    if (dims[0]! % block !== 0) throw c.fail(`tensor ${name} (${type}) has rows of ${dims[0]} values, not a whole number of ${block}-value blocks`);
    const offset = c.u64(`${name} offset`);
    if (offset % alignment !== 0) throw c.fail(`tensor ${name} starts at data offset ${offset}, not a multiple of the alignment ${alignment}`);
    relOffsets.push(offset);
    tensors.push({ name, dims, type, position: 0, byteLength: ggmlByteSize(type, elements), elements });
  }
  const dataOffset = Math.ceil(c.pos / alignment) * alignment;
  // Tensors must lie inside the file and not overlap one another.
  const order = tensors.map((_, i) => i).sort((a, b) => relOffsets[a]! - relOffsets[b]!);
  let end = 0;
  for (const i of order) {
    const t = tensors[i]!;
    t.position = dataOffset + relOffsets[i]!;
    if (relOffsets[i]! < end) throw c.fail(`tensor ${t.name}'s data (offset ${relOffsets[i]}) overlaps the tensor before it`);
    end = relOffsets[i]! + t.byteLength;
    if (t.position + t.byteLength > c.size) {
      throw new ModelFileError(`${path}: tensor ${t.name} (${t.type}, ${t.byteLength} bytes at ${t.position}) runs past the end of the file (${c.size} bytes): the file is truncated`);
    }
  }
  return { path, version: version as 2 | 3, metadata, tensors, alignment, dataOffset, fileSize: c.size };
}
