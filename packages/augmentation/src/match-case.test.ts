import { describe, expect, it } from 'vitest';
import { matchCase } from './match-case.js';

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
