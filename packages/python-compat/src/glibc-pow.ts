import { fma } from './exact-fma.js';
import { glibcExpInline } from './glibc-exp.js';
import { GLIBC_POW_LOG_TABLE } from './glibc-pow-table.js';

/**
 * Python's `x ** y` for floats, which is glibc 2.36's `pow` on x86-64 (FMA variant): log(x) in double-double from a
 * 128-entry table and a degree-8 polynomial, then exp of y·log(x) with its error term. It is not always the
 * correctly rounded value — `m ** 2` differs from `m * m` about once in 2000 — and HELM's Stat variance is
 * `sum_squared / count - mean ** 2`, so reproducing it decides bytes in stats.json.
 */

const N = 128;
const OFF_HI = 0x3fe69555; // OFF = 0x3fe6955500000000: z ranges over [OFF, 2·OFF)
const LN2_HI = 0.6931471805598903; // 0x1.62e42fefa3800p-1
const LN2_LO = 5.497923018708371e-14; // 0x1.ef35793c76730p-45
// glibc's polynomial, pre-scaled as glibc stores it (0x1.555555555556p-2 * -2, …).
const A = [
  -0.5,
  -0.6666666666666679,
  0.5000000000000007,
  0.7999999995323976,
  -0.6666666663487739,
  -1.142909628459501,
  1.0000415263675542,
];

const view = new DataView(new ArrayBuffer(8));
function words(x: number): [number, number] {
  view.setFloat64(0, x);
  return [view.getUint32(0), view.getUint32(4)];
}
function fromWords(hi: number, lo: number): number {
  view.setUint32(0, hi >>> 0);
  view.setUint32(4, lo >>> 0);
  return view.getFloat64(0);
}

/** log(x) as hi + lo for a positive normal x given by its two words. */
function logInline(ixHi: number, ixLo: number): [number, number] {
  const tmpHi = (ixHi - OFF_HI) | 0;
  const i = (tmpHi >>> 13) & (N - 1);
  const k = tmpHi >> 20; // arithmetic shift of the 64-bit difference, exponent part
  const z = fromWords(ixHi - (tmpHi & 0xfff00000), ixLo);
  const kd = k;
  const [invc, logc, logctail] = GLIBC_POW_LOG_TABLE[i]!; // i < N, the table's length
  const r = fma(z, invc, -1.0);
  const t1 = fma(kd, LN2_HI, logc);
  const t2 = t1 + r;
  const lo1 = fma(kd, LN2_LO, logctail);
  const lo2 = t1 - t2 + r;
  const ar = A[0]! * r;
  const ar2 = r * ar;
  const ar3 = r * ar2;
  const hi = t2 + ar2;
  const lo3 = fma(ar, r, -ar2);
  const lo4 = t2 - hi + ar2;
  const p = ar3 * fma(ar2, fma(ar2, fma(r, A[6]!, A[5]!), fma(r, A[4]!, A[3]!)), fma(r, A[2]!, A[1]!));
  const lo = lo1 + lo2 + lo3 + lo4 + p;
  const y = hi + lo;
  return [y, hi - y + lo];
}

/** 0 for a non-integer, 1 for an odd integer, 2 for an even integer. */
function checkInt(y: number): 0 | 1 | 2 {
  if (!Number.isInteger(y)) return 0;
  return Math.abs(y) < 2 ** 53 && Math.abs(y % 2) === 1 ? 1 : 2;
}

/** Python's float `x ** y` (glibc `pow`) for finite doubles; zero, infinite, NaN and subnormal cases follow C99 `pow`. */
export function glibcPow(x: number, y: number): number {
  if (y === 0 || x === 1) return 1;
  if (!Number.isFinite(x) || !Number.isFinite(y) || x === 0) return x ** y;
  let negate = false;
  if (x < 0) {
    const yint = checkInt(y);
    if (yint === 0) return NaN; // Python itself turns this into a complex number
    negate = yint === 1;
  }
  const ax = Math.abs(x);
  const ay = Math.abs(y);
  if (ay < 2 ** -65) return ax > 1 ? 1.0 + y : 1.0 - y;
  if (ay >= 2 ** 63) return x ** y;
  let [ixHi, ixLo] = words(ax);
  if (ax < 2 ** -1022) {
    // Normalise a subnormal base so its exponent becomes negative.
    [ixHi, ixLo] = words(ax * 2 ** 52);
    ixHi -= 52 << 20;
  }
  const [hi, lo] = logInline(ixHi, ixLo);
  const ehi = y * hi;
  const elo = y * lo + fma(y, hi, -ehi);
  if (Math.abs(ehi) >= 1024) {
    if (ehi < 0) return negate ? -0 : 0;
    return negate ? -Infinity : Infinity;
  }
  return glibcExpInline(ehi, elo, negate);
}
