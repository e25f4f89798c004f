import { f32ToF16Bits, halfToFloatValues } from '@flexhelm/python-compat';
import { GGML_TYPES } from './ggml-types.js';
import { quantize } from './quantize.js';

/**
 * Plain quantizers for the types flexhelm only reads (Q4_1, Q4_K, Q5_K, Q6_K), written for tests from ggml's block
 * layouts: not ggml's error-minimising searches, just per-block ranges, so that test files hold realistic weights.
 */
const half = (v: number) => {
  const bits = f32ToF16Bits(v);
  return { bits, value: halfToFloatValues()[bits]! };
};
const clamp = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x));

function q41(x: Float32Array): Uint8Array {
  const out = new Uint8Array((x.length / 32) * 20);
  const dv = new DataView(out.buffer);
  for (let b = 0; b < x.length / 32; b++) {
    const v = x.subarray(b * 32, b * 32 + 32);
    const mn = Math.min(...v);
    const d = half((Math.max(...v) - mn) / 15);
    const m = half(mn);
    dv.setUint16(b * 20, d.bits, true);
    dv.setUint16(b * 20 + 2, m.bits, true);
    for (let j = 0; j < 32; j++) {
      const q = d.value ? clamp(Math.round((v[j]! - m.value) / d.value), 0, 15) : 0;
      out[b * 20 + 4 + (j & 15)]! |= q << (j < 16 ? 0 : 4);
    }
  }
  return out;
}

/** Q4_K (bits 4) and Q5_K (bits 5): eight 32-value sub-blocks, each with a 6-bit scale and min. */
function qk(x: Float32Array, bits: 4 | 5): Uint8Array {
  const size = bits === 4 ? 144 : 176;
  const levels = (1 << bits) - 1;
  const out = new Uint8Array((x.length / 256) * size);
  const dv = new DataView(out.buffer);
  for (let b = 0; b < x.length / 256; b++) {
    const at = b * size;
    const v = x.subarray(b * 256, b * 256 + 256);
    const scales: number[] = [];
    const mins: number[] = [];
    for (let s = 0; s < 8; s++) {
      const sub = v.subarray(s * 32, s * 32 + 32);
      const mn = Math.min(0, ...sub);
      scales.push((Math.max(...sub) - mn) / levels);
      mins.push(-mn);
    }
    const d = half(Math.max(...scales) / 63);
    const dmin = half(Math.max(...mins) / 63);
    dv.setUint16(at, d.bits, true);
    dv.setUint16(at + 2, dmin.bits, true);
    const sc = scales.map((s) => (d.value ? clamp(Math.round(s / d.value), 0, 63) : 0));
    const m = mins.map((s) => (dmin.value ? clamp(Math.round(s / dmin.value), 0, 63) : 0));
    // ggml's packing of the 6-bit fields (the inverse of get_scale_min_k4).
    for (let j = 0; j < 4; j++) {
      out[at + 4 + j] = sc[j]! | ((sc[j + 4]! >> 4) << 6);
      out[at + 8 + j] = m[j]! | ((m[j + 4]! >> 4) << 6);
      out[at + 12 + j] = (sc[j + 4]! & 0xf) | ((m[j + 4]! & 0xf) << 4);
    }
    const qs = at + (bits === 4 ? 16 : 48);
    for (let i = 0; i < 256; i++) {
      const s = i >> 5;
      const step = d.value * sc[s]!;
      const q = step ? clamp(Math.round((v[i]! + dmin.value * m[s]!) / step), 0, levels) : 0;
      out[qs + (i >> 6) * 32 + (i & 31)]! |= (q & 15) << (s & 1 ? 4 : 0);
      if (bits === 5 && q >= 16) out[at + 16 + (i & 31)]! |= 1 << s;
    }
  }
  return out;
}

/** Q6_K: sixteen 16-value groups with int8 scales, 6-bit signed values split into low nibbles and 2-bit highs. */
function q6k(x: Float32Array): Uint8Array {
  const out = new Uint8Array((x.length / 256) * 210);
  const dv = new DataView(out.buffer);
  for (let b = 0; b < x.length / 256; b++) {
    const at = b * 210;
    const v = x.subarray(b * 256, b * 256 + 256);
    const groupScale: number[] = [];
    for (let g = 0; g < 16; g++) groupScale.push(Math.max(...v.subarray(g * 16, g * 16 + 16).map(Math.abs)) / 31);
    const d = half(Math.max(...groupScale) / 127);
    dv.setUint16(at + 208, d.bits, true);
    const sc = groupScale.map((s) => (d.value ? clamp(Math.round(s / d.value), -128, 127) : 0));
    for (let g = 0; g < 16; g++) dv.setInt8(at + 192 + g, sc[g]!);
    for (let i = 0; i < 256; i++) {
      const halfIdx = i >> 7;
      const r = i & 127;
      const quarter = r >> 5;
      const l = r & 31;
      const step = d.value * sc[halfIdx * 8 + (l >> 4) + 2 * quarter]!;
      const q = (step ? clamp(Math.round(v[i]! / step), -32, 31) : 0) + 32;
      out[at + halfIdx * 64 + l + (quarter & 1) * 32]! |= (q & 15) << (quarter >= 2 ? 4 : 0);
      out[at + 128 + halfIdx * 32 + l]! |= (q >> 4) << (2 * quarter);
    }
  }
  return out;
}

export type TestType = 'F32' | 'F16' | 'BF16' | 'Q8_0' | 'Q4_0' | 'Q4_1' | 'Q4_K' | 'Q5_K' | 'Q6_K';

/** Any readable type: the package's reference quantizers where it has them, the plain ones above otherwise. */
export function testQuantize(type: TestType, x: Float32Array): Uint8Array {
  switch (type) {
    case 'Q4_1':
      return q41(x);
    case 'Q4_K':
      return qk(x, 4);
    case 'Q5_K':
      return qk(x, 5);
    case 'Q6_K':
      return q6k(x);
    default:
      return quantize(type, x);
  }
}

export const testTypeId = (type: TestType) => GGML_TYPES[type].id;
