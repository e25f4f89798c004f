import { afterAll, describe, expect, it } from 'vitest';
import { generate, type GenerationResult, llamaDescriptionFromHf, LlamaCheckpoint, Engine, DescriptionTensorSource, ReferenceBackend, StagedKvCache } from '@flexhelm/engine';
import type { ModelDescription, DecoderBackend } from '@flexhelm/contract';
import { OrtBackend } from './ort-backend.js';
import { ortGraphs } from './ort-family-graphs.js';

/** Small models of each family: GQA with llama3 scaling, a sliding window shorter than the prompts, one kv head with biases and a tied head. */
const MODELS: Record<string, ModelDescription> = {
  'llama3-gqa': llamaDescriptionFromHf({
    model_type: 'llama', hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 8, num_key_value_heads: 2, head_dim: 8, intermediate_size: 96, vocab_size: 300,
    max_position_embeddings: 256, rms_norm_eps: 1e-5, rope_theta: 500000, bos_token_id: 1, eos_token_id: 2,
    rope_scaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 16 },
  }),
  'mistral-window': llamaDescriptionFromHf({ model_type: 'mistral', hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 80, vocab_size: 300, max_position_embeddings: 128, sliding_window: 4, eos_token_id: 2 }),
  'qwen2-kv1-tied': llamaDescriptionFromHf({ model_type: 'qwen2', hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 1, intermediate_size: 64, vocab_size: 300, max_position_embeddings: 128, eos_token_id: 2 }),
};

const engines: Engine[] = [];
afterAll(async () => {
  for (const e of engines) await e.close();
});

async function pair(d: ModelDescription): Promise<{ ort: Engine; ref: Engine }> {
  const ort = await Engine.dummy(d, { backend: new OrtBackend(), seed: 4 });
  const ref = await Engine.dummy(d, { seed: 4, backend: 'reference' });
  engines.push(ort, ref);
  return { ort, ref };
}

/** Same tokens, and the worst log-prob difference over generated and echoed tokens (and their top lists). */
function compare(a: GenerationResult[], b: GenerationResult[]): number {
  let worst = 0;
  a.forEach((res, i) => {
    const [x, y] = [res.completions[0]!, b[i]!.completions[0]!];
    expect(x.tokens.map((t) => t.id)).toEqual(y.tokens.map((t) => t.id));
    x.tokens.forEach((t, j) => {
      worst = Math.max(worst, Math.abs(t.logprob! - y.tokens[j]!.logprob!));
      t.top?.forEach((e, k) => { worst = Math.max(worst, Math.abs(e.logprob - y.tokens[j]!.top![k]!.logprob)); });
    });
    (x.promptTokens ?? []).forEach((t, j) => { worst = Math.max(worst, Math.abs((t.logprob ?? 0) - (y.promptTokens![j]!.logprob ?? 0))); });
  });
  return worst;
}

