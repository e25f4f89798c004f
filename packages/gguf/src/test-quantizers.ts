import { f32ToF16Bits, halfToFloatValues } from '@flexhelm/python-compat';
import { GGML_TYPES } from './ggml-types.js';
import { quantize } from './quantize.js';

/**
 * A plain quantizer for Q4_1, the one type flexhelm only reads, written for tests from ggml's block layout: not ggml's
 * search, just per-block ranges, so that test files hold realistic weights (the K-quants' are in quantize.ts).
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

export type TestType = 'F32' | 'F16' | 'BF16' | 'Q8_0' | 'Q4_0' | 'Q4_1' | 'Q4_K' | 'Q5_K' | 'Q6_K';

/** Any readable type: the package's quantizers, the plain Q4_1 one above. */
export function testQuantize(type: TestType, x: Float32Array): Uint8Array {
  switch (type) {
    case 'Q4_1':
      return q41(x);
    default:
      return quantize(type, x);
  }
}

export const testTypeId = (type: TestType) => GGML_TYPES[type].id;
