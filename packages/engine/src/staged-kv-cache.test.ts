import { describe, expect, it } from 'vitest';
import { kvValuesPerToken, MASK_BIAS } from '@flexhelm/contract';
import { OPT_POSITION_OFFSET } from './families/opt/opt-config.js';
import { makeModelDescription } from './families/opt/make-model.js';
import { Engine } from './engine.js';
import { StagedKvCache } from './staged-kv-cache.js';

const tiny = makeModelDescription({ base: 'opt-125m', name: 'tiny', hiddenSize: 16, numHiddenLayers: 2, numAttentionHeads: 2, ffnDim: 32, vocabSize: 64, wordEmbedProjDim: 16, maxPositionEmbeddings: 32 });

/** A causal, unpadded step of `seq` tokens per row after `pastLen` cached ones. */
function step(batch: number, seq: number, pastLen: number) {
  const T = pastLen + seq;
  const maskBias = new Float32Array(batch * seq * T);
  for (let b = 0; b < batch; b++) for (let s = 0; s < seq; s++) for (let t = 0; t < T; t++) maskBias[(b * seq + s) * T + t] = t <= pastLen + s ? 0 : MASK_BIAS;
  const ids = Int32Array.from({ length: batch * seq }, (_, i) => 3 + ((i * 7) % 60));
  const positions = Int32Array.from({ length: batch * seq }, (_, i) => pastLen + (i % seq) + OPT_POSITION_OFFSET);
  return { ids, positions, shape: { batch, seq, pastLen, maskBias } };
}

describe('StagedKvCache', () => {
  it('steps the reference backend like one prefill of the whole sequence, and counts its bytes', async () => {
    const engine = await Engine.dummy(tiny, { backend: 'reference', seed: 3 });
    try {
      const whole = new StagedKvCache(engine.backend, 2, kvValuesPerToken(engine.description), 2);
      const all = step(2, 5, 0);
      const full = await whole.forward(all.ids, all.positions, all.shape);
      // The same five tokens as a prefill of three and two decode steps.
      const split = new StagedKvCache(engine.backend, 2, kvValuesPerToken(engine.description), 2);
      const rows = (s: { ids: Int32Array; positions: Int32Array }, from: number, n: number) => ({
        ids: Int32Array.from([...all.ids.subarray(from, from + n), ...all.ids.subarray(5 + from, 5 + from + n)]),
        positions: Int32Array.from([...s.positions.subarray(from, from + n), ...s.positions.subarray(5 + from, 5 + from + n)]),
      });
      const a = rows(all, 0, 3);
      await split.forward(a.ids, a.positions, step(2, 3, 0).shape);
      expect(split.bytes).toBe(2 * 4 * 2 * 2 * 3 * 16);
      const b = rows(all, 3, 1);
      await split.forward(b.ids, b.positions, step(2, 1, 3).shape);
      const c = rows(all, 4, 1);
      const last = await split.forward(c.ids, c.positions, step(2, 1, 4).shape);
      // Row 1's last hidden state (position 4) against the prefill's.
      const fromFull = full.subarray((1 * 5 + 4) * 16, (1 * 5 + 5) * 16);
      const fromSteps = last.subarray(16, 32);
      for (let i = 0; i < 16; i++) expect(fromSteps[i]).toBeCloseTo(fromFull[i]!, 5);
      expect(split.bytes).toBe(2 * 4 * 2 * 2 * 5 * 16);
    } finally {
      await engine.close();
    }
  });

  it('refuses a step of another batch size, a step that skips tokens, and any step after close', async () => {
    const engine = await Engine.dummy(tiny, { backend: 'reference' });
    try {
      const cache = new StagedKvCache(engine.backend, 2, kvValuesPerToken(engine.description), 2);
      const s = step(3, 1, 0);
      await expect(cache.forward(s.ids, s.positions, s.shape)).rejects.toThrow('opened for 2 rows, stepped with 3');
      const skip = step(2, 1, 4);
      await expect(cache.forward(skip.ids, skip.positions, skip.shape)).rejects.toThrow('holds 0 tokens but the step says 4 are cached');
      await cache.close();
      const ok = step(2, 1, 0);
      await expect(cache.forward(ok.ids, ok.positions, ok.shape)).rejects.toThrow(/closed; start a new batch/);
    } finally {
      await engine.close();
    }
  });
});
