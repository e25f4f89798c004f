import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { exportOnnx } from './export-onnx.js';
import { generate, makeHubModel, makeModel, argmax, Engine } from '@flexhelm/engine';
import { OrtBackend } from './ort-backend.js';

const dir = mkdtempSync(join(tmpdir(), 'flexhelm-export-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('exportOnnx', () => {
  it('refuses a model whose kinds the graph lacks (a mixture of experts), writing nothing', () => {
    const model = join(dir, 'mixtral');
    makeHubModel({ config: { base: 'mixtral-8x7b', hidden_size: 32, num_attention_heads: 4, num_key_value_heads: 2, num_hidden_layers: 1, intermediate_size: 16, num_local_experts: 2, vocab_size: 300 }, outDir: model, seed: 1 });
    expect(() => exportOnnx(model, join(dir, 'mixtral-onnx'))).toThrow('onnxruntime does not compute mlp:moe yet (mixtral is a mixtral model)');
    expect(existsSync(join(dir, 'mixtral-onnx'))).toBe(false);
  });

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
    const engine = await Engine.load(join(dir, 'm'), { backend: new OrtBackend() });
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

describe('exportOnnx for the Llama family', () => {
  const shapes = {
    // GQA 4 → 2, llama3 rope scaling whose bands all hold a frequency (head_dim 16), untied head.
    'llama-3.1-8b': { rope_scaling: { factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 64, rope_type: 'llama3' }, rope_theta: 500000, num_key_value_heads: 2 },
    // A sliding window shorter than the sequences.
    'mistral-7b-v0.1': { sliding_window: 4, num_key_value_heads: 2 },
    // q/k/v biases, tied head, one kv head.
    'qwen2-0.5b': { num_key_value_heads: 1 },
  } as const;
  it.each(Object.entries(shapes))('%s: @huggingface/transformers gives the reference logits and greedy tokens (left padding too)', async (base, extra) => {
    const src = join(dir, `${base}-src`);
    const config = { base, hidden_size: 64, num_attention_heads: 4, num_hidden_layers: 2, intermediate_size: 96, vocab_size: 320, max_position_embeddings: 128, ...extra };
    makeHubModel({ config, outDir: src, seed: 4, dtype: 'bf16', shardSize: 60_000 });
    exportOnnx(src, join(dir, `${base}-onnx`));
    expect(existsSync(join(dir, `${base}-onnx`, 'onnx', 'model.onnx'))).toBe(true);
    // The reference backend (llama-reference.ts's forward) through Engine, greedy through its KV cache.
    const engine = await Engine.load(src, { backend: 'reference' });
    const V = engine.description.vocabSize;
    const prompts = [
      [5, 17, 250, 33, 4, 99, 12, 7],
      [9, 5, 6],
    ];
    const width = 8;
    const ids = prompts.map((p) => [...Array(width - p.length).fill(0), ...p]);
    const mask = prompts.map((p) => [...Array(width - p.length).fill(0), ...p.map(() => 1)]);
    const ours: number[][] = [[], []];
    let firstLogits: Float32Array = new Float32Array(0);
    const run = engine.startBatch(2);
    try {
      let stepIds = ids;
      let stepMask = mask;
      for (let step = 0; step < 6; step++) {
        const S = stepIds[0]!.length;
        const logits = await run.stepLogits(stepIds, stepMask);
        if (step === 0) firstLogits = logits;
        const next = [0, 1].map((b) => argmax(logits.subarray((b * S + S - 1) * V, (b * S + S) * V)));
        for (const [b, t] of next.entries()) ours[b]!.push(t);
        stepIds = next.map((t) => [t]);
        stepMask = [[1], [1]];
      }
    } finally {
      await run.close();
      await engine.close();
    }
    const { AutoModelForCausalLM, env, Tensor } = await import('@huggingface/transformers');
    env.allowRemoteModels = false;
    env.localModelPath = `${dir}/`;
    const model = await AutoModelForCausalLM.from_pretrained(`${base}-onnx`, { dtype: 'fp32', device: 'cpu' });
    try {
      const input_ids = new Tensor('int64', BigInt64Array.from(ids.flat().map(BigInt)), [2, width]);
      const attention_mask = new Tensor('int64', BigInt64Array.from(mask.flat().map(BigInt)), [2, width]);
      const out = (await model({ input_ids, attention_mask })) as { logits: { data: Float32Array } };
      let worst = 0;
      for (let b = 0; b < 2; b++) {
        for (let s = 0; s < width; s++) {
          if (!mask[b]![s]) continue; // pad rows are never read
          for (let v = 0; v < V; v++) worst = Math.max(worst, Math.abs(out.logits.data[(b * width + s) * V + v]! - firstLogits[(b * width + s) * V + v]!));
        }
      }
      expect(worst).toBeLessThan(1e-4);
      const generated = (await model.generate({ input_ids, attention_mask, max_new_tokens: 6, do_sample: false })) as { tolist(): bigint[][] };
      expect(generated.tolist().map((row) => row.slice(width).map(Number))).toEqual(ours);
    } finally {
      await model.dispose();
    }
  });
});
