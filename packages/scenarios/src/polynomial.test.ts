import { describe, expect, it } from 'vitest';
import { Polynomial, generateTerms } from './polynomial.js';

describe('Polynomial', () => {
  it('lists terms highest degree first, combinations in lexicographic order', () => {
    expect(generateTerms(2, 2)).toEqual([[0, 0], [0, 1], [1, 1], [0], [1], []]);
    expect(generateTerms(1, 1)).toEqual([[0], []]);
  });

  it('formats like HELM: unit coefficients elided, zeros dropped, "+ -" folded', () => {
    expect(new Polynomial(2, 2, [2, 1, 1, 0, 0, 4]).toString()).toBe('2x^2 + xy + y^2 + 4');
    expect(new Polynomial(2, 1, [-1, 0, -3]).toString()).toBe('-x^2 - 3');
    expect(new Polynomial(1, 2, [1, -1, 1]).toString()).toBe('x - y + 1');
    expect(new Polynomial(1, 1, [0, -1]).toString()).toBe('-1');
  });

  it('evaluates at integer points', () => {
    expect(new Polynomial(2, 2, [2, 1, 1, 0, 0, 4]).evaluate([16, 18])).toBe(1128);
    expect(new Polynomial(1, 1, [4, 4]).evaluate([-82])).toBe(-324);
  });

  it('refuses a coefficient list of the wrong length', () => {
    expect(() => new Polynomial(2, 1, [1, 2])).toThrow(/has 3 coefficients, got 2/);
  });
});
