/**
 * Python's `statistics.mean` of floats: the exact rational mean, rounded once to the nearest double (ties to even).
 * Summing in floating point and dividing can be one ulp off, which shows in HELM's JSON.
 */
export function exactMean(values: readonly number[]): number {
  if (values.length === 0) throw new RangeError('mean of an empty list');
  // Every finite double is an integer multiple of 2^-1074.
  const SCALE = 1074n;
  let total = 0n;
  for (const v of values) {
    if (!Number.isFinite(v)) return values.reduce((a, b) => a + b, 0) / values.length;
    total += toScaledBigInt(v, SCALE);
  }
  return ratioToDouble(total, BigInt(values.length) << SCALE);
}

function toScaledBigInt(v: number, scale: bigint): bigint {
  if (v === 0) return 0n;
  const buf = new DataView(new ArrayBuffer(8));
  buf.setFloat64(0, v);
  const bits = buf.getBigUint64(0);
  const sign = bits >> 63n ? -1n : 1n;
  const exp = Number((bits >> 52n) & 0x7ffn);
  const frac = bits & ((1n << 52n) - 1n);
  // value = mantissa * 2^(e - 1075) for normals, frac * 2^-1074 for subnormals
  const mantissa = exp === 0 ? frac : frac | (1n << 52n);
  const shift = BigInt(exp === 0 ? 1 : exp) - 1075n + scale;
  return sign * (mantissa << shift);
}

/** num/den rounded to the nearest double, ties to even (den > 0). */
function ratioToDouble(num: bigint, den: bigint): number {
  if (num === 0n) return 0;
  const negative = num < 0n;
  const n = negative ? -num : num;
  // Scale so the integer quotient has 54..55 significant bits (53 + guard), then round by the remainder.
  const bitLength = (x: bigint) => x.toString(2).length;
  let shift = 55 - (bitLength(n) - bitLength(den));
  let q = shift >= 0 ? (n << BigInt(shift)) / den : n / (den << BigInt(-shift));
  let r = shift >= 0 ? (n << BigInt(shift)) % den : n % (den << BigInt(-shift));
  while (bitLength(q) > 54) {
    r = r !== 0n || (q & 1n) !== 0n ? 1n : 0n;
    q >>= 1n;
    shift -= 1;
  }
  // q has 54 bits: 53 kept plus one rounding bit; r !== 0 is the sticky bit.
  const half = q & 1n;
  q >>= 1n;
  shift -= 1;
  if (half && (r !== 0n || (q & 1n) === 1n)) q += 1n;
  const value = Number(q) * 2 ** -shift;
  return negative ? -value : value;
}
