import { f32ToF16Bits, halfToFloatValues } from '@flexhelm/python-compat';
import type { GroupLayout } from './group-layout.js';

// Pure-JS 4-bit group quantisation, operation for operation the same f32 arithmetic as the native kernel
// (native/quantize4.cc) and FlexLLMGen's CPU path: Math.fround after every step.
//   mn, mx = group min/max (zero padding included); scale = fround(fround(1 / (mx - mn)) * 15)
//   q = roundHalfEven(clamp(fround((x - mn) * scale), 0, 15)), NaN (constant group) -> 0
//   dequantized x = fround(fround(q / scale) + mn) with scale and mn read back from f16.
const fround = Math.fround;

function roundHalfEven(t: number): number {
  const floor = Math.floor(t);
  const diff = t - floor;
  if (diff > 0.5) return floor + 1;
  if (diff < 0.5) return floor;
  return floor % 2 === 0 ? floor : floor + 1;
}

export function quantize4Js(src: Float32Array | Uint16Array, layout: GroupLayout, packed: Uint8Array, scaleOut: Uint16Array): void {
  const { outer, dim: D, inner: I, groups: NG, groupSize: G } = layout;
  const half = G / 2;
  const table = src instanceof Uint16Array ? halfToFloatValues() : undefined;
  // One group's values as f32, [G][I], zero padding included (reused across groups).
  const tile = new Float32Array(G * I);
  const mn = new Float64Array(I);
  const mx = new Float64Array(I);
  const scale = new Float64Array(I);
  const codes = new Uint8Array(G * I);
  for (let o = 0; o < outer; o++) {
    for (let g = 0; g < NG; g++) {
      const row = o * NG + g;
      const valid = Math.min(G, D - g * G);
      const start = (o * D + g * G) * I;
      if (table) for (let e = 0; e < valid * I; e++) tile[e] = table[src[start + e]!]!;
      else tile.set(src.subarray(start, start + valid * I));
      tile.fill(0, valid * I);
      for (let i = 0; i < I; i++) mn[i] = mx[i] = tile[i]!;
      for (let k = 1; k < G; k++) {
        const base = k * I;
        for (let i = 0; i < I; i++) {
          const v = tile[base + i]!;
          // biome-ignore lint/complexity/useMathMinMax: NaN and -0 must go the native kernel's way, which Math.min/max does not
          mn[i] = v < mn[i]! ? v : mn[i]!;
          // biome-ignore lint/complexity/useMathMinMax: NaN and -0 must go the native kernel's way, which Math.min/max does not
          mx[i] = v > mx[i]! ? v : mx[i]!;
        }
      }
      for (let i = 0; i < I; i++) {
        mn[i] = mn[i]! + 0; // -0 becomes +0, as in the native kernel
        scale[i] = fround(fround(1 / fround(mx[i]! + 0 - mn[i]!)) * 15);
        scaleOut[row * 2 * I + i] = f32ToF16Bits(scale[i]!);
        scaleOut[(row * 2 + 1) * I + i] = f32ToF16Bits(mn[i]!);
      }
      for (let e = 0; e < G * I; e++) {
        const i = e % I;
        let t = fround(fround(tile[e]! - mn[i]!) * scale[i]!);
        // biome-ignore lint/complexity/useMathMinMax: NaN and -0 must go the native kernel's way, which Math.min/max does not
        t = t > 0 ? t : 0;
        // biome-ignore lint/complexity/useMathMinMax: NaN and -0 must go the native kernel's way, which Math.min/max does not
        t = t < 15 ? t : 15;
        codes[e] = roundHalfEven(t);
      }
      for (let p = 0; p < half; p++) {
        const out = (row * half + p) * I;
        for (let i = 0; i < I; i++) packed[out + i] = (codes[2 * p * I + i]! << 4) | codes[(2 * p + 1) * I + i]!;
      }
    }
  }
}

export function dequantize4Js(packed: Uint8Array, scaleIn: Uint16Array, layout: GroupLayout, dst: Float32Array): void {
  const { outer, dim: D, inner: I, groups: NG, groupSize: G } = layout;
  const half = G / 2;
  const table = halfToFloatValues();
  for (let o = 0; o < outer; o++) {
    for (let g = 0; g < NG; g++) {
      const row = o * NG + g;
      for (let k = 0; k < G && g * G + k < D; k++) {
        const byteRow = (row * half + (k >> 1)) * I;
        const shift = k % 2 === 0 ? 4 : 0;
        const out = (o * D + g * G + k) * I;
        for (let i = 0; i < I; i++) {
          const q = (packed[byteRow + i]! >> shift) & 0xf;
          const s = table[scaleIn[row * 2 * I + i]!]!;
          const m = table[scaleIn[(row * 2 + 1) * I + i]!]!;
          dst[out + i] = fround(fround(q / s) + m);
        }
      }
    }
  }
}
