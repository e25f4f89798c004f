import { describe, expect, it } from 'vitest';
import { HelmError } from './helm-error.js';
import { PyFloat } from './py-float.js';
import { PythonRandom, pythonFloatHash } from './python-random.js';

// Expected values were produced once with CPython 3.11.7 (`random.Random`), see each test's Python line.
const words = (r: PythonRandom, n = 5): number[] => Array.from({ length: n }, () => r.getrandbits(32));

describe('PythonRandom seeding', () => {
  it('seeds ints (including 0, negatives, and multi-word values) like random.Random(n)', () => {
    // [random.Random(s).getrandbits(32) for _ in range(5)]
    const expected: Record<string, number[]> = {"0": [3626764237, 1654615998, 3255389356, 3823568514, 1806341205], "1": [577090037, 2444712010, 3639700191, 3445702192, 3280387012], "5489": [3382763572, 956215839, 417760592, 166104981, 4181578304], "12345": [1789368711, 3146859322, 43676229, 3522623596, 3544234957], "-12345": [1789368711, 3146859322, 43676229, 3522623596, 3544234957], "4294967296": [485306839, 1508871100, 1794561286, 4014597330, 71624475], "18446744073709551615": [93740670, 1068495656, 1452108352, 2657516307, 910393425], "1267650600228229401496703205383": [1786885132, 353954449, 1403444918, 2297707818, 2390882014], "100000000000000000000": [78147056, 1939873431, 2326779150, 2783989157, 2524951905]};
    const seeds: (number | bigint)[] = [0, 1, 5489, 12345, -12345, 2 ** 32, 2n ** 64n - 1n, 2n ** 100n + 7n, 1e20];
    for (const s of seeds) expect(words(new PythonRandom(s)), String(s)).toEqual(expected[typeof s === 'bigint' ? s.toString() : BigInt(s).toString()]);
  });

  it('seeds str and bytes with sha512 (seed version 2)', () => {
    const expected: Record<string, number[]> = {"": [4124137760, 1951988028, 2557274880, 888572032, 1666497616], "hello": [1519453933, 3618488475, 2848416207, 3256656039, 2351947165], "h\u00e9llo \u2713": [2402069620, 1529516004, 728551504, 1833239741, 2498983421], "helm": [3090000228, 1874961073, 1403016252, 4078446438, 3088882568]};
    for (const [s, w] of Object.entries(expected)) expect(words(new PythonRandom(s)), s).toEqual(w);
    // random.Random(b'\x00\x01abc')
    expect(words(new PythonRandom(new Uint8Array([0, 1, 97, 98, 99])))).toEqual([2193877025, 530165386, 923284006, 79828351, 3469156247]);
  });

  it('seeds floats through hash(float), wrapping negative hashes to size_t', () => {
    const expected: Record<string, number[]> = {"1.5": [2369807148, 3534653101, 1099911448, 624696387, 2505428956], "-1.5": [3049922142, 1895599190, 3396863, 1112112312, 4176936155], "5.0": [2675342405, 1097127993, 3185950873, 1539898300, 3415330359], "1e+20": [3883780073, 2018261294, 1062878874, 2081844491, 1653513740], "1e-300": [1876217259, 3707663635, 2339693476, 2191225450, 2474453767], "-0.1": [3908900109, 2392015486, 1836870659, 1353227224, 2601856041], "inf": [826196214, 1180060831, 1231978967, 423847419, 507473068]};
    const seeds: [string, number | PyFloat][] = [
      ['1.5', 1.5],
      ['-1.5', -1.5],
      ['5.0', new PyFloat(5)],
      ['1e+20', new PyFloat(1e20)],
      ['1e-300', 1e-300],
      ['-0.1', -0.1],
      ['inf', Infinity],
    ];
    for (const [key, s] of seeds) expect(words(new PythonRandom(s)), key).toEqual(expected[key]);
    expect(pythonFloatHash(-1.5)).toBe(-1152921504606846977n);
    expect(pythonFloatHash(0.5)).toBe(1152921504606846976n);
  });

  it('re-seeding restarts the sequence and an unseeded generator differs between instances', () => {
    const r = new PythonRandom(99);
    const first = words(r);
    r.seed(99);
    expect(words(r)).toEqual(first);
    expect(words(new PythonRandom())).not.toEqual(words(new PythonRandom()));
  });
});

