import { fma } from './exact-fma.js';
import { GLIBC_EXP_TABLE } from './glibc-exp-table.js';

/**
 * Python's `math.exp` as glibc 2.36 computes it on x86-64 with FMA (the `__exp_fma` variant CPython calls on
 * such machines): 2^(k/128) from a table times a degree-5 polynomial, with the fused multiply-adds GCC forms.
 * glibc is not correctly rounded in about one case in a thousand; this reproduces those cases too (checked
 * against Debian's Python 3.11 on 25 000 values).
 */

const N = 128;
const INV_LN2_N = 1.4426950408889634 * N;
const SHIFT = 6755399441055744; // 0x1.8p52
const NEG_LN2_HI_N = -0.005415212348111709; // -0x1.62e42fefa0000p-8
const NEG_LN2_LO_N = -1.2864023111638346e-14; // -0x1.cf79abc9e3b3ap-47
const C2 = 0.49999999999996786; // 0x1.ffffffffffdbdp-2
const C3 = 0.16666666666665886; // 0x1.555555555543cp-3
const C4 = 0.0416666808410674; // 0x1.55555cf172b91p-5
const C5 = 0.008333335853059549; // 0x1.1111167a4d017p-7
const MASK64 = (1n << 64n) - 1n;

const view = new DataView(new ArrayBuffer(8));
function bitsOf(x: number): bigint {
  view.setFloat64(0, x);
  return view.getBigUint64(0);
}
function fromBits(b: bigint): number {
  view.setBigUint64(0, b & MASK64);
  return view.getFloat64(0);
}

function specialCase(tmp: number, sbits: bigint, ki: bigint): number {
  if ((ki & 0x80000000n) === 0n) {
    // k > 0: the exponent of scale may have overflowed.
    const scale = fromBits(sbits - (1009n << 52n));
    return 2 ** 1009 * fma(scale, tmp, scale);
  }
  // k < 0: round once before scaling into the subnormal range.
  const scale = fromBits(sbits + (1022n << 52n));
  let y = fma(scale, tmp, scale);
  if (y < 1.0) {
    const lo0 = fma(scale, tmp, scale - y);
    const hi = 1.0 + y;
    const lo = 1.0 - hi + y + lo0;
    y = hi + lo - 1.0;
    if (y === 0) y = 0;
  }
  return 2 ** -1022 * y;
}

/** glibc's `exp(x)` (what Python's `math.exp` returns on x86-64 Linux). */
export function glibcExp(x: number): number {
  if (Number.isNaN(x)) return NaN;
  const ax = Math.abs(x);
  if (ax < 2 ** -54) return 1.0 + x;
  if (ax >= 1024) {
    if (x === -Infinity) return 0;
    if (x === Infinity) return Infinity;
    return x < 0 ? 0 : Infinity;
  }
  const z = INV_LN2_N * x;
  let kd = z + SHIFT;
  const ki = bitsOf(kd);
  kd -= SHIFT;
  const r = fma(kd, NEG_LN2_LO_N, fma(kd, NEG_LN2_HI_N, x));
  const idx = Number(ki % BigInt(N)) * 2;
  const top = (ki << 45n) & MASK64;
  const tail = fromBits(GLIBC_EXP_TABLE[idx]);
  const sbits = (GLIBC_EXP_TABLE[idx + 1] + top) & MASK64;
  const r2 = r * r;
  const tmp = fma(r2 * r2, fma(r, C5, C4), fma(r2, fma(r, C3, C2), tail + r));
  if (ax >= 512) return specialCase(tmp, sbits, ki);
  const scale = fromBits(sbits);
  return fma(scale, tmp, scale);
}
