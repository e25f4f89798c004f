import { bisectRight } from './bisect-right.js';
import { HelmError } from './helm-error.js';
import { MT19937 } from './mt19937.js';

const MAX_SEED = 0xffffffff;
const TWO_POW_32 = 4294967296;
// numpy's tolerance for probabilities that should sum to one: sqrt(float64 eps).
const P_SUM_TOLERANCE = Math.sqrt(2 ** -52);

/**
 * numpy's legacy `np.random.RandomState` (what `np.random.seed` + `np.random.*` use), draw for draw. Methods keep
 * numpy's names; a `size` gives a flat array of that many values, no `size` a single value. Integer results must fit
 * a JavaScript number exactly (|x| < 2**53).
 */
export class NumpyRandomState {
  private readonly mt = new MT19937();
  private gauss: number | undefined;

  /** `RandomState(seed)`; without a seed it is seeded from the OS entropy source, as numpy does. */
  constructor(seed?: number | readonly number[]) {
    this.seed(seed);
  }

  /** An int seed in [0, 2**32) uses `init_genrand`; an array of such ints uses `init_by_array`. */
  seed(seed?: number | readonly number[]): void {
    if (seed === undefined) {
      this.mt.seedFromEntropy();
    } else if (typeof seed === 'number') {
      checkSeedWord(seed);
      this.mt.initGenrand(seed);
    } else {
      if (seed.length === 0) throw new HelmError('ValueError', 'Seed must be non-empty');
      seed.forEach(checkSeedWord);
      this.mt.initByArray(seed);
    }
    this.gauss = undefined;
  }

  /**
   * Integers in [low, high) (or [0, low) without `high`), numpy's legacy masked rejection: for ranges below 2**32 a
   * 32-bit draw masked to the smallest covering bit mask, larger ranges a 64-bit draw (high word first).
   */
  randint(low: number, high?: number): number;
  randint(low: number, high: number | undefined, size: number): number[];
  randint(low: number, high?: number, size?: number): number | number[] {
    let lo = low;
    let hi = high;
    if (hi === undefined) {
      hi = lo;
      lo = 0;
      if (hi <= 0) throw new HelmError('ValueError', 'high <= 0');
    }
    if (!Number.isSafeInteger(lo) || !Number.isSafeInteger(hi)) {
      throw new HelmError('ValueError', `randint bounds must be integers with |x| < 2**53, got low=${lo}, high=${hi}.`);
    }
    if (lo >= hi) throw new HelmError('ValueError', 'low >= high');
    const range = hi - 1 - lo;
    if (!Number.isSafeInteger(range)) {
      throw new HelmError('ValueError', `randint range high - low = ${hi - lo} is too large; keep it below 2**53.`);
    }
    return this.fill(size, () => lo + this.boundedMasked(range));
  }

  /** Floats in [0, 1) with 53 random bits. */
  random_sample(): number;
  random_sample(size: number): number[];
  random_sample(size?: number): number | number[] {
    return this.fill(size, () => this.mt.nextDouble());
  }

  /** Same as {@link random_sample} (numpy's `rand(n)`). */
  rand(): number;
  rand(size: number): number[];
  rand(size?: number): number | number[] {
    return this.fill(size, () => this.mt.nextDouble());
  }