describe('PythonRandom draws', () => {
  it('getrandbits(k) for k = 0..100 (multi-word values least significant word first)', () => {
    // r = random.Random(42); [r.getrandbits(k) for k in range(101)]
    const expected: string[] = ["0", "1", "0", "0", "11", "8", "15", "28", "35", "377", "104", "1385", "3033", "7308", "8935", "2848", "38698", "55302", "8331", "15622", "98246", "458517", "975850", "4239227", "10100198", "890399", "37664518", "26687537", "192205051", "348904049", "753041955", "1170252923", "1801823908", "946785248", "6825844140", "29246281099", "51567519519", "24935803837", "118962602874", "151785220214", "236890980656", "1679148444259", "448122261369", "3341882896657", "6314017318807", "12102562833427", "18612686277123", "6115205051775", "129316009522128", "70272263011973", "1038415602523468", "177439609692435", "1320356922165489", "5662286581849394", "15950879833673594", "13029276619690689", "13855854739413439", "10023954183803376", "190596174753506713", "445643557048912526", "1135883078528750669", "1972228384002752305", "3995950625880289016", "3506045623077649104", "8363943803604256569", "15386621650891716399", "25275377621303276265", "49256038055104626862", "201745668149816753918", "351805281238746768811", "630346249284166217699", "373450845984825806292", "1279825058571107086194", "6049155766286443177702", "4142344581976414708164", "31845062231852211953967", "4238619064751988159180", "4848206529486473323769", "121237821134132571765582", "127523562745791511177886", "685682870833912136026592", "760849202500994212667630", "2414137487635706222129519", "8844971848450355975692752", "2763533640749215844004018", "9540935311808546751852510", "41701347197740665638721817", "90460301066762018835597500", "180594692507937680934164167", "135752972070249902324522135", "171246419406371833489964516", "225080797717714870683586728", "4263975094556579311652630666", "6213924611137874096639047477", "13478319087242894365517190273", "2516591758595337183005158632", "47211144827619073893595094085", "41920757348388971979672244121", "305882481374107795952615593913", "57101465837943970912592227216", "993281122716154621175385068055"];
    const r = new PythonRandom(42);
    const got = expected.map((_, k) => (k <= 53 ? String(r.getrandbits(k)) : r.getrandbitsBigInt(k).toString()));
    expect(got).toEqual(expected);
    expect(() => r.getrandbits(54)).toThrow(/getrandbitsBigInt/);
    expect(() => r.getrandbits(-1)).toThrow(/non-negative/);
  });

  it('random() and uniform()', () => {
    const r = new PythonRandom(7);
    expect(Array.from({ length: 5 }, () => r.random())).toEqual([0.32383276483316237, 0.15084917392450192, 0.6509344730398537, 0.07243628666754276, 0.5358820043066892]);
    const u = new PythonRandom(7);
    expect(Array.from({ length: 3 }, () => u.uniform(-3, 5))).toEqual([-0.40933788133470106, -1.7932066086039846, 2.20747578431883]);
  });

  it('randrange / randint, including steps, negative ranges, randrange(1) consuming a draw and 53-bit ranges', () => {
    // r = random.Random(3); [r.randrange(10), r.randrange(3, 10), r.randrange(0, 100, 7), r.randrange(10, 0, -3),
    //   r.randrange(-5, 5), r.randint(1, 6), r.randrange(1), r.randrange(2**40), r.randrange(2**53 - 1),
    //   r.randint(-10, -10), r.getrandbits(32)]
    const r = new PythonRandom(3);
    const got = [
      r.randrange(10),
      r.randrange(3, 10),
      r.randrange(0, 100, 7),
      r.randrange(10, 0, -3),
      r.randrange(-5, 5),
      r.randint(1, 6),
      r.randrange(1),
      r.randrange(2 ** 40),
      r.randrange(2 ** 53 - 1),
      r.randint(-10, -10),
      r.getrandbits(32),
    ];
    expect(got).toEqual([3, 7, 56, 7, 0, 5, 0, 1034389053353, 4961027643213380, -10, 823534631]);
  });

  it('randrange rejects bad arguments with CPython messages', () => {
    const r = new PythonRandom(0);
    const fails = (f: () => unknown, cls: string, msg: string | RegExp) => {
      try {
        f();
      } catch (e) {
        expect(e).toBeInstanceOf(HelmError);
        expect((e as HelmError).pythonClass).toBe(cls);
        expect((e as HelmError).message).toMatch(msg);
        return;
      }
      throw new Error('expected an error');
    };
    fails(() => r.randrange(0), 'ValueError', 'empty range for randrange()');
    fails(() => r.randrange(5, 5), 'ValueError', 'empty range for randrange() (5, 5, 0)');
    fails(() => r.randrange(0, 10, 0), 'ValueError', 'zero step for randrange()');
    fails(() => r.randrange(0, 10, -1), 'ValueError', 'empty range for randrange()');
    fails(() => r.randrange(1.5), 'ValueError', 'non-integer arg 1 for randrange()');
    fails(() => r.randrange(1, 2.5), 'ValueError', 'non-integer stop for randrange()');
    fails(() => r.randrange(1, 5, 1.5), 'ValueError', 'non-integer step for randrange()');
    fails(() => r.randrange(10, undefined, 2), 'TypeError', 'Missing a non-None stop argument');
    fails(() => r.choice([]), 'Exception', /IndexError: Cannot choose from an empty sequence/);
    fails(() => r.sample([1, 2], 3), 'ValueError', /Sample larger than population or is negative/);
  });

  it('shuffle, and a one-element shuffle draws nothing', () => {
    // r = random.Random(1); x = list(range(20)); r.shuffle(x)
    const r = new PythonRandom(1);
    const x = Array.from({ length: 20 }, (_, i) => i);
    r.shuffle(x);
    expect(x).toEqual([11, 5, 17, 19, 9, 0, 16, 1, 15, 6, 10, 13, 14, 12, 7, 3, 8, 2, 18, 4]);
    const s = new PythonRandom(1);
    s.shuffle([5]);
    expect(s.getrandbits(32)).toBe(577090037);
  });

  it('sample: pool path and set path (setsize = 21 + 4**ceil(log(3k, 4)))', () => {
    const range = (n: number) => Array.from({ length: n }, (_, i) => i);
    // random.Random(2).sample(range(n), k)
    expect(new PythonRandom(2).sample(range(10), 5)).toEqual([0, 1, 8, 2, 7]);
    expect(new PythonRandom(2).sample(range(80), 6)).toEqual([7, 11, 10, 46, 21, 39]);
    expect(new PythonRandom(2).sample(range(100), 6)).toEqual([7, 11, 10, 46, 21, 94]);
    expect(new PythonRandom(2).sample(range(1000), 10)).toEqual([978, 883, 970, 869, 57, 93, 86, 369, 855, 173]);
    expect(new PythonRandom(2).sample(range(7), 7)).toEqual([6, 0, 5, 4, 1, 3, 2]);
    // random.Random(2).sample(['a', 'b', 'c'], 5, counts=[3, 1, 4])
    expect(new PythonRandom(2).sample(['a', 'b', 'c'], 5, { counts: [3, 1, 4] })).toEqual(["a", "c", "c", "a", "a"]);
    expect(new PythonRandom(2).sample(range(5), 0)).toEqual([]);
  });

  it('choice and choices (plain, weights, cum_weights)', () => {
    const r = new PythonRandom(9);
    expect(Array.from({ length: 8 }, () => r.choice('abcdefg'))).toEqual(["d", "e", "c", "c", "b", "b", "g", "f"]);
    const range10 = Array.from({ length: 10 }, (_, i) => i);
    expect(new PythonRandom(9).choices(range10, { k: 6 })).toEqual([4, 3, 1, 8, 0, 5]);
    expect(new PythonRandom(9).choices(['a', 'b', 'c'], { weights: [1, 2.5, 0.5], k: 6 })).toEqual(["b", "b", "a", "b", "a", "b"]);
    expect(new PythonRandom(9).choices(['a', 'b', 'c'], { cumWeights: [1, 3, 10], k: 6 })).toEqual(["c", "c", "b", "c", "a", "c"]);
    expect(() => new PythonRandom(9).choices(['a'], { weights: [0] })).toThrow('Total of weights must be greater than zero');
    expect(() => new PythonRandom(9).choices(['a'], { weights: [1], cumWeights: [1] })).toThrow('Cannot specify both');
  });

  it('gauss caches its second value until re-seeding; normalvariate', () => {
    const r = new PythonRandom(11);
    const got = [r.gauss(), r.gauss(), r.gauss(2, 3)];
    const expected: number[] = [-1.224072675713965, 0.3775881983015979, 4.984998883012819];
    expect(got).toEqual(expected);
    r.seed(11);
    expect(r.gauss()).toBe(-1.224072675713965);
    const n = new PythonRandom(11);
    const nv: number[] = [-0.18557263512529387, 1.6809629761934963];
    expect(n.normalvariate()).toBe(nv[0]);
    expect(n.normalvariate(1, 0.5)).toBe(nv[1]);
  });
});
