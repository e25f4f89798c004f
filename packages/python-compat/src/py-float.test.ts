import { describe, expect, it } from 'vitest';
import { PyFloat, formatPyFloat, formatPyNumber, pyFloat } from './py-float.js';

describe('formatPyFloat (Python repr)', () => {
  it.each([
    [1, '1.0'],
    [0, '0.0'],
    [-0, '-0.0'],
    [0.1, '0.1'],
    [1e-5, '1e-05'],
    [1.5e-7, '1.5e-07'],
    [0.0001, '0.0001'],
    [0.00012345, '0.00012345'],
    [1e16, '1e+16'],
    [1.2345e16, '1.2345e+16'],
    [9999999999999998, '9999999999999998.0'],
    [123456.789, '123456.789'],
    [5e-324, '5e-324'],
    [1.7976931348623157e308, '1.7976931348623157e+308'],
    [-2.5, '-2.5'],
    [1 / 3, '0.3333333333333333'],
    [NaN, 'NaN'],
    [Infinity, 'Infinity'],
    [-Infinity, '-Infinity'],
    [100, '100.0'],
    [1e21, '1e+21'],
  ])('%s → %s', (x, expected) => {
    expect(formatPyFloat(x)).toBe(expected);
  });

  it('keeps ints and boxed floats apart', () => {
    expect(formatPyNumber(1)).toBe('1');
    expect(formatPyNumber(pyFloat(1))).toBe('1.0');
    expect(formatPyNumber(pyFloat(0.5))).toBe('0.5');
    expect(pyFloat(0.5)).toBe(0.5);
    expect(pyFloat(2)).toBeInstanceOf(PyFloat);
  });
});
