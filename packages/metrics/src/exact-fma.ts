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

/** `fma(a, b, c)` rounded once with `mode`. */
export function fma(a: number, b: number, c: number, mode: RoundingMode = 'rn'): number {
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
