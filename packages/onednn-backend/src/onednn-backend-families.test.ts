import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { argmax, describeHfConfig, Engine, type ModelDescription } from '@flexhelm/engine';
import { describe, expect, it } from 'vitest';
import { oneDnnStatus } from './native-addon.js';
import { OneDnnBackend } from './onednn-backend.js';
import { conformanceDir } from './test-conformance-dir.js';
import { StreamingHarness } from './test-streaming-harness.js';

const available = oneDnnStatus().available;

// The family goldens (transformers 4.47.1).
const GOLDEN = conformanceDir('families');

interface Rec { logits: number[] }
interface Golden {
  prompts: number[][];
  input_ids: number[][];
  attention_mask: number[][];
  prompt_logits: (Rec | null)[][];
  greedy: { generated_ids: number[][]; step_logits: Rec[][]; max_new_tokens: number };
}
const golden = (model: string): Golden => JSON.parse(readFileSync(join(GOLDEN, model, 'golden.json'), 'utf8'));

function maxDiff(got: Float32Array, want: number[]): number {
  let worst = 0;
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i]! - want[i]!));
  return worst;
}

/**
 * The golden's padded prompt batch through `engine.forwardLogits` (every layer's `layer()`, fresh KV), then greedy
 * decoding through the backend's KV cache (teacher-forced on the golden ids): the worst logit errors and the ids.
 */
async function againstGolden(engine: Engine, g: Golden): Promise<{ prompt: number; steps: number; ids: number[][] }> {
  const V = engine.description.vocabSize;
  const L = g.input_ids[0]!.length;
  const logits = await engine.forwardLogits(g.input_ids, g.attention_mask);
  let prompt = 0;
  for (const [b, rows] of g.prompt_logits.entries()) {
    for (const [t, r] of rows.entries()) if (r) prompt = Math.max(prompt, maxDiff(logits.subarray((b * L + t) * V, (b * L + t + 1) * V), r.logits));
  }
  const run = engine.startBatch(g.prompts.length);
  let step = await run.stepLogits(g.input_ids, g.attention_mask);
  let last = g.prompts.map((_, b) => step.slice((b * L + L - 1) * V, (b * L + L) * V));
  const ids: number[][] = g.prompts.map(() => []);
  let steps = 0;
  for (let s = 0; s < g.greedy.max_new_tokens; s++) {
    last.forEach((row, b) => {
      ids[b]!.push(argmax(row));
      steps = Math.max(steps, maxDiff(row, g.greedy.step_logits[b]![s]!.logits));
    });
    if (s === g.greedy.max_new_tokens - 1) break;
    // Teacher-forced: the golden's next ids, so one early bf16 flip does not derail every later step.
    step = await run.stepLogits(g.greedy.generated_ids.map((r) => [r[s]!]), ids.map(() => [1]));
    last = g.prompts.map((_, b) => step.slice(b * V, (b + 1) * V));
  }
  await run.close();
  return { prompt, steps, ids };
}

// gemma2-a: plus-one norms on both sides of each branch, scale 16^-½ with head_dim 12, attention and final soft-caps,
// window 8 on even layers, tanh GeGLU, scaled embedding, tied head. phi3-a: longrope past 8 keys (cos/sin scaled).
// olmo2-a: norms on the branch outputs only and q/k projection norms. mixtral-a: every layer a mixture of 4 experts,
// top 2 renormalised (router in fp32, each expert's rows gathered into one GEMM).
describe.skipIf(!available || (!GOLDEN && !process.env.CI))('OneDnnBackend on the family goldens (Gemma 2, Phi-3, OLMo 2, Mixtral)', () => {
  it.each(['gemma2-a', 'phi3-a', 'olmo2-a', 'mixtral-a'])('%s: fp32 within 1e-4 of transformers (prompt and cached steps, greedy ids exact); bf16 within 0.1', { timeout: 120_000 }, async (model) => {
    const g = golden(model);
    const fp32 = await Engine.load(join(GOLDEN, model, 'bf16'), { backend: new OneDnnBackend({ dtype: 'fp32' }) });
    const f = await againstGolden(fp32, g);
    await fp32.close();
    expect(f.prompt).toBeLessThan(1e-4);
    expect(f.steps).toBeLessThan(1e-4);
    expect(f.ids).toEqual(g.greedy.generated_ids);
    const bf16 = await Engine.load(join(GOLDEN, model, 'bf16'), { backend: new OneDnnBackend({ dtype: 'bf16' }) });
    const b = await againstGolden(bf16, g);
    await bf16.close();
    // llama/check.md's bf16 tolerance; above 0 shows the bf16 GEMMs really ran.
    expect(b.prompt).toBeLessThan(0.1);
    expect(b.steps).toBeLessThan(0.1);
    expect(b.prompt).toBeGreaterThan(0);
  });

  it.each([
    ['gemma2-a', 'attention resident, MLP streamed', ['attention']],
    ['olmo2-a', 'every tensor streamed', []],
    ['phi3-a', 'every tensor streamed', []],
    ['mixtral-a', 'attention resident, experts streamed', ['attention']],
  ] as const)('%s, streamed layers (%s): fp32 within 1e-4 of transformers, greedy ids exact', { timeout: 120_000 }, async (model, _, residentGroups) => {
    const g = golden(model);
    const inner = new OneDnnBackend({ dtype: 'fp32' });
    const engine = await Engine.load(join(GOLDEN, model, 'bf16'), { backend: new StreamingHarness(inner, residentGroups) });
    const r = await againstGolden(engine, g);
    await engine.close();
    expect(r.prompt).toBeLessThan(1e-4);
    expect(r.steps).toBeLessThan(1e-4);
    expect(r.ids).toEqual(g.greedy.generated_ids);
    // Layers were handed over and packed (the norms of the streamed parts with them).
    expect(inner.packing.layers).toBeGreaterThan(2);
  });

  it('refuses a kind the native layer does not compute (erf GELU), naming it', async () => {
    const reference = await Engine.load(join(GOLDEN, 'gemma2-a', 'f32'), { backend: 'reference' });
    const d = reference.description;
    await reference.close();
    await expect(new OneDnnBackend({ dtype: 'fp32' }).init({ ...d, mlp: { ...d.mlp, kind: 'gelu' } })).rejects.toThrow('the oneDNN backend does not compute mlp:gelu yet');
  });
});

