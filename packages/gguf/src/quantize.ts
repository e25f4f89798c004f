import { f32ToF16Bits } from '@flexhelm/python-compat';
import { GGML_TYPES, ggmlByteSize } from './ggml-types.js';

/** The types `export-gguf` writes. */
export type ExportType = 'F32' | 'F16' | 'BF16' | 'Q8_0' | 'Q4_0';

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
 * Quantises float32 values (whole blocks for the block types) as ggml's reference quantizers do
 * (`quantize_row_q8_0_ref`, `quantize_row_q4_0_ref`: per 32 values one f16 scale from the largest magnitude).
 */
export function quantize(type: ExportType, values: Float32Array): Uint8Array {
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
