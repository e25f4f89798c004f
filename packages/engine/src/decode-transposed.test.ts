import { f32ToF16Bits } from '@flexhelm/python-compat';
import { mkdtempSync, rmSync, statSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeTransposed } from './decode-transposed.js';
import { ModelFileError } from './model-file-error.js';
import { SafetensorsSource, writeSafetensors } from './safetensors.js';
import { decodeTensor } from './tensor-source.js';
import { transposed } from './transposed.js';

const dir = mkdtempSync(join(tmpdir(), 'flexhelm-dt-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// Not multiples of the 32-value tile, so partial tiles on both edges are exercised.
const ROWS = 45;
const COLS = 70;

function values(n: number): Float32Array {
  const v = new Float32Array(n);
  for (let i = 0; i < n; i++) v[i] = ((i * 7919) % 1013) / 97 - 5 + (i % 3 === 0 ? 2 ** -20 : 0);
  return v;
}
const f32 = values(ROWS * COLS);
const f16 = Uint16Array.from(f32, f32ToF16Bits);
const bf16 = Uint16Array.from(new Uint32Array(f32.buffer), (w) => w >>> 16);
const bytes = (a: Float32Array | Uint16Array) => new Uint8Array(a.buffer.slice(a.byteOffset, a.byteOffset + a.byteLength));

describe('decodeTransposed', () => {
  it('gives the transpose of decodeTensor, bit for bit, for F32, F16 and BF16', () => {
    for (const [dtype, data] of [['F32', f32], ['F16', f16], ['BF16', bf16]] as const) {
      const want = transposed(decodeTensor(bytes(data), dtype), ROWS, COLS);
      const got = decodeTransposed(bytes(data), dtype, ROWS, COLS);
      expect(got.length).toBe(ROWS * COLS);
      expect(Buffer.from(got.buffer).equals(Buffer.from(want.buffer))).toBe(true);
      // [r, c] of the file is [c, r] of the result.
      expect(got[5 * ROWS + 3]).toBe(decodeTensor(bytes(data), dtype)[3 * COLS + 5]);
    }
  });

  it('reads bytes that start at an odd offset of their buffer', () => {
    const raw = bytes(f32);
    const odd = new Uint8Array(raw.length + 1);
    odd.set(raw, 1);
    expect([...decodeTransposed(odd.subarray(1), 'F32', ROWS, COLS)]).toEqual([...transposed(f32, ROWS, COLS)]);
  });

  it('reports the first NaN or ±Inf in the file order, as decodeTensor does', () => {
    const info = (name: string) => ({ name, dtype: 'F16' as const, shape: [ROWS, COLS], file: 'w.safetensors' });
    const bad = f16.slice();
    // Two bad values: the file's first (row 2) lies later in the transposed output than the other (row 40, column 0).
    bad[2 * COLS + 9] = 0xfc00;
    bad[40 * COLS] = 0x7e00;
    const message = /w\.safetensors: tensor x holds -Infinity at flat index 149 \(shape \[45,70\]\); the checkpoint is corrupt/;
    expect(() => decodeTensor(bytes(bad), 'F16', info('x'))).toThrow(message);
    expect(() => decodeTransposed(bytes(bad), 'F16', ROWS, COLS, info('x'))).toThrow(message);
    expect(() => decodeTransposed(bytes(bad), 'F16', ROWS, COLS, info('x'))).toThrow(ModelFileError);
    const badF32 = f32.slice();
    badF32[ROWS * COLS - 1] = NaN;
    expect(() => decodeTransposed(bytes(badF32), 'F32', ROWS, COLS, { ...info('y'), dtype: 'F32' })).toThrow(/tensor y holds NaN at flat index 3149/);
    const badBf = bf16.slice();
    badBf[0] = 0x7f80;
    expect(() => decodeTransposed(bytes(badBf), 'BF16', ROWS, COLS, { ...info('z'), dtype: 'BF16' })).toThrow(/tensor z holds Infinity at flat index 0/);
    // Unchecked (benchmarks), the value passes through.
    expect(decodeTransposed(bytes(badF32), 'F32', ROWS, COLS)[(COLS - 1) * ROWS + ROWS - 1]).toBeNaN();
  });

  it('refuses a byte count that does not match the shape', () => {
    expect(() => decodeTransposed(new Uint8Array(10), 'F16', 2, 3)).toThrow(/10 bytes for a F16 \[2, 3\] matrix \(expected 12\)/);
  });
});

describe('SafetensorsSource.readTransposed', () => {
  it('reads a checkpoint matrix transposed, checked, and says when the file is cut short', () => {
    const path = join(dir, 'm.safetensors');
    const bad = f16.slice();
    bad[7] = 0x7c00;
    writeSafetensors(path, [
      { name: 'w', shape: [ROWS, COLS], dtype: 'F16', data: f16 },
      { name: 'x.bad', shape: [ROWS, COLS], dtype: 'F16', data: bad },
      { name: 'y.vec', shape: [COLS], dtype: 'F32', data: f32.subarray(0, COLS) },
      { name: 'z.last', shape: [ROWS, COLS], dtype: 'F32', data: f32 },
    ]);
    const src = new SafetensorsSource(path);
    expect([...src.readTransposed('w')]).toEqual([...transposed(src.read('w'), ROWS, COLS)]);
    expect(() => src.readTransposed('x.bad')).toThrow(/m\.safetensors: tensor x\.bad holds Infinity at flat index 7/);
    expect(() => src.readTransposed('y.vec')).toThrow(/only 2-D tensors transpose/);
    expect(() => src.readTransposed('nope')).toThrow(/tensor nope is not in this checkpoint/);
    // Cut inside the last tensor after the header was validated (the file shrank while open).
    truncateSync(path, statSync(path).size - 100);
    expect(() => src.readTransposed('z.last')).toThrow(/m\.safetensors: file ends before the data of tensor z\.last .*the file is truncated/);
    src.close();
  });
});
