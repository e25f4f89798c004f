import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectSameResults } from './expect-same-results.js';
import { makeModelDescription, generate, MIN_SHARED_PREFIX, type GenerationRequest, type GenerationResult, type GenerationTimings, llamaDescriptionFromHf, Engine } from '@flexhelm/engine';
import type { ModelDescription } from '@flexhelm/contract';
import { OrtBackend } from './ort-backend.js';

const V = 300;
const opt = makeModelDescription({ name: 'tiny-opt', hiddenSize: 32, numHiddenLayers: 2, numAttentionHeads: 4, ffnDim: 64, vocabSize: V, maxPositionEmbeddings: 128, wordEmbedProjDim: 32, doLayerNormBefore: true, layerNormEps: 1e-5, padTokenId: 1, bosTokenId: 2, eosTokenId: 2 });
const llama = (extra: Record<string, unknown>): ModelDescription =>
  llamaDescriptionFromHf({ model_type: 'llama', vocab_size: V, hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 96, max_position_embeddings: 128, ...extra });

/** A prefix of 40 tokens (a HELM trial's instructions and examples) and rows that go on from it differently. */
const prefix = [2, ...Array.from({ length: 39 }, (_, i) => 10 + ((i * 37) % 250))];
const sharedPrefixRequests: GenerationRequest[] = [
  { prompt: prefix, maxNewTokens: 4 },
  { prompt: [...prefix, 201, 202, 203], maxNewTokens: 5 },
  { prompt: [...prefix, 5, 6, 7, 8, 9, 10, 11, 12, 13], maxNewTokens: 3, n: 2, temperature: 0.9, seed: 4 },
  { prompt: [...prefix, 77], maxNewTokens: 0, echoPrompt: true, topLogprobs: 3 },
  { prompt: [...prefix, 90, 91, 92, 93, 94], maxNewTokens: 2, echoPrompt: true, topLogprobs: 2 },
];


/** The requests with and without prefix sharing; also checks that sharing really fed fewer prompt tokens. */
async function compareSharing(engine: Engine, requests: GenerationRequest[], maxBatchSize = 8): Promise<{ shared: GenerationResult[]; unshared: GenerationResult[]; sharedTimings: GenerationTimings; unsharedTimings: GenerationTimings; batchRows: number[] }> {
  const sharedTimings = { prefillMs: 0, prefillTokens: 0, decodeMs: 0, decodeTokens: 0 };
  const unsharedTimings = { ...sharedTimings };
  const batchRows: number[] = [];
  const shared = await generate(engine, requests, { maxBatchSize, timings: sharedTimings, onBatch: (b) => batchRows.push(b.rows.length) });
  const unshared = await generate(engine, requests, { maxBatchSize, timings: unsharedTimings, sharePrefixes: false });
  return { shared, unshared, sharedTimings, unsharedTimings, batchRows };
}

