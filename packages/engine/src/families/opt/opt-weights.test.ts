import { f32ToF16Bits } from '@flexhelm/python-compat';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeModel, resolveConfig } from './make-model.js';
import { ModelFileError } from '../../model-file-error.js';
import { Engine } from '../../engine.js';
import { optConfigByName, optConfigFromHf, optConfigToHf } from './opt-config.js';
import { expectedOptTensors, OptWeights } from './opt-weights.js';
import { DummyTensorSource } from '../../random-weights.js';
import { transposeLayerTensors } from '../../layer-tensors.js';
import type { LayerTensors } from '@flexhelm/contract';
import { optDescription } from './opt-description.js';
import { SafetensorsSource, writeSafetensors } from '../../safetensors.js';

const dir = mkdtempSync(join(tmpdir(), 'flexhelm-w-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const tinyConfig = resolveConfig({ name: 'tiny', hiddenSize: 16, numHiddenLayers: 1, numAttentionHeads: 2, vocabSize: 50, maxPositionEmbeddings: 8 });
const tiny = optDescription(tinyConfig);

function write(file: string, rename: (n: string) => string | undefined, extra: { name: string; shape: number[] }[] = [], reshape?: string): string {
  const path = join(dir, file);
  const tensors = [...expectedOptTensors(tiny)].flatMap(([name, shape]) => {
    const out = rename(name);
    if (!out) return [];
    const s = name === reshape ? [shape[0]! + 1, ...shape.slice(1)] : shape;
    return [{ name: out, shape: s, dtype: 'F32' as const, data: new Float32Array(s.reduce((a, b) => a * b, 1)).fill(0.5) }];
  });
  for (const e of extra) tensors.push({ name: e.name, shape: e.shape, dtype: 'F32', data: new Float32Array(e.shape.reduce((a, b) => a * b, 1)) });
  writeSafetensors(path, tensors);
  return path;
}

describe('OPT configs', () => {
  it('knows every facebook/opt size and the iml variants', () => {
    expect(optConfigByName('facebook/opt-1.3b')).toMatchObject({ numHiddenLayers: 24, hiddenSize: 2048, numAttentionHeads: 32, ffnDim: 8192 });
    expect(optConfigByName('opt-350m')).toMatchObject({ wordEmbedProjDim: 512, doLayerNormBefore: false });
    expect(optConfigByName('facebook/opt-iml-max-30b')).toMatchObject({ name: 'opt-iml-max-30b', hiddenSize: 7168, numAttentionHeads: 56 });
    expect(optConfigByName('OPT-175B').numHiddenLayers).toBe(96);
    expect(() => optConfigByName('opt-iml-6.7b')).toThrow(/only in sizes 1\.3b, 30b/);
    expect(() => optConfigByName('gpt2')).toThrow(/unknown OPT model "gpt2"/);
  });

  it('parses config.json and round-trips what makeModel writes', () => {
    const c = optConfigByName('opt-350m');
    expect(optConfigFromHf(optConfigToHf(c, 'float16'))).toEqual({ ...c, name: 'opt-350m' });
    expect(() => optConfigFromHf({ ...optConfigToHf(c, 'float32'), hidden_size: 'x' })).toThrow(/hidden_size/);
    expect(() => optConfigFromHf({ ...optConfigToHf(c, 'float32'), activation_function: 'gelu' })).toThrow(/activation_function "gelu" is not supported/);
  });
});

describe('OptWeights', () => {
  it('accepts names with or without model. and an explicit lm_head', () => {
    const a = new OptWeights(tiny, new SafetensorsSource(write('prefixed.safetensors', (n) => `model.${n}`)));
    expect(a.hasSeparateLmHead).toBe(false);
    expect(a.layer(0).fc1W.length).toBe(64 * 16);
    a.close();
    const b = new OptWeights(tiny, new SafetensorsSource(write('bare.safetensors', (n) => n, [{ name: 'lm_head.weight', shape: [50, 16] }])));
    expect(b.hasSeparateLmHead).toBe(true);
    expect([...b.head().lmHead.slice(0, 2)]).toEqual([0, 0]);
    b.close();
  });

  it('names missing, unused and misshapen tensors', () => {
    const missing = write('missing.safetensors', (n) => (n.includes('fc2.bias') ? undefined : `model.${n}`));
    expect(() => new OptWeights(tiny, new SafetensorsSource(missing))).toThrow(/lacks 1 tensor\(s\) this config needs: decoder\.layers\.0\.fc2\.bias/);
    const extra = write('extra.safetensors', (n) => n, [{ name: 'decoder.layers.1.fc1.weight', shape: [64, 16] }]);
    expect(() => new OptWeights(tiny, new SafetensorsSource(extra))).toThrow(/does not use: decoder\.layers\.1\.fc1\.weight \(.*extra\.safetensors\)/);
    const shaped = write('shape.safetensors', (n) => n, [], 'decoder.layers.0.fc1.weight');
    expect(() => new OptWeights(tiny, new SafetensorsSource(shaped))).toThrow(/shape\.safetensors: tensor decoder\.layers\.0\.fc1\.weight has shape \[65,16\], but the config needs \[64,16\]/);
  });

  it('finds non-finite values while reading, always', () => {
    const path = join(dir, 'nan.safetensors');
    writeSafetensors(
      path,
      [...expectedOptTensors(tiny)].map(([name, shape]) => {
        const data = new Float32Array(shape.reduce((a, b) => a * b, 1)).fill(1);
        if (name === 'decoder.layers.0.self_attn.k_proj.weight') data[7] = NaN;
        return { name, shape, dtype: 'F32' as const, data };
      }),
    );
    const w = new OptWeights(tiny, new SafetensorsSource(path));
    expect(() => w.layer(0)).toThrow(/nan\.safetensors: tensor decoder\.layers\.0\.self_attn\.k_proj\.weight holds NaN at flat index 7 \(shape \[16,16\]\)/);
    w.close();
  });

  it('Engine.load refuses garbage weights with a ModelFileError: shifted header, NaN, +Inf', async () => {
    const folder = (name: string) => {
      const out = join(dir, name);
      makeModel({ config: tinyConfig, outDir: out, seed: 3 });
      return out;
    };
    const shifted = folder('shifted');
    const bytes = readFileSync(join(shifted, 'model.safetensors'));
    bytes.writeBigUInt64LE(bytes.readBigUInt64LE(0) - 1n, 0);
    writeFileSync(join(shifted, 'model.safetensors'), bytes);
    await expect(Engine.load(shifted, { backend: 'reference' })).rejects.toThrow(ModelFileError);
    await expect(Engine.load(shifted, { backend: 'reference' })).rejects.toThrow(/shifted\/model\.safetensors: the last 1 bytes of the data section belong to no tensor/);

    for (const [name, tensor, value] of [['nan', 'model.decoder.layers.0.fc1.bias', NaN], ['inf', 'model.decoder.embed_positions.weight', Infinity]] as const) {
      const out = folder(`poisoned-${name}`);
      const src = new SafetensorsSource(join(out, 'model.safetensors'));
      const tensors = [...src.tensors.values()].map((info) => {
        const data = src.read(info.name);
        if (info.name === tensor) data[3] = value;
        return { name: info.name, shape: info.shape, dtype: 'F32' as const, data };
      });
      src.close();
      writeSafetensors(join(out, 'model.safetensors'), tensors);
      const err = await Engine.load(out, { backend: 'reference' }).then(() => undefined, (e: unknown) => e as Error);
      expect(err).toBeInstanceOf(ModelFileError);
      expect(err!.message).toContain(`poisoned-${name}/model.safetensors: tensor ${tensor} holds ${value} at flat index 3`);
    }
  });

  it('layerInOut gives what transposeLayerTensors gives, read from f16 and f32 files and from sources without readTransposed', () => {
    const d = tiny;
    for (const dtype of ['f16', 'f32'] as const) {
      const folder = join(dir, `inout-${dtype}`);
      makeModel({ config: { ...tinyConfig, base: 'opt-125m' }, outDir: folder, seed: 5, dtype });
      const w = new OptWeights(tiny, new SafetensorsSource(join(folder, 'model.safetensors')));
      const want = transposeLayerTensors(d, w.layer(0) as unknown as LayerTensors);
      const got = w.layerInOut(0) as unknown as LayerTensors;
      expect(Object.keys(got).sort()).toEqual(Object.keys(want).sort());
      for (const key of Object.keys(want)) expect([...got[key]!], `${dtype} ${key}`).toEqual([...want[key]!]);
      w.close();
    }
    // A source that can only read in the file's layout (numpy folders, random weights) is transposed after reading.
    const dummy = new OptWeights(tiny, new DummyTensorSource(tiny, 2));
    expect([...(dummy.layerInOut(0) as unknown as LayerTensors).fc1W!]).toEqual([...transposeLayerTensors(d, dummy.layer(0) as unknown as LayerTensors).fc1W!]);
    expect(() => dummy.layerInOut(1)).toThrow(/layer 1 out of range 0\.\.0/);
  });

  it('a bad matrix in a later layer is reported while onnxruntime still loads the one before (reads run ahead of loads)', async () => {
    const out = join(dir, 'poisoned-layer1');
    const two = { ...tinyConfig, numHiddenLayers: 2, base: 'opt-125m' };
    makeModel({ config: two, outDir: out, seed: 4, dtype: 'f16' });
    const path = join(out, 'model.safetensors');
    const src = new SafetensorsSource(path);
    const tensors = [...src.tensors.values()].map((info) => {
      const data = Uint16Array.from(src.read(info.name), f32ToF16Bits);
      // [hidden, ffn] in the file: index 40 is row 0, column 40 (column-major after the transpose, yet named as stored).
      if (info.name === 'model.decoder.layers.1.fc2.weight') data[40] = 0x7c00;
      return { name: info.name, shape: info.shape, dtype: 'F16' as const, data };
    });
    src.close();
    writeSafetensors(path, tensors);
    const err = await Engine.load(out, { backend: 'reference' }).then(() => undefined, (e: unknown) => e as Error);
    expect(err).toBeInstanceOf(ModelFileError);
    expect(err!.message).toContain('poisoned-layer1/model.safetensors: tensor model.decoder.layers.1.fc2.weight holds Infinity at flat index 40 (shape [16,64])');
  });

  it('dummy weights cover every tensor of any size without reading files', () => {
    const c = optDescription(optConfigByName('opt-1.3b'));
    const src = new DummyTensorSource(c, 3);
    expect(src.tensors.size).toBe(expectedOptTensors(c).size);
    const ln = src.read('decoder.final_layer_norm.weight');
    expect(ln.length).toBe(2048);
    expect(Math.min(...ln)).toBeGreaterThanOrEqual(0.75);
    expect([...src.read('decoder.final_layer_norm.weight')]).toEqual([...ln]);
  });
});
