import { makeModelDescription, generate, llamaDescriptionFromHf, Engine, type GenerationRequest, type GenerationResult, type ModelDescription } from '@flexhelm/engine';
import { describe, expect, it } from 'vitest';
import { oneDnnStatus } from './native-addon.js';
import { OneDnnBackend } from './onednn-backend.js';

const available = oneDnnStatus().available;
const V = 320;
const opt = makeModelDescription({ name: 'tiny-opt', hiddenSize: 64, numHiddenLayers: 2, numAttentionHeads: 4, ffnDim: 256, vocabSize: V, maxPositionEmbeddings: 128, wordEmbedProjDim: 64, doLayerNormBefore: true, layerNormEps: 1e-5, padTokenId: 1, bosTokenId: 2, eosTokenId: 2 });
const llama: ModelDescription = llamaDescriptionFromHf({ model_type: 'llama', vocab_size: V, hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 96, max_position_embeddings: 128 });

/** A 40-token prefix and rows that go on from it: none, 1, 3, 5 and 9 more tokens, n = 2 sampled, echo. */
const prefix = [2, ...Array.from({ length: 39 }, (_, i) => 10 + ((i * 37) % 250))];
const requests: GenerationRequest[] = [
  { prompt: prefix, maxNewTokens: 4 },
  { prompt: [...prefix, 201, 202, 203], maxNewTokens: 5 },
  { prompt: [...prefix, 5, 6, 7, 8, 9, 10, 11, 12, 13], maxNewTokens: 3, n: 2, temperature: 0.9, seed: 4 },
  { prompt: [...prefix, 77], maxNewTokens: 0, echoPrompt: true, topLogprobs: 3 },
  { prompt: [...prefix, 90, 91, 92, 93, 94], maxNewTokens: 2, echoPrompt: true, topLogprobs: 2 },
];

/** Largest |shared − unshared| over every generated and echoed logprob; generated ids must be equal. */
function largestGap(shared: GenerationResult[], unshared: GenerationResult[]): number {
  let gap = 0;
  for (const [i, r] of shared.entries()) {
    for (const [k, c] of r.completions.entries()) {
      const d = unshared[i]!.completions[k]!;
      expect(c.tokens.map((t) => t.id)).toEqual(d.tokens.map((t) => t.id));
      const pairs = [...c.tokens.map((t, j) => [t.logprob, d.tokens[j]!.logprob]), ...(c.promptTokens ?? []).map((t, j) => [t.logprob, d.promptTokens![j]!.logprob])];
      for (const [a, b] of pairs) gap = Math.max(gap, Math.abs((a ?? 0) - (b ?? 0)));
    }
  }
  return gap;
}

describe.skipIf(!available)('OneDnnKvCache.expandRows: a shared prompt prefix prefilled once', () => {
  for (const [family, model] of [['opt', opt], ['llama', llama]] as const) {
    for (const [dtype, tolerance] of [['fp32', 1e-5], ['bf16', 0.05]] as const) {
      it(`${family} ${dtype}: same tokens, logprobs within ${tolerance}, fewer prompt tokens fed`, async () => {
        const engine = await Engine.dummy(model, { backend: new OneDnnBackend({ dtype }), seed: 5 });
        try {
          const shared = { prefillMs: 0, prefillTokens: 0, decodeMs: 0, decodeTokens: 0 };
          const unshared = { ...shared };
          const a = await generate(engine, requests, { timings: shared });
          const b = await generate(engine, requests, { timings: unshared, sharePrefixes: false });
          expect(largestGap(a, b)).toBeLessThanOrEqual(tolerance);
          expect(shared.prefillTokens).toBe(40 + 6 * 9);
          expect(unshared.prefillTokens).toBe(6 * 49);
        } finally {
          await engine.close();
        }
      });
    }
  }

  it('copies only a stepped one-row cache', async () => {
    const engine = await Engine.dummy(opt, { backend: new OneDnnBackend({ dtype: 'fp32' }), seed: 5 });
    try {
      const two = engine.startBatch(2);
      await two.step([[2, 5], [2, 6]], [[1, 1], [1, 1]]);
      await expect(two.expandRows(4)).rejects.toThrow('needs a batch of one row, this one has 2');
      await two.close();
      const fresh = engine.startBatch(1);
      await expect(fresh.expandRows(4)).rejects.toThrow('step the row first');
      await fresh.close();
    } finally {
      await engine.close();
    }
  });
});
