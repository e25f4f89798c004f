import { bf16ToF32, f16ToF32, f32ToF16, halfToFloatBits } from '@flexhelm/python-compat';
import { describe, expect, it } from 'vitest';

import { loadNativeBinding } from './native-backend.js';
import { seededRandom } from './test-random.js';

// The JS conversions are tested against their definition in @flexhelm/python-compat; here the addon must match them.
const binding = loadNativeBinding();
const allHalves = Uint16Array.from({ length: 65536 }, (_, i) => i);

describe('f16 -> f32 in the addon', () => {
  it.runIf(binding)('the addon gives the same bits for all 65536 halves (with odd lengths and offsets)', async () => {
    const expected = new Float32Array(65536);
    f16ToF32(allHalves, expected);
    for (const [start, threads] of [
      [0, 1],
      [3, 2],
      [17, 3],
    ] as const) {
      const src = allHalves.subarray(start);
      const out = new Float32Array(src.length + 1).subarray(1);
      await binding!.f16ToF32(src, out, threads);
      expect(Buffer.from(out.buffer, out.byteOffset, out.byteLength).equals(Buffer.from(expected.buffer, start * 4))).toBe(true);
    }
  });
});


describe('bf16 -> f32', () => {
  it('is the bf16 bits in the top half of an f32, for all 65536 values, in both implementations', async () => {
    const out = new Float32Array(65536);
    bf16ToF32(allHalves, out);
    const words = new Uint32Array(out.buffer);
    expect(words.every((w, h) => w === (h << 16) >>> 0)).toBe(true);
    if (binding) {
      const native = new Float32Array(65536);
      await binding.bf16ToF32(allHalves, native, 2);
      expect(Buffer.from(native.buffer).equals(Buffer.from(out.buffer))).toBe(true);
    }
  });
});


describe('f32 -> f16 in the addon', () => {
  it.runIf(binding)('the addon (F16C/AVX-512) rounds exactly like the JS code on random and edge bit patterns', async () => {
    const random = seededRandom(7);
    const words = new Uint32Array(1 << 20);
    for (let i = 0; i < words.length; i++) words[i] = Math.floor(random() * 2 ** 32);
    // Every f32 around each half boundary and tie: the half's f32 and +-1..2 ulps, and every exact midpoint.
    let i = 0;
    for (let h = 0; h < 0x7c00 && i + 12 < words.length; h++) {
      const base = halfToFloatBits(h);
      const next = halfToFloatBits(h + 1);
      const mid = base + Math.floor((next - base) / 2);
      for (const w of [base - 1, base, base + 1, mid - 1, mid, mid + 1]) {
        words[i++] = w >>> 0;
        words[i++] = (w | 0x80000000) >>> 0;
      }
    }
    const src = new Float32Array(words.buffer);
    const expected = new Uint16Array(src.length);
    f32ToF16(src, expected);
    const native = new Uint16Array(src.length);
    await binding!.f32ToF16(src, native, 2);
    expect(Buffer.from(native.buffer).equals(Buffer.from(expected.buffer))).toBe(true);
  });
});

