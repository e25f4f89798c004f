import { describe, expect, it } from 'vitest';
import { PyFloat } from './py-float.js';
import { pyEquals, pyRepr, pyStrRepr, pyTruthy } from './python-values.js';

describe('repr, truthiness and == of Python values', () => {
  it('repr(str) picks the quote and escapes what str.isprintable() rejects, as Python 3.11', () => {
    // Python: repr("a'b\x85\u2028\U000e0001 \xa0\x7f\ufeffé") == "\"a'b\\x85\\u2028\\U000e0001 \\xa0\\x7f\\ufeffé\""
    expect(pyStrRepr("a'b\x85\u2028\u{e0001} \xa0\x7f\ufeffé")).toBe(`"a'b\\x85\\u2028\\U000e0001 \\xa0\\x7f\\ufeffé"`);
    expect(pyStrRepr('it\'s "x"\\\n')).toBe(`'it\\'s "x"\\\\\\n'`);
    expect(pyRepr(['a', 1, new PyFloat(2)])).toBe("['a', 1, 2.0]");
  });

  it('truthiness: "False" and NaN are true; empty containers, 0 and 0n are false', () => {
    expect(['False', NaN, [0], { a: 1 }, 1n, new PyFloat(0.5)].map(pyTruthy)).toEqual([true, true, true, true, true, true]);
    expect(['', 0, 0n, [], {}, new Map(), null, undefined, false, new PyFloat(0)].map(pyTruthy)).toEqual(Array(10).fill(false));
  });

  it('== compares ints, floats and bools numerically', () => {
    expect([pyEquals(1, new PyFloat(1)), pyEquals(true, 1), pyEquals('1', 1), pyEquals('a', 'a')]).toEqual([true, true, false, true]);
  });
});
