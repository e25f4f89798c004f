import { f32ToF16Bits } from '@flexhelm/python-compat';
import { describe, expect, it } from 'vitest';
import { dequantize } from './dequantize.js';
import { GGML_TYPES } from './ggml-types.js';
import { quantize } from './quantize.js';
import { testQuantize } from './test-quantizers.js';

/** Deterministic bytes (xorshift32). */
function randomBytes(n: number, seed: number): Uint8Array {
  let s = seed >>> 0 || 1;
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    out[i] = s & 0xff;
  }
  return out;
}

const setHalf = (b: Uint8Array, at: number, v: number) => new DataView(b.buffer, b.byteOffset).setUint16(at, f32ToF16Bits(v), true);

/** ggml's packing of eight 6-bit scales and mins into 12 bytes (as `quantize_row_q4_K_ref` writes them). */
function packScales(sc: number[], m: number[]): number[] {
  const q = new Array<number>(12).fill(0);
  for (let j = 0; j < 4; j++) {
    q[j] = sc[j]! | ((sc[j + 4]! >> 4) << 6);
    q[j + 4] = m[j]! | ((m[j + 4]! >> 4) << 6);
    q[j + 8] = (sc[j + 4]! & 0xf) | ((m[j + 4]! & 0xf) << 4);
  }
  return q;
}

describe('dequantize: hand-computed blocks', () => {
  it('F32, F16 and BF16 values', () => {
    expect([...dequantize('F32', new Uint8Array(new Float32Array([1.5, -2]).buffer), 2)]).toEqual([1.5, -2]);
    expect([...dequantize('F16', new Uint8Array(new Uint16Array([0x3c00, 0xc000, 0x3555]).buffer), 3)]).toEqual([1, -2, Math.fround(0.333251953125)]);
    expect([...dequantize('BF16', new Uint8Array(new Uint16Array([0x3f80, 0xc040]).buffer), 2)]).toEqual([1, -3]);
  });

  it('Q8_0: d · q', () => {
    const b = new Uint8Array(34);
    setHalf(b, 0, 0.5);
    const q = new Int8Array(b.buffer, 2, 32);
    q[0] = -128;
    q[1] = 127;
    q[2] = 3;
    const y = dequantize('Q8_0', b, 32);
    expect([y[0], y[1], y[2], y[3]]).toEqual([-64, 63.5, 1.5, 0]);
  });

  it('Q4_0: low nibbles are values 0–15, high nibbles 16–31, d · (q − 8)', () => {
    const b = new Uint8Array(18);
    setHalf(b, 0, 2);
    b[2] = 0x1f; // value 0: 15 → 14; value 16: 1 → −14
    b[17] = 0x80; // value 15: 0 → −16; value 31: 8 → 0
    const y = dequantize('Q4_0', b, 32);
    expect([y[0], y[16], y[15], y[31], y[1]]).toEqual([14, -14, -16, 0, -16]);
  });

  it('Q4_1: d · q + m', () => {
    const b = new Uint8Array(20);
    setHalf(b, 0, 0.5);
    setHalf(b, 2, -1);
    b[4] = 0xf3;
    const y = dequantize('Q4_1', b, 32);
    expect([y[0], y[16], y[1]]).toEqual([0.5, 6.5, -1]);
  });

  it('Q4_K: sub-block scale and min from the packed 6-bit fields', () => {
    const sc = [1, 2, 3, 4, 17, 33, 63, 40];
    const m = [0, 5, 10, 15, 20, 63, 1, 32];
    const b = new Uint8Array(144);
    setHalf(b, 0, 0.5);
    setHalf(b, 2, 0.25);
    b.set(packScales(sc, m), 4);
    b[16] = 0x4a; // value 0: q 10 (sub-block 0); value 32: q 4 (sub-block 1)
    b[16 + 96 + 5] = 0xf1; // value 197 (sub-block 6, q 1); value 229 (sub-block 7, q 15)
    const y = dequantize('Q4_K', b, 256);
    expect(y[0]).toBe(0.5 * 1 * 10 - 0);
    expect(y[32]).toBe(0.5 * 2 * 4 - 0.25 * 5);
    expect(y[197]).toBe(0.5 * 63 * 1 - 0.25 * 1);
    expect(y[229]).toBe(0.5 * 40 * 15 - 0.25 * 32);
    expect(y[100]).toBe(-0.25 * 15); // q 0 in sub-block 3
  });
});

/** Element-wise statements of ggml's K-quant layouts, written apart from the block loops under test. */
const fr = Math.fround;
function q4kElement(b: Uint8Array, i: number, fifthBit: boolean): number {
  const dv = new DataView(b.buffer, b.byteOffset);
  const half = (at: number) => dequantize('F16', b.subarray(at, at + 2), 1)[0]!;
  const sub = i >> 5;
  const raw = b.subarray(4, 16);
  const sc = sub < 4 ? raw[sub]! & 63 : (raw[sub + 4]! & 0xf) | ((raw[sub - 4]! >> 6) << 4);
  const mn = sub < 4 ? raw[sub + 4]! & 63 : (raw[sub + 4]! >> 4) | ((raw[sub]! >> 6) << 4);
  const qsAt = fifthBit ? 48 : 16;
  const byte = b[qsAt + (i >> 6) * 32 + (i & 31)]!;
  let q = sub & 1 ? byte >> 4 : byte & 0xf;
  if (fifthBit && (b[16 + (i & 31)]! >> sub) & 1) q += 16;
  void dv;
  return fr(fr(fr(half(0) * sc) * q) - fr(half(2) * mn));
}
function q6kElement(b: Uint8Array, i: number): number {
  const d = dequantize('F16', b.subarray(208, 210), 1)[0]!;
  const half = i >> 7;
  const r = i & 127;
  const quarter = r >> 5;
  const l = r & 31;
  const lowByte = b[half * 64 + l + (quarter & 1) * 32]!;
  const low = quarter >= 2 ? lowByte >> 4 : lowByte & 0xf;
  const high = (b[128 + half * 32 + l]! >> (2 * quarter)) & 3;
  const scale = new Int8Array(b.buffer, b.byteOffset + 192, 16)[half * 8 + (l >> 4) + 2 * quarter]!;
  return fr(fr(d * scale) * ((low | (high << 4)) - 32));
}

