import { randomBytes } from 'node:crypto';

const N = 624;
const M = 397;
const MATRIX_A = 0x9908b0df;
const UPPER_MASK = 0x80000000;
const LOWER_MASK = 0x7fffffff;

/** A snapshot of a generator's state, for {@link MT19937.getState} / {@link MT19937.setState}. */
export interface MT19937State {
  /** The 624 words of state. */
  readonly key: readonly number[];
  /** How many words of the current block were already used (624 = a new block is due). */
  readonly pos: number;
}

/**
 * The Mersenne Twister MT19937 (Matsumoto & Nishimura's reference algorithm), the generator behind both CPython's
 * `random` and numpy's legacy `RandomState`. They differ only in how they seed it: CPython always uses
 * {@link initByArray}, numpy uses {@link initGenrand} for an integer seed.
 */
export class MT19937 {
  private readonly mt = new Uint32Array(N);
  private pos = N;

  /** A generator seeded like the reference code does when nothing else is said (`init_genrand(5489)`). */
  constructor() {
    this.initGenrand(5489);
  }

  /** The reference `init_genrand(s)`: fills the state from one 32-bit word. */
  initGenrand(seed: number): void {
    const mt = this.mt;
    mt[0] = seed >>> 0;
    for (let i = 1; i < N; i++) {
      const prev = mt[i - 1]! ^ (mt[i - 1]! >>> 30);
      mt[i] = (Math.imul(1812433253, prev) + i) >>> 0;
    }
    this.pos = N;
  }

  /** The reference `init_by_array(key)`: fills the state from any number of 32-bit words. */
  initByArray(key: ArrayLike<number>): void {
    if (key.length === 0) throw new RangeError('MT19937.initByArray needs at least one key word; pass [0] to seed with zero.');
    this.initGenrand(19650218);
    const mt = this.mt;
    let i = 1;
    let j = 0;
    for (let k = Math.max(N, key.length); k > 0; k--) {
      const prev = mt[i - 1]! ^ (mt[i - 1]! >>> 30);
      // The sum stays far below 2^53, so `>>> 0` reduces it modulo 2^32 exactly.
      mt[i] = ((mt[i]! ^ Math.imul(prev, 1664525)) >>> 0) + (key[j]! >>> 0) + j;
      i++;
      j++;
      if (i >= N) {
        mt[0] = mt[N - 1]!;
        i = 1;
      }
      if (j >= key.length) j = 0;
    }
    for (let k = N - 1; k > 0; k--) {
      const prev = mt[i - 1]! ^ (mt[i - 1]! >>> 30);
      mt[i] = ((mt[i]! ^ Math.imul(prev, 1566083941)) >>> 0) - i;
      i++;
      if (i >= N) {
        mt[0] = mt[N - 1]!;
        i = 1;
      }
    }
    mt[0] = 0x80000000; // guarantees a non-zero state
    this.pos = N;
  }

  /** Seeds with 624 words from the OS entropy source, as CPython and numpy do when given no seed. */
  seedFromEntropy(): void {
    const bytes = randomBytes(N * 4);
    const key = new Uint32Array(N);
    for (let i = 0; i < N; i++) key[i] = bytes.readUInt32LE(i * 4);
    this.initByArray(key);
  }

  /** The next tempered 32-bit output (`genrand_uint32`), as an unsigned integer. */
  nextUint32(): number {
    if (this.pos >= N) this.twist();
    let y = this.mt[this.pos++]!; // pos < N after the twist
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }

  /** A double in [0, 1) with 53 random bits (`genrand_res53`), the same in CPython and numpy. */
  nextDouble(): number {
    const a = this.nextUint32() >>> 5;
    const b = this.nextUint32() >>> 6;
    return (a * 67108864 + b) / 9007199254740992;
  }

  getState(): MT19937State {
    return { key: Array.from(this.mt), pos: this.pos };
  }

  setState(state: MT19937State): void {
    if (state.key.length !== N) throw new RangeError(`MT19937 state needs ${N} words, got ${state.key.length}.`);
    if (!Number.isInteger(state.pos) || state.pos < 0 || state.pos > N) {
      throw new RangeError(`MT19937 state position must be an integer in [0, ${N}], got ${state.pos}.`);
    }
    this.mt.set(state.key);
    this.pos = state.pos;
  }

  private twist(): void {
    const mt = this.mt;
    let kk = 0;
    for (; kk < N - M; kk++) {
      const y = (mt[kk]! & UPPER_MASK) | (mt[kk + 1]! & LOWER_MASK);
      mt[kk] = mt[kk + M]! ^ (y >>> 1) ^ (y & 1 ? MATRIX_A : 0);
    }
    for (; kk < N - 1; kk++) {
      const y = (mt[kk]! & UPPER_MASK) | (mt[kk + 1]! & LOWER_MASK);
      mt[kk] = mt[kk + M - N]! ^ (y >>> 1) ^ (y & 1 ? MATRIX_A : 0);
    }
    const y = (mt[N - 1]! & UPPER_MASK) | (mt[0]! & LOWER_MASK);
    mt[N - 1] = mt[M - 1]! ^ (y >>> 1) ^ (y & 1 ? MATRIX_A : 0);
    this.pos = 0;
  }
}
