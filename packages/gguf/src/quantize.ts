import { f32ToF16Bits, halfToFloatValues } from '@flexhelm/python-compat';
import { GGML_TYPES, ggmlByteSize } from './ggml-types.js';

/** The tensor types `quantize` writes (`export-gguf` writes them, alone or as llama.cpp's K-quant mixes). */
export type QuantizeType = 'F32' | 'F16' | 'BF16' | 'Q8_0' | 'Q4_0' | 'Q4_K' | 'Q5_K' | 'Q6_K';

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** ggml's `GGML_FP32_TO_BF16`: round to nearest even, NaN kept quiet. */
function bf16Bits(value: number): number {
  f32[0] = value;
  const w = u32[0]!;
  if ((w & 0x7fffffff) > 0x7f800000) return ((w >>> 16) | 64) & 0xffff;
  return ((w + 0x7fff + ((w >>> 16) & 1)) >>> 16) & 0xffff;
}

/** C's `roundf`: halves away from zero. */
const roundf = (x: number) => (x < 0 ? -Math.floor(-x + 0.5) : Math.floor(x + 0.5));

/**
 * Quantises float32 values (whole blocks for the block types) to GGUF tensor bytes. Q8_0 / Q4_0 as ggml's reference
 * quantizers do (`quantize_row_q8_0_ref`, `quantize_row_q4_0_ref`: per 32 values one f16 scale from the largest
 * magnitude); the K-quants with plain per-block ranges (`quantizeK`), not llama.cpp's error-minimising search.
 */
export function quantize(type: QuantizeType, values: Float32Array): Uint8Array {
  if (type === 'Q4_K' || type === 'Q5_K' || type === 'Q6_K') return quantizeK(type, values);
  const out = new Uint8Array(ggmlByteSize(type, values.length));
  const dv = new DataView(out.buffer);
  const fr = Math.fround;
  switch (type) {
    case 'F32':
      for (let i = 0; i < values.length; i++) dv.setFloat32(i * 4, values[i]!, true);
      return out;
    case 'F16':
      for (let i = 0; i < values.length; i++) dv.setUint16(i * 2, f32ToF16Bits(values[i]!), true);
      return out;
    case 'BF16':
      for (let i = 0; i < values.length; i++) dv.setUint16(i * 2, bf16Bits(values[i]!), true);
      return out;
    case 'Q8_0':
      for (let b = 0; b < values.length / 32; b++) {
        let amax = 0;
        for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(values[b * 32 + j]!));
        const d = fr(amax / 127);
        const id = d ? fr(1 / d) : 0;
        const at = b * GGML_TYPES.Q8_0.blockBytes;
        dv.setUint16(at, f32ToF16Bits(d), true);
        for (let j = 0; j < 32; j++) dv.setInt8(at + 2 + j, roundf(fr(values[b * 32 + j]! * id)));
      }
      return out;
    case 'Q4_0':
      for (let b = 0; b < values.length / 32; b++) {
        // The scale takes the sign of the value of largest magnitude, so that value maps to −8 exactly.
        let amax = 0;
        let max = 0;
        for (let j = 0; j < 32; j++) {
          const v = values[b * 32 + j]!;
          if (amax < Math.abs(v)) {
            amax = Math.abs(v);
            max = v;
          }
        }
        const d = fr(max / -8);
        const id = d ? fr(1 / d) : 0;
        const at = b * GGML_TYPES.Q4_0.blockBytes;
        dv.setUint16(at, f32ToF16Bits(d), true);
        for (let j = 0; j < 16; j++) {
          // (int8_t)(x + 8.5f) truncates toward zero; MIN(15, …) clips the top.
          const x0 = Math.min(15, Math.trunc(fr(fr(values[b * 32 + j]! * id) + 8.5)));
          const x1 = Math.min(15, Math.trunc(fr(fr(values[b * 32 + 16 + j]! * id) + 8.5)));
          out[at + 2 + j] = x0 | (x1 << 4);
        }
      }
      return out;
  }
}

const half = (v: number) => f32ToF16Bits(v);
const halfValue = (bits: number) => halfToFloatValues()[bits]!;
const clamp = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x));

/**
 * The K-quants (256-value super-blocks) from plain ranges, in ggml's block layouts (`dequantize` reads them back):
 * Q4_K / Q5_K: per 32-value sub-block the range [min(0, values), max] in 2^bits − 1 steps, its scale and −min as 6-bit
 * multiples of the super-block's f16 d and dmin; Q6_K: per 16 values a symmetric scale (max |v| / 31) as an int8
 * multiple of the f16 d. Every value then rounds to the nearest level of its sub-block's dequantized scale.
 */
