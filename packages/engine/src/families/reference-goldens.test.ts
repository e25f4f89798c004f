import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Engine } from '../engine.js';
import { layerHasWindow } from '../llama-reference.js';
import { ReferenceBackend } from '../reference-backend.js';
import { ropeInvFreq } from '../rope-inv-freq.js';
import { readModelDescription } from './registry.js';

const GOLDEN = join(import.meta.dirname, '../../../../../shared/conformance/families');
const have = existsSync(GOLDEN);

interface Rec { logits: number[] }
interface Golden {
  prompts: number[][];
  input_ids: number[][];
  attention_mask: number[][];
  prompt_logits: (Rec | null)[][];
  greedy: { generated_ids: number[][]; step_logits: Rec[][]; max_new_tokens: number };
  derived: { rope_inv_freq_short?: number[]; rope_inv_freq_long?: number[] };
}
const golden = (model: string): Golden => JSON.parse(readFileSync(join(GOLDEN, model, 'golden.json'), 'utf8'));

/** Largest |a − b| over a logits row. */
function maxDiff(got: Float32Array, want: number[]): number {
  let worst = 0;
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i]! - want[i]!));
  return worst;
}

function argmax(x: Float32Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i]! > x[best]!) best = i;
  return best;
}

describe.skipIf(!have)('the TS reference on the family goldens (float32 tolerance 1e-4)', () => {
  it.each(['gemma2-a', 'phi3-a', 'olmo2-a', 'mixtral-a'])('%s: padded prompt logits, then greedy with the KV cache (ids exact, step logits)', async (model) => {
    const g = golden(model);
    const engine = await Engine.load(join(GOLDEN, model, 'bf16'), { backend: new ReferenceBackend() });
    try {
      const V = engine.description.vocabSize;
      const L = g.input_ids[0]!.length;
      const prompt = await engine.forwardLogits(g.input_ids, g.attention_mask);
      let worst = 0;
      for (const [b, rows] of g.prompt_logits.entries()) {
        for (const [t, r] of rows.entries()) if (r) worst = Math.max(worst, maxDiff(prompt.subarray((b * L + t) * V, (b * L + t + 1) * V), r.logits));
      }
      expect(worst).toBeLessThan(1e-4);
      // Gemma 2's greedy data come from uncached forwards: a correct sliding-window cache must reproduce them.
      const run = engine.startBatch(g.prompts.length);
      let logits = await run.stepLogits(g.input_ids, g.attention_mask);
      let last = g.prompts.map((_, b) => logits.slice((b * L + L - 1) * V, (b * L + L) * V));
      const ids: number[][] = g.prompts.map(() => []);
      let stepWorst = 0;
      for (let s = 0; s < g.greedy.max_new_tokens; s++) {
        last.forEach((row, b) => {
          ids[b]!.push(argmax(row));
          stepWorst = Math.max(stepWorst, maxDiff(row, g.greedy.step_logits[b]![s]!.logits));
        });
        if (s === g.greedy.max_new_tokens - 1) break;
        logits = await run.stepLogits(ids.map((r) => [r[s]!]), ids.map(() => [1]));
        last = g.prompts.map((_, b) => logits.slice(b * V, (b + 1) * V));
      }
      await run.close();
      expect(ids).toEqual(g.greedy.generated_ids);
      expect(stepWorst).toBeLessThan(1e-4);
    } finally {
      await engine.close();
    }
  }, 120_000);

  it('gemma2-a: the window is on even layers only', () => {
    const d = readModelDescription(join(GOLDEN, 'gemma2-a', 'f32'));
    expect([0, 1, 2].map((i) => layerHasWindow(d, i))).toEqual([true, false, true]);
  });

  it('phi3-a: longrope picks short factors up to original_max_position_embeddings keys, long ones past it', () => {
    const d = readModelDescription(join(GOLDEN, 'phi3-a', 'f32'));
    const g = golden('phi3-a');
    const rope = d.positions;
    if (rope.kind !== 'rope') throw new Error('phi3 has rotary positions');
    const at = (keys: number) => Array.from(ropeInvFreq(16, rope.theta, rope.scaling, keys));
    for (const [i, f] of at(8).entries()) expect(f).toBeCloseTo(g.derived.rope_inv_freq_short![i]!, 9);
    for (const [i, f] of at(9).entries()) expect(f).toBeCloseTo(g.derived.rope_inv_freq_long![i]!, 9);
  });

  it('the reference refuses a kind it does not compute (erf GELU MLP), naming it', async () => {
    const d = readModelDescription(join(GOLDEN, 'olmo2-a', 'f32'));
    await expect(new ReferenceBackend().init({ ...d, mlp: { ...d.mlp, kind: 'gelu' } })).rejects.toThrow('the reference backend does not compute mlp:gelu yet (olmo2 is a olmo2 model)');
  });
});
