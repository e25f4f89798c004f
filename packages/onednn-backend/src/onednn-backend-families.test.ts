import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { argmax, Engine } from '@flexhelm/engine';
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
// olmo2-a: norms on the branch outputs only and q/k projection norms.
describe.skipIf(!available || (!GOLDEN && !process.env.CI))('OneDnnBackend on the family goldens (Gemma 2, Phi-3, OLMo 2)', () => {
  it.each(['gemma2-a', 'phi3-a', 'olmo2-a'])('%s: fp32 within 1e-4 of transformers (prompt and cached steps, greedy ids exact); bf16 within 0.1', { timeout: 120_000 }, async (model) => {
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