export function quantizeK(type: 'Q4_K' | 'Q5_K' | 'Q6_K', values: Float32Array): Uint8Array {
  if (values.length % 256 !== 0) throw new RangeError(`quantize ${type}: ${values.length} values are not whole 256-value super-blocks`);
  const size = GGML_TYPES[type].blockBytes;
  const out = new Uint8Array((values.length / 256) * size);
  for (let b = 0; b < values.length / 256; b++) {
    const v = values.subarray(b * 256, b * 256 + 256);
    const block = out.subarray(b * size, (b + 1) * size);
    if (type === 'Q6_K') q6kBlock(v, block);
    else qk45Block(v, block, type === 'Q4_K' ? 4 : 5);
  }
  return out;
}

function qk45Block(v: Float32Array, out: Uint8Array, bits: 4 | 5): void {
  const levels = (1 << bits) - 1;
  const dv = new DataView(out.buffer, out.byteOffset, out.byteLength);
  const scales = new Float64Array(8);
  const mins = new Float64Array(8);
  for (let s = 0; s < 8; s++) {
    let lo = 0;
    let hi = -Infinity;
    for (let i = s * 32; i < s * 32 + 32; i++) {
      lo = Math.min(lo, v[i]!);
      hi = Math.max(hi, v[i]!);
    }
    scales[s] = (hi - lo) / levels;
    mins[s] = -lo;
  }
  const dBits = half(Math.max(...scales) / 63);
  const mBits = half(Math.max(...mins) / 63);
  const d = halfValue(dBits);
  const dmin = halfValue(mBits);
  dv.setUint16(0, dBits, true);
  dv.setUint16(2, mBits, true);
  const sc = Array.from(scales, (s) => (d ? clamp(Math.round(s / d), 0, 63) : 0));
  const m = Array.from(mins, (s) => (dmin ? clamp(Math.round(s / dmin), 0, 63) : 0));
  // The 12 bytes of 6-bit fields: sub-blocks 0–3 in the low 6 bits of bytes 0–3 (scales) and 4–7 (mins), 4–7 split
  // into the nibbles of bytes 8–11 and the top 2 bits of bytes 0–7.
  for (let j = 0; j < 4; j++) {
    out[4 + j] = sc[j]! | ((sc[j + 4]! >> 4) << 6);
    out[8 + j] = m[j]! | ((m[j + 4]! >> 4) << 6);
    out[12 + j] = (sc[j + 4]! & 0xf) | ((m[j + 4]! & 0xf) << 4);
  }
  const qs = bits === 4 ? 16 : 48;
  for (let i = 0; i < 256; i++) {
    const s = i >> 5;
    const step = d * sc[s]!;
    const q = step ? clamp(Math.round((v[i]! + dmin * m[s]!) / step), 0, levels) : 0;
    // Sub-blocks 2j and 2j + 1 share 32 bytes: low nibbles, then high nibbles; Q5_K's fifth bit s of qh[l].
    out[qs + (i >> 6) * 32 + (i & 31)]! |= (q & 15) << (s & 1 ? 4 : 0);
    if (bits === 5 && q >= 16) out[16 + (i & 31)]! |= 1 << s;
  }
}

function q6kBlock(v: Float32Array, out: Uint8Array): void {
  const dv = new DataView(out.buffer, out.byteOffset, out.byteLength);
  const groupScale = new Float64Array(16);
  for (let g = 0; g < 16; g++) {
    let amax = 0;
    for (let i = g * 16; i < g * 16 + 16; i++) amax = Math.max(amax, Math.abs(v[i]!));
    groupScale[g] = amax / 31;
  }
  const dBits = half(Math.max(...groupScale) / 127);
  const d = halfValue(dBits);
  dv.setUint16(208, dBits, true);
  const sc = Array.from(groupScale, (s) => (d ? clamp(Math.round(s / d), -128, 127) : 0));
  for (let g = 0; g < 16; g++) dv.setInt8(192 + g, sc[g]!);
  for (let i = 0; i < 256; i++) {
    // Two halves of 128 values; in each, quarter k of 32 values: low nibbles in ql bytes (k & 1)·32 + l (high nibble
    // for k ≥ 2), the two high bits at bit 2k of qh[l].
    const h = i >> 7;
    const quarter = (i & 127) >> 5;
    const l = i & 31;
    const step = d * sc[i >> 4]!;
    const q = (step ? clamp(Math.round(v[i]! / step), -32, 31) : 0) + 32;
    out[h * 64 + l + (quarter & 1) * 32]! |= (q & 15) << (quarter >= 2 ? 4 : 0);
    out[128 + h * 32 + l]! |= (q >> 4) << (2 * quarter);
  }
}
