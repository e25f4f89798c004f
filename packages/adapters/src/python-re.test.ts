import { describe, expect, it } from 'vitest';
import { pyReSub } from './python-re.js';
import { pySlice } from './python-slice.js';

// Expected values: Python 3.11 `re.sub(pattern, repl, text)`.
const CASES: [string, string, string, string][] = [
  ['x*', '-', 'abxd', '-a-b--d-'],
  ['', '-', 'ab', '-a-b-'],
  ['\n', '<br>\n', 'a\nb\n', 'a<br>\nb<br>\n'],
  ['(a)|b', '[\\1]', 'ab', '[a][]'],
  ['a', '\\\\n\n$', 'a', '\\n\n$'],
  ['(?P<x>b)', '\\g<x>\\g<0>', 'abc', 'abbc'],
  ['.', '*', 'a\r\nb', '**\n*'],
  ['b$', 'X', 'ab\n', 'aX\n'],
  ['\\bcafé\\b', 'X', 'un café, cafés', 'un X, cafés'],
  ['\\s+', ' ', 'a\u0085\u00a0b\ufeffc', 'a b\ufeffc'],
  ['(?i)HELLO', 'bye', 'Hello hello', 'bye bye'],
  ['a{2}', 'X', 'aaa{', 'Xa{'],
  ['\\{', '(', 'a{b', 'a(b'],
  ['\\d', '#', 'a1٣', 'a##'],
];

describe('pyReSub (Python re.sub)', () => {
  it.each(CASES)('re.sub(%j, %j, %j) == %j', (pattern, repl, text, expected) => {
    expect(pyReSub(pattern, repl, text)).toBe(expected);
  });

  it('rejects what Python rejects', () => {
    expect(() => pyReSub('\\q', '', 'x')).toThrow(/bad escape \\q/);
    expect(() => pyReSub('a', '\\q', 'a')).toThrow(/bad escape \\q/);
    expect(() => pyReSub('(a)', '\\2', 'a')).toThrow(/invalid group reference 2/);
  });
});

describe('pySlice', () => {
  it('follows Python slice rules', () => {
    const xs = [0, 1, 2, 3, 4];
    expect(pySlice(xs, -2)).toEqual([3, 4]);
    expect(pySlice(xs, 0, -2)).toEqual([0, 1, 2]);
    expect(pySlice(xs, -10, 2)).toEqual([0, 1]);
    expect(pySlice(xs, 3, 1)).toEqual([]);
    expect(pySlice(xs, 1, 99)).toEqual([1, 2, 3, 4]);
  });
});
