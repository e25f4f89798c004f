import { describe, expect, it } from 'vitest';
import { PY_WORD_BOUNDARY, escapeRegExp, escapeRegExpIgnoreCase, pyReSub } from './python-re.js';
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

describe('Python re helpers', () => {
  it('word boundaries are Unicode-aware like Python re', () => {
    const re = new RegExp(`${PY_WORD_BOUNDARY}(caf)${PY_WORD_BOUNDARY}`, 'gu');
    expect('café caf caf_ caf1 (caf)'.replace(re, 'X')).toBe('café X caf_ caf1 (X)');
    const naive = new RegExp(`${PY_WORD_BOUNDARY}na${PY_WORD_BOUNDARY}`, 'u');
    expect(naive.test('naïve')).toBe(false);
  });
  it('escapes regex syntax for literal matching', () => {
    expect(new RegExp(escapeRegExp('a.m. (x)+[y]|z?'), 'u').test('at a.m. (x)+[y]|z?')).toBe(true);
    expect(new RegExp(escapeRegExp('a.m.'), 'u').test('axmx')).toBe(false);
  });
  it('case-insensitive literals match like re.IGNORECASE, dotless and dotted i included', () => {
    const his = new RegExp(`^${escapeRegExpIgnoreCase('his')}$`, 'iu');
    // Python: re.fullmatch('his', w, re.I) is true for all of these, false for "hjs".
    expect(['his', 'HIS', 'hıs', 'HİS', 'hİs'].map((w) => his.test(w))).toEqual([true, true, true, true, true]);
    expect(his.test('hjs')).toBe(false);
    expect(new RegExp(`^${escapeRegExpIgnoreCase('ſtraße')}$`, 'iu').test('STRAẞE')).toBe(true);
  });
});
