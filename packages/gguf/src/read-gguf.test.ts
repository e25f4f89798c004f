import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ModelFileError } from '@flexhelm/engine';
import { afterAll, describe, expect, it } from 'vitest';
import { readGguf } from './read-gguf.js';
import { readGgufTensor } from './read-gguf-tensor.js';
import { f32Bytes, testGgufBytes, type TestValue } from './test-gguf-writer.js';

const root = mkdtempSync(join(tmpdir(), 'read-gguf-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const file = (bytes: Buffer | Uint8Array) => {
  const p = join(root, `f${n++}.gguf`);
  writeFileSync(p, bytes);
  return p;
};

const ALL_TYPES: [string, TestValue][] = [
  ['general.architecture', { type: 'string', value: 'llama' }],
  ['t.u8', { type: 'u8', value: 200 }],
  ['t.i8', { type: 'i8', value: -5 }],
  ['t.u16', { type: 'u16', value: 65000 }],
  ['t.i16', { type: 'i16', value: -30000 }],
  ['t.u32', { type: 'u32', value: 4_000_000_000 }],
  ['t.i32', { type: 'i32', value: -2_000_000_000 }],
  ['t.f32', { type: 'f32', value: 0.5 }],
  ['t.f64', { type: 'f64', value: 1e-300 }],
  ['t.bool', { type: 'bool', value: true }],
  ['t.u64', { type: 'u64', value: 2n ** 63n }],
  ['t.i64', { type: 'i64', value: -(2n ** 40n) }],
  ['t.unicode', { type: 'string', value: 'héllo ▁ {{ }}' }],
  ['t.strings', { type: 'array', itemType: 'string', value: ['a', '', 'ccc'] }],
  ['t.floats', { type: 'array', itemType: 'f32', value: [1, -2.5] }],
  ['t.empty', { type: 'array', itemType: 'i32', value: [] }],
];

const sample = (version = 3, alignment = 32) =>
  testGgufBytes({
    version,
    alignment,
    metadata: ALL_TYPES,
    tensors: [
      { name: 'a', dims: [3, 2], typeId: 0, data: f32Bytes([1, 2, 3, 4, 5, 6]) },
      { name: 'b', dims: [32], typeId: 8, data: new Uint8Array(34) },
    ],
  });

describe('readGguf', () => {
  it.each([2, 3])('reads every metadata value type, tensor infos and offsets (v%i)', (version) => {
    const f = readGguf(file(sample(version)));
    expect(f.version).toBe(version);
    expect(Object.fromEntries(f.metadata)).toEqual({
      'general.architecture': 'llama',
      't.u8': 200,
      't.i8': -5,
      't.u16': 65000,
      't.i16': -30000,
      't.u32': 4_000_000_000,
      't.i32': -2_000_000_000,
      't.f32': 0.5,
      't.f64': 1e-300,
      't.bool': true,
      't.u64': 2n ** 63n,
      't.i64': -(2n ** 40n),
      't.unicode': 'héllo ▁ {{ }}',
      't.strings': ['a', '', 'ccc'],
      't.floats': [1, -2.5],
      't.empty': [],
    });
    expect(f.tensors.map((t) => [t.name, t.dims, t.type, t.byteLength])).toEqual([
      ['a', [3, 2], 'F32', 24],
      ['b', [32], 'Q8_0', 34],
    ]);
    expect(f.dataOffset % 32).toBe(0);
    expect(f.tensors[1]!.position).toBe(f.dataOffset + 32);
    expect([...readGgufTensor(f, f.tensors[0]!)]).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('hands the same header to every reader while its bytes are unchanged, and reads a file rewritten in place again', () => {
    const p = file(sample());
    const first = readGguf(p);
    expect(readGguf(p)).toBe(first);
    // The same size and, within the file system's timestamp granularity, the same times: only the bytes differ.
    const changed = Buffer.from(sample());
    const at = changed.indexOf('héllo');
    changed.write('jéllo', at, 'utf8');
    writeFileSync(p, changed);
    const again = readGguf(p);
    expect(again).not.toBe(first);
    expect(again.metadata.get('t.unicode')).toBe('jéllo ▁ {{ }}');
    expect(readGguf(p)).toBe(again);
    // Another path to the same bytes is its own header (errors and records name the path asked for).
    const copy = file(changed);
    expect(readGguf(copy).path).toBe(copy);
    // A file cut short after a good read is refused, not served from memory.
    writeFileSync(p, changed.subarray(0, 100));
    expect(() => readGguf(p)).toThrow(ModelFileError);
  });

  it('honours general.alignment', () => {
    const f = readGguf(file(sample(3, 64)));
    expect(f.alignment).toBe(64);
    expect(f.dataOffset % 64).toBe(0);
    expect(f.tensors[1]!.position - f.tensors[0]!.position).toBe(64);
  });

  it('refuses every truncation of a valid file with a ModelFileError (never another error, never a hang)', () => {
    const bytes = sample();
    // Past the last tensor's data only alignment padding is left: a file cut there is still whole.
    const b = readGguf(file(bytes)).tensors[1]!;
    for (let len = 0; len < b.position + b.byteLength; len++) {
      const p = file(bytes.subarray(0, len));
      let err: unknown;
      try {
        readGguf(p);
      } catch (e) {
        err = e;
      }
      if (!(err instanceof ModelFileError)) throw new Error(`truncated to ${len} bytes: ${String(err)}`);
      rmSync(p);
    }
  });

  it('refuses random corruption with a ModelFileError or reads it, and never allocates the garbage sizes', () => {
    const bytes = sample();
    let s = 12345;
    for (let k = 0; k < 400; k++) {
      const b = Buffer.from(bytes);
      for (let j = 0; j < 4; j++) {
        s = (s * 1103515245 + 12345) & 0x7fffffff;
        const at = 4 + (s % (b.length - 4));
        b[at] = (s >> 8) & 0xff;
      }
      const p = file(b);
      try {
        readGguf(p);
      } catch (e) {
        if (!(e instanceof ModelFileError)) throw new Error(`corruption ${k}: ${String(e)}`);
      }
      rmSync(p);
    }
  });

  const header = (version: number, tensors: bigint, kvs: bigint) => {
    const b = Buffer.alloc(24);
    b.write('GGUF', 0, 'ascii');
    b.writeUInt32LE(version, 4);
    b.writeBigUInt64LE(tensors, 8);
    b.writeBigUInt64LE(kvs, 16);
    return b;
  };

  it('names what is wrong', () => {
    expect(() => readGguf(join(root, 'missing.gguf'))).toThrow(/cannot open \(ENOENT\)/);
    expect(() => readGguf(file(Buffer.from('PK\x03\x04 not a gguf')))).toThrow(/does not start with the bytes "GGUF"/);
    expect(() => readGguf(file(header(1, 0n, 0n)))).toThrow(/version 1/);
    expect(() => readGguf(file(header(0x03000000, 0n, 0n)))).toThrow(/big-endian/);
    expect(() => readGguf(file(header(4, 0n, 0n)))).toThrow(/version 4 is not read/);
    expect(() => readGguf(file(header(3, 2n ** 40n, 0n)))).toThrow(/tensors cannot fit in the file/);
    expect(() => readGguf(file(header(3, 0n, 2n ** 64n - 1n)))).toThrow(/larger than any file/);
    // An array claiming 2^40 items in a small file.
    const arr = Buffer.concat([header(3, 0n, 1n), Buffer.from([1, 0, 0, 0, 0, 0, 0, 0, 0x6b, 9, 0, 0, 0, 6, 0, 0, 0]), Buffer.from(new BigUint64Array([2n ** 40n]).buffer), Buffer.alloc(64)]);
    expect(() => readGguf(file(arr))).toThrow(/claims 1099511627776 float32 items/);
    const two = (tensors: Parameters<typeof testGgufBytes>[0]['tensors'], metadata: [string, TestValue][] = []) => file(testGgufBytes({ metadata, tensors }));
    expect(() => readGguf(two([{ name: 'x', dims: [32], typeId: 6, data: new Uint8Array(22) }]))).toThrow(/tensor x is Q5_0 \(6\); flexhelm reads F32, F16/);
    expect(() => readGguf(two([{ name: 'x', dims: [33], typeId: 8, data: new Uint8Array(34) }]))).toThrow(/rows of 33 values, not a whole number of 32-value blocks/);
    expect(() => readGguf(two([{ name: 'x', dims: [4], typeId: 0, data: f32Bytes([1, 2, 3, 4]) }, { name: 'x', dims: [1], typeId: 0, data: f32Bytes([1]) }]))).toThrow(/tensor "x" appears twice/);
    expect(() => readGguf(two([], [['general.alignment', { type: 'u32', value: 48 }]]))).toThrow(/general.alignment is 48; it must be a power of two/);
    expect(() => readGguf(two([], [['k', { type: 'u8', value: 1 }], ['k', { type: 'u8', value: 2 }]]))).toThrow(/metadata key "k" appears twice/);
    // A tensor whose data lies past the end: the file cut right after the header.
    const full = testGgufBytes({ metadata: [], tensors: [{ name: 'w', dims: [64, 64], typeId: 0, data: new Uint8Array(64 * 64 * 4) }] });
    expect(() => readGguf(file(full.subarray(0, full.length - 100)))).toThrow(/tensor w \(F32, 16384 bytes at \d+\) runs past the end of the file/);
  });
});
