import { createHash } from 'node:crypto';
import { bisectRight } from './bisect-right.js';
import { HelmError } from './helm-error.js';
import { PyFloat } from './py-float.js';
import { MT19937 } from './mt19937.js';

/** What CPython's `random.seed(a)` accepts: an int (number or bigint), a float (`PyFloat` or non-integral number), str or bytes. */
export type PythonSeed = number | bigint | PyFloat | string | Uint8Array;

const TWO_PI = 2 * Math.PI;
const NV_MAGICCONST = (4 * Math.exp(-0.5)) / Math.sqrt(2.0);
const TWO_POW_32 = 4294967296;

/**
 * CPython's `random.Random` (3.x, seed version 2), draw for draw: the same seed gives the same numbers, shuffles and
 * samples as Python. Methods keep Python's names and argument order; Python's exceptions become {@link HelmError}s
 * carrying the Python class.
 */
export class PythonRandom {
  private readonly mt = new MT19937();
  private gaussNext: number | undefined;

  /** `random.Random(seed)`; without a seed it is seeded from the OS entropy source, as Python does. */
  constructor(seed?: PythonSeed) {
    this.seed(seed);
  }

  /** `random.seed(a)`: ints use all bits of |a|; str/bytes use `int.from_bytes(a + sha512(a).digest(), 'big')`. */
  seed(a?: PythonSeed): void {
    if (a === undefined) {
      this.mt.seedFromEntropy();
    } else {
      this.mt.initByArray(seedKey(a));
    }
    this.gaussNext = undefined;
  }

  /** An int with `k` random bits, `0 <= r < 2**k`, for `k <= 53` (use {@link getrandbitsBigInt} beyond). */
  getrandbits(k: number): number {
    checkBitCount(k);
    if (k > 53) {
      throw new RangeError(`getrandbits(${k}) does not fit a JavaScript number exactly; call getrandbitsBigInt(${k}) instead.`);
    }
    if (k <= 32) return k === 0 ? 0 : this.mt.nextUint32() >>> (32 - k);
    const low = this.mt.nextUint32();
    const high = this.mt.nextUint32() >>> (64 - k);
    return high * TWO_POW_32 + low;
  }

  /** `getrandbits(k)` for any `k`: 32-bit words least significant first, the last one cut to the remaining bits. */
  getrandbitsBigInt(k: number): bigint {
    checkBitCount(k);
    let result = 0n;
    let shift = 0n;
    for (let remaining = k; remaining > 0; remaining -= 32) {
      let word = this.mt.nextUint32();
      if (remaining < 32) word >>>= 32 - remaining;
      result |= BigInt(word) << shift;
      shift += 32n;
    }
    return result;
  }

  /** A float in [0, 1) with 53 random bits. */
  random(): number {
    return this.mt.nextDouble();
  }

  /** `a + (b - a) * random()`. */
  uniform(a: number, b: number): number {
    return a + (b - a) * this.random();
  }

  /**
   * CPython's `_randbelow_with_getrandbits(n)`: draws `n.bit_length()` bits until the value is below `n`, so even
   * `n = 1` consumes a draw.
   */
  randbelow(n: number): number {
    if (!Number.isSafeInteger(n) || n <= 0) {
      throw new HelmError('ValueError', `randbelow(n) needs a positive safe integer n, got ${n}.`);
    }
    const k = bitLength(n);
    let r = this.getrandbits(k);
    while (r >= n) r = this.getrandbits(k);
    return r;
  }

  /** `randrange(stop)` or `randrange(start, stop[, step])`, with CPython 3.11's checks and messages. */
  randrange(start: number, stop?: number, step?: number): number {
    const istart = integerArgument(start, 'non-integer arg 1 for randrange()');
    if (stop === undefined) {
      if (step !== undefined) throw new HelmError('TypeError', 'Missing a non-None stop argument');
      if (istart > 0) return this.randbelow(istart);
      throw new HelmError('ValueError', 'empty range for randrange()');
    }
    const istop = integerArgument(stop, 'non-integer stop for randrange()');
    const width = istop - istart;
    const istep = step === undefined ? 1 : integerArgument(step, 'non-integer step for randrange()');
    if (istep === 1) {
      if (width > 0) return istart + this.randbelow(width);
      throw new HelmError('ValueError', `empty range for randrange() (${istart}, ${istop}, ${width})`);
    }
    let n: number;
    if (istep > 0) n = Math.floor((width + istep - 1) / istep);
    else if (istep < 0) n = Math.floor((width + istep + 1) / istep);
    else throw new HelmError('ValueError', 'zero step for randrange()');
    if (n <= 0) throw new HelmError('ValueError', 'empty range for randrange()');
    return istart + istep * this.randbelow(n);
  }

