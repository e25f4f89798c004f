import { pyIsSpaceChar } from '@flexhelm/python-compat';
import { describe, expect, it } from 'vitest';
import { WhitespaceStubTokenizer } from './whitespace-stub-tokenizer.js';

// Expected values: Python 3.11 `re.findall(r'\s*\S+|\s+', text)`.
const CASES: [string, string[]][] = [
  ['', []],
  ['   ', ['   ']],
  ['Hello  world\n', ['Hello', '  world', '\n']],
  ['\u00a0a\u0085b\u001cc\ufeffd\u3000e', ['\u00a0a', '\u0085b', '\u001cc\ufeffd', '\u3000e']],
  [' \t lead and trail \n\n', [' \t lead', ' and', ' trail', ' \n\n']],
  ['caf\u00e9 \ud83d\ude00\u200d\ud83d\udc69 x', ['caf\u00e9', ' \ud83d\ude00\u200d\ud83d\udc69', ' x']],
];

describe('WhitespaceStubTokenizer', () => {
  const tok = new WhitespaceStubTokenizer();

  it.each(CASES)('splits %j like Python re.findall', (text, expected) => {
    expect(tok.encode(text)).toEqual(expected);
    expect(tok.tokenize(text)).toEqual(expected);
    expect(tok.decode(tok.encode(text))).toBe(text);
  });

  it('truncation keeps the first max_length tokens with Python slice semantics', () => {
    const text = 'a b c d e';
    expect(tok.encode(text, { truncation: true, maxLength: 2 })).toEqual(['a', ' b']);
    expect(tok.encode(text, { truncation: true, maxLength: 0 })).toEqual([]);
    expect(tok.encode(text, { truncation: true, maxLength: -2 })).toEqual(['a', ' b', ' c']);
    expect(tok.encode(text, { truncation: false, maxLength: 2 })).toHaveLength(5);
  });

  it('knows Python whitespace', () => {
    expect(['\u001c', '\u0085', '\u3000', ' '].every(pyIsSpaceChar)).toBe(true);
    expect(['\ufeff', '\u200b', 'a'].some(pyIsSpaceChar)).toBe(false);
  });
});
