// IEEE half (f16, NumPy's float16) and bfloat16 conversions on raw bits, bit-exact with the native kernels of
// @flexhelm/pinned-memory (native/half-kernels.h):
//  - f16 -> f32 is exact; a signalling NaN comes out quiet with its payload kept (what F16C hardware does);
//  - f32 -> f16 rounds to nearest-even, overflows to Inf, keeps the top 10 NaN payload bits and sets the quiet bit;
//  - bf16 -> f32 is a 16-bit shift.
// Results are written through Uint32Array views because V8 may canonicalise NaN payloads stored via Float32Array.

export function halfToFloatBits(half: number): number {
  const sign = (half & 0x8000) << 16;
  const exponent = (half >> 10) & 0x1f;
  let mantissa = half & 0x3ff;
  if (exponent === 0x1f) return (sign | 0x7f800000 | (mantissa << 13) | (mantissa !== 0 ? 0x400000 : 0)) >>> 0;
  if (exponent === 0) {
    if (mantissa === 0) return sign >>> 0;
    let e = 113; // a subnormal is renormalised: value = mantissa * 2^-24
    while ((mantissa & 0x400) === 0) {
      mantissa <<= 1;
      e--;
    }
    return (sign | (e << 23) | ((mantissa & 0x3ff) << 13)) >>> 0;
  }
  return (sign | ((exponent + 112) << 23) | (mantissa << 13)) >>> 0;
}

export function floatBitsToHalf(bits: number): number {
  const sign = (bits >>> 16) & 0x8000;
  const exponent = (bits >>> 23) & 0xff;
  let mantissa = bits & 0x7fffff;
  if (exponent === 0xff) return sign | 0x7c00 | (mantissa !== 0 ? 0x200 | (mantissa >>> 13) : 0);
  const e = exponent - 112; // biased f16 exponent
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mantissa |= 0x800000;
    const shift = 14 - e;
    let half = mantissa >>> shift;
    const rest = mantissa & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rest > halfway || (rest === halfway && (half & 1) !== 0)) half++;
    return sign | half;
  }
  let half = (e << 10) | (mantissa >>> 13);
  const rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (half & 1) !== 0)) half++; // a carry may round up to Inf, as it should
  return sign | half;
}

let halfTable: Uint32Array | undefined;

/** f32 bit patterns of all 65536 halves (256 KiB, built on first use). */
export function halfToFloatTable(): Uint32Array {
  if (!halfTable) {
    halfTable = new Uint32Array(65536);
    for (let h = 0; h < 65536; h++) halfTable[h] = halfToFloatBits(h);
  }
  return halfTable;
}

let halfValues: Float32Array | undefined;

/** f32 values of all 65536 halves, for arithmetic (not for copying bits: NaN payloads may change). */
export function halfToFloatValues(): Float32Array {
  halfValues ??= new Float32Array(halfToFloatTable().buffer);
  return halfValues;
}

function wordsOf(array: Float32Array): Uint32Array {
  return new Uint32Array(array.buffer, array.byteOffset, array.length);
}

/** Converts float16 values to float32 (exact); returns `dst`. */
export function f16ToF32(src: Uint16Array, dst: Float32Array = new Float32Array(src.length)): Float32Array {
  const table = halfToFloatTable();
  const out = wordsOf(dst);
  for (let i = 0; i < src.length; i++) out[i] = table[src[i]!]!;
  return dst;
}

/** Converts bfloat16 values (the high half of a float32) to float32; returns `dst`. */
export function bf16ToF32(src: Uint16Array, dst: Float32Array = new Float32Array(src.length)): Float32Array {
  const out = wordsOf(dst);
  for (let i = 0; i < src.length; i++) out[i] = src[i]! << 16;
  return dst;
}

/** Rounds float32 values to float16 (nearest-even); returns `dst`. */
export function f32ToF16(src: Float32Array, dst: Uint16Array = new Uint16Array(src.length)): Uint16Array {
  const words = wordsOf(src);
  for (let i = 0; i < words.length; i++) dst[i] = floatBitsToHalf(words[i]!);
  return dst;
}

const scratch = new Float32Array(1);
const scratchWords = new Uint32Array(scratch.buffer);

/** f16 bits of a number rounded to float32 then to float16 (nearest-even both times). */
export function f32ToF16Bits(value: number): number {
  scratch[0] = value;
  return floatBitsToHalf(scratchWords[0]!);
}
