import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { generate, jsLogitsMath, type LogitsMath } from '@flexhelm/contract';
import { Engine } from './engine.js';
import { makeModelDescription } from './families/opt/make-model.js';

/** A two-layer OPT of 300 tokens for the tests that drive `generate` itself (its weights come from Engine.dummy). */
const TINY_VOCAB = 300;
const tinyOpt = (maxPositionEmbeddings: number) =>
  makeModelDescription({ name: 'tiny-opt', hiddenSize: 32, numHiddenLayers: 2, numAttentionHeads: 4, ffnDim: 64, vocabSize: TINY_VOCAB, maxPositionEmbeddings, wordEmbedProjDim: 32, doLayerNormBefore: true, layerNormEps: 1e-5, padTokenId: 1, bosTokenId: 2, eosTokenId: 2 });

interface LlamaGolden {
  prompts: number[][];
  echo: { prompt_token_logprobs: (number | null)[][] };
  greedy: { max_new_tokens: number; generated_ids: number[][]; token_logprobs: number[][] };
}

// The golden data sits beside the checkout (../shared/conformance), as the conformance runner expects it.
const llama = fileURLToPath(new URL('../../../../shared/conformance/llama', import.meta.url));

describe.skipIf(!existsSync(llama) && !process.env.CI)('generate() on the Llama-family golden models (transformers 4.47.1)', () => {
  // mistral-a: 21-token sequences past its window of 8; llama-b: GQA 8/2, llama3 RoPE scaling, two bf16 shards.
  it.each([
    ['mistral-a', 'f32'],
    ['llama-b', 'bf16-sharded'],
  ])('%s/%s: greedy ids exact, token and echo log-probs within 1e-4, through a left-padded batch', { timeout: 120_000 }, async (model, folder) => {
    const golden = JSON.parse(readFileSync(join(llama, model, 'golden.json'), 'utf8')) as LlamaGolden;
    const engine = await Engine.load(join(llama, model, folder), { backend: 'reference' });
    try {
      expect(engine.description.family).toBe(model === 'mistral-a' ? 'mistral' : 'llama');
      const results = await generate(
        engine,
        golden.prompts.map((prompt) => ({ prompt, maxNewTokens: golden.greedy.max_new_tokens, echoPrompt: true, stopAtEos: false })),
        { maxBatchSize: golden.prompts.length },
      );
      results.forEach((r, b) => {
        const c = r.completions[0]!;
        expect(c.tokens.map((t) => t.id)).toEqual(golden.greedy.generated_ids[b]);
        c.tokens.forEach((t, s) => {
          expect(Math.abs(t.logprob! - golden.greedy.token_logprobs[b]![s]!)).toBeLessThan(1e-4);
        });
        expect(c.promptTokens![0]!.logprob).toBeNull();
        c.promptTokens!.slice(1).forEach((t, j) => {
          expect(Math.abs(t.logprob! - golden.echo.prompt_token_logprobs[b]![j + 1]!)).toBeLessThan(1e-4);
        });
      });
    } finally {
      await engine.close();
    }
  });
});

describe('generate: onTokens streams every row’s tokens as they are produced', () => {
  const V = TINY_VOCAB;
  const opt = tinyOpt(128);
  // A made-up detokenizer: one letter per id, so stop sequences are short letter strings.
  const decode = (ids: number[]) => ids.map((id) => String.fromCharCode(97 + (id % 26))).join('');
  const prompt = (seed: number, n: number) => [2, ...Array.from({ length: n }, (_, i) => 3 + ((seed * 53 + i * 31) % (V - 3)))];

  it('concatenates to each final completion for greedy, seeded sampling, n > 1, stop tokens, stop sequences and echo', async () => {
    const engine = await Engine.dummy(opt, { backend: 'reference', seed: 7 });
    try {
      // First a free greedy run, to pick a stop token and a stop text that really occur mid-way.
      const [free] = await generate(engine, [{ prompt: prompt(1, 6), maxNewTokens: 12, stopAtEos: false }]);
      const ids = free!.completions[0]!.tokens.map((t) => t.id);
      const stopText = decode(ids.slice(4, 6));
      const requests = [
        { prompt: prompt(1, 6), maxNewTokens: 12, stopAtEos: false },
        { prompt: prompt(2, 9), maxNewTokens: 10, temperature: 0.9, topP: 0.95, n: 3, seed: 11, topLogprobs: 2 },
        { prompt: prompt(1, 6), maxNewTokens: 12, stopAtEos: false, stopTokenIds: [ids[7]!] },
        { prompt: prompt(1, 6), maxNewTokens: 12, stopAtEos: false, stopSequences: [stopText] },
        { prompt: prompt(3, 4), maxNewTokens: 5, echoPrompt: true, topLogprobs: 1, temperature: 1, seed: 2 },
        { prompt: prompt(4, 5), maxNewTokens: 0, echoPrompt: true },
      ];
      const streamed = new Map<string, number[]>();
      const calls: string[] = [];
      const prompts = new Map<string, readonly unknown[] | undefined>();
      const results = await generate(engine, requests, {
        decode,
        maxBatchSize: 4,
        onTokens: (row, tokens) => {
          const key = `${row.request}/${row.completion}`;
          calls.push(key);
          prompts.set(key, row.promptTokens);
          streamed.set(key, [...(streamed.get(key) ?? []), ...tokens.map((t) => t.id)]);
        },
      });
      expect(results[3]!.completions[0]!.finishReason).toBe('stop');
      expect(results[2]!.completions[0]!.finishReason).toBe('eos');
      results.forEach((r, ri) => {
        r.completions.forEach((c, ci) => {
          const key = `${ri}/${ci}`;
          expect(streamed.get(key) ?? [], key).toEqual(c.tokens.map((t) => t.id));
          if (c.tokens.length > 0 && requests[ri]!.echoPrompt) expect(prompts.get(key)).toBe(c.promptTokens);
        });
      });
      // The stop rows report nothing after their last token: exactly one call per generated token.
      expect(calls.length).toBe(results.reduce((s, r) => s + r.completions.reduce((t, c) => t + c.tokens.length, 0), 0));
      // The same requests without the hook give the same tokens and logprobs.
      const plain = await generate(engine, requests, { decode, maxBatchSize: 4 });
      expect(plain).toEqual(results);
    } finally {
      await engine.close();
    }
  });

  it('cancels a row when the hook answers "cancel", and stops decoding once every row of a batch ended', async () => {
    const engine = await Engine.dummy(opt, { backend: 'reference', seed: 7 });
    try {
      const timings = { prefillMs: 0, prefillTokens: 0, decodeMs: 0, decodeTokens: 0 };
      const seen = [0, 0];
      const [r] = await generate(engine, [{ prompt: prompt(5, 6), maxNewTokens: 40, n: 2, temperature: 1, seed: 3, stopAtEos: false }], {
        timings,
        onTokens: (row) => (++seen[row.completion]! >= (row.completion === 0 ? 3 : 5) ? 'cancel' : undefined),
      });
      expect(r!.completions.map((c) => c.tokens.length)).toEqual([3, 5]);
      expect(r!.completions.map((c) => c.cancelled)).toEqual([true, true]);
      expect(seen).toEqual([3, 5]);
      // Four decode steps fed (the fifth token comes from the last step's logits), not 39.
      expect(timings.decodeTokens).toBe(2 * 4);
    } finally {
      await engine.close();
    }
  });
});

