import { describe, expect, it } from 'vitest';
import { SeededUniform } from './seeded-uniform.js';
import { argmax, logSumExp, processedLogits, sampleToken, topK } from './sampling.js';

const logits = Float32Array.from([2, 1, 0, 1, -1]); // probabilities ≈ .53 .20 .07 .20 .03

describe('sampling', () => {
  it('log-sum-exp, argmax and top-k are exact', () => {
    expect(logSumExp(logits)).toBeCloseTo(Math.log(Math.E ** 2 + 2 * Math.E + 1 + Math.E ** -1), 6);
    expect(argmax(Float32Array.from([1, 3, 3]))).toBe(1);
    expect(topK(logits, 3)).toEqual([
      { id: 0, value: 2 },
      { id: 1, value: 1 },
      { id: 3, value: 1 },
    ]);
  });

  it('applies temperature, then top-k (keeping ties), then top-p like Hugging Face warpers', () => {
    expect([...processedLogits(logits, { temperature: 0.5, topK: 0, topP: 1 })]).toEqual([4, 2, 0, 2, -2]);
    expect([...processedLogits(logits, { temperature: 1, topK: 2, topP: 1 })]).toEqual([2, 1, -Infinity, 1, -Infinity]);
    // nucleus 0.6: .53 is not enough, .53 + .20 is
    expect([...processedLogits(logits, { temperature: 1, topK: 0, topP: 0.6 })]).toEqual([2, 1, -Infinity, -Infinity, -Infinity]);
    expect([...processedLogits(logits, { temperature: 1, topK: 0, topP: 0.5 })]).toEqual([2, -Infinity, -Infinity, -Infinity, -Infinity]);
  });

  it('draws with the right frequencies and never outside the kept set', () => {
    const rng = new SeededUniform(42);
    const counts = [0, 0, 0, 0, 0];
    for (let i = 0; i < 20000; i++) counts[sampleToken(logits, { temperature: 1, topK: 0, topP: 1 }, rng)]!++;
    const p = [...logits].map((l) => Math.exp(l - logSumExp(logits)));
    counts.forEach((c, i) => { expect(Math.abs(c / 20000 - p[i]!)).toBeLessThan(0.015); });
    for (let i = 0; i < 500; i++) expect([0, 1]).toContain(sampleToken(logits, { temperature: 1, topK: 0, topP: 0.6 }, rng));
    expect(sampleToken(logits, { temperature: 0, topK: 0, topP: 1 }, rng)).toBe(0);
  });
});