/**
 * Qwen2-MoE (check.md's qwen2moe-a shape, hidden goldens): layer 1 sparse among dense 0 and 2, 6 experts top 2 not
 * renormalised, the shared expert with its sigmoid gate; against the reference backend on the same random weights.
 */
describe.skipIf(!available)('OneDnnBackend computes Qwen2-MoE (shared expert, dense layers among sparse ones)', () => {
  const d: ModelDescription = describeHfConfig({
    model_type: 'qwen2_moe', vocab_size: 300, hidden_size: 32, num_hidden_layers: 3, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 96,
    max_position_embeddings: 128, rope_theta: 1e6, rms_norm_eps: 1e-6, decoder_sparse_step: 2, mlp_only_layers: [], num_experts: 6, num_experts_per_tok: 2,
    norm_topk_prob: false, moe_intermediate_size: 32, shared_expert_intermediate_size: 48, use_sliding_window: false, tie_word_embeddings: false,
    bos_token_id: 1, eos_token_id: 2, pad_token_id: 0,
  });
  // Left-padded rows, then two cached single-token steps (most experts see no row there).
  const ids = [[0, 0, 5, 17, 250, 33, 8], [9, 5, 6, 7, 8, 2, 100]];
  const mask = ids.map((row, b) => row.map((_, s) => (b === 0 && s < 2 ? 0 : 1)));
  const logitsOf = async (engine: Engine): Promise<Float32Array> => {
    const run = engine.startBatch(2);
    try {
      const out = [await run.stepLogits(ids, mask)];
      for (const next of [[[40], [41]], [[42], [43]]]) out.push(await run.stepLogits(next, [[1], [1]]));
      return Float32Array.from(out.flatMap((a) => [...a]));
    } finally {
      await run.close();
      await engine.close();
    }
  };
  const worst = (a: Float32Array, b: Float32Array) => {
    expect(a.length).toBe(b.length);
    let w = 0;
    // Pad rows (batch row 0's first two positions) are never read.
    const V = d.vocabSize;
    a.forEach((x, i) => {
      const r = Math.floor(i / V);
      if (r < 14 && Math.floor(r / 7) === 0 && r % 7 < 2) return;
      w = Math.max(w, Math.abs(x - b[i]!));
    });
    return w;
  };

  it('fp32 within 1e-4 of the reference (resident and streamed layers), bf16 within 0.1', { timeout: 120_000 }, async () => {
    expect(d.moe?.sparseLayers).toEqual([1]);
    const want = await logitsOf(await Engine.dummy(d, { seed: 7, backend: 'reference' }));
    expect(worst(await logitsOf(await Engine.dummy(d, { seed: 7, backend: new OneDnnBackend({ dtype: 'fp32' }) })), want)).toBeLessThan(1e-4);
    const inner = new OneDnnBackend({ dtype: 'fp32' });
    expect(worst(await logitsOf(await Engine.dummy(d, { seed: 7, backend: new StreamingHarness(inner, ['attention']) })), want)).toBeLessThan(1e-4);
    expect(inner.packing.layers).toBeGreaterThan(2);
    const bf16 = worst(await logitsOf(await Engine.dummy(d, { seed: 7, backend: new OneDnnBackend({ dtype: 'bf16' }) })), want);
    expect(bf16).toBeLessThan(0.1);
    expect(bf16).toBeGreaterThan(0);
  });
});