describe('generate: a long echo gives the event loop turns while it is scored', () => {
  it('copies and scores the echoed positions a slice at a time between turns of the event loop, with the same scores', async () => {
    // Issue 26: one head call's worth of echo (256 positions over the vocabulary) was copied and scored in one go on
    // the caller's thread, holding a server's /healthz for up to 1.4 s. The reference backend computes without any
    // I/O, so before, the whole generate call ran without a single turn of the event loop.
    const V = TINY_VOCAB;
    const opt = tinyOpt(1024);
    const engine = await Engine.dummy(opt, { backend: 'reference', seed: 5 });
    try {
      const prompt = [2, ...Array.from({ length: 600 }, (_, i) => 3 + ((i * 37) % (V - 3)))];
      let turns = 0;
      let counting = true;
      const tick = () => {
        if (!counting) return;
        turns++;
        setImmediate(tick);
      };
      setImmediate(tick);
      const [sliced] = await generate(engine, [{ prompt, maxNewTokens: 0, echoPrompt: true, topLogprobs: 2 }]);
      counting = false;
      // 600 positions in slices of 32 (copied, then scored): at least a turn per slice, less one per head call.
      expect(turns).toBeGreaterThanOrEqual(2 * Math.floor(600 / 32) - 6);
      const echoed = sliced!.completions[0]!.promptTokens!;
      expect(echoed).toHaveLength(601);
      expect(echoed.slice(1).every((t) => Number.isFinite(t.logprob) && t.top.length === 2)).toBe(true);
      // The same scores with every position in one head call.
      const [whole] = await generate(engine, [{ prompt, maxNewTokens: 0, echoPrompt: true, topLogprobs: 2 }], { headChunk: 1000 });
      expect(whole!.completions[0]!.promptTokens).toEqual(echoed);
    } finally {
      await engine.close();
    }
  });
});

describe('generate: a backend’s own logitsMath', () => {
  it('picks, scores and ranks every generated and echoed token with it, with the same results', async () => {
    const opt = tinyOpt(128);
    const engine = await Engine.dummy(opt, { backend: 'reference', seed: 9 });
    try {
      const prompt = [2, 17, 33, 250, 8, 91];
      const requests = [
        { prompt, maxNewTokens: 4, echoPrompt: true, topLogprobs: 3, stopAtEos: false },
        { prompt, maxNewTokens: 3, temperature: 0.8, seed: 4, stopAtEos: false },
        { prompt, maxNewTokens: 3, temperature: 0.8, seed: 4, logprobs: 'processed' as const, topLogprobs: 2, stopAtEos: false },
      ];
      const plain = await generate(engine, requests, { maxBatchSize: 1 });
      const calls = { argmax: 0, logSumExp: 0, topK: 0, allFinite: 0 };
      const counted: LogitsMath = {
        argmax(l) {
          calls.argmax++;
          return jsLogitsMath.argmax(l);
        },
        logSumExp(l) {
          calls.logSumExp++;
          return jsLogitsMath.logSumExp(l);
        },
        topK(l, k) {
          calls.topK++;
          return jsLogitsMath.topK(l, k);
        },
        allFinite(l) {
          calls.allFinite++;
          return jsLogitsMath.allFinite(l);
        },
      };
      Object.defineProperty(engine.backend, 'logitsMath', { value: counted });
      const withIt = await generate(engine, requests, { maxBatchSize: 1 });
      expect(withIt).toEqual(plain);
      // Greedy: 4 picks; log-sum-exps: 5 echoed positions + 4 + 3 + 3 tokens; top k: 5 + 4 (k 3) + 3 (k 2, processed);
      // the engine's finiteness check once per head call: the echo's, then one per token but the last of each row.
      expect(calls).toEqual({ argmax: 4, logSumExp: 5 + 4 + 3 + 3, topK: 5 + 4 + 3, allFinite: 1 + 4 + 3 + 3 });
    } finally {
      await engine.close();
    }
  });
});
