import { afterAll, describe, expect, it } from 'vitest';
import { layerTensorsOf, MASK_BIAS, modelKinds, type DecoderBackend, type ModelDescription } from '@flexhelm/contract';
import { DescriptionTensorSource, describeHfConfig, Engine, generate, LlamaCheckpoint, ReferenceBackend, StagedKvCache, type GenerationResult } from '@flexhelm/engine';
import { OrtBackend } from './ort-backend.js';
import { QWEN2_MOE_A } from './test-moe-configs.js';

/**
 * The goldens' shapes (families/{gemma2-a,phi3-a,olmo2-a,mixtral-a}, check.md's qwen2moe-a), smaller where that makes
 * a kind matter on short inputs: Gemma 2's window of 4 on even layers (prompts of 11 tokens and 8 decode steps pass
 * it), Phi-3's longrope switching at 8 keys (the 2-token prompt crosses it while decoding: the engine recomputes the
 * batch with the long factors). The mixtures: Mixtral's every layer sparse, renormalised top 2 of 4 experts;
 * Qwen2-MoE's layer 1 sparse among dense ones, a shared expert, top 2 of 6 not renormalised (on single-token decode
 * steps most experts see no row: the empty-expert path).
 */
const MODELS: Record<string, ModelDescription> = {
  gemma2: describeHfConfig({
    model_type: 'gemma2', hidden_size: 48, num_hidden_layers: 3, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 12, intermediate_size: 96,
    vocab_size: 300, max_position_embeddings: 128, rms_norm_eps: 1e-6, rope_theta: 10000, query_pre_attn_scalar: 16, attn_logit_softcapping: 4,
    final_logit_softcapping: 3, sliding_window: 4, hidden_activation: 'gelu_pytorch_tanh', bos_token_id: 1, eos_token_id: 2, pad_token_id: 0,
  }),
  phi3: describeHfConfig({
    model_type: 'phi3', hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 128, vocab_size: 300,
    max_position_embeddings: 64, original_max_position_embeddings: 8, rms_norm_eps: 1e-5, rope_theta: 10000, hidden_act: 'silu', bos_token_id: 1, eos_token_id: 2,
    rope_scaling: { type: 'longrope', short_factor: [1, 1, 1.03125, 1.0625, 1.125, 1.25, 1.5, 2], long_factor: [1, 1.25, 2, 3, 5, 8, 16, 32] },
  }),
  olmo2: describeHfConfig({
    model_type: 'olmo2', hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 128, vocab_size: 300,
    max_position_embeddings: 128, rms_norm_eps: 1e-6, rope_theta: 500000, hidden_act: 'silu', bos_token_id: 1, eos_token_id: 2, pad_token_id: 0,
  }),
  mixtral: describeHfConfig({
    model_type: 'mixtral', hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 16, intermediate_size: 96,
    num_local_experts: 4, num_experts_per_tok: 2, vocab_size: 300, max_position_embeddings: 128, rms_norm_eps: 1e-5, rope_theta: 1e6, hidden_act: 'silu',
    bos_token_id: 1, eos_token_id: 2, pad_token_id: 0,
  }),
  qwen2_moe: describeHfConfig({ ...QWEN2_MOE_A, vocab_size: 300 }),
};

/** The layers each streamed-layer test streams (one per test): layer 0, and for Qwen2-MoE its sparse layer too. */
const STREAMED: Record<string, number[]> = { qwen2_moe: [0, 1] };

const engines: Engine[] = [];
afterAll(async () => {
  for (const e of engines) await e.close();
});

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

