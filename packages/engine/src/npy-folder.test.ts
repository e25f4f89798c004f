import { f32ToF16Bits } from '@flexhelm/python-compat';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeModel, makeModelDescription } from './families/opt/make-model.js';
import { ModelFileError } from './model-file-error.js';
import { Engine } from './engine.js';
import { NpyFolderSource } from './npy-folder.js';
import { SafetensorsSource } from './safetensors.js';
import { npyFile } from './test-npy.js';

const dir = mkdtempSync(join(tmpdir(), 'flexhelm-npy-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('FlexLLMGen weight folders', () => {
  it('load with FlexLLMGen names (no model., decoder.layer_norm, lm_head copy) and compute like the safetensors model', async () => {
    const config = makeModel({ config: { name: 'tiny', hiddenSize: 16, numHiddenLayers: 2, numAttentionHeads: 2, ffnDim: 32, vocabSize: 40, maxPositionEmbeddings: 16 }, outDir: join(dir, 'hf'), seed: 5 });
    const src = new SafetensorsSource(join(dir, 'hf', 'model.safetensors'));
    const folder = join(dir, 'tiny-np');
    mkdirSync(folder);
    for (const [name, info] of src.tensors) {
      const flex = name.slice('model.'.length).replace('decoder.final_layer_norm.', 'decoder.layer_norm.');
      writeFileSync(join(folder, flex), npyFile('<f4', info.shape, src.read(name)));
    }
    writeFileSync(join(folder, 'lm_head.weight'), npyFile('<f4', [40, 16], src.read('model.decoder.embed_tokens.weight')));
    src.close();

    const a = await Engine.load(join(dir, 'hf'), { backend: 'reference' });
    const b = await Engine.load(folder, { backend: 'reference', config });
    const logits = async (e: Engine) => {
      const run = e.startBatch(1);
      const h = await run.step([[2, 7, 9, 11]], [[1, 1, 1, 1]]);
      return run.logits(h, 4, [0, 1, 2, 3].map((pos) => ({ row: 0, pos })));
    };
    expect([...(await logits(b))]).toEqual([...(await logits(a))]);
    await expect(Engine.load(folder, { backend: 'reference' })).rejects.toThrow(/has no config\.json and its name does not say which OPT model it is/);
  });
});

describe('FlexLLMGen numpy folders', () => {
  it('reads per-tensor .npy files named by parameter', () => {
    const folder = join(dir, 'opt-x-np');
    mkdirSync(folder);
    writeFileSync(join(folder, 'decoder.embed_tokens.weight'), npyFile('<f4', [2, 2], Float32Array.of(1, 2, 3, 4)));
    writeFileSync(join(folder, 'decoder.layer_norm.bias'), npyFile('<f2', [2], Uint16Array.from([1, -0.5].map(f32ToF16Bits))));
    const src = new NpyFolderSource(folder);
    expect(src.tensors.get('decoder.embed_tokens.weight')!.shape).toEqual([2, 2]);
    expect([...src.read('decoder.embed_tokens.weight')]).toEqual([1, 2, 3, 4]);
    expect([...src.read('decoder.layer_norm.bias')]).toEqual([1, -0.5]);
  });

  it('rejects truncated files and unsupported dtypes', () => {
    const folder = join(dir, 'bad-np');
    mkdirSync(folder);
    writeFileSync(join(folder, 'w'), npyFile('<f4', [4], new Uint8Array(8)));
    expect(() => new NpyFolderSource(folder)).toThrow(/bad-np\/w: tensor w \(<f4 \[4\]\) needs 16 data bytes but the file has 8; the file is truncated/);
    writeFileSync(join(folder, 'w'), npyFile('<i8', [1], new Uint8Array(8)));
    expect(() => new NpyFolderSource(folder)).toThrow(/dtype <i8 is not supported/);
    // A version-2 header claiming 4 GiB: refused before anything that size is allocated.
    const v2 = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 2, 0, 0xff, 0xff, 0xff, 0xff, 0x7b]);
    writeFileSync(join(folder, 'w'), v2);
    expect(() => new NpyFolderSource(folder)).toThrow(/bad-np\/w: \.npy header length 4294967295 does not fit in the 13-byte file/);
  });

  it('names the tensor holding NaN or Inf, and the engine refuses the folder with a ModelFileError', async () => {
    const folder = join(dir, 'nan-np');
    mkdirSync(folder);
    writeFileSync(join(folder, 'decoder.embed_tokens.weight'), npyFile('<f4', [2, 2], Float32Array.of(1, 2, NaN, 4)));
    writeFileSync(join(folder, 'decoder.layer_norm.bias'), npyFile('<f2', [2], Uint16Array.of(f32ToF16Bits(1), 0x7c00)));
    const src = new NpyFolderSource(folder);
    expect(() => src.read('decoder.embed_tokens.weight')).toThrow(/nan-np\/decoder\.embed_tokens\.weight: tensor decoder\.embed_tokens\.weight holds NaN at flat index 2/);
    expect(() => src.read('decoder.layer_norm.bias')).toThrow(/tensor decoder\.layer_norm\.bias holds Infinity at flat index 1/);
    expect(new NpyFolderSource(folder, { checkFinite: false }).read('decoder.layer_norm.bias')[1]).toBe(Infinity);

    // A FlexLLMGen folder of a whole model with one Inf deep inside a layer.
    makeModel({ config: { name: 'tiny', hiddenSize: 16, numHiddenLayers: 2, numAttentionHeads: 2, ffnDim: 32, vocabSize: 40, maxPositionEmbeddings: 16 }, outDir: join(dir, 'hf-inf'), seed: 2 });
    const hf = new SafetensorsSource(join(dir, 'hf-inf', 'model.safetensors'));
    const np = join(dir, 'tiny-inf-np');
    mkdirSync(np);
    for (const [name, info] of hf.tensors) {
      const values = hf.read(name);
      if (name === 'model.decoder.layers.1.fc2.weight') values[5] = -Infinity;
      writeFileSync(join(np, name.slice('model.'.length)), npyFile('<f4', info.shape, values));
    }
    hf.close();
    const config = makeModelDescription({ name: 'tiny', vocabSize: 40, hiddenSize: 16, numHiddenLayers: 2, numAttentionHeads: 2, ffnDim: 32, maxPositionEmbeddings: 16, wordEmbedProjDim: 16, doLayerNormBefore: true, layerNormEps: 1e-5, padTokenId: 1, bosTokenId: 2, eosTokenId: 2 });
    const load = Engine.load(np, { backend: 'reference', config });
    await expect(load).rejects.toThrow(ModelFileError);
    await expect(Engine.load(np, { backend: 'reference', config })).rejects.toThrow(/tiny-inf-np\/decoder\.layers\.1\.fc2\.weight: tensor decoder\.layers\.1\.fc2\.weight holds -Infinity at flat index 5/);
  });
});
