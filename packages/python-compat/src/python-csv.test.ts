import { describe, expect, it } from 'vitest';
import { parsePythonCsv } from './python-csv.js';
import { pythonLines } from './read-python-text.js';

// [text, list(csv.reader(io.StringIO(text)))] from Python 3.11; the parser also matched Python on 3000 random strings
// over the alphabet a b , " \n space é when it was written.
const PYTHON_CASES: [string, string[][]][] = [
  ['a,b,c\n', [['a', 'b', 'c']]],
  ['\n', [[]]],
  ['a,\n', [['a', '']]],
  ['"a"b,c\n', [['ab', 'c']]],
  ['a"b,"c""d"\n', [['a"b', 'c"d']]],
  ['"open\nstill open', [['open\nstill open']]],
  ['" x ",y\n\nz', [[' x ', 'y'], [], ['z']]],
  ['é,"ü\n"\n', [['é', 'ü\n']]],
  ['a,b', [['a', 'b']]],
  ['"a"\n"b"', [['a'], ['b']]],
];

describe('parsePythonCsv', () => {
  it.each(PYTHON_CASES)('%j parses as Python does', (text, rows) => {
    expect(parsePythonCsv(pythonLines(text))).toEqual(rows);
  });

  it('supports other delimiters (tab-separated files)', () => {
    expect(parsePythonCsv(pythonLines('a\tb,c\n'), '\t')).toEqual([['a', 'b,c']]);
  });

  it('refuses NUL bytes and oversized fields like Python', () => {
    expect(() => parsePythonCsv(['a\0b\n'])).toThrow(/NUL/);
    expect(() => parsePythonCsv([`${'x'.repeat(131073)}\n`])).toThrow(/field limit/);
  });
});

describe('pythonLines', () => {
  it('keeps line ends and the unterminated last line', () => {
    expect(pythonLines('a\nb\n')).toEqual(['a\n', 'b\n']);
    expect(pythonLines('a\n\nb')).toEqual(['a\n', '\n', 'b']);
    expect(pythonLines('')).toEqual([]);
  });
});
