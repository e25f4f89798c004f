import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeModel } from './make-model.js';
import { OptEngine } from './opt-engine.js';
import { SafetensorsSource } from './safetensors.js';

const dir = mkdtempSync(join(tmpdir(), 'flexhelm-npy-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A version-1 .npy file holding float32 values. */
function npyF32(shape: number[], data: Float32Array): Buffer {
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${shape.join(', ')}${shape.length === 1 ? ',' : ''}), }`;
  header += ' '.repeat(63 - ((header.length + 10) % 64)) + '\n';
  const pre = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, 0, 0]);
  pre.writeUInt16LE(header.length, 8);
  return Buffer.concat([pre, Buffer.from(header, 'latin1'), Buffer.from(data.buffer, data.byteOffset, data.byteLength)]);
}

describe('FlexLLMGen weight folders', () => {
  it('load with FlexLLMGen names (no model., decoder.layer_norm, lm_head copy) and compute like the safetensors model', async () => {
    const config = makeModel({ config: { name: 'tiny', hiddenSize: 16, numHiddenLayers: 2, numAttentionHeads: 2, ffnDim: 32, vocabSize: 40, maxPositionEmbeddings: 16 }, outDir: join(dir, 'hf'), seed: 5 });
    const src = new SafetensorsSource(join(dir, 'hf', 'model.safetensors'));
    const folder = join(dir, 'tiny-np');
    mkdirSync(folder);
    for (const [name, info] of src.tensors) {
      const flex = name.slice('model.'.length).replace('decoder.final_layer_norm.', 'decoder.layer_norm.');
      writeFileSync(join(folder, flex), npyF32(info.shape, src.read(name)));
    }
    writeFileSync(join(folder, 'lm_head.weight'), npyF32([40, 16], src.read('model.decoder.embed_tokens.weight')));
    src.close();

    const a = await OptEngine.load(join(dir, 'hf'), { backend: 'reference' });
    const b = await OptEngine.load(folder, { backend: 'reference', config });
    const logits = async (e: OptEngine) => {
      const run = e.startBatch(1);
      const h = await run.step([[2, 7, 9, 11]], [[1, 1, 1, 1]]);
      return run.logits(h, 4, [0, 1, 2, 3].map((pos) => ({ row: 0, pos })));
    };
    expect([...(await logits(b))]).toEqual([...(await logits(a))]);
    await expect(OptEngine.load(folder)).rejects.toThrow(/has no config\.json and its name does not say which OPT model it is/);
  });
});
