import { describe, expect, it } from 'vitest';
import { pyCapitalize, pyLstrip, pyRstrip, pySplit, pyStrip } from './python-string.js';

// Expected values from Python 3.11. pyCapitalize was also compared with Python on every code point: it agrees except
// for ~55 characters that gained case mappings in Unicode versions newer than Python 3.11's (Node's ICU is newer).
describe('Python str methods', () => {
  it('capitalize title-cases the first character and lower-cases the rest', () => {
    const cases: [string, string][] = [
      ['hello WORLD', 'Hello world'],
      ['ßtraße', 'Sstraße'],
      ['ǆungla', 'ǅungla'],
      ['ﬁne', 'Fine'],
      ['ᾷ x', '\u0391\u0342\u0345 x'],
      ['  lead', '  lead'],
      ['İSTANBUL', 'İstanbul'],
      ['ΣΑΣ ΟΔΟΣ', 'Σας οδος'],
      ['', ''],
    ];
    for (const [input, expected] of cases) expect(pyCapitalize(input), input).toBe(expected);
  });

  it('strip and split use Python whitespace (U+001C–U+001F, U+0085 yes; U+FEFF no)', () => {
    const s = '\x1c\ufeff a b\x85\u3000';
    expect(pyStrip(s)).toBe('\ufeff a b');
    expect(pySplit(s)).toEqual(['\ufeff', 'a', 'b']);
    expect(pySplit(' \t ')).toEqual([]);
    expect(pyStrip('xxhixy', 'xy')).toBe('hi');
    expect(pyLstrip('..a..', '.')).toBe('a..');
    expect(pyRstrip('..a..', '.')).toBe('..a');
    expect(pyStrip('a]^-\\', ']^-\\')).toBe('a');
  });
});
