import { describe, expect, it } from 'vitest';
import { exactMean } from './exact-mean.js';

// Expected values are CPython 3.11's statistics.mean on the same lists.
describe('exactMean (statistics.mean)', () => {
  it('rounds the exact mean once, where summing first is one ulp off', () => {
    expect((0.1 + 0.2 + 0.3) / 3).toBe(0.20000000000000004);
    expect(exactMean([0.1, 0.2, 0.3])).toBe(0.2);
  });
  it('breaks exact ties to even', () => {
    expect(exactMean([2 ** 53, 1])).toBe(4503599627370496);
  });
  it('matches Python on win-rate-like lists', () => {
    expect(exactMean([1 / 3, 2 / 3, 0])).toBe(0.3333333333333333);
    expect(exactMean([0, 1, 0.5, 1 / 3])).toBe(0.4583333333333333);
    expect(exactMean([0])).toBe(0);
    expect(exactMean([1])).toBe(1);
  });
});
