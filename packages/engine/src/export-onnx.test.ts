import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { exportOnnx } from './export-onnx.js';
import { generate } from './generate.js';
import { makeModel } from './make-model.js';
import { OptEngine } from './opt-engine.js';

const dir = mkdtempSync(join(tmpdir(), 'flexhelm-export-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('exportOnnx', () => {
  it('writes a model @huggingface/transformers generates with, token for token like the engine (left padding too)', async () => {
    const config = { name: 'tiny', hiddenSize: 32, numHiddenLayers: 2, numAttentionHeads: 4, ffnDim: 64, vocabSize: 300, maxPositionEmbeddings: 64, wordEmbedProjDim: 16, doLayerNormBefore: false };
    makeModel({ config, outDir: join(dir, 'm'), seed: 3 });
    exportOnnx(join(dir, 'm'), join(dir, 'exported'), { externalData: true });
    expect(existsSync(join(dir, 'exported', 'onnx', 'model.onnx_data'))).toBe(true);
    expect(JSON.parse(readFileSync(join(dir, 'exported', 'config.json'), 'utf8'))['transformers.js_config']).toEqual({ use_external_data_format: true });
    exportOnnx(join(dir, 'm'), join(dir, 'inline'));
    expect(existsSync(join(dir, 'inline', 'onnx', 'model.onnx_data'))).toBe(false);
    expect(() => exportOnnx(join(dir, 'm'), join(dir, 'inline'))).toThrow(/already exists/);

    const { AutoModelForCausalLM, env, Tensor } = await import('@huggingface/transformers');
    env.allowRemoteModels = false;
    env.localModelPath = `${dir}/`;
    const prompts = [
      [2, 17, 250, 33, 4, 99],
      [2, 5, 6],
    ];
    const engine = await OptEngine.load(join(dir, 'm'));
    const ours = (await generate(engine, prompts.map((prompt) => ({ prompt, maxNewTokens: 8, stopAtEos: false })))).map((r) => r.completions[0]!.tokens.map((t) => t.id));
    await engine.close();
    for (const name of ['exported', 'inline']) {
      const model = await AutoModelForCausalLM.from_pretrained(name, { dtype: 'fp32', device: 'cpu' });
      const ids = [...prompts[0]!, 1, 1, 1, ...prompts[1]!].map(BigInt);
      const mask = [1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1].map(BigInt);
      const out = (await model.generate({
        input_ids: new Tensor('int64', BigInt64Array.from(ids), [2, 6]),
        attention_mask: new Tensor('int64', BigInt64Array.from(mask), [2, 6]),
        max_new_tokens: 8,
        do_sample: false,
      })) as { tolist(): bigint[][] };
      expect(out.tolist().map((row) => row.slice(6).map(Number))).toEqual(ours);
      await model.dispose();
    }
  });
});
