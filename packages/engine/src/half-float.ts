/** IEEE half → float32 for every 16-bit pattern, built once (exact, incl. subnormals, Inf and NaN). */
let f16Cache: Float32Array | undefined;

/** The float16 → float32 lookup table (65,536 entries, built on first use). */
export function f16Table(): Float32Array {
  if (f16Cache) return f16Cache;
  const t = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1;
    const exp = (h >> 10) & 0x1f;
    const frac = h & 0x3ff;
    let v: number;
    if (exp === 0) v = frac * 2 ** -24;
    else if (exp === 31) v = frac ? NaN : Infinity;
    else v = (1 + frac / 1024) * 2 ** (exp - 15);
    t[h] = sign * v;
  }
  f16Cache = t;
  return t;
}

/** Converts little-endian float16 values to float32. */
export function f16ToF32(src: Uint16Array, dst: Float32Array = new Float32Array(src.length)): Float32Array {
  const t = f16Table();
  for (let i = 0; i < src.length; i++) dst[i] = t[src[i]!]!;
  return dst;
}

/** Converts bfloat16 values (the high half of a float32) to float32. */
export function bf16ToF32(src: Uint16Array, dst: Float32Array = new Float32Array(src.length)): Float32Array {
  const bits = new Uint32Array(dst.buffer, dst.byteOffset, dst.length);
  for (let i = 0; i < src.length; i++) bits[i] = src[i]! << 16;
  return dst;
}

const scratch = new Float32Array(1);
const scratchBits = new Uint32Array(scratch.buffer);

/** Rounds a float32 to the nearest float16 (ties to even) and returns its bit pattern. */
export function f32ToF16Bits(value: number): number {
  scratch[0] = value;
  const x = scratchBits[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rest = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    if (rest > mid || (rest === mid && half & 1)) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && half & 1)) half++;
  e = half >>> 10;
  return sign | half;
}
