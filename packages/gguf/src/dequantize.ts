import { halfToFloatValues } from '@flexhelm/python-compat';
import { GGML_TYPES, type GgmlTypeName } from './ggml-types.js';

const fr = Math.fround;

/**
 * ggml's `get_scale_min_k4`: the 6-bit scale and min of sub-block `j` (0–7) from a K-quant block's 12 packed bytes
 * (sub-blocks 0–3 in the low 6 bits of bytes 0–7, 4–7 split over the nibbles of bytes 8–11 and the top bits of 0–7).
 */
function scaleMinK4(j: number, q: Uint8Array, at: number): [number, number] {
  if (j < 4) return [q[at + j]! & 63, q[at + j + 4]! & 63];
  return [(q[at + j + 4]! & 0xf) | ((q[at + j - 4]! >> 6) << 4), (q[at + j + 4]! >> 4) | ((q[at + j]! >> 6) << 4)];
}

/**
 * Dequantises `count` values of `type` from `bytes` (whole blocks) to float32, with ggml's reference formulas
 * (`dequantize_row_*` in ggml-quants.c), each product and sum rounded to float32 as the C code computes it.
 */
export function dequantize(type: GgmlTypeName, bytes: Uint8Array, count: number, out: Float32Array = new Float32Array(count)): Float32Array {
  const t = GGML_TYPES[type];
  const blocks = count / t.blockValues;
  if (!Number.isInteger(blocks) || bytes.byteLength < blocks * t.blockBytes) {
    throw new RangeError(`dequantize ${type}: ${count} values need ${Math.ceil(blocks) * t.blockBytes} bytes in whole ${t.blockValues}-value blocks, got ${bytes.byteLength}`);
  }
  const half = halfToFloatValues();
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const h = (at: number) => half[dv.getUint16(at, true)]!;
  const signed = new Int8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  switch (type) {
    case 'F32':
      for (let i = 0; i < count; i++) out[i] = dv.getFloat32(i * 4, true);
      return out;
    case 'F16':
      for (let i = 0; i < count; i++) out[i] = h(i * 2);
      return out;
    case 'BF16': {
      const bits = new Uint32Array(out.buffer, out.byteOffset, count);
      for (let i = 0; i < count; i++) bits[i] = dv.getUint16(i * 2, true) << 16;
      return out;
    }
    case 'Q8_0':
      // block_q8_0: f16 d, int8 qs[32]; y = d·q.
      for (let b = 0; b < blocks; b++) {
        const at = b * 34;
        const d = h(at);
        for (let j = 0; j < 32; j++) out[b * 32 + j] = fr(d * signed[at + 2 + j]!);
      }
      return out;
    case 'Q4_0':
      // block_q4_0: f16 d, 16 bytes of nibbles; low nibbles are values 0–15, high nibbles 16–31; y = d·(q − 8).
      for (let b = 0; b < blocks; b++) {
        const at = b * 18;
        const d = h(at);
        for (let j = 0; j < 16; j++) {
          const q = bytes[at + 2 + j]!;
          out[b * 32 + j] = fr(((q & 0xf) - 8) * d);
          out[b * 32 + j + 16] = fr(((q >> 4) - 8) * d);
        }
      }
      return out;
    case 'Q4_1':
      // block_q4_1: f16 d, f16 m, 16 bytes of nibbles; y = d·q + m.
      for (let b = 0; b < blocks; b++) {
        const at = b * 20;
        const d = h(at);
        const m = h(at + 2);
        for (let j = 0; j < 16; j++) {
          const q = bytes[at + 4 + j]!;
          out[b * 32 + j] = fr(fr((q & 0xf) * d) + m);
          out[b * 32 + j + 16] = fr(fr((q >> 4) * d) + m);
        }
      }
      return out;
    case 'Q4_K':
      // block_q4_K: f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes of nibbles; 8 sub-blocks of 32 values,
      // each 64-value pair sharing 32 bytes (low nibbles first); y = d·sc·q − dmin·m.
      return dequantizeK45(bytes, blocks, out, h, 144, undefined, 16);
    case 'Q5_K':
      // block_q5_K: as Q4_K plus 32 bytes of fifth bits (qh) before the nibbles; bit 2j of qh[l] is value l of
      // sub-block 2j, bit 2j+1 value l of sub-block 2j+1.
      return dequantizeK45(bytes, blocks, out, h, 176, 16, 48);
    case 'Q6_K':
      // block_q6_K: 128 bytes of low nibbles (ql), 64 bytes of 2-bit highs (qh), 16 int8 scales, f16 d; two halves of
      // 128 values, each from 64 ql bytes, 32 qh bytes and 8 scales (one per 16 values); y = d·sc·(q − 32).
      for (let b = 0; b < blocks; b++) {
        const at = b * 210;
        const d = h(at + 208);
        for (let half2 = 0; half2 < 2; half2++) {
          const ql = at + 64 * half2;
          const qh = at + 128 + 32 * half2;
          const sc = at + 192 + 8 * half2;
          const y = b * 256 + 128 * half2;
          for (let l = 0; l < 32; l++) {
            const is = l >> 4;
            const hb = bytes[qh + l]!;
            const q1 = ((bytes[ql + l]! & 0xf) | ((hb & 3) << 4)) - 32;
            const q2 = ((bytes[ql + l + 32]! & 0xf) | (((hb >> 2) & 3) << 4)) - 32;
            const q3 = ((bytes[ql + l]! >> 4) | (((hb >> 4) & 3) << 4)) - 32;
            const q4 = ((bytes[ql + l + 32]! >> 4) | (((hb >> 6) & 3) << 4)) - 32;
            out[y + l] = fr(fr(d * signed[sc + is]!) * q1);
            out[y + l + 32] = fr(fr(d * signed[sc + is + 2]!) * q2);
            out[y + l + 64] = fr(fr(d * signed[sc + is + 4]!) * q3);
            out[y + l + 96] = fr(fr(d * signed[sc + is + 6]!) * q4);
          }
        }
      }
      return out;
  }
}


