import { fma } from './exact-fma.js';
import { GLIBC_EXP_TABLE_WORDS } from './glibc-exp-table.js';

/**
 * Python's `math.exp` as glibc 2.36 computes it on x86-64 with FMA (the `__exp_fma` variant CPython calls on
 * such machines): 2^(k/128) from a table times a degree-5 polynomial, with the fused multiply-adds GCC forms.
 * glibc is not correctly rounded in about one case in a thousand; this reproduces those cases too (checked
 * against Debian's Python 3.11 on 38 000 values). Bits are handled as two 32-bit words (BigInt is slow).
 */

const N = 128;
const INV_LN2_N = Math.LOG2E * N;
const SHIFT = 6755399441055744; // 0x1.8p52
const NEG_LN2_HI_N = -0.005415212348111709; // -0x1.62e42fefa0000p-8
const NEG_LN2_LO_N = -1.2864023111638346e-14; // -0x1.cf79abc9e3b3ap-47
const C2 = 0.49999999999996786; // 0x1.ffffffffffdbdp-2
const C3 = 0.16666666666665886; // 0x1.555555555543cp-3
const C4 = 0.0416666808410674; // 0x1.55555cf172b91p-5
const C5 = 0.008333335853059549; // 0x1.1111167a4d017p-7

const view = new DataView(new ArrayBuffer(8));
function lowWord(x: number): number {
  view.setFloat64(0, x);
  return view.getInt32(4);
}
function fromWords(hi: number, lo: number): number {
  view.setUint32(0, hi >>> 0);
  view.setUint32(4, lo >>> 0);
  return view.getFloat64(0);
}

function specialCase(tmp: number, sbitsHi: number, sbitsLo: number, k: number): number {
  if (k >= 0) {
    // k > 0: the exponent of scale may have overflowed.
    const scale = fromWords(sbitsHi - (1009 << 20), sbitsLo);
    return 2 ** 1009 * fma(scale, tmp, scale);
  }
  // k < 0: round once before scaling into the subnormal range (scale carries the result's sign).
  const scale = fromWords(sbitsHi + (1022 << 20), sbitsLo);
  let y = fma(scale, tmp, scale);
  if (Math.abs(y) < 1.0) {
    const one = y < 0 ? -1.0 : 1.0;
    const lo0 = fma(scale, tmp, scale - y);
    const hi = one + y;
    const lo = one - hi + y + lo0;
    y = hi + lo - one;
    if (y === 0) y = (sbitsHi + (1022 << 20)) & 0x80000000 ? -0 : 0;
  }
  return 2 ** -1022 * y;
}

/**
 * glibc's `exp_inline(x, xtail, sign_bias)`: e^(x + xtail), negated when `negate` is set (pow of a negative base
 * to an odd power). `x` must be finite with |x| < 1024.
 */
export function glibcExpInline(x: number, xtail: number, negate: boolean): number {
  const ax = Math.abs(x);
  if (ax < 2 ** -54) {
    const one = 1.0 + x;
    return negate ? -one : one;
  }
  const z = INV_LN2_N * x;
  let kd = z + SHIFT;
  const k = lowWord(kd); // round(z), in the low bits of z + 1.5·2^52
  kd -= SHIFT;
  let r = fma(kd, NEG_LN2_LO_N, fma(kd, NEG_LN2_HI_N, x));
  r += xtail;
  const idx = (k & (N - 1)) * 2;
  // top = (ki + sign_bias) << 45: only the low 19 bits of k (+ the sign bias 0x800 << 7) reach the high word.
  const topHi = ((k + (negate ? 0x800 << 7 : 0)) & 0x7ffff) << 13;
  const tail = fromWords(GLIBC_EXP_TABLE_WORDS[2 * idx]!, GLIBC_EXP_TABLE_WORDS[2 * idx + 1]!);
  const sbitsHi = (GLIBC_EXP_TABLE_WORDS[2 * idx + 2]! + topHi) | 0;
  const sbitsLo = GLIBC_EXP_TABLE_WORDS[2 * idx + 3]!;
  const r2 = r * r;
  const tmp = fma(r2 * r2, fma(r, C5, C4), fma(r2, fma(r, C3, C2), tail + r));
  if (ax >= 512) return specialCase(tmp, sbitsHi, sbitsLo, k);
  const scale = fromWords(sbitsHi, sbitsLo);
  return fma(scale, tmp, scale);
}

/** glibc's `exp(x)` (what Python's `math.exp` returns on x86-64 Linux). */
export function glibcExp(x: number): number {
  if (Number.isNaN(x)) return NaN;
  if (Math.abs(x) >= 1024) {
    if (x === Infinity) return Infinity;
    return x < 0 ? 0 : Infinity;
  }
  return glibcExpInline(x, 0, false);
}