describe('OrtBackend computes Gemma 2, Phi-3, OLMo 2, Mixtral and Qwen2-MoE (onnxruntime graphs by kind)', () => {
  it('the models use the kinds these tests are about', () => {
    expect(modelKinds(MODELS.gemma2!)).toEqual(expect.arrayContaining(['norm:rmsnorm-plus-one', 'placement:pre-and-post-branch', 'attention:scale', 'attention:logit-softcap', 'attention:window-even-layers', 'mlp:geglu-tanh', 'embedding:scale', 'head:logit-softcap']));
    expect(modelKinds(MODELS.phi3!)).toContain('rope:longrope');
    expect(modelKinds(MODELS.olmo2!)).toEqual(expect.arrayContaining(['placement:post-branch', 'attention:qk-norm']));
    expect(modelKinds(MODELS.mixtral!)).toContain('mlp:moe');
    expect(modelKinds(MODELS.mixtral!)).not.toContain('mlp:moe-dense-layers');
    expect(modelKinds(MODELS.qwen2_moe!)).toEqual(expect.arrayContaining(['mlp:moe', 'mlp:moe-shared-expert', 'mlp:moe-dense-layers']));
    expect(MODELS.qwen2_moe!.moe!.sparseLayers).toEqual([1]);
  });

  for (const [name, d] of Object.entries(MODELS)) {
    it(`${name}: generate() with echo gives the reference backend's tokens and log-probs (≤ 1e-4), resident layers and the worker-held cache`, async () => {
      const ort = await Engine.dummy(d, { backend: new OrtBackend(), seed: 4 });
      const ref = await Engine.dummy(d, { seed: 4, backend: 'reference' });
      engines.push(ort, ref);
      // Left-padded rows of 11, 6 and 2 tokens, then 8 cached steps.
      const requests = [11, 6, 2].map((len, r) => ({
        prompt: [1, ...Array.from({ length: len - 1 }, (_, j) => 3 + ((r * 53 + j * 17) % 290))],
        maxNewTokens: 8,
        stopAtEos: false,
        topLogprobs: 3,
        echoPrompt: true,
      }));
      // One row alone too: Phi-3's 2-token prompt then crosses the 8 keys while decoding (the recomputed step).
      for (const batch of [requests, [requests[2]!]]) {
        const a = await generate(ort, batch, { maxBatchSize: 3 });
        const b = await generate(ref, batch, { maxBatchSize: 3 });
        expect(compare(a, b)).toBeLessThan(1e-4);
        expect(a[0]!.completions[0]!.tokens).toHaveLength(8);
      }
    });
  }

  for (const [name, d, layer] of Object.entries(MODELS).flatMap(([n, m]) => (STREAMED[n] ?? [0]).map((layer) => [n, m, layer] as const))) {
    it(`${name}: a streamed layer ${layer} (weights fed per use) computes as the reference, through both kinds of cache`, async () => {
      const weights = new LlamaCheckpoint(d, new DescriptionTensorSource(d, 9));
      const ort = new OrtBackend();
      const ref = new ReferenceBackend();
      try {
        for (const b of [ort, ref]) {
          await b.init(d);
          await b.loadEmbedding(weights.embedding());
          for (let i = 0; i < d.layers; i++) await b.loadLayer(i, weights.layer(i));
          await b.loadHead(weights.head(weights.embedding().tokens));
        }
        // The layer (windowed on Gemma 2's layer 0) streamed: its first tensor resident, the others set before each use.
        const [firstKey] = layerTensorsOf(d, layer).map((t) => t.key);
        const all = weights.layer(layer);
        const streamedPart = () => Object.fromEntries(Object.entries(weights.layer(layer)).filter(([k]) => k !== firstKey));
        await ort.streamedLayers.loadLayer(layer, { [firstKey!]: all[firstKey!]! });
        const B = 2;
        const rows = [[1, 5, 9, 200, 7, 8], [0, 0, 1, 44, 3, 6]];
        const mask = rows.map((r, b) => r.map((_, s) => (b === 1 && s < 2 ? 0 : 1)));
        const logitsOf = async (backend: DecoderBackend, staged: boolean): Promise<Float32Array> => {
          const cache = staged ? new StagedKvCache(backend, d.layers, 2 * d.attention.kvHeads * d.attention.headDim, B) : backend.openKvCache(B);
          const out: number[] = [];
          let P = 0;
          const seen = [0, 0];
          // 6, 7, 8 then 9 keys: Phi-3's call with 9 keys uses the long factors; Gemma 2's window of 4 slides.
          for (const ids of [rows, [[17], [250]], [[3], [4]], [[90], [91]]]) {
            const S = ids[0]!.length;
            const m = S === 1 ? [[1], [1]] : mask;
            const positions = new Int32Array(B * S);
            const bias = new Float32Array(B * S * (P + S)).fill(MASK_BIAS);
            for (let b = 0; b < B; b++) {
              for (let s = 0; s < S; s++) {
                seen[b]! += m[b]![s]!;
                positions[b * S + s] = seen[b]! * m[b]![s]! - 1;
                for (let t = 0; t <= P + s; t++) if (t >= P ? m[b]![t - P] : b === 0 || t >= 2) bias[(b * S + s) * (P + S) + t] = 0;
              }
            }
            if (backend === ort) await ort.streamedLayers.setLayer(layer, streamedPart());
            const hidden = await cache.forward(Int32Array.from(ids.flat()), positions, { batch: B, seq: S, pastLen: P, maskBias: bias, positions });
            const last = new Float32Array(B * d.hiddenSize);
            for (let b = 0; b < B; b++) last.set(hidden.subarray(((b + 1) * S - 1) * d.hiddenSize, (b + 1) * S * d.hiddenSize), b * d.hiddenSize);
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
  }
});
