/**
 * Fused multiply-add `a·b + c` with a single rounding (to nearest-even, or toward zero), computed exactly with
 * BigInt. JavaScript has no `Math.fma`; numpy's vectorised math (Intel SVML) relies on it, so reproducing
 * those results bit for bit needs it. Finite inputs only; subnormal results are not needed here.
 */

export type RoundingMode = 'rn' | 'rz';

const view = new DataView(new ArrayBuffer(8));

/** x = mantissa · 2^exponent with an integer mantissa (sign included). */
function decompose(x: number): [bigint, number] {
  view.setFloat64(0, x);
  const hi = view.getUint32(0);
  const lo = view.getUint32(4);
  const sign = hi >>> 31 ? -1n : 1n;
  const biased = (hi >>> 20) & 0x7ff;
  let mant = (BigInt(hi & 0xfffff) << 32n) | BigInt(lo);
  let exp: number;
  if (biased === 0) exp = -1074;
  else {
    mant |= 1n << 52n;
    exp = biased - 1075;
  }
  return [sign * mant, exp];
}

function ldexp(x: number, k: number): number {
  // Two steps keep each power of two representable.
  const half = Math.trunc(k / 2);
  return x * 2 ** half * 2 ** (k - half);
}

function bitLength(n: bigint): number {
  return n.toString(2).length;
}

/** Rounds mantissa·2^exponent to a double. */
function roundToDouble(mantissa: bigint, exponent: number, mode: RoundingMode): number {
  if (mantissa === 0n) return 0;
  const negative = mantissa < 0n;
  let m = negative ? -mantissa : mantissa;
  let e = exponent;
  const len = bitLength(m);
  if (len > 53) {
    const shift = BigInt(len - 53);
    const rem = m & ((1n << shift) - 1n);
    m >>= shift;
    e += len - 53;
    if (mode === 'rn') {
      const half = 1n << (shift - 1n);
      if (rem > half || (rem === half && (m & 1n) === 1n)) m += 1n;
    }
  }
  const value = ldexp(Number(m), e);
  return negative ? -value : value;
}

const SPLITTER = 134217729; // 2^27 + 1

/** The distance from |w| to the next larger double (w finite, non-zero). */
function ulpOf(w: number): number {
  view.setFloat64(0, w);
  const biased = (view.getUint32(0) >>> 20) & 0x7ff;
  return biased === 0 ? 2 ** -1074 : 2 ** (biased - 1075);
}

/**
 * Round-to-nearest fma from error-free transformations: a·b + c = w + d exactly up to a negligible error, and w is
 * the rounded result whenever |d| stays clearly below half an ulp of w. Returns undefined when that cannot be
 * decided cheaply (near ties, powers of two, extreme exponents), so the exact BigInt path decides.
 */
function fastFma(a: number, b: number, c: number): number | undefined {
  const p = a * b;
  const ap = Math.abs(p);
  if (!(ap < 1e290) || (ap !== 0 && ap < 1e-280) || Math.abs(c) > 1e290 || Math.abs(a) > 1e150 || Math.abs(b) > 1e150) return undefined;
  let t = SPLITTER * a;
  const ah = t - (t - a);
  const al = a - ah;
  t = SPLITTER * b;
  const bh = t - (t - b);
  const bl = b - bh;
  const e = ah * bh - p + ah * bl + al * bh + al * bl;
  const s = p + c;
  let bb = s - p;
  const st = p - (s - bb) + (c - bb);
  const u = st + e;
  bb = u - st;
  const v = st - (u - bb) + (e - bb);
  const w = s + u;
  bb = w - s;
  const err = s - (w - bb) + (u - bb);
  if (w === 0 || !Number.isFinite(w)) return undefined;
  const d = err + v;
  const half = ulpOf(w) / 2;
  // Powers of two have a smaller ulp below them; leave those to the exact path.
  if (ulpOf(w) * 2 ** 52 === Math.abs(w)) return undefined;
  if (Math.abs(d) < half * (1 - 2 ** -30) && half > 2 ** -1070) return w;
  return undefined;
}

/** `fma(a, b, c)` rounded once with `mode`. */
export function fma(a: number, b: number, c: number, mode: RoundingMode = 'rn'): number {
  if (!Number.isFinite(a) || !Number.isFinite(b) || !Number.isFinite(c)) return a * b + c;
  if (mode === 'rn') {
    const fast = fastFma(a, b, c);
    if (fast !== undefined) return fast;
  }
  return exactFma(a, b, c, mode);
}

/** `fma` computed only with BigInt arithmetic (the reference the fast path is checked against). */
export function exactFma(a: number, b: number, c: number, mode: RoundingMode = 'rn'): number {
  if (!Number.isFinite(a) || !Number.isFinite(b) || !Number.isFinite(c)) return a * b + c;
  const [ma, ea] = decompose(a);
  const [mb, eb] = decompose(b);
  const [mc, ec] = decompose(c);
  let mp = ma * mb;
  let ep = ea + eb;
  let mcc = mc;
  let ecc = ec;
  // Align both terms to the smaller exponent; the sum is then exact.
  if (ep > ecc) {
    mp <<= BigInt(ep - ecc);
    ep = ecc;
  } else if (ecc > ep) {
    mcc <<= BigInt(ecc - ep);
    ecc = ep;
  }
  const sum = mp + mcc;
  if (sum === 0n) return a * b + c; // the sign of an exact zero follows IEEE rules
  return roundToDouble(sum, ep, mode);
}
