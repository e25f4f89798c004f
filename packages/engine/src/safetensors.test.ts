import { f32ToF16Bits } from '@flexhelm/python-compat';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SafetensorsSource, writeSafetensors } from './safetensors.js';

const dir = mkdtempSync(join(tmpdir(), 'flexhelm-st-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function rawFile(name: string, header: object, data: Uint8Array): string {
  let text = JSON.stringify(header);
  text += ' '.repeat((8 - (text.length % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(text.length));
  const path = join(dir, name);
  writeFileSync(path, Buffer.concat([len, Buffer.from(text), data]));
  return path;
}

describe('safetensors', () => {
  it('round-trips F32 and F16 tensors and converts BF16', () => {
    const path = join(dir, 'rt.safetensors');
    const a = Float32Array.from([1.5, -2, 0.125, 3]);
    const halves = Uint16Array.from([0.5, -1, 65504, 2 ** -24].map(f32ToF16Bits));
    writeSafetensors(path, [
      { name: 'b', shape: [4], dtype: 'F16', data: halves },
      { name: 'a', shape: [2, 2], dtype: 'F32', data: a },
    ]);
    const text = readFileSync(path);
    const headerLen = Number(text.readBigUInt64LE(0));
    expect(headerLen % 8).toBe(0);
    expect(JSON.parse(text.subarray(8, 8 + headerLen).toString())).toEqual({
      __metadata__: { format: 'pt' },
      a: { dtype: 'F32', shape: [2, 2], data_offsets: [0, 16] },
      b: { dtype: 'F16', shape: [4], data_offsets: [16, 24] },
    });
    const src = new SafetensorsSource(path);
    expect([...src.read('a')]).toEqual([1.5, -2, 0.125, 3]);
    expect([...src.read('b')]).toEqual([0.5, -1, 65504, 2 ** -24]);
    src.close();

    const bf = Uint16Array.from([0x3fc0, 0xc000]); // 1.5, -2
    const p2 = rawFile('bf16.safetensors', { x: { dtype: 'BF16', shape: [2], data_offsets: [0, 4] } }, new Uint8Array(bf.buffer));
    const s2 = new SafetensorsSource(p2);
    expect([...s2.read('x')]).toEqual([1.5, -2]);
    s2.close();
  });

  it('names the file and tensor for every defect', () => {
    const four = new Uint8Array(16);
    const cases: [string, object, Uint8Array, RegExp][] = [
      ['dtype.safetensors', { x: { dtype: 'I64', shape: [2], data_offsets: [0, 16] } }, four, /dtype\.safetensors: tensor x has dtype "I64"/],
      ['size.safetensors', { x: { dtype: 'F32', shape: [3], data_offsets: [0, 16] } }, four, /tensor x \(F32 \[3\]\) needs 12 bytes but its data_offsets span 16/],
      ['past-end.safetensors', { x: { dtype: 'F32', shape: [8], data_offsets: [0, 32] } }, four, /tensor x ends at data offset 32 but the file holds only 16 data bytes; the file is truncated/],
      ['overlap.safetensors', { x: { dtype: 'F32', shape: [3], data_offsets: [0, 12] }, y: { dtype: 'F32', shape: [2], data_offsets: [8, 16] } }, four, /tensors x and y overlap/],
      ['shape.safetensors', { x: { dtype: 'F32', shape: [-1], data_offsets: [0, 4] } }, four, /tensor x has an invalid shape/],
    ];
    for (const [name, header, data, message] of cases) expect(() => new SafetensorsSource(rawFile(name, header, data))).toThrow(message);
    const truncated = rawFile('trunc.safetensors', { x: { dtype: 'F32', shape: [4], data_offsets: [0, 16] } }, four);
    truncateSync(truncated, readFileSync(truncated).length - 6);
    expect(() => new SafetensorsSource(truncated)).toThrow(/trunc\.safetensors: tensor x ends at data offset 16 but the file holds only 10 data bytes; the file is truncated/);
    const shortHeader = join(dir, 'short.safetensors');
    writeFileSync(shortHeader, Buffer.from([0xff, 0, 0, 0, 0, 0, 0, 0, 0x7b]));
    expect(() => new SafetensorsSource(shortHeader)).toThrow(/header length 255 does not fit/);
    const notJson = rawFile('json.safetensors', {}, four);
    const bytes = readFileSync(notJson);
    bytes[8] = 0x5b; // '[' … → not an object
    writeFileSync(notJson, bytes);
    expect(() => new SafetensorsSource(notJson)).toThrow(/json\.safetensors: header (is not valid JSON|must be a JSON object)/);
    expect(() => new SafetensorsSource(join(dir, 'missing.safetensors'))).toThrow(/does not exist/);
  });

  it('reads sharded checkpoints through the index and checks it', () => {
    writeSafetensors(join(dir, 'model-00001-of-00002.safetensors'), [{ name: 'a', shape: [1], dtype: 'F32', data: Float32Array.of(1) }]);
    writeSafetensors(join(dir, 'model-00002-of-00002.safetensors'), [{ name: 'b', shape: [1], dtype: 'F32', data: Float32Array.of(2) }]);
    const index = join(dir, 'model.safetensors.index.json');
    writeFileSync(index, JSON.stringify({ metadata: {}, weight_map: { a: 'model-00001-of-00002.safetensors', b: 'model-00002-of-00002.safetensors' } }));
    const src = new SafetensorsSource(index);
    expect([...src.read('b')]).toEqual([2]);
    src.close();
    writeFileSync(index, JSON.stringify({ weight_map: { a: 'model-00002-of-00002.safetensors', b: 'model-00002-of-00002.safetensors' } }));
    expect(() => new SafetensorsSource(index)).toThrow(/lists tensor a in model-00002-of-00002\.safetensors, but that shard does not contain it/);
  });
});