  /**
   * Draws from `a` (an array, or `range(a)` for a number). With replacement and no `p`: `randint(0, n)`; with `p`: the
   * normalised cumulative sum searched with uniform draws; without replacement and no `p`: `permutation(n)[:size]`;
   * without replacement with `p`: numpy's repeated weighted draws, zeroing the weights already chosen.
   */
  choice<T = number>(a: number | readonly T[], size?: undefined, replace?: boolean, p?: readonly number[]): T;
  choice<T = number>(a: number | readonly T[], size: number, replace?: boolean, p?: readonly number[]): T[];
  choice<T = number>(a: number | readonly T[], size?: number, replace = true, p?: readonly number[]): T | T[] {
    const count = size ?? 1;
    let popSize: number;
    if (typeof a === 'number') {
      if (!Number.isInteger(a)) throw new HelmError('ValueError', 'a must be 1-dimensional or an integer');
      popSize = a;
      if (popSize <= 0 && count !== 0) throw new HelmError('ValueError', 'a must be greater than 0 unless no samples are taken');
    } else {
      popSize = a.length;
      if (popSize === 0 && count !== 0) throw new HelmError('ValueError', "'a' cannot be empty unless no samples are taken");
    }
    if (!Number.isInteger(count) || count < 0) throw new HelmError('ValueError', 'negative dimensions are not allowed');
    if (p !== undefined) checkProbabilities(p, popSize);

    let idx: number[];
    if (replace) {
      if (p !== undefined) {
        const cdf = normalisedCdf(p);
        idx = this.random_sample(count).map((u) => bisectRight(cdf, u));
      } else {
        idx = this.randint(0, popSize, count);
      }
    } else {
      if (count > popSize) throw new HelmError('ValueError', "Cannot take a larger sample than population when 'replace=False'");
      idx = p !== undefined ? this.weightedWithoutReplacement(p, count) : this.permutation(popSize).slice(0, count);
    }
    const values = typeof a === 'number' ? (idx as T[]) : idx.map((i) => a[i]!);
    return size === undefined ? values[0]! : values; // one sample when size is None
  }

  /** A shuffled `arange(n)`, or a shuffled copy of an array. */
  permutation(n: number): number[];
  permutation<T>(x: readonly T[]): T[];
  permutation<T>(x: number | readonly T[]): (number | T)[] {
    if (typeof x === 'number') {
      if (!Number.isInteger(x)) throw new HelmError('TypeError', `permutation needs an integer or an array, got ${x}.`);
      const arr = Array.from({ length: Math.max(x, 0) }, (_, i) => i);
      this.shuffle(arr);
      return arr;
    }
    const copy = x.slice();
    this.shuffle(copy);
    return copy;
  }

  /** Shuffles in place: for i from the end, swap with `random_interval(i)` (inclusive). */
  shuffle<T>(x: T[]): void {
    for (let i = x.length - 1; i > 0; i--) {
      const j = this.boundedMasked(i);
      const tmp = x[i]!;
      x[i] = x[j]!;
      x[j] = tmp;
    }
  }

  /** Floats `low + (high - low) * random_sample()`. */
  uniform(low?: number, high?: number): number;
  uniform(low: number | undefined, high: number | undefined, size: number): number[];
  uniform(low = 0, high = 1, size?: number): number | number[] {
    const range = high - low;
    if (!Number.isFinite(range)) throw new HelmError('Exception', 'OverflowError: Range exceeds valid bounds');
    return this.fill(size, () => low + range * this.mt.nextDouble());
  }

  /** Gaussian draws, numpy's legacy polar Box–Muller (each pair's second value is kept for the next call). */
  normal(loc?: number, scale?: number): number;
  normal(loc: number | undefined, scale: number | undefined, size: number): number[];
  normal(loc = 0, scale = 1, size?: number): number | number[] {
    if (scale < 0) throw new HelmError('ValueError', 'scale < 0');
    return this.fill(size, () => loc + scale * this.legacyGauss());
  }

  standard_normal(): number;
  standard_normal(size: number): number[];
  standard_normal(size?: number): number | number[] {
    return this.fill(size, () => this.legacyGauss());
  }

  /** Same as {@link standard_normal} (numpy's `randn(n)`). */
  randn(): number;
  randn(size: number): number[];
  randn(size?: number): number | number[] {
    return this.fill(size, () => this.legacyGauss());
  }

  private fill<T>(size: number | undefined, draw: () => T): T | T[] {
    if (size === undefined) return draw();
    if (!Number.isInteger(size) || size < 0) throw new HelmError('ValueError', `size must be a non-negative integer, got ${size}.`);
    const out = new Array<T>(size);
    for (let i = 0; i < size; i++) out[i] = draw();
    return out;
  }

