import { describe, expect, it } from 'vitest';
import { ropeInvFreq } from './rope-inv-freq.js';

// Expected values are worked out by hand from the formulas of transformers 4.47.1's modeling_rope_utils.py.
describe('ropeInvFreq', () => {
  it('default: 1 / theta^(2i/d)', () => {
    expect(Array.from(ropeInvFreq(8, 10000))).toEqual([1, 0.10000000149011612, 0.009999999776482582, 0.0010000000474974513]);
  });

  it('linear divides every frequency by the factor', () => {
    const got = ropeInvFreq(8, 10000, { kind: 'linear', factor: 4 });
    [0.25, 0.025, 0.0025, 0.00025].forEach((want, i) => {
      expect(got[i]).toBeCloseTo(want, 9);
    });
  });

  it('dynamic grows the base only past max_position_embeddings', () => {
    const scaling = { kind: 'dynamic' as const, factor: 2, originalMaxPositions: 100 };
    // seq 50 < 100: base stays 10000 → [1, 1/100]
    expect(Array.from(ropeInvFreq(4, 10000, scaling, 50))).toEqual([1, 0.009999999776482582]);
    // seq 200: base = 10000 · (2·200/100 − 1)^(4/2) = 90000 → [1, 1/300]
    const got = ropeInvFreq(4, 10000, scaling, 200);
    expect(got[0]).toBe(1);
    expect(got[1]).toBeCloseTo(1 / 300, 9);
  });

  it('llama3 keeps short wavelengths, divides long ones, smooths the band between (llama-b of the conformance set)', () => {
    const scaling = { kind: 'llama3' as const, factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 256 };
    const got = ropeInvFreq(8, 500000, scaling);
    // unscaled: 1 (λ 6.3 < 64: kept), 500000^-0.25 = 0.0376 (λ 167: smoothed), 500000^-0.5, 500000^-0.75 (λ > 256: ÷ 8)
    const f1 = 500000 ** -0.25;
    const smooth = (256 / ((2 * Math.PI) / f1) - 1) / (4 - 1);
    const want = [1, ((1 - smooth) * f1) / 8 + smooth * f1, 500000 ** -0.5 / 8, 500000 ** -0.75 / 8];
    want.forEach((w, i) => {
      expect(Math.abs(got[i]! - w) / w).toBeLessThan(1e-6);
    });
    // transformers' own float32 buffer (golden.json derived.rope_inv_freq)
    [1.0, 0.0105382307, 0.000176776681, 6.64786967e-6].forEach((w, i) => {
      expect(Math.abs(got[i]! - w) / w).toBeLessThan(1e-7);
    });
  });
});
