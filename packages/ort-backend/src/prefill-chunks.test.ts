import { mkdtempSync, openSync, readFileSync, writeSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectSameResults } from './expect-same-results.js';
import { makeModelDescription, echoHeadRows, generate, prefillChunkTokens, PREFILL_SCORE_ELEMENTS, type GenerationRequest, llamaDescriptionFromHf, makeHubModel, checkRequestMemory, RequestMemoryError, type MemoryBudget, ModelFileError, NonFiniteOutputError, Engine } from '@flexhelm/engine';
import { OrtBackend } from './ort-backend.js';

const root = mkdtempSync(join(tmpdir(), 'flexhelm-prefill-chunks-'));
const V = 300;
const opt = makeModelDescription({ name: 'tiny-opt', hiddenSize: 32, numHiddenLayers: 2, numAttentionHeads: 4, ffnDim: 64, vocabSize: V, maxPositionEmbeddings: 256, wordEmbedProjDim: 32, doLayerNormBefore: true, layerNormEps: 1e-5, padTokenId: 1, bosTokenId: 2, eosTokenId: 2 });
const llama = llamaDescriptionFromHf({ model_type: 'llama', vocab_size: V, hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 96, max_position_embeddings: 256 });

const prompt = (n: number, k: number) => [2, ...Array.from({ length: n - 1 }, (_, i) => 3 + ((i * k) % (V - 3)))];
const requests: GenerationRequest[] = [
  { prompt: prompt(70, 37), maxNewTokens: 4, topLogprobs: 2 },
  { prompt: prompt(45, 11), maxNewTokens: 3, echoPrompt: true, topLogprobs: 3 },
  // Shares its first 60 tokens with the first: the shared-prefix path is chunked too.
  { prompt: [...prompt(70, 37).slice(0, 60), 5, 6, 7], maxNewTokens: 2, n: 2, temperature: 0.8, seed: 3 },
];

describe('prefill in chunks', () => {
  it('chunks by attention scores per row: whole prompts while they fit, fewer positions as prompts grow', () => {
    expect(prefillChunkTokens(4, 512)).toBe(512);
    expect(prefillChunkTokens(4, 8002)).toBe(Math.floor(PREFILL_SCORE_ELEMENTS / (4 * 8002)));
    expect(prefillChunkTokens(64, 1_000_000)).toBe(1);
    expect(echoHeadRows(50272)).toBe(256);
    expect(echoHeadRows(128256)).toBe(130);
  });

  for (const [name, model] of [['OPT', opt], ['Llama', llama]] as const) {
    for (const backend of ['onnxruntime', 'reference'] as const) {
      it(`gives the same results in chunks of 1, 7 and 64 positions as in one step (${name}, ${backend})`, async () => {
        const engine = await Engine.dummy(model, { seed: 5, backend: backend === 'onnxruntime' ? new OrtBackend() : backend });
        try {
          const whole = await generate(engine, requests, { prefillChunk: 1000 });
          // The reference computes each position alone: equal bits. onnxruntime's GEMMs may block rows differently.
          const tolerance = backend === 'reference' ? 0 : 1e-5;
          for (const prefillChunk of [1, 7, 64]) expectSameResults(await generate(engine, requests, { prefillChunk }), whole, tolerance);
          expectSameResults(await generate(engine, requests, { prefillChunk: 7, sharePrefixes: false }), whole, tolerance);
        } finally {
          await engine.close();
        }
      }, 120_000);
    }
  }
});

