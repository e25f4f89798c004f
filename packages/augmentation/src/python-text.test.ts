import { describe, expect, it } from 'vitest';
import { PY_WORD_BOUNDARY, escapeRegExp, escapeRegExpIgnoreCase, matchCase, pyCapitalize, pyIsLowerChar, pyIsUpperChar, pyStrip, pyTitleChar } from './python-text.js';

describe('matchCase (HELM match_case)', () => {
  it('follows the source word case, character by character', () => {
    expect(matchCase('he', 'SHE')).toBe('she');
    expect(matchCase('HE', 'she')).toBe('SHE');
    expect(matchCase('He', 'sHE')).toBe('She');
    expect(matchCase('hE', 'She')).toBe('She');
  });
  it('counts a character that is neither case against both "all" tests', () => {
    expect(matchCase("I'm", 'i am')).toBe('I am');
    expect(matchCase("it's", 'IT IS')).toBe('IT IS');
    expect(matchCase('', 'Word')).toBe('word');
  });
});

describe('Python str semantics', () => {
  it('capitalize title-cases the first character and lowers the rest', () => {
    expect(pyCapitalize('hELLO wORLD')).toBe('Hello world');
    expect(pyCapitalize('ßtraße')).toBe('Sstraße');
    expect(pyCapitalize('ǆungla')).toBe('ǅungla');
    expect(pyCapitalize('ﬁne')).toBe('Fine');
    expect(pyCapitalize('ΟΔΟΣ')).toBe('Οδος'); // final sigma stays final
    expect(pyCapitalize('')).toBe('');
  });
  it('title case of special code points matches CPython 3.11', () => {
    expect(pyTitleChar('ǉ')).toBe('ǈ');
    expect(pyTitleChar('Ǳ')).toBe('ǲ');
    expect(pyTitleChar('ა')).toBe('ა');
    expect(pyTitleChar('ᾳ')).toBe('ᾼ');
    expect(pyTitleChar('ᾀ')).toBe('ᾈ');
    expect(pyTitleChar('ᾲ')).toBe('Ὰͅ');
    expect(pyTitleChar('և')).toBe('Եւ');
    expect(pyTitleChar('a')).toBe('A');
  });
  it('islower/isupper use the Unicode Lowercase/Uppercase properties', () => {
    expect(['a', 'ß', 'ª', 'ı'].map(pyIsLowerChar)).toEqual([true, true, true, true]);
    expect(['A', 'Ⅷ', 'ǅ', "'", '1'].map(pyIsUpperChar)).toEqual([true, true, false, false, false]);
    expect(pyIsLowerChar('ǅ')).toBe(false);
  });
  it('strip removes Python whitespace only', () => {
    expect(pyStrip('\x1c\x85\u3000 name \t\n')).toBe('name');
    expect(pyStrip('\ufeffname')).toBe('\ufeffname');
  });
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
