import { describe, expect, it } from 'vitest';
import { Engine } from '../engine.js';
import { ReferenceBackend } from '../reference-backend.js';
import { describeHfConfig } from './registry.js';

/** A small random Phi-3 whose context passes original_max_position_embeddings (8) while decoding. */
const phi3 = describeHfConfig({
  model_type: 'phi3', vocab_size: 64, hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2,
  intermediate_size: 48, max_position_embeddings: 64, original_max_position_embeddings: 8, rms_norm_eps: 1e-5,
  rope_scaling: { type: 'longrope', short_factor: [1, 1, 1.5, 2], long_factor: [1, 2, 8, 32] },
});

function maxDiff(a: Float32Array, b: Float32Array): number {
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!));
  return worst;
}

describe('longrope with a KV cache', () => {
  it('a cached decode across original_max_position_embeddings equals a no-cache forward at every step (the switch recomputes with long factors)', async () => {
    const engine = await Engine.dummy(phi3, { backend: new ReferenceBackend(), seed: 3 });
    try {
      const V = phi3.vocabSize;
      const rows = [[5, 9, 13, 2, 40], [0, 0, 7, 30, 11]];
      const mask = [[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]];
      const run = engine.startBatch(2);
      let logits = await run.stepLogits(rows, mask);
      let worstCached = 0;
      let switchEffect = 0;
      const seqs = rows.map((r) => [...r]);
      const masks = mask.map((m) => [...m]);
      for (let s = 0; s < 6; s++) {
        const next = seqs.map((_, b) => (b * 17 + s * 5 + 3) % V);
        for (const [b, r] of seqs.entries()) r.push(next[b]!);
        for (const m of masks) m.push(1);
        logits = await run.stepLogits(next.map((id) => [id]), [[1], [1]]);
        // transformers' reference: a full forward of the sequence so far (its key count picks the factor set).
        const full = await engine.forwardLogits(seqs, masks);
        const T = seqs[0]!.length;
        for (let b = 0; b < 2; b++) worstCached = Math.max(worstCached, maxDiff(logits.subarray(b * V, (b + 1) * V), full.subarray((b * T + T - 1) * V, (b * T + T) * V)));
        if (T === 9) {
          // The same 9 tokens with the first 8 keys kept from the short-factor cache would differ: the switch matters.
          const short = await engine.forwardLogits(seqs.map((r) => r.slice(0, 8)), masks.map((m) => m.slice(0, 8)));
          const long = await engine.forwardLogits(seqs, masks);
          switchEffect = maxDiff(short.subarray(7 * V, 8 * V), long.subarray(7 * V, 8 * V));
        }
      }
      await run.close();
      expect(worstCached).toBeLessThan(1e-5);
      expect(switchEffect).toBeGreaterThan(1e-3);
    } finally {
      await engine.close();
    }
  });
});
