import { writeFileSync } from 'node:fs';

/**
 * A small GGUF writer for tests, written from the GGUF specification (ggml/docs/gguf.md) independently of the
 * package's exporter: little-endian, version 2 or 3, typed metadata (arrays included), tensor infos, aligned data.
 */
export type TestValue =
  | { type: 'u8' | 'i8' | 'u16' | 'i16' | 'u32' | 'i32' | 'f32' | 'f64'; value: number }
  | { type: 'u64' | 'i64'; value: bigint }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | { type: 'array'; itemType: 'u8' | 'i8' | 'u16' | 'i16' | 'u32' | 'i32' | 'f32' | 'f64' | 'bool' | 'string' | 'u64' | 'i64'; value: (number | bigint | boolean | string)[] };

export interface TestTensor {
  name: string;
  /** ggml order (`dims[0]` fastest). */
  dims: number[];
  typeId: number;
  data: Uint8Array;
}

const TYPE_IDS = { u8: 0, i8: 1, u16: 2, i16: 3, u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10, i64: 11, f64: 12 } as const;

class Bytes {
  parts: Buffer[] = [];
  length = 0;
  push(b: Buffer): void {
    this.parts.push(b);
    this.length += b.length;
  }
  u32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    this.push(b);
  }
  u64(v: number | bigint): void {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(v));
    this.push(b);
  }
  str(s: string): void {
    const b = Buffer.from(s, 'utf8');
    this.u64(b.length);
    this.push(b);
  }
  scalar(type: keyof typeof TYPE_IDS, v: number | bigint | boolean | string): void {
    const b = Buffer.alloc(8);
    switch (type) {
      case 'u8': b.writeUInt8(v as number); this.push(b.subarray(0, 1));
        return;
      case 'i8': b.writeInt8(v as number); this.push(b.subarray(0, 1));
        return;
      case 'u16': b.writeUInt16LE(v as number); this.push(b.subarray(0, 2));
        return;
      case 'i16': b.writeInt16LE(v as number); this.push(b.subarray(0, 2));
        return;
      case 'u32': b.writeUInt32LE(v as number); this.push(b.subarray(0, 4));
        return;
      case 'i32': b.writeInt32LE(v as number); this.push(b.subarray(0, 4));
        return;
      case 'f32': b.writeFloatLE(v as number); this.push(b.subarray(0, 4));
        return;
      case 'bool': b.writeUInt8(v ? 1 : 0); this.push(b.subarray(0, 1));
        return;
      case 'u64': b.writeBigUInt64LE(v as bigint); this.push(b);
        return;
      case 'i64': b.writeBigInt64LE(v as bigint); this.push(b);
        return;
      case 'f64': b.writeDoubleLE(v as number); this.push(b);
        return;
      case 'string': this.str(v as string);
        return;
      default: throw new Error(`scalar of type ${type}`);
    }
  }
  pad(alignment: number): void {
    const n = (alignment - (this.length % alignment)) % alignment;
    if (n) this.push(Buffer.alloc(n));
  }
}

/** The bytes of a GGUF file; `alignment` is written as `general.alignment` when not 32. */
export function testGgufBytes(o: { version?: number; metadata: [string, TestValue][]; tensors: TestTensor[]; alignment?: number }): Buffer {
  const alignment = o.alignment ?? 32;
  const metadata: [string, TestValue][] = alignment === 32 ? o.metadata : [['general.alignment', { type: 'u32', value: alignment }], ...o.metadata];
  const out = new Bytes();
  out.push(Buffer.from('GGUF', 'ascii'));
  out.u32(o.version ?? 3);
  out.u64(o.tensors.length);
  out.u64(metadata.length);
  for (const [key, v] of metadata) {
    out.str(key);
    out.u32(TYPE_IDS[v.type]);
    if (v.type === 'array') {
      out.u32(TYPE_IDS[v.itemType]);
      out.u64(v.value.length);
      for (const item of v.value) out.scalar(v.itemType, item);
    } else {
      out.scalar(v.type, v.value);
    }
  }
  let offset = 0;
  const offsets: number[] = [];
  for (const t of o.tensors) {
    offsets.push(offset);
    offset += Math.ceil(t.data.length / alignment) * alignment;
  }
  o.tensors.forEach((t, i) => {
    out.str(t.name);
    out.u32(t.dims.length);
    for (const d of t.dims) out.u64(d);
    out.u32(t.typeId);
    out.u64(offsets[i]!);
  });
  out.pad(alignment);
  for (const t of o.tensors) {
    out.push(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    out.pad(alignment);
  }
  return Buffer.concat(out.parts);
}

export function writeTestGguf(path: string, o: Parameters<typeof testGgufBytes>[0]): void {
  writeFileSync(path, testGgufBytes(o));
}

/** Float32 values as the bytes of an F32 tensor. */
export const f32Bytes = (v: Float32Array | number[]) => new Uint8Array(Float32Array.from(v).buffer);