  /** An int in [a, b], both ends included. */
  randint(a: number, b: number): number {
    return this.randrange(a, b + 1);
  }

  /** One element of a non-empty sequence. */
  choice<T>(seq: ArrayLike<T>): T {
    if (seq.length === 0) {
      throw new HelmError('Exception', 'IndexError: Cannot choose from an empty sequence; pass at least one element to choice().');
    }
    return seq[this.randbelow(seq.length)]!;
  }

  /** Shuffles `x` in place (Fisher–Yates from the end, as CPython). */
  shuffle<T>(x: T[]): void {
    for (let i = x.length - 1; i > 0; i--) {
      const j = this.randbelow(i + 1);
      const tmp = x[i]!;
      x[i] = x[j]!;
      x[j] = tmp;
    }
  }

  /**
   * `k` distinct positions of `population`, in selection order. Like CPython it tracks either a pool (small
   * populations) or a set of chosen positions (large ones), which consume different draws. `counts` repeats each
   * element that many times.
   */
  sample<T>(population: ArrayLike<T>, k: number, options: { counts?: readonly number[] } = {}): T[] {
    if (options.counts !== undefined) return this.sampleWithCounts(population, k, options.counts);
    return this.sampleIndices(population.length, k).map((j) => population[j]!);
  }

  /** `sample(range(n), k)`: the positions `sample` picks from a population of size `n`. */
  sampleIndices(n: number, k: number): number[] {
    if (!Number.isInteger(k) || k < 0 || k > n) {
      throw new HelmError('ValueError', `Sample larger than population or is negative (k=${k}, population size ${n})`);
    }
    const result = new Array<number>(k);
    let setsize = 21;
    if (k > 5) setsize += 4 ** Math.ceil(Math.log(k * 3) / Math.log(4));
    if (n <= setsize) {
      const pool = Array.from({ length: n }, (_, i) => i);
      for (let i = 0; i < k; i++) {
        const j = this.randbelow(n - i);
        result[i] = pool[j]!;
        pool[j] = pool[n - i - 1]!;
      }
    } else {
      const selected = new Set<number>();
      for (let i = 0; i < k; i++) {
        let j = this.randbelow(n);
        while (selected.has(j)) j = this.randbelow(n);
        selected.add(j);
        result[i] = j;
      }
    }
    return result;
  }

  /** `k` elements drawn with replacement, optionally weighted by `weights` or `cumWeights` (CPython's bisect method). */
  choices<T>(population: readonly T[], options: { weights?: readonly number[]; cumWeights?: readonly number[]; k?: number } = {}): T[] {
    const { weights, k = 1 } = options;
    let cumWeights = options.cumWeights;
    const n = population.length;
    if (cumWeights === undefined) {
      if (weights === undefined) {
        const result = new Array<T>(Math.max(k, 0));
        for (let i = 0; i < k; i++) result[i] = population[Math.floor(this.random() * n)]!;
        return result;
      }
      cumWeights = accumulate(weights);
    } else if (weights !== undefined) {
      throw new HelmError('TypeError', 'Cannot specify both weights and cumulative weights');
    }
    if (cumWeights.length !== n) throw new HelmError('ValueError', 'The number of weights does not match the population');
    const total = cumWeights[n - 1] ?? 0; // n = 0 fails the check below, as in Python
    if (!(total > 0)) throw new HelmError('ValueError', 'Total of weights must be greater than zero');
    if (!Number.isFinite(total)) throw new HelmError('ValueError', 'Total of weights must be finite');
    const result = new Array<T>(Math.max(k, 0));
    for (let i = 0; i < k; i++) result[i] = population[bisectRight(cumWeights, this.random() * total, 0, n - 1)]!;
    return result;
  }

  /** Gaussian draw with CPython's `gauss` (Box–Muller, caching the second value until the next `seed`). */
  gauss(mu = 0, sigma = 1): number {
    let z = this.gaussNext;
    this.gaussNext = undefined;
    if (z === undefined) {
      const x2pi = this.random() * TWO_PI;
      const g2rad = Math.sqrt(-2.0 * Math.log(1.0 - this.random()));
      z = Math.cos(x2pi) * g2rad;
      this.gaussNext = Math.sin(x2pi) * g2rad;
    }
    return mu + z * sigma;
  }

  /** Gaussian draw with CPython's `normalvariate` (Kinderman–Monahan ratio of uniforms). */
  normalvariate(mu = 0, sigma = 1): number {
    for (;;) {
      const u1 = this.random();
      const u2 = 1.0 - this.random();
      const z = (NV_MAGICCONST * (u1 - 0.5)) / u2;
      if ((z * z) / 4.0 <= -Math.log(u2)) return mu + z * sigma;
    }
  }

