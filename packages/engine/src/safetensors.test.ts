import { f32ToF16Bits } from '@flexhelm/python-compat';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeModel } from './families/opt/make-model.js';
import { ModelFileError } from './model-file-error.js';
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
      ['name.safetensors', { 'x\nflexhelm run: ok': { dtype: 'F32', shape: [4], data_offsets: [0, 16] } }, four, /name\.safetensors: tensor name "x\\nflexhelm run: ok" is empty or holds control characters/],
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

  it('refuses shard indexes whose weight_map is not plain shard file names, naming the index', () => {
    const folder = join(dir, 'bad-index');
    mkdirSync(folder);
    writeSafetensors(join(folder, 'model-00001-of-00001.safetensors'), [{ name: 'a', shape: [1], dtype: 'F32', data: Float32Array.of(1) }]);
    const index = join(folder, 'model.safetensors.index.json');
    const cases: [unknown, RegExp][] = [
      [{ weight_map: { a: 7 } }, /model\.safetensors\.index\.json: weight_map\["a"\] is 7; every value must be the file name of a shard in the same folder/],
      [{ weight_map: { a: ['model-00001-of-00001.safetensors'] } }, /index\.json: weight_map\["a"\] is \["model-00001-of-00001\.safetensors"\]/],
      [{ weight_map: { a: null } }, /index\.json: weight_map\["a"\] is null/],
      [{ weight_map: { a: '../bad-index/model-00001-of-00001.safetensors' } }, /index\.json: weight_map\["a"\] is "\.\.\/bad-index\//],
      [{ weight_map: { a: '/etc/passwd' } }, /index\.json: weight_map\["a"\] is "\/etc\/passwd"/],
      [{ weight_map: ['model-00001-of-00001.safetensors'] }, /index\.json: no "weight_map" object/],
      [null, /index\.json: no "weight_map" object/],
    ];
    for (const [json, message] of cases) {
      writeFileSync(index, JSON.stringify(json));
      let error: unknown;
      try {
        new SafetensorsSource(index).close();
      } catch (err) {
        error = err;
      }
      expect(error, JSON.stringify(json)).toBeInstanceOf(ModelFileError);
      expect((error as Error).message).toMatch(message);
    }
    writeFileSync(index, JSON.stringify({ weight_map: { a: 'model-00001-of-00001.safetensors' } }));
    const ok = new SafetensorsSource(index);
    expect([...ok.read('a')]).toEqual([1]);
    ok.close();
  });

  it('refuses data the tensors do not cover exactly: a header length one byte short, gaps, trailing bytes', () => {
    makeModel({ config: { name: 'tiny', hiddenSize: 16, numHiddenLayers: 1, numAttentionHeads: 2, vocabSize: 50, maxPositionEmbeddings: 8 }, outDir: join(dir, 'shifted'), seed: 1 });
    const file = join(dir, 'shifted', 'model.safetensors');
    const bytes = readFileSync(file);
    const headerLen = Number(bytes.readBigUInt64LE(0));
    // save_pretrained pads the header with spaces: one byte less still parses, and shifts every tensor by one byte.
    expect(bytes[8 + headerLen - 1]).toBe(0x20);
    bytes.writeBigUInt64LE(BigInt(headerLen - 1), 0);
    writeFileSync(file, bytes);
    expect(() => new SafetensorsSource(file)).toThrow(/shifted\/model\.safetensors: the last 1 bytes of the data section belong to no tensor .*is the header length right\?/);

    const f = new Uint8Array(16);
    const gap = rawFile('gap.safetensors', { x: { dtype: 'F32', shape: [1], data_offsets: [0, 4] }, y: { dtype: 'F32', shape: [2], data_offsets: [8, 16] } }, f);
    expect(() => new SafetensorsSource(gap)).toThrow(/gap\.safetensors: 4 bytes of the data section before tensor y belong to no tensor \(data offsets 4\.\.8\)/);
    const lead = rawFile('lead.safetensors', { y: { dtype: 'F32', shape: [2], data_offsets: [8, 16] } }, f);
    expect(() => new SafetensorsSource(lead)).toThrow(/lead\.safetensors: 8 bytes of the data section before tensor y belong to no tensor/);
    const trailing = rawFile('trailing.safetensors', { x: { dtype: 'F32', shape: [3], data_offsets: [0, 12] } }, f);
    expect(() => new SafetensorsSource(trailing)).toThrow(/trailing\.safetensors: the last 4 bytes of the data section belong to no tensor/);
    const same = rawFile('same.safetensors', { x: { dtype: 'F32', shape: [4], data_offsets: [0, 16] }, y: { dtype: 'F32', shape: [4], data_offsets: [0, 16] } }, f);
    expect(() => new SafetensorsSource(same)).toThrow(/tensors x and y overlap/);
    const empty = rawFile('empty-ok.safetensors', { z: { dtype: 'F32', shape: [0], data_offsets: [0, 0] }, x: { dtype: 'F32', shape: [4], data_offsets: [0, 16] } }, f);
    const src = new SafetensorsSource(empty);
    expect(src.read('z').length).toBe(0);
    src.close();
  });

  it('names the tensor holding NaN or ±Inf, in F32, F16 and BF16 data', () => {
    const f32 = Float32Array.of(1, 2, 3, 4);
    const nan = Float32Array.of(1, NaN, 3, 4);
    const inf = Float32Array.of(1, 2, 3, Infinity);
    const p = join(dir, 'nonfinite.safetensors');
    writeSafetensors(p, [
      { name: 'fine', shape: [4], dtype: 'F32', data: f32 },
      { name: 'has.nan', shape: [2, 2], dtype: 'F32', data: nan },
      { name: 'has.inf', shape: [4], dtype: 'F32', data: inf },
      { name: 'half.inf', shape: [2], dtype: 'F16', data: Uint16Array.of(f32ToF16Bits(1), 0xfc00) },
      { name: 'half.nan', shape: [2], dtype: 'F16', data: Uint16Array.of(0x7e00, 0) },
    ]);
    const src = new SafetensorsSource(p);
    expect([...src.read('fine')]).toEqual([1, 2, 3, 4]);
    expect(() => src.read('has.nan')).toThrow(/nonfinite\.safetensors: tensor has\.nan holds NaN at flat index 1 \(shape \[2,2\]\); the checkpoint is corrupt/);
    expect(() => src.read('has.inf')).toThrow(/tensor has\.inf holds Infinity at flat index 3/);
    expect(() => src.read('half.inf')).toThrow(/tensor half\.inf holds -Infinity at flat index 1/);
    expect(() => src.read('half.nan')).toThrow(/tensor half\.nan holds NaN at flat index 0/);
    expect(() => src.read('half.nan')).toThrow(ModelFileError);
    src.close();
    // F32 data is tested in 1 MiB pieces as it is read: values in the second piece and in the last word count too.
    const big = join(dir, 'big-nonfinite.safetensors');
    const values = (bad: number) => {
      const v = new Float32Array(300_000).fill(0.25);
      v[bad] = -Infinity;
      return v;
    };
    writeSafetensors(big, [
      { name: 'second.piece', shape: [300_000], dtype: 'F32', data: values(262_144) },
      { name: 'last.word', shape: [300_000], dtype: 'F32', data: values(299_999) },
    ]);
    const bigSrc = new SafetensorsSource(big);
    expect(() => bigSrc.read('second.piece')).toThrow(/tensor second\.piece holds -Infinity at flat index 262144/);
    expect(() => bigSrc.read('last.word')).toThrow(/tensor last\.word holds -Infinity at flat index 299999/);
    bigSrc.close();
    const unchecked = new SafetensorsSource(p, { checkFinite: false });
    expect(unchecked.read('has.inf')[3]).toBe(Infinity);
    unchecked.close();

    const bf = rawFile('bf16-inf.safetensors', { x: { dtype: 'BF16', shape: [3], data_offsets: [0, 6] } }, new Uint8Array(Uint16Array.of(0x3fc0, 0x7f80, 0).buffer));
    const s2 = new SafetensorsSource(bf);
    expect(() => s2.read('x')).toThrow(/bf16-inf\.safetensors: tensor x holds Infinity at flat index 1/);
    s2.close();
  });

  it('refuses a FIFO as weights or shard index instead of blocking on it', () => {
    const folder = join(dir, 'fifo');
    mkdirSync(folder);
    execFileSync('mkfifo', [join(folder, 'model.safetensors'), join(folder, 'model.safetensors.index.json')]);
    expect(() => new SafetensorsSource(join(folder, 'model.safetensors'))).toThrow(/weights file .*fifo\/model\.safetensors is not a regular file/);
    expect(() => new SafetensorsSource(join(folder, 'model.safetensors.index.json'))).toThrow(/shard index .*fifo\/model\.safetensors\.index\.json is not a regular file/);
  });
});