/**
 * Q4_K and Q5_K (Q5_K is Q4_K with a fifth bit per value, `qhAt` bytes into the block; Q4_K has none): blocks of
 * `blockBytes`, f16 d and dmin, 6-bit scales/mins at byte 4, nibbles from `qsAt`; y = d·sc·q − dmin·m in float32 steps.
 */
function dequantizeK45(bytes: Uint8Array, blocks: number, out: Float32Array, h: (at: number) => number, blockBytes: number, qhAt: number | undefined, qsAt: number): Float32Array {
  for (let b = 0; b < blocks; b++) {
    const at = b * blockBytes;
    const d = h(at);
    const dmin = h(at + 2);
    let y = b * 256;
    for (let j = 0; j < 4; j++) {
      const [sc1, m1] = scaleMinK4(2 * j, bytes, at + 4);
      const [sc2, m2] = scaleMinK4(2 * j + 1, bytes, at + 4);
      const d1 = fr(d * sc1);
      const n1 = fr(dmin * m1);
      const d2 = fr(d * sc2);
      const n2 = fr(dmin * m2);
      const qs = at + qsAt + 32 * j;
      // The fifth bits of sub-blocks 2j and 2j + 1 (none for Q4_K).
      const high = (l: number, bit: number) => (qhAt !== undefined && bytes[at + qhAt + l]! & bit ? 16 : 0);
      for (let l = 0; l < 32; l++) out[y + l] = fr(fr(d1 * ((bytes[qs + l]! & 0xf) + high(l, 1 << (2 * j)))) - n1);
      for (let l = 0; l < 32; l++) out[y + 32 + l] = fr(fr(d2 * ((bytes[qs + l]! >> 4) + high(l, 2 << (2 * j)))) - n2);
      y += 64;
    }
  }
  return out;
}
