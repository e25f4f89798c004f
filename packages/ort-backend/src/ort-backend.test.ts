import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate, makeModel, Engine } from '@flexhelm/engine';
import { OrtBackend } from './ort-backend.js';

const dir = mkdtempSync(join(tmpdir(), 'flexhelm-ort-'));
const config = { name: 'tiny-chunks', hiddenSize: 32, numHiddenLayers: 2, numAttentionHeads: 4, ffnDim: 64, vocabSize: 300, maxPositionEmbeddings: 80 };
let ort: Engine;
let ref: Engine;

beforeAll(async () => {
  makeModel({ config, outDir: join(dir, 'm'), seed: 3 });
  ort = await Engine.load(join(dir, 'm'), { backend: new OrtBackend() });
  ref = await Engine.load(join(dir, 'm'), { backend: 'reference' });
});
afterAll(async () => {
  await ort?.close();
  await ref?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('OrtBackend with its worker-held KV cache', () => {
  it('runs a prefill larger than one row chunk (rows in several session runs) and decodes after it, as the reference', async () => {
    // 20 rows × 60 tokens = 1200 tokens: the worker splits the prefill into row chunks of ≤ 1024 tokens.
    const requests = Array.from({ length: 20 }, (_, r) => ({
      prompt: [2, ...Array.from({ length: 40 + r }, (_, j) => 4 + ((r * 31 + j * 7) % 290))],
      maxNewTokens: 3,
      stopAtEos: false,
      topLogprobs: 2,
      echoPrompt: r % 5 === 0,
    }));
    const a = await generate(ort, requests, { maxBatchSize: 20 });
    const b = await generate(ref, requests, { maxBatchSize: 20 });
    let worst = 0;
    a.forEach((res, i) => {
      const [x, y] = [res.completions[0]!, b[i]!.completions[0]!];
      expect(x.tokens.map((t) => t.id)).toEqual(y.tokens.map((t) => t.id));
      x.tokens.forEach((t, j) => { worst = Math.max(worst, Math.abs(t.logprob! - y.tokens[j]!.logprob!)); });
      (x.promptTokens ?? []).forEach((t, j) => { worst = Math.max(worst, Math.abs((t.logprob ?? 0) - (y.promptTokens![j]!.logprob ?? 0))); });
    });
    expect(worst).toBeLessThan(1e-4);
  });
});

describe('OrtBackend execution providers', () => {
  it('takes them in order of preference: the CPU provider named gives the same tokens; a provider not installed is an error naming it', async () => {
    const requests = [{ prompt: [2, 17, 250, 33], maxNewTokens: 4, topLogprobs: 2 }];
    const named = await Engine.load(join(dir, 'm'), { backend: new OrtBackend({ executionProviders: ['cpu'] }) });
    try {
      expect(await generate(named, requests)).toEqual(await generate(ort, requests));
    } finally {
      await named.close();
    }
    // onnxruntime-node's CUDA provider is fetched by its install script, which this workspace does not run.
    await expect(Engine.load(join(dir, 'm'), { backend: new OrtBackend({ executionProviders: ['cuda'] }) })).rejects.toThrow(/cuda/i);
  });
});