  /** numpy's `random_interval(max)` / masked bounded draw: a value in [0, max], no draw when max is 0. */
  private boundedMasked(max: number): number {
    if (max === 0) return 0;
    if (max <= MAX_SEED) {
      if (max === MAX_SEED) return this.mt.nextUint32();
      const mask = maskFor(max);
      let v: number;
      do v = (this.mt.nextUint32() & mask) >>> 0;
      while (v > max);
      return v;
    }
    // Ranges of 2**32 and more: a 64-bit draw (high word first); max < 2**53, so the low word is kept whole.
    const highMask = maskFor(Math.floor(max / TWO_POW_32));
    let v: number;
    do {
      const high = (this.mt.nextUint32() & highMask) >>> 0;
      v = high * TWO_POW_32 + this.mt.nextUint32();
    } while (v > max);
    return v;
  }

  private legacyGauss(): number {
    if (this.gauss !== undefined) {
      const cached = this.gauss;
      this.gauss = undefined;
      return cached;
    }
    let x1: number;
    let x2: number;
    let r2: number;
    do {
      x1 = 2.0 * this.mt.nextDouble() - 1.0;
      x2 = 2.0 * this.mt.nextDouble() - 1.0;
      r2 = x1 * x1 + x2 * x2;
    } while (r2 >= 1.0 || r2 === 0.0);
    const f = Math.sqrt((-2.0 * Math.log(r2)) / r2);
    this.gauss = f * x1;
    return f * x2;
  }

  private weightedWithoutReplacement(p: readonly number[], size: number): number[] {
    if (p.filter((x) => x > 0).length < size) throw new HelmError('ValueError', 'Fewer non-zero entries in p than size');
    const weights = p.slice();
    const found: number[] = [];
    while (found.length < size) {
      const x = this.random_sample(size - found.length);
      for (const i of found) weights[i] = 0;
      const cdf = normalisedCdf(weights);
      const seen = new Set<number>();
      // numpy keeps the first occurrence of each new index, in draw order.
      for (const u of x) {
        const index = bisectRight(cdf, u);
        if (!seen.has(index)) {
          seen.add(index);
          found.push(index);
        }
      }
    }
    return found;
  }
}

function checkSeedWord(s: number): void {
  if (!Number.isInteger(s) || s < 0 || s > MAX_SEED) throw new HelmError('ValueError', 'Seed must be between 0 and 2**32 - 1');
}

/** The smallest 2**b - 1 that is >= x (x < 2**32). */
function maskFor(x: number): number {
  let mask = x;
  mask |= mask >>> 1;
  mask |= mask >>> 2;
  mask |= mask >>> 4;
  mask |= mask >>> 8;
  mask |= mask >>> 16;
  return mask >>> 0;
}

function checkProbabilities(p: readonly number[], popSize: number): void {
  if (p.length !== popSize) throw new HelmError('ValueError', "'a' and 'p' must have same size");
  const sum = kahanSum(p);
  if (Number.isNaN(sum)) throw new HelmError('ValueError', 'probabilities contain NaN');
  if (p.some((x) => x < 0)) throw new HelmError('ValueError', 'probabilities are not non-negative');
  if (Math.abs(sum - 1) > P_SUM_TOLERANCE) throw new HelmError('ValueError', 'probabilities do not sum to 1');
}

/** numpy's `kahan_sum` (used only for the sums-to-one check). */
function kahanSum(values: readonly number[]): number {
  if (values.length === 0) return 0;
  let sum = values[0]!;
  let c = 0;
  for (let i = 1; i < values.length; i++) {
    const y = values[i]! - c;
    const t = sum + y;
    c = t - sum - y;
    sum = t;
  }
  return sum;
}

/** `cdf = p.cumsum(); cdf /= cdf[-1]` (numpy's cumsum adds left to right). */
function normalisedCdf(p: readonly number[]): number[] {
  const cdf = new Array<number>(p.length);
  let sum = 0;
  for (let i = 0; i < p.length; i++) {
    sum += p[i]!;
    cdf[i] = sum;
  }
  const total = cdf[cdf.length - 1]!; // unused when p is empty
  return cdf.map((x) => x / total);
}
