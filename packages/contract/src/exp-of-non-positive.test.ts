import { describe, expect, it } from 'vitest';
import { expOfNonPositive } from './exp-of-non-positive.js';
import { SeededUniform } from './seeded-uniform.js';

describe('expOfNonPositive', () => {
  it("gives Math.exp's bits on millions of arguments over (−745, 0], float32 differences included", () => {
    const rng = new SeededUniform(7);
    const f32 = new Float32Array(2);
    let differing = 0;
    for (let i = 0; i < 1_000_000; i++) {
      const u = rng.next();
      // Mostly the range logits minus their max span, then the whole domain.
      const x = i % 4 === 0 ? -u * 745 : i % 4 === 1 ? -u * 2 : -u * 40;
      f32[0] = x;
      f32[1] = -u * 30;
      for (const v of [x, f32[0]! - f32[1]!, f32[1]!]) if (v <= 0 && !Object.is(expOfNonPositive(v), Math.exp(v))) differing++;
    }
    expect(differing).toBe(0);
  });

  it('matches Math.exp at the branch edges, zeros, the extremes and NaN', () => {
    const around = (v: number) => [v, v * (1 + 2 ** -52), v * (1 - 2 ** -53)];
    const edges = [
      0, -0, -(2 ** -1074), -1e-300, -(2 ** -28), -(2 ** -29), ...around(-Math.LN2 / 2), ...around(-1.5 * Math.LN2), -Math.LN2, -1, -0.5,
      ...around(-700), -708.39, -745, -745.2, -1000, -Infinity, Number.NaN, 1e-9, 1, 710, Infinity,
    ];
    for (const v of edges) expect(Object.is(expOfNonPositive(v), Math.exp(v)), `x = ${v}`).toBe(true);
  });
});
