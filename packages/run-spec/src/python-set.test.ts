import { describe, expect, it } from 'vitest';
import { PythonStrSet, pyStrHash } from './python-set.js';

// Expected values printed by CPython 3.11 with PYTHONHASHSEED=0.
describe('pyStrHash', () => {
  it.each([
    ['', 0n],
    ['a', 4644417185603328019n],
    ['together/opt-66b', 463323045850153939n],
    ['abcdefgh', 4574395652268504554n],
    ['\u00e9', 6047309291227476195n],
    ['\u03a1\u03b1\u03c0\u03c4\u03ac\u03c1\u03c7\u03b7\u03c2', -115862628297566554n],
    ['\u{1f600}x', -8926728262118538918n],
  ])('hash(%j) = %s', (s, expected) => expect(BigInt.asIntN(64, pyStrHash(s))).toBe(expected));
});

describe('PythonStrSet', () => {
  it('iterates like a CPython set, across resizes', () => {
    const keys = Array.from({ length: 40 }, (_, i) => `x${i}`);
    expect(new PythonStrSet(keys).values()).toEqual(
      ('x0 x23 x39 x19 x11 x15 x4 x31 x3 x34 x7 x20 x26 x30 x35 x28 x33 x12 x25 x22 x21 x32 x37 x18 x13 x29 x38 x27 x9 x2 ' +
        'x5 x10 x36 x16 x14 x17 x8 x24 x6 x1').split(' '),
    );
    expect(new PythonStrSet(['exact_match', 'quasi_exact_match', 'bleu_1', 'bleu_4']).values()).toEqual(['quasi_exact_match', 'bleu_4', 'bleu_1', 'exact_match']);
  });

  it('intersection iterates the smaller set', () => {
    const a = new PythonStrSet(['together/opt-175b', 'together/opt-66b', 'together/bloom']);
    expect(a.intersection(new PythonStrSet(['together/opt-175b', 'together/opt-66b'])).values()).toEqual(['together/opt-66b', 'together/opt-175b']);
    expect(a.intersection(new PythonStrSet(['nope'])).values()).toEqual([]);
  });
});
