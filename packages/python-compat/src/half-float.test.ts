import { describe, expect, it } from 'vitest';
import { bf16ToF32, f16ToF32, f32ToF16, f32ToF16Bits, floatBitsToHalf, halfToFloatBits } from './half-float.js';

const allHalves = Uint16Array.from({ length: 65536 }, (_, i) => i);

function f32OfBits(bits: number): number {
  return new Float32Array(new Uint32Array([bits]).buffer)[0]!;
}

/** The value of an f16 bit pattern computed from its definition, independently of the converter. */
function halfValue(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >> 10) & 0x1f;
  const mantissa = h & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 31) return mantissa ? NaN : sign * Infinity;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

describe('f16 -> f32', () => {
  it('converts all 65536 halves exactly: normals, subnormals, signed zeros, Inf; NaNs become quiet with their payload', () => {
    const wrong: string[] = [];
    for (let h = 0; h < 65536; h++) {
      const bits = halfToFloatBits(h);
      const expected = halfValue(h);
      const ok = Number.isNaN(expected)
        ? (bits & 0x7fc00000) === 0x7fc00000 && ((bits >>> 13) & 0x1ff) === (h & 0x1ff) && bits >>> 31 === h >> 15
        : Object.is(f32OfBits(bits), expected);
      if (!ok) wrong.push(`0x${h.toString(16)} -> 0x${bits.toString(16)}`);
    }
    expect(wrong).toEqual([]);
  });

  it('the table-driven array conversion matches the scalar one', () => {
    const out = new Float32Array(65536);
    f16ToF32(allHalves, out);
    const words = new Uint32Array(out.buffer);
    expect(Array.from(words.filter((w, h) => w !== halfToFloatBits(h)))).toEqual([]);
  });
});

describe('bf16 -> f32', () => {
  it('is the bf16 bits in the top half of an f32, for all 65536 values', () => {
    const words = new Uint32Array(bf16ToF32(allHalves).buffer);
    expect(words.every((w, h) => w === (h << 16) >>> 0)).toBe(true);
  });
});

describe('f32 -> f16', () => {
  it('f32ToF16Bits of a number agrees with the array conversion', () => {
    expect([1, -2.5, 65520, 2 ** -25, NaN].map(f32ToF16Bits)).toEqual([1, -2.5, 65520, 2 ** -25, NaN].map(f32ToF16Value));
  });


  it('round-trips every non-NaN half exactly', () => {
    const wrong: number[] = [];
    for (let h = 0; h < 65536; h++) {
      if ((h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0) continue;
      if (floatBitsToHalf(halfToFloatBits(h)) !== h) wrong.push(h);
    }
    expect(wrong).toEqual([]);
  });

  it('rounds to nearest, ties to even, including into subnormals and up to Inf', () => {
    const cases: Array<[number, number]> = [
      [1 + 2 ** -11, 0x3c00], // tie between 1 and next: even (1)
      [1 + 3 * 2 ** -11, 0x3c02], // tie: rounds up to even
      [1 + 2 ** -11 + 2 ** -20, 0x3c01], // above the tie
      [65504, 0x7bff],
      [65519.99, 0x7bff],
      [65520, 0x7c00], // the tie above the largest half rounds to Inf
      [2 ** -24, 0x0001],
      [2 ** -25, 0x0000], // tie between 0 and the smallest subnormal: even (0)
      [3 * 2 ** -25, 0x0002], // tie between 1 and 2 subnormal steps: even (2)
      [2 ** -25 + 2 ** -40, 0x0001],
      [-(2 ** -26), 0x8000],
      [2 ** -14 - 2 ** -25, 0x0400], // rounds up from the largest subnormal into the smallest normal
      [1e-45, 0x0000],
      [-Infinity, 0xfc00],
      [1e10, 0x7c00],
    ];
    for (const [value, half] of cases) expect(f32ToF16Value(value), `${value}`).toBe(half);
  });

  it('keeps a NaN a NaN (quiet, top payload bits kept)', () => {
    expect(floatBitsToHalf(0x7fc00000)).toBe(0x7e00);
    expect(floatBitsToHalf(0x7f800001)).toBe(0x7e00); // signalling, payload only in low bits: still a NaN
    expect(floatBitsToHalf(0xffa02000)).toBe(0xfe01 | 0x0100);
  });
});

function f32ToF16Value(value: number): number {
  const out = new Uint16Array(1);
  f32ToF16(new Float32Array([value]), out);
  return out[0]!;
}