describe('the memory budget of a request', () => {
  // A made-up budget: 1 MB per prompt token and row, 100 MB fixed.
  const budget: MemoryBudget = { limitBytes: 2 ** 30, needBytes: (rows, need) => 100e6 + rows * need.promptTokens * 1e6 };

  it('refuses a request that cannot fit alone, with its tokens, its need, the budget and the longest prompt that fits', () => {
    expect(() => checkRequestMemory(budget, { promptTokens: 900, newTokens: 4, echo: false }, 'request 2', 4096)).not.toThrow();
    let err: unknown;
    try {
      checkRequestMemory(budget, { promptTokens: 2000, newTokens: 4, echo: false }, 'request 2', 4096);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(RequestMemoryError);
    expect((err as Error).message).toBe('request 2: a prompt of 2000 tokens with 4 new tokens needs 1.96 GiB of RAM, more than the 1.00 GiB budget (--max-ram); shorten the prompt to at most 973 tokens, or raise --max-ram');
  });

  it('generate refuses before any work, and runs rows that fit alone but not together in smaller batches', async () => {
    const engine = await Engine.dummy(opt, { seed: 5, backend: 'reference', memory: { limitBytes: 1000, needBytes: (rows, need) => rows * need.promptTokens } });
    try {
      const batches: number[] = [];
      const rows = Array.from({ length: 6 }, (_, i) => ({ prompt: prompt(200, 3 + i), maxNewTokens: 1 }));
      const budgeted = await generate(engine, rows, { onBatch: (b) => batches.push(b.rows.length) });
      expect(batches).toEqual([5, 1]);
      const free = await Engine.dummy(opt, { seed: 5, backend: 'reference' });
      expect(await generate(free, rows)).toEqual(budgeted);
      await free.close();
      const small = await Engine.dummy(opt, { seed: 5, backend: 'reference', memory: { limitBytes: 100, needBytes: (r, need) => r * need.promptTokens } });
      await expect(generate(small, [{ prompt: prompt(20, 3) }, { prompt: prompt(150, 3) }])).rejects.toThrow(/^request 1: a prompt of 150 tokens with 16 new tokens needs 0\.00 GiB of RAM, more than the 0\.00 GiB budget \(--max-ram\); shorten the prompt to at most 100 tokens, or raise --max-ram$/);
      await small.close();
    } finally {
      await engine.close();
    }
  });
});

/** Writes `bytes` over element `index` of tensor `name` in a safetensors file. */
function patchTensor(file: string, name: string, index: number, bytes: Buffer): void {
  const data = readFileSync(file);
  const n = Number(data.readBigUInt64LE(0));
  const header = JSON.parse(data.subarray(8, 8 + n).toString('utf8')) as Record<string, { dtype: string; data_offsets: [number, number] }>;
  const t = header[name];
  if (!t) throw new Error(`no tensor ${name} in ${file}: ${Object.keys(header).join(', ')}`);
  const size = t.dtype === 'F32' ? 4 : 2;
  const fd = openSync(file, 'r+');
  writeSync(fd, bytes, 0, bytes.length, 8 + n + t.data_offsets[0] + index * size);
  closeSync(fd);
}

const f32 = (v: number) => {
  const b = Buffer.alloc(4);
  b.writeFloatLE(v);
  return b;
};

describe('non-finite outputs from finite inputs', () => {
  let n = 0;
  const made = (config: Record<string, unknown> | string, dtype: 'f32' | 'bf16'): string => {
    const dir = join(root, `m${n++}`);
    makeHubModel({ config, outDir: dir, dtype, seed: 2 });
    return join(dir, 'model.safetensors');
  };
  const tinyOpt = { hiddenSize: 32, numHiddenLayers: 2, numAttentionHeads: 4, ffnDim: 64, vocabSize: 1000, maxPositionEmbeddings: 64, wordEmbedProjDim: 32 };
  const tinyLlama = { base: 'llama-3.2-1b', num_hidden_layers: 2, hidden_size: 64, intermediate_size: 96, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 1000, bos_token_id: 1, eos_token_id: 2, max_position_embeddings: 256 };
  const cases: [string, () => string][] = [
    ['OPT v_proj weight 3e38', () => { const f = made(tinyOpt, 'f32'); patchTensor(f, 'model.decoder.layers.0.self_attn.v_proj.weight', 5, f32(3e38)); return f; }],
    ['OPT layer-norm bias 3e38', () => { const f = made(tinyOpt, 'f32'); patchTensor(f, 'model.decoder.layers.0.self_attn_layer_norm.bias', 3, f32(3e38)); return f; }],
    ['Llama bf16 q_proj 0x7f7f', () => { const f = made(tinyLlama, 'bf16'); patchTensor(f, 'model.layers.0.self_attn.q_proj.weight', 7, Buffer.from([0x7f, 0x7f])); patchTensor(f, 'model.layers.0.self_attn.k_proj.weight', 7, Buffer.from([0x7f, 0x7f])); return f; }],
    ['Llama bf16 input norm 0x7f7f', () => { const f = made(tinyLlama, 'bf16'); patchTensor(f, 'model.layers.1.input_layernorm.weight', 0, Buffer.from([0x7f, 0x7f])); patchTensor(f, 'model.layers.1.post_attention_layernorm.weight', 0, Buffer.from([0x7f, 0x7f])); return f; }],
  ];
  for (const [what, make] of cases) {
    for (const backend of ['onnxruntime', 'reference'] as const) {
      it(`fails the batch with a clear error naming the model, never NaN/Inf logprobs (${what}, ${backend})`, async () => {
        const file = make();
        const engine = await Engine.load(join(file, '..'), { backend: backend === 'onnxruntime' ? new OrtBackend() : backend });
        try {
          const err = await generate(engine, [{ prompt: [1, 5, 9, 200, 17, 33, 44, 12], maxNewTokens: 3, echoPrompt: true }]).then((r) => r, (e: unknown) => e);
          if (backend === 'reference' && !(err instanceof Error)) {
            // The reference sums in float64, where some of these stay finite: then every logprob is finite.
            const c = (err as Awaited<ReturnType<typeof generate>>)[0]!.completions[0]!;
            for (const t of [...c.tokens, ...c.promptTokens!.slice(1)]) expect(Number.isFinite(t.logprob)).toBe(true);
            return;
          }
          expect(err).toBeInstanceOf(NonFiniteOutputError);
          expect((err as Error).message).toMatch(new RegExp(`^the model ${engine.description.name} computed a non-finite logit \\((NaN|-?Infinity) for token \\d+ in row \\d+\\) on the ${engine.backend.name} backend from finite inputs`));
        } finally {
          await engine.close();
        }
      }, 60_000);
    }
  }
});

describe('configs whose derived values are not finite', () => {
  const base = { model_type: 'llama', vocab_size: 1000, hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, intermediate_size: 96, max_position_embeddings: 256 };
  it('refuses rope_theta 1e-300 (0 in float32: infinite inverse frequencies)', () => {
    expect(() => llamaDescriptionFromHf({ ...base, rope_theta: 1e-300 })).toThrow(ModelFileError);
    expect(() => llamaDescriptionFromHf({ ...base, rope_theta: 1e-300 })).toThrow(/^config\.json: rope_theta 1e-300 gives the rotary inverse frequency Infinity for dimension pair 1; it must be/);
    expect(llamaDescriptionFromHf({ ...base, rope_theta: 500000 }).positions).toMatchObject({ theta: 500000 });
  });
  it('refuses a norm eps that is 0 in float32', () => {
    expect(() => llamaDescriptionFromHf({ ...base, rms_norm_eps: 1e-50 })).toThrow(/^config\.json: rms_norm_eps is 1e-50, which is 0 in float32/);
    expect(() => llamaDescriptionFromHf({ ...base, rms_norm_eps: 0 })).toThrow(/rms_norm_eps is 0; it must be a number above 0/);
  });
  it('refuses eos_token_id outside the vocabulary, a single id or a list, as bos_token_id', () => {
    expect(() => llamaDescriptionFromHf({ ...base, eos_token_id: 1000 })).toThrow(/^config\.json: eos_token_id is 1000; it must be a token id from 0 to 999$/);
    expect(() => llamaDescriptionFromHf({ ...base, eos_token_id: [2, 128009] })).toThrow(/^config\.json: eos_token_id is \[2,128009\]; every entry must be a token id from 0 to 999$/);
    expect(() => llamaDescriptionFromHf({ ...base, bos_token_id: 5000 })).toThrow(/bos_token_id is 5000; it must be a token id from 0 to 999/);
    expect(llamaDescriptionFromHf({ ...base, eos_token_id: [2, 7] }).eosTokenId).toBeUndefined();
  });
});
