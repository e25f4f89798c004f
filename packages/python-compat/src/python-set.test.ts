import { describe, expect, it } from 'vitest';
import { PythonSet, pyStrHash, pythonIntHash, pythonTupleHash } from './python-set.js';

// Iteration orders printed by CPython 3.11 for the same operations.
const INTS = [-1, -2, -3, 7, 15, 23, 31, 8, 16, 1000, -1000, 63, 64, 127, 1099511627776, -4503599627370496];
const INTS_ORDER = [64, 1099511627776, -4503599627370496, 7, 8, 1000, 15, 16, 63, -2, 23, -1000, 127, -3, -1, 31];
const TUPLES_ORDER = [[3, -2], [3, -1], [3, 1], [-3, -3], [-3, 0], [-3, 3], [0, 2], [1, -3], [2, 2], [1, 3], [-2, -2], [-2, -1], [-1, -2], [-2, 1], [3, -3], [3, 0], [3, 3], [-3, 2], [0, -2], [2, -2], [2, -1], [1, 2], [2, 1], [-2, -3], [-1, -3], [-2, 0], [-2, 3], [-1, 3], [3, 2], [-1, 2], [-3, -2], [-3, -1], [0, -3], [-3, 1], [2, -3], [0, 3], [2, 0], [1, -2], [2, 3], [-2, 2]];
const ONE_TUPLES_ORDER = [11, 8, 14, 17, 20, -20, -17, -14, -8, -11, 7, 10, 16, 13, 19, -15, -18, -12, -9, -6, 9, 6, 12, 18, 15, -19, -16, -10, -13, -7];
const ITERATE_REMOVE = [79, 32, 94, 45, 101, 88, 107, 117, 83, 67, 3, 113, 59, 99, 31, 111, 6, 20, 14, 47, 60, 105, 48, 69, 13, 73, 98, 1, 27, 52];
const ITERATE_ORDER = [0, 2, 4, 5, 7, 8, 9, 10, 11, 12, 15, 16, 17, 18, 19, 21, 22, 23, 24, 25, 26, 28, 29, 30, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 49, 50, 51, 53, 54, 55, 56, 57, 58, 61, 62, 63, 64, 65, 66, 68, 70, 71, 72, 74, 75, 76, 77, 78, 80, 81, 82, 84, 85, 86, 87, 89, 90, 91, 92, 93, 95, 96, 97, 100, 102, 103, 104, 106, 108, 109, 110, 112, 114, 115, 116, 118, 119];
const COPY_ITEMS = [286, 186, 938, 888, 784, 398, 163, 780, 816, 73, 142, 632, 455, 129, 135, 1, 995, 892, 5, 214, 792, 220, 983, 169, 893, 170, 296, 321, 984, 203, 552, 897, 694, 640, 209, 963, 991, 707, 201, 989];
const COPY_REMOVE = [286, 186, 938, 5000];
const COPY_ORDER = [640, 129, 1, 897, 5, 135, 780, 398, 142, 784, 792, 163, 296, 169, 170, 552, 816, 694, 321, 963, 707, 455, 73, 201, 203, 209, 214, 983, 984, 220, 989, 991, 995, 888, 632, 892, 893];

const range = (a: number, b: number) => Array.from({ length: b - a }, (_, i) => a + i);
const product2 = (xs: number[]) => xs.flatMap((x) => xs.map((y) => [x, y]));
const signed = (h: bigint) => BigInt.asIntN(64, h);

describe('PythonSet', () => {
  it('hashes ints and tuples as CPython 3.11 (64-bit)', () => {
    expect(signed(pythonIntHash(-1))).toBe(-2n);
    expect(signed(pythonIntHash(2 ** 61))).toBe(1n);
    expect(signed(pythonIntHash(-(2 ** 52)))).toBe(-4503599627370496n);
    expect(signed(pythonTupleHash([1, 2]))).toBe(-3550055125485641917n);
    expect(signed(pythonTupleHash([-1]))).toBe(8078679518589016365n);
    expect(signed(pythonTupleHash([]))).toBe(5740354900026072187n);
    expect(signed(pythonTupleHash([0, 0]))).toBe(-8458139203682520985n);
  });

  it('iterates a set of ints in CPython slot order (collisions, negatives, big values)', () => {
    expect([...PythonSet.from(INTS)]).toEqual(INTS_ORDER);
  });

  it('set(product) - set(product) of tuples iterates as in CPython', () => {
    const diff = PythonSet.from(product2(range(-3, 4))).difference(PythonSet.from(product2(range(-1, 2))));
    expect([...diff]).toEqual(TUPLES_ORDER);
    const oneTuples = PythonSet.from(range(-20, 21).map((v) => [v])).difference(PythonSet.from(range(-5, 6).map((v) => [v])));
    expect([...oneTuples].map((t) => t[0])).toEqual(ONE_TUPLES_ORDER);
  });

  it('difference by iteration (large other) and by copy-and-discard (small other) both keep CPython order', () => {
    expect([...PythonSet.from(range(0, 120)).difference(PythonSet.from(ITERATE_REMOVE))]).toEqual(ITERATE_ORDER);
    expect([...PythonSet.from(COPY_ITEMS).difference(PythonSet.from(COPY_REMOVE))]).toEqual(COPY_ORDER);
  });

  it('ignores duplicates and answers membership', () => {
    const s = PythonSet.from<number>([3, 3, 11, 3]);
    expect(s.size).toBe(2);
    expect(s.has(11)).toBe(true);
    expect(s.has(4)).toBe(false);
    s.discard(11);
    expect([...s]).toEqual([3]);
  });
});


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

describe('PythonSet of str', () => {
  it('iterates like a CPython set, across resizes', () => {
    const keys = Array.from({ length: 40 }, (_, i) => `x${i}`);
    expect([...PythonSet.from(keys)]).toEqual(
      ('x0 x23 x39 x19 x11 x15 x4 x31 x3 x34 x7 x20 x26 x30 x35 x28 x33 x12 x25 x22 x21 x32 x37 x18 x13 x29 x38 x27 x9 x2 ' +
        'x5 x10 x36 x16 x14 x17 x8 x24 x6 x1').split(' '),
    );
    expect([...PythonSet.from(['exact_match', 'quasi_exact_match', 'bleu_1', 'bleu_4'])]).toEqual(['quasi_exact_match', 'bleu_4', 'bleu_1', 'exact_match']);
  });

  it('intersection iterates the smaller set', () => {
    const a = PythonSet.from<string>(['together/opt-175b', 'together/opt-66b', 'together/bloom']);
    expect([...a.intersection(PythonSet.from(['together/opt-175b', 'together/opt-66b']))]).toEqual(['together/opt-66b', 'together/opt-175b']);
    expect([...a.intersection(PythonSet.from(['nope']))]).toEqual([]);
  });
});
