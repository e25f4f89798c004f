import { writeAll, writeFileAtomicWith } from '@flexhelm/atomic-write';
import { GGML_TYPES, type GgmlTypeName } from './ggml-types.js';

/** A metadata value to write, typed as GGUF stores it. */
export type GgufWriteValue =
  | { type: 'u32' | 'i32' | 'f32'; value: number }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | { type: 'strings'; value: readonly string[] }
  | { type: 'f32s' | 'i32s'; value: ArrayLike<number> };

export interface GgufTensorToWrite {
  name: string;
  /** ggml order: `dims[0]` varies fastest. */
  dims: number[];
  type: GgmlTypeName;
  /** The encoded bytes, made when the tensor is written (one tensor in memory at a time). */
  data: () => Uint8Array;
}

const ALIGNMENT = 32;

/** Appends little-endian GGUF fields to a growing list of buffers. */
class HeaderBytes {
  readonly parts: Buffer[] = [];
  length = 0;
  add(b: Buffer): void {
    this.parts.push(b);
    this.length += b.length;
  }
  u32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    this.add(b);
  }
  i32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeInt32LE(v);
    this.add(b);
  }
  f32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeFloatLE(v);
    this.add(b);
  }
  u64(v: number): void {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(v));
    this.add(b);
  }
  string(s: string): void {
    const b = Buffer.from(s, 'utf8');
    this.u64(b.length);
    this.add(b);
  }
  value(v: GgufWriteValue): void {
    // gguf_type ids: uint32 4, int32 5, float32 6, bool 7, string 8, array 9.
    switch (v.type) {
      case 'u32': this.u32(4); this.u32(v.value);
        return;
      case 'i32': this.u32(5); this.i32(v.value);
        return;
      case 'f32': this.u32(6); this.f32(v.value);
        return;
      case 'bool': this.u32(7); this.add(Buffer.from([v.value ? 1 : 0]));
        return;
      case 'string': this.u32(8); this.string(v.value);
        return;
      case 'strings': this.u32(9); this.u32(8); this.u64(v.value.length); for (const s of v.value) this.string(s); return;
      case 'f32s': this.u32(9); this.u32(6); this.u64(v.value.length); for (let i = 0; i < v.value.length; i++) this.f32(v.value[i]!); return;
      case 'i32s': this.u32(9); this.u32(5); this.u64(v.value.length); for (let i = 0; i < v.value.length; i++) this.i32(v.value[i]!); return;
    }
  }
}

/**
 * Writes a GGUF v3 file all or nothing (temp file, fsync, rename): metadata, tensor infos at 32-byte aligned offsets,
 * then each tensor's data as it is made. A tensor whose data is not the size its dims and type imply is an error.
 */
export function writeGguf(path: string, metadata: [string, GgufWriteValue][], tensors: GgufTensorToWrite[]): void {
  const h = new HeaderBytes();
  h.add(Buffer.from('GGUF', 'ascii'));
  h.u32(3);
  h.u64(tensors.length);
  h.u64(metadata.length);
  for (const [key, v] of metadata) {
    h.string(key);
    h.value(v);
  }
  const sizes = tensors.map((t) => {
    const n = t.dims.reduce((a, b) => a * b, 1);
    return (n / GGML_TYPES[t.type].blockValues) * GGML_TYPES[t.type].blockBytes;
  });
  let offset = 0;
  tensors.forEach((t, i) => {
    h.string(t.name);
    h.u32(t.dims.length);
    for (const d of t.dims) h.u64(d);
    h.u32(GGML_TYPES[t.type].id);
    h.u64(offset);
    offset += Math.ceil(sizes[i]! / ALIGNMENT) * ALIGNMENT;
  });
  const pad = (n: number) => Buffer.alloc((ALIGNMENT - (n % ALIGNMENT)) % ALIGNMENT);
  writeFileAtomicWith(path, (fd) => {
    writeAll(fd, Buffer.concat([...h.parts, pad(h.length)]));
    tensors.forEach((t, i) => {
      const data = t.data();
      if (data.byteLength !== sizes[i]) throw new Error(`writeGguf: tensor ${t.name} has ${data.byteLength} bytes for ${t.type} ${t.dims.join(' × ')} (expected ${sizes[i]})`);
      writeAll(fd, data);
      writeAll(fd, pad(data.byteLength));
    });
  });
}