describe('dequantize: K-quants against element-wise formulas on random blocks', () => {
  it.each(['Q4_K', 'Q5_K', 'Q6_K'] as const)('%s, three blocks', (type) => {
    const bytes = randomBytes(3 * GGML_TYPES[type].blockBytes, 7);
    // Finite, modest scales: the f16 fields set explicitly per block.
    for (let k = 0; k < 3; k++) {
      const at = k * GGML_TYPES[type].blockBytes;
      if (type === 'Q6_K') setHalf(bytes, at + 208, 0.01 * (k + 1));
      else {
        setHalf(bytes, at, 0.02 * (k + 1));
        setHalf(bytes, at + 2, 0.03);
      }
    }
    const y = dequantize(type, bytes, 768);
    for (let i = 0; i < 768; i++) {
      const block = bytes.subarray(Math.floor(i / 256) * GGML_TYPES[type].blockBytes);
      const want = type === 'Q6_K' ? q6kElement(block, i % 256) : q4kElement(block, i % 256, type === 'Q5_K');
      if (y[i] !== want) throw new Error(`${type} value ${i}: ${y[i]} != ${want}`);
    }
  });

  it('refuses a byte count that is not whole blocks', () => {
    expect(() => dequantize('Q4_K', new Uint8Array(100), 256)).toThrow(/256 values need 144 bytes/);
  });
});

describe('quantize (ggml reference quantizers) round trips', () => {
  const values = Float32Array.from({ length: 128 }, (_, i) => Math.sin(i * 0.37) * (1 + (i % 7)));
  it('Q8_0 within half a step of each block', () => {
    const y = dequantize('Q8_0', quantize('Q8_0', values), values.length);
    for (let b = 0; b < 4; b++) {
      const amax = Math.max(...values.subarray(b * 32, b * 32 + 32).map(Math.abs));
      for (let j = 0; j < 32; j++) expect(Math.abs(y[b * 32 + j]! - values[b * 32 + j]!)).toBeLessThanOrEqual((amax / 127) * 0.5 + amax * 1e-3);
    }
  });
  it('Q4_0: the largest magnitude maps to −8 · d exactly; others within a step', () => {
    const x = Float32Array.from({ length: 32 }, (_, j) => j - 16);
    const y = dequantize('Q4_0', quantize('Q4_0', x), 32);
    expect(y[0]).toBe(-16);
    expect(y[16]).toBe(0);
    expect(y[31]).toBe(14); // 15 clips to q = 15 → (15 − 8) · 2
    const r = dequantize('Q4_0', quantize('Q4_0', values), values.length);
    for (let i = 0; i < values.length; i++) expect(Math.abs(r[i]! - values[i]!)).toBeLessThanOrEqual(7 / 8 + 1e-3);
  });
  it('F16 and BF16 round to nearest', () => {
    const x = new Float32Array([1 / 3, -65504, 1e-8]);
    expect([...dequantize('F16', quantize('F16', x), 3)]).toEqual([Math.fround(0.333251953125), -65504, 0]);
    expect([...dequantize('BF16', quantize('BF16', new Float32Array([1.00390625, 1.01171875])), 2)]).toEqual([1, 1.015625]);
  });
});

describe('the tests\' quantizers of the read-only types round trip through dequantize', () => {
  const values = Float32Array.from({ length: 512 }, (_, i) => Math.sin(i * 0.61) * (0.5 + ((i * 7) % 13) / 13) - 0.1);
  const meanError = (type: 'Q4_1' | 'Q4_K' | 'Q5_K' | 'Q6_K') => {
    const y = dequantize(type, testQuantize(type, values), values.length);
    let sum = 0;
    let worst = 0;
    for (let i = 0; i < values.length; i++) {
      const e = Math.abs(y[i]! - values[i]!);
      sum += e;
      worst = Math.max(worst, e);
    }
    return { mean: sum / values.length, worst };
  };
  it('each within a fraction of the range, and more bits give less error', () => {
    const e = { Q4_1: meanError('Q4_1'), Q4_K: meanError('Q4_K'), Q5_K: meanError('Q5_K'), Q6_K: meanError('Q6_K') };
    // |values| < 1.6: a 4-bit step is at most ~3.2/15, half of it ~0.11 (plus the 6-bit scale's rounding).
    expect(e.Q4_1.worst).toBeLessThan(0.11);
    expect(e.Q4_K.worst).toBeLessThan(0.15);
    expect(e.Q5_K.worst).toBeLessThan(0.08);
    expect(e.Q6_K.worst).toBeLessThan(0.04);
    expect(e.Q5_K.mean).toBeLessThan(e.Q4_K.mean);
    expect(e.Q6_K.mean).toBeLessThan(e.Q5_K.mean);
  });
});