  private sampleWithCounts<T>(population: ArrayLike<T>, k: number, counts: readonly number[]): T[] {
    if (counts.length !== population.length) throw new HelmError('ValueError', 'The number of counts does not match the population');
    if (!counts.every((c) => Number.isInteger(c))) throw new HelmError('TypeError', 'Counts must be integers');
    const cumCounts = accumulate(counts);
    const total = cumCounts.pop() ?? 0;
    if (total <= 0) throw new HelmError('ValueError', 'Total of counts must be greater than zero');
    const positions = this.sampleIndices(total, k);
    return positions.map((s) => population[bisectRight(cumCounts, s)]!);
  }
}

function checkBitCount(k: number): void {
  if (!Number.isInteger(k)) throw new HelmError('TypeError', `getrandbits needs an integer number of bits, got ${k}.`);
  if (k < 0) throw new HelmError('ValueError', 'number of bits must be non-negative');
}

function integerArgument(x: number, message: string): number {
  if (!Number.isInteger(x)) throw new HelmError('ValueError', message);
  return x;
}

function bitLength(n: number): number {
  if (n < TWO_POW_32) return 32 - Math.clz32(n);
  return 32 + bitLength(Math.floor(n / TWO_POW_32));
}

function accumulate(values: readonly number[]): number[] {
  const out = new Array<number>(values.length);
  let sum = 0;
  for (let i = 0; i < values.length; i++) {
    sum = i === 0 ? values[0]! : sum + values[i]!;
    out[i] = sum;
  }
  return out;
}


/** The `init_by_array` key CPython derives from a seed: the 32-bit words of the seed integer, least significant first. */
function seedKey(a: PythonSeed): Uint32Array {
  if (typeof a === 'string') return seedKey(new TextEncoder().encode(a));
  if (a instanceof Uint8Array) {
    const digest = createHash('sha512').update(a).digest();
    const all = Buffer.concat([Buffer.from(a), digest]);
    return wordsOf(BigInt(`0x${all.toString('hex')}`));
  }
  if (typeof a === 'bigint') return wordsOf(a < 0n ? -a : a);
  if (a instanceof PyFloat || !Number.isInteger(a)) {
    const value = a instanceof PyFloat ? a.value : a;
    // CPython seeds non-ints with hash(a) cast to size_t, so a negative hash wraps around 2**64.
    const hash = pythonFloatHash(value);
    return wordsOf(hash < 0n ? hash + (1n << 64n) : hash);
  }
  const big = BigInt(a);
  return wordsOf(big < 0n ? -big : big);
}

function wordsOf(n: bigint): Uint32Array {
  const words: number[] = [];
  let rest = n;
  do {
    words.push(Number(rest & 0xffffffffn));
    rest >>= 32n;
  } while (rest > 0n);
  return Uint32Array.from(words);
}

const HASH_MODULUS = (1n << 61n) - 1n;
const HASH_BITS = 61n;

/** CPython's `hash(float)` (`_Py_HashDouble`): the value reduced modulo the Mersenne prime 2**61 - 1. */
export function pythonFloatHash(v: number): bigint {
  if (Number.isNaN(v)) {
    throw new HelmError('TypeError', 'Python hashes NaN by object identity, so a NaN seed is not reproducible; seed with an int or str.');
  }
  if (v === Infinity) return 314159n;
  if (v === -Infinity) return -314159n;
  let [m, e] = frexp(v);
  let sign = 1n;
  if (m < 0) {
    sign = -1n;
    m = -m;
  }
  let x = 0n;
  while (m) {
    x = ((x << 28n) & HASH_MODULUS) | (x >> (HASH_BITS - 28n));
    m *= 268435456.0;
    e -= 28;
    const y = Math.floor(m);
    m -= y;
    x += BigInt(y);
    if (x >= HASH_MODULUS) x -= HASH_MODULUS;
  }
  const shift = BigInt(e >= 0 ? e % 61 : 61 - 1 - ((-1 - e) % 61));
  x = ((x << shift) & HASH_MODULUS) | (x >> (HASH_BITS - shift));
  x *= sign;
  return x === -1n ? -2n : x;
}

/** C's `frexp`: `v = m * 2**e` with `0.5 <= |m| < 1`, read off the IEEE-754 bits. */
function frexp(v: number): [number, number] {
  if (v === 0 || !Number.isFinite(v)) return [v, 0];
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, v);
  let biased = (view.getUint32(0) >>> 20) & 0x7ff;
  let offset = 0;
  if (biased === 0) {
    // Subnormal: scale into the normal range first.
    view.setFloat64(0, v * 2 ** 64);
    biased = (view.getUint32(0) >>> 20) & 0x7ff;
    offset = -64;
  }
  view.setUint32(0, (view.getUint32(0) & 0x800fffff) | (1022 << 20));
  return [view.getFloat64(0), biased - 1022 + offset];
}
