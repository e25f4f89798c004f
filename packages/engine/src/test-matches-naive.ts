import { expect } from 'vitest';
import { Engine } from './engine.js';
import { generate } from '@flexhelm/contract';
import { kvValuesPerToken, type ModelDescription } from '@flexhelm/contract';
import { DescriptionTensorSource } from './random-weights.js';
import { argmax } from '@flexhelm/contract';
import { naiveLlamaLogits } from './test-naive-llama.js';

/**
 * Test helper: the reference engine on random weights (`seed`), each row's real positions of a left-padded batch and
 * then greedy decoding through the KV cache, against the naive forward of the row alone (`naiveLlamaLogits`, which
 * computes a mixture of experts' sparse layers too), to 1e-4 and exact greedy ids.
 */
export async function expectMatchesNaive(d: ModelDescription, rows: number[][], seed: number): Promise<void> {
  const engine = await Engine.dummy(d, { backend: 'reference', seed });
  const source = new DescriptionTensorSource(d, seed);
  try {
    const L = Math.max(...rows.map((r) => r.length));
    const run = engine.startBatch(rows.length);
    const hidden = await run.step(
      rows.map((r) => [...Array<number>(L - r.length).fill(0), ...r]),
      rows.map((r) => [...Array<number>(L - r.length).fill(0), ...r.map(() => 1)]),
    );
    const picks = rows.flatMap((r, b) => r.map((_, j) => ({ row: b, pos: L - r.length + j })));
    const logits = await run.logits(hidden, L, picks);
    // The cache holds kvHeads · headDim keys and values per token, not hidden-size ones.
    expect(run.kvBytes).toBe(4 * d.layers * rows.length * L * kvValuesPerToken(d));
    expect(kvValuesPerToken(d)).toBe(2 * d.attention.kvHeads * d.attention.headDim);
    await run.close();
    let k = 0;
    for (const r of rows) {
      const naive = naiveLlamaLogits(d, source, r);
      for (let j = 0; j < r.length; j++, k++) {
        const got = logits.subarray(k * d.vocabSize, (k + 1) * d.vocabSize);
        let diff = 0;
        for (let v = 0; v < d.vocabSize; v++) diff = Math.max(diff, Math.abs(got[v]! - naive[j]![v]!));
        expect(diff, `row ${rows.indexOf(r)} position ${j}`).toBeLessThan(1e-4);
      }
    }
    // Greedy through generate() (prefill, then the KV cache) picks the naive forward's argmax at every step.
    const results = await generate(engine, rows.map((prompt) => ({ prompt, maxNewTokens: 4, stopAtEos: false })), { maxBatchSize: rows.length });
    results.forEach((res, b) => {
      const seq = [...rows[b]!, ...res.completions[0]!.tokens.map((t) => t.id)];
      const naive = naiveLlamaLogits(d, source, seq.slice(0, -1));
      for (let s = 0; s < 4; s++) expect(seq[rows[b]!.length + s]).toBe(argmax(Float32Array.from(naive[rows[b]!.length - 1 + s]!)));
    });
  } finally {
    await engine.close();
  }
}