describe('OrtBackend computes the Llama family (onnxruntime graphs, worker-held cache of kv heads)', () => {
  for (const [name, d] of Object.entries(MODELS)) {
    it(`${name}: generate() with echo gives the reference backend's tokens and log-probs (≤ 1e-4)`, async () => {
      const { ort, ref } = await pair(d);
      // Left-padded rows of 11, 6 and 2 tokens, then 8 cached steps (the window of 4 slides over all of them).
      const requests = [11, 6, 2].map((len, r) => ({
        prompt: [1, ...Array.from({ length: len - 1 }, (_, j) => 3 + ((r * 53 + j * 17) % 290))],
        maxNewTokens: 8,
        stopAtEos: false,
        topLogprobs: 3,
        echoPrompt: true,
      }));
      const a = await generate(ort, requests, { maxBatchSize: 3 });
      const b = await generate(ref, requests, { maxBatchSize: 3 });
      expect(compare(a, b)).toBeLessThan(1e-4);
      expect(a[0]!.completions[0]!.tokens).toHaveLength(8);
    });
  }

  it('a prefill larger than one row chunk (cos/sin split with the rows) decodes as the reference', async () => {
    const { ort, ref } = await pair(MODELS['mistral-window']!);
    // 20 rows × 60 tokens = 1200 tokens: the worker runs the prefill in row chunks of ≤ 1024 tokens.
    const requests = Array.from({ length: 20 }, (_, r) => ({
      prompt: [1, ...Array.from({ length: 40 + r }, (_, j) => 4 + ((r * 31 + j * 7) % 290))],
      maxNewTokens: 3,
      stopAtEos: false,
      topLogprobs: 2,
      echoPrompt: r % 5 === 0,
    }));
    expect(compare(await generate(ort, requests, { maxBatchSize: 20 }), await generate(ref, requests, { maxBatchSize: 20 }))).toBeLessThan(1e-4);
  });

  it('streamed layers and a streamed head (weights fed per use) compute as resident ones, through both kinds of cache', async () => {
    const d = MODELS['llama3-gqa']!;
    const weights = new LlamaCheckpoint(d, new DescriptionTensorSource(d, 9));
    const ort = new OrtBackend();
    const ref = new ReferenceBackend();
    try {
      for (const b of [ort, ref]) {
        await b.init(d);
        await b.loadEmbedding(weights.embedding());
        await b.loadLayer(0, weights.layer(0));
        await b.loadLayer(1, weights.layer(1));
      }
      // onnxruntime: layer 1 streamed (its input norm resident, the rest set before each use), the head streamed too.
      const streamedPart = () => (({ inNormW: _, ...rest }) => rest)(weights.layer(1));
      await ort.streamedLayers.loadLayer(1, { inNormW: weights.layer(1).inNormW! });
      await ort.streamedHead.load({ finalLnW: weights.head().finalLnW });
      await ref.loadHead(weights.head());
      const B = 2;
      const rows = [[1, 5, 9, 200, 7], [0, 0, 1, 44, 3]];
      const mask = rows.map((r, b) => r.map((_, s) => (b === 1 && s < 2 ? 0 : 1)));
      const logitsOf = async (backend: DecoderBackend, staged: boolean): Promise<Float32Array> => {
        const cache = staged ? new StagedKvCache(backend, d.layers, 2 * d.attention.kvHeads * d.attention.headDim, B) : backend.openKvCache(B);
        const out: number[] = [];
        let P = 0;
        const seen = [0, 0];
        for (const ids of [rows, [[17], [250]], [[3], [4]]]) {
          const S = ids[0]!.length;
          const m = S === 1 ? [[1], [1]] : mask;
          const positions = new Int32Array(B * S);
          const bias = new Float32Array(B * S * (P + S)).fill(-1e30);
          for (let b = 0; b < B; b++) {
            for (let s = 0; s < S; s++) {
              seen[b]! += m[b]![s]!;
              positions[b * S + s] = seen[b]! * m[b]![s]! - 1;
              for (let t = 0; t <= P + s; t++) if (t >= P ? m[b]![t - P] : b === 0 || t >= 2) bias[(b * S + s) * (P + S) + t] = 0;
            }
          }
          if (backend === ort) await ort.streamedLayers.setLayer(1, streamedPart());
          const hidden = await cache.forward(Int32Array.from(ids.flat()), positions, { batch: B, seq: S, pastLen: P, maskBias: bias, positions });
          const last = new Float32Array(B * d.hiddenSize);
          for (let b = 0; b < B; b++) last.set(hidden.subarray(((b + 1) * S - 1) * d.hiddenSize, (b + 1) * S * d.hiddenSize), b * d.hiddenSize);
          // Streamed layer and head share one slot in the worker: each is set again before its use.
          if (backend === ort) await ort.streamedHead.set({ lmHead: weights.head().lmHead });
          out.push(...(await backend.head(last, B)));
          P += S;
        }
        await cache.close();
        return Float32Array.from(out);
      };
      const want = await logitsOf(ref, true);
      for (const staged of [false, true]) {
        const got = await logitsOf(ort, staged);
        expect(got.length).toBe(want.length);
        let worst = 0;
        got.forEach((x, i) => { worst = Math.max(worst, Math.abs(x - want[i]!)); });
        expect(worst).toBeLessThan(1e-4);
      }
    } finally {
      weights.close();
      await ort.dispose();
      await ref.dispose();
    }
  });

  it('a tied head reads the token table it shares with the embedding, also when no embedding was loaded here (offloading keeps it on its tiers)', async () => {
    const d = MODELS['qwen2-kv1-tied']!;
    const weights = new LlamaCheckpoint(d, new DescriptionTensorSource(d, 3));
    const ort = new OrtBackend();
    const ref = new ReferenceBackend();
    try {
      for (const b of [ort, ref]) {
        await b.init(d);
        await b.loadHead(weights.head(weights.embedding().tokens));
      }
      const x = Float32Array.from({ length: 3 * d.hiddenSize }, (_, i) => Math.sin(i * 0.37));
      const got = await ort.head(x.slice(), 3);
      const want = await ref.head(x.slice(), 3);
      expect(got.length).toBe(3 * d.vocabSize);
      expect(got.reduce((m, v, i) => Math.max(m, Math.abs(v - want[i]!)), 0)).toBeLessThan(1e-4);
    } finally {
      weights.close();
      await ort.dispose();
      await ref.dispose();
    }
  });

  it('a token table over 2 GB (Llama-3.1-8B: 128256 × 4096 fp32) is a graph input, not an initializer onnxruntime would refuse', () => {
    const d8b = llamaDescriptionFromHf({ model_type: 'llama', hidden_size: 4096, num_hidden_layers: 1, num_attention_heads: 32, num_key_value_heads: 8, intermediate_size: 14336, vocab_size: 128256, max_position_embeddings: 2048, eos_token_id: 2 });
    const graphs = ortGraphs(d8b);
    expect(graphs.sharedTable).toBe(true);
    expect(graphs.tiedTable).toBe(false);
    // The table is never read into the graph: an empty one stands in for it.
    expect(graphs.embedding({ tokens: new Float32Array(0) } as never).byteLength).toBeLessThan(4096);
    // Small tables stay initializers.
    expect(ortGraphs(MODELS['llama3-gqa']!).sharedTable).toBe(false);
  });

  it('an untied model whose tables are fed as worker tensors embeds and projects like the reference', async () => {
    const d = MODELS['llama3-gqa']!;
    const weights = new LlamaCheckpoint(d, new DescriptionTensorSource(d, 3));
    const ort = new OrtBackend({ maxTableInitializerBytes: 0 });
    const ref = new ReferenceBackend();
    try {
      for (const b of [ort, ref]) {
        await b.init(d);
        await b.loadEmbedding(weights.embedding());
        await b.loadHead(weights.head(weights.embedding().tokens));
      }
      const ids = Int32Array.from([1, 7, 299, 42]);
      const pos = Int32Array.from([0, 1, 2, 3]);
      const ge = await ort.embed(ids.slice(), pos.slice(), 1, 4);
      const we = await ref.embed(ids.slice(), pos.slice());
      expect(ge.length).toBe(4 * d.hiddenSize);
      expect(ge.reduce((m, v, i) => Math.max(m, Math.abs(v - we[i]!)), 0)).toBeLessThan(1e-6);
      const x = Float32Array.from({ length: 3 * d.hiddenSize }, (_, i) => Math.sin(i * 0.37));
      const got = await ort.head(x.slice(), 3);
      const want = await ref.head(x.slice(), 3);
      expect(got.length).toBe(3 * d.vocabSize);
      // The untied head's own projection, not the embedding's table.
      expect(got.reduce((m, v, i) => Math.max(m, Math.abs(v - want[i]!)), 0)).toBeLessThan(1e-4);
    } finally {
      weights.close();
      await ort.dispose();
      await ref.dispose();
    }
  });

  it('refuses at init a description its graphs do not compute, naming what does not fit', async () => {
    const d = MODELS['mistral-window']!;
    const backend = new OrtBackend();
    await expect(backend.init({ ...d, mlp: { ...d.mlp, kind: 'gelu' } })).rejects.toThrow(/onnxruntime does not compute mlp:gelu yet \(.* is a mistral model\)/);
    await backend.dispose();
  });
});