describe('generate: a shared prompt prefix computed once per batch', () => {
  const engines: Record<string, Engine> = {};
  beforeAll(async () => {
    engines.optRef = await Engine.dummy(opt, { backend: 'reference', seed: 3 });
    engines.optOrt = await Engine.dummy(opt, { backend: new OrtBackend(), seed: 3 });
    engines.llamaRef = await Engine.dummy(llama({}), { backend: 'reference', seed: 5 });
    engines.llamaOrt = await Engine.dummy(llama({}), { backend: new OrtBackend(), seed: 5 });
    engines.mistralWide = await Engine.dummy(llama({ model_type: 'mistral', sliding_window: 100 }), { backend: 'reference', seed: 6 });
    engines.mistralNarrow = await Engine.dummy(llama({ model_type: 'mistral', sliding_window: 20 }), { backend: 'reference', seed: 6 });
  });
  afterAll(async () => {
    for (const e of Object.values(engines)) await e.close();
  });

  // Rows: the whole prompt is the prefix; suffixes of 1, 3, 5 and 9 tokens; n = 2 sampled; echo with and without new tokens.
  for (const name of ['optRef', 'optOrt', 'llamaRef', 'llamaOrt', 'mistralWide']) {
    it(`${name}: same tokens and logprobs (fp32, 1e-5) with fewer prompt tokens fed`, async () => {
      const r = await compareSharing(engines[name]!, sharedPrefixRequests);
      expectSameResults(r.shared, r.unshared, 1e-5);
      // 6 rows in one batch: unshared 6 × 49 slots; shared the 40-token prefix once, then 6 × 9 suffix slots.
      expect(r.unsharedTimings.prefillTokens).toBe(6 * 49);
      expect(r.sharedTimings.prefillTokens).toBe(40 + 6 * 9);
    });
  }

  it('a sliding window shorter than the batch is not shared (the padding would shift it) and gives the same results', async () => {
    const r = await compareSharing(engines.mistralNarrow!, sharedPrefixRequests);
    expectSameResults(r.shared, r.unshared, 0);
    expect(r.sharedTimings.prefillTokens).toBe(6 * 49);
  });

  it(`rows that share fewer than ${MIN_SHARED_PREFIX} tokens, or a fixed padTo shape, are not shared`, async () => {
    const short = [{ prompt: prefix.slice(0, 20), maxNewTokens: 2 }, { prompt: [...prefix.slice(0, 20), 9, 9], maxNewTokens: 2 }];
    const t = { prefillMs: 0, prefillTokens: 0, decodeMs: 0, decodeTokens: 0 };
    await generate(engines.optRef!, short, { timings: t });
    expect(t.prefillTokens).toBe(2 * 22);
    const padded = { ...t, prefillTokens: 0 };
    await generate(engines.optRef!, sharedPrefixRequests, { timings: padded, padTo: 64 });
    expect(padded.prefillTokens).toBe(6 * 64);
  });

  it('batches of two trials (different prefixes) are formed per trial, each sharing its own prefix', async () => {
    const other = [2, ...Array.from({ length: 39 }, (_, i) => 20 + ((i * 13) % 250))];
    const requests = [0, 1, 2, 3].flatMap((i) => [{ prompt: [...prefix, 100 + i], maxNewTokens: 1 }, { prompt: [...other, 100 + i, 7], maxNewTokens: 1 }]);
    const r = await compareSharing(engines.optRef!, requests, 4);
    expectSameResults(r.shared, r.unshared, 1e-5);
    expect(r.sharedTimings.prefillTokens).toBe(40 + 4 * 1 + 40 + 4 * 2);
    expect(r.batchRows).toEqual([4, 4]);
  });

  it('trials that share only their first tokens (the instructions) are batched apart, each sharing its whole prefix', async () => {
    const header = prefix.slice(0, 35);
    const trialA = [...header, ...Array.from({ length: 30 }, (_, i) => 40 + i)];
    const trialB = [...header, ...Array.from({ length: 30 }, (_, i) => 140 + i)];
    const requests = [0, 1, 2, 3].flatMap((i) => [{ prompt: [...trialA, 100 + i], maxNewTokens: 1 }, { prompt: [...trialB, 100 + i, 7], maxNewTokens: 1 }]);
    const r = await compareSharing(engines.optRef!, requests, 8);
    expectSameResults(r.shared, r.unshared, 1e-5);
    // One batch of 8 would share only the 35-token header: 35 + 8 × 32 slots. Per trial: 65 + 4 × 1 and 65 + 4 × 2.
    expect(r.sharedTimings.prefillTokens).toBe(65 + 4 + 65 + 8);
    expect(r.batchRows).toEqual([4, 4]);
  });

  for (const name of ['optRef', 'optOrt']) {
    it(`${name}: expandRows copies only a stepped one-row batch, and the copies step on`, async () => {
      const engine = engines[name]!;
      const two = engine.startBatch(2);
      await two.step([[2, 5], [2, 6]], [[1, 1], [1, 1]]);
      await expect(two.expandRows(3)).rejects.toThrow('needs a batch of one row, this one has 2');
      await two.close();
      const run = engine.startBatch(1);
      try {
        await expect(run.expandRows(3)).rejects.toThrow('step the row first');
        await run.step([[2, 5, 6]], [[1, 1, 1]]);
        await run.expandRows(3);
        expect(run.batch).toBe(3);
        expect(run.mask).toEqual([[1, 1, 1], [1, 1, 1], [1, 1, 1]]);
        const h = await run.step([[7], [8], [9]], [[1], [1], [1]]);
        expect(h.length).toBe(3 * 32);
      } finally {
        await run.close();
      }
      await expect(run.expandRows(2)).rejects.toThrow('was closed');
    });
  }

  it('a backend whose cache cannot copy rows computes every row (same results)', async () => {
    const engine = engines.optRef!;
    const open = engine.backend.openKvCache.bind(engine.backend);
    engine.backend.openKvCache = (batch) => {
      const c = open(batch);
      return { forward: (ids, positions, step) => c.forward(ids, positions, step), get bytes() { return c.bytes; }, close: () => c.close() };
    };
    try {
      const r = await compareSharing(engine, sharedPrefixRequests);
      expectSameResults(r.shared, r.unshared, 0);
      expect(r.sharedTimings.prefillTokens).toBe(6 * 49);
    } finally {
      delete (engine.backend as { openKvCache?: unknown }).openKvCache;
    }
  });
});
