import { describe, expect, it } from 'vitest';
import { HelmError } from './helm-error.js';
import { MT19937 } from './mt19937.js';
import { NumpyRandomState } from './numpy-random.js';

// Expected values were produced once with numpy 2.4.6 (legacy `np.random.RandomState`), see each test's Python line.
const raw = (r: NumpyRandomState, n = 5): number[] => r.randint(0, 2 ** 32, n);

describe('MT19937', () => {
  it('init_genrand(5489) gives the reference first outputs', () => {
    const mt = new MT19937();
    expect([mt.nextUint32(), mt.nextUint32(), mt.nextUint32()]).toEqual([3499211612, 581869302, 3890346734]);
  });

  it('state snapshots round-trip', () => {
    const mt = new MT19937();
    mt.initByArray([1, 2, 3]);
    for (let i = 0; i < 700; i++) mt.nextUint32();
    const copy = new MT19937();
    copy.setState(mt.getState());
    expect(Array.from({ length: 10 }, () => copy.nextUint32())).toEqual(Array.from({ length: 10 }, () => mt.nextUint32()));
  });
});

describe('NumpyRandomState', () => {
  it('seed(int) uses init_genrand; seed(array) uses init_by_array', () => {
    // np.random.RandomState(s).randint(0, 2**32, 5)
    const expected: Record<string, number[]> = {"0": [2357136044, 2546248239, 3071714933, 3626093760, 2588848963], "5489": [3499211612, 581869302, 3890346734, 3586334585, 545404204], "12345": [3992670690, 3823185381, 1358822685, 561383553, 789925284], "4294967295": [419326371, 479346978, 3918654476, 2416749639, 3388880820]};
    for (const [seed, w] of Object.entries(expected)) expect(raw(new NumpyRandomState(Number(seed))), seed).toEqual(w);
    expect(raw(new NumpyRandomState([1, 2, 3]))).toEqual([2619334238, 1552691353, 3808334787, 2540200029, 2045850693]);
  });

  it('rejects seeds outside [0, 2**32)', () => {
    expect(() => new NumpyRandomState(-1)).toThrow('Seed must be between 0 and 2**32 - 1');
    expect(() => new NumpyRandomState(2 ** 32)).toThrow('Seed must be between 0 and 2**32 - 1');
    expect(() => new NumpyRandomState([])).toThrow('Seed must be non-empty');
  });

  it('permutation(n) and permutation(array); permutation(1) draws nothing', () => {
    expect(new NumpyRandomState(0).permutation(10)).toEqual([2, 8, 4, 9, 1, 6, 7, 3, 0, 5]);
    expect(new NumpyRandomState(0).permutation(['a', 'b', 'c', 'd', 'e'])).toEqual(["c", "a", "b", "d", "e"]);
    const r = new NumpyRandomState(0);
    expect([...r.permutation(1), r.randint(0, 2 ** 32)]).toEqual([0, 2357136044]);
  });

  it('randint with small ranges (32-bit masked rejection), including one-value ranges that draw nothing', () => {
    // r = RandomState(0); r.randint(0, 10, 10), r.randint(5), r.randint(-3, 3, 8), r.randint(7, 8), r.randint(0, 2)
    const r = new NumpyRandomState(0);
    const got = [...r.randint(0, 10, 10), r.randint(5), ...r.randint(-3, 3, 8), r.randint(7, 8), r.randint(0, 2)];
    expect(got).toEqual([5, 0, 3, 3, 7, 9, 3, 5, 2, 4, 0, -3, 1, -1, -2, -3, -2, 2, -2, 7, 1]);
  });

  it('randint with ranges of 2**32 and more (64-bit masked rejection, high word first)', () => {
    // r = RandomState(1); r.randint(0, 2**40, 4), r.randint(10**15, 10**15 + 3 * 2**33, 3), r.randint(0, 2**32 + 1),
    //   r.randint(-2**52, 2**52)
    const r = new NumpyRandomState(1);
    const got = [
      ...r.randint(0, 2 ** 40, 4),
      ...r.randint(1e15, 1e15 + 3 * 2 ** 33, 3),
      r.randint(0, 2 ** 32 + 1),
      r.randint(-(2 ** 52), 2 ** 52),
    ];
    expect(got).toEqual([163196666091, 605300724808, 1095766950793, 876169207429, 1000001703301249, 1000018845933127, 1000024351373820, 4018109721, -30018186521324]);
  });

  it('randint argument errors', () => {
    const r = new NumpyRandomState(0);
    expect(() => r.randint(5, 5)).toThrow('low >= high');
    expect(() => r.randint(0)).toThrow('high <= 0');
    expect(() => r.randint(0, 2 ** 60)).toThrow(/2\*\*53/);
  });

  it('choice with and without replacement, with p, and the scalar form', () => {
    // r = RandomState(2); r.choice(10, 5), r.choice(10, 5, replace=False), r.choice(5)
    const r = new NumpyRandomState(2);
    expect([...r.choice(10, 5), ...r.choice(10, 5, false), r.choice(5)]).toEqual([8, 8, 6, 2, 8, 9, 4, 6, 0, 8, 3]);
    // RandomState(2).choice(['a', 'b', 'c'], 6, p=[0.2, 0.5, 0.3])
    expect(new NumpyRandomState(2).choice(['a', 'b', 'c'], 6, true, [0.2, 0.5, 0.3])).toEqual(["b", "a", "b", "b", "b", "b"]);
    // RandomState(2).choice(5, 3, replace=False, p=[0.1, 0.2, 0.3, 0.2, 0.2])
    expect(new NumpyRandomState(2).choice(5, 3, false, [0.1, 0.2, 0.3, 0.2, 0.2])).toEqual([2, 0, 3]);
    expect(new NumpyRandomState(2).choice(4, 4, false, [0.7, 0.1, 0.1, 0.1])).toEqual([0, 2, 1, 3]);
  });

  it('choice argument errors use numpy messages', () => {
    const r = new NumpyRandomState(0);
    const cases: [() => unknown, string][] = [
      [() => r.choice([], 3), "'a' cannot be empty unless no samples are taken"],
      [() => r.choice(0, 1), 'a must be greater than 0 unless no samples are taken'],
      [() => r.choice(3, 5, false), "Cannot take a larger sample than population when 'replace=False'"],
      [() => r.choice(3, 1, true, [0.5, 0.5]), "'a' and 'p' must have same size"],
      [() => r.choice(3, 1, true, [0.5, 0.6, 0.1]), 'probabilities do not sum to 1'],
      [() => r.choice(3, 1, true, [-0.5, 1.4, 0.1]), 'probabilities are not non-negative'],
      [() => r.choice(3, 3, false, [0, 1, 0]), 'Fewer non-zero entries in p than size'],
    ];
    for (const [f, message] of cases) {
      expect(f).toThrow(HelmError);
      expect(f).toThrow(message);
    }
  });

  it('random_sample, uniform, normal / standard_normal (polar method with cached value)', () => {
    expect(new NumpyRandomState(4).random_sample(5)).toEqual([0.9670298390136767, 0.5472322491757223, 0.9726843599648843, 0.7148159936743647, 0.6977288245972708]);
    expect(new NumpyRandomState(4).uniform(-2, 3, 4)).toEqual([2.835149195068383, 0.7361612458786118, 2.8634217998244216, 1.5740799683718234]);
    const r = new NumpyRandomState(4);
    const got = [...r.normal(1, 2, 5), r.standard_normal()];
    const expected: number[] = [1.101123414285879, 1.9999026664756578, -0.9918178622137301, 2.3871970165826233, 0.16339695994617986, -1.5845772351121241];
    expect(got).toEqual(expected);
    expect(() => r.normal(0, -1)).toThrow('scale < 0');
  });

  it('shuffle in place', () => {
    const x = Array.from({ length: 12 }, (_, i) => i);
    new NumpyRandomState(6).shuffle(x);
    expect(x).toEqual([8, 11, 1, 6, 0, 7, 5, 2, 4, 3, 9, 10]);
  });
});
