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
  it('exports a mixture of experts (Qwen2-MoE: dense and sparse layers, shared expert): onnxruntime runs it to the reference logits', async () => {
    const src = join(dir, 'qwen2-moe');
    // Layers 1 and 3 sparse (decoder_sparse_step 2), 0 and 2 dense; 5 experts, top 2, not renormalised.
    const config = { base: 'qwen1.5-moe-a2.7b', hidden_size: 32, num_attention_heads: 4, num_key_value_heads: 2, num_hidden_layers: 4, intermediate_size: 48, decoder_sparse_step: 2, num_experts: 5, num_experts_per_tok: 2, moe_intermediate_size: 16, shared_expert_intermediate_size: 24, vocab_size: 300, max_position_embeddings: 64 };
    makeHubModel({ config, outDir: src, seed: 6, dtype: 'f32' });
    exportOnnx(src, join(dir, 'qwen2-moe-onnx'));
    const engine = await Engine.load(src, { backend: 'reference' });
    const d = engine.description;
    expect(d.moe?.sparseLayers).toEqual([1, 3]);
    const ids = [[0, 0, 5, 17, 250, 33], [9, 5, 6, 7, 8, 2]];
    const mask = ids.map((row, b) => row.map((_, s) => (b === 0 && s < 2 ? 0 : 1)));
    const run = engine.startBatch(2);
    let want: Float32Array;
    try {
      want = await run.stepLogits(ids, mask);
    } finally {
      await run.close();
      await engine.close();
    }
    const ort = await import('onnxruntime-node');
    const session = await ort.InferenceSession.create(join(dir, 'qwen2-moe-onnx', 'onnx', 'model.onnx'));
    try {
      const feeds: Record<string, InstanceType<typeof ort.Tensor>> = {
        input_ids: new ort.Tensor('int64', BigInt64Array.from(ids.flat().map(BigInt)), [2, 6]),
        attention_mask: new ort.Tensor('int64', BigInt64Array.from(mask.flat().map(BigInt)), [2, 6]),
      };
      for (let i = 0; i < d.layers; i++) {
        for (const kv of ['key', 'value']) feeds[`past_key_values.${i}.${kv}`] = new ort.Tensor('float32', new Float32Array(0), [2, d.attention.kvHeads, 0, d.attention.headDim]);
      }
      const got = (await session.run(feeds)).logits!.data as Float32Array;
      const V = d.vocabSize;
      let worst = 0;
      for (let r = 0; r < 12; r++) {
        if (!mask[Math.floor(r / 6)]![r % 6]) continue; // pad rows are never read
        for (let v = 0; v < V; v++) worst = Math.max(worst, Math.abs(got[r * V + v]! - want[r * V + v]!));
      }
      expect(worst).toBeLessThan(1e-4);
    } finally {
      await session.release();
    }
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
