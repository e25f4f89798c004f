import { f32ToF16, halfToFloatValues } from '@flexhelm/python-compat';
import { describe, expect, it } from 'vitest';

import { jsBackend } from './js-backend.js';
import { loadNativeBinding, nativeBackend } from './native-backend.js';
import { createPinnedMemory, type Quantized4 } from './pinned-memory.js';
import { bitsEqual, randomWeights, seededRandom } from './test-random.js';

const js = createPinnedMemory(jsBackend, { ioUring: false });
const binding = loadNativeBinding();
const native = binding ? createPinnedMemory(nativeBackend(binding), { ioUring: binding.features.ioUring }) : undefined;
const implementations = [['js', js] as const, ...(native ? [['native', native] as const] : [])];

function toHalves(values: Float32Array): Uint16Array {
  const halves = new Uint16Array(values.length);
  f32ToF16(values, halves);
  return halves;
}

describe.each(implementations)('quantize4 / dequantize4 (%s)', (_name, api) => {
  it('maps a group onto 0..15 with scale = 15 / (max - min), high nibble first', async () => {
    const q = await api.quantize4(new Float32Array([0, 1, 2, 3]), { groupSize: 4 });
    expect(Array.from(q.packed)).toEqual([0x05, 0xaf]);
    expect(Array.from(q.scale)).toEqual([0x4500, 0x0000]); // f16 5.0 and 0.0
    expect(Array.from(await api.dequantize4(q))).toEqual([0, 1, 2, 3]);
  });

  it('rounds half to even, like torch.round', async () => {
    const q = await api.quantize4(new Float32Array([0, 2.5, 3.5, 15]), { groupSize: 4 });
    expect(Array.from(q.packed)).toEqual([0x02, 0x4f]);
  });

  it('pads the grouped dimension with zeros, which take part in min/max, and trims them on dequantize', async () => {
    const q = await api.quantize4(new Float32Array([1, 2, 3]), { groupSize: 4 });
    expect(q.packedShape).toEqual([2]);
    expect(q.scaleShape).toEqual([1, 2]);
    expect(Array.from(q.packed)).toEqual([0x5a, 0xf0]);
    const back = await api.dequantize4(q);
    expect(back.length).toBe(3);
    expect(Array.from(back)).toEqual([1, 2, 3]);
  });

  it('groups along groupDim with FlexLLMGen shapes: data [.., groups*G/2, ..], scale [.., groups, 2, ..]', async () => {
    // Columns are groups when groupDim = 0 on a [4, 2] matrix.
    const q = await api.quantize4(new Float32Array([0, 3, 1, 2, 2, 1, 3, 0]), { shape: [4, 2], groupSize: 4, groupDim: 0 });
    expect(q.packedShape).toEqual([2, 2]);
    expect(q.scaleShape).toEqual([1, 2, 2]);
    expect(Array.from(q.packed)).toEqual([0x05, 0xfa, 0xaf, 0x50]);
    expect(Array.from(q.scale)).toEqual([0x4500, 0x4500, 0, 0]);
    const kv = await api.quantize4(new Float32Array(2 * 3 * 8).map((_, i) => i % 7), { shape: [2, 3, 8], groupSize: 4, groupDim: -1 });
    expect(kv.groupDim).toBe(2);
    expect(kv.packedShape).toEqual([2, 3, 4]);
    expect(kv.scaleShape).toEqual([2, 3, 2, 2]);
  });

  it('reconstructs within half a step (plus f16 rounding of scale and min) on weight-like data', async () => {
    const shape = [200, 48];
    const values = randomWeights(shape[0]! * shape[1]!, 11, 0.05);
    const q = await api.quantize4(values, { shape, groupSize: 64, groupDim: 0 });
    const back = await api.dequantize4(q);
    let worst = 0;
    for (let col = 0; col < shape[1]!; col++) {
      for (let g = 0; g * 64 < shape[0]!; g++) {
        let mn = 0;
        let mx = 0;
        const rows = [];
        for (let r = g * 64; r < g * 64 + 64; r++) {
          const v = r < shape[0]! ? values[r * shape[1]! + col] : 0;
          mn = Math.min(mn, v!);
          mx = Math.max(mx, v!);
          if (r < shape[0]!) rows.push(r);
        }
        const bound = (mx - mn) / 30 + (mx - mn) * 2 ** -10 + Math.abs(mn) * 2 ** -10 + 1e-7;
        for (const r of rows) {
          const error = Math.abs(back[r * shape[1]! + col]! - values[r * shape[1]! + col]!);
          worst = Math.max(worst, error / bound);
        }
      }
    }
    expect(worst).toBeLessThanOrEqual(1);
    expect(worst).toBeGreaterThan(0.5); // the bound is tight, not vacuous
  });

  it('gives identical output for f16 input and for the same values as f32', async () => {
    const halves = toHalves(randomWeights(3 * 100, 5));
    const asF32 = new Float32Array(halves.length);
    const table = halfToFloatValues();
    for (let i = 0; i < halves.length; i++) asF32[i] = table[halves[i]!]!;
    const a = await api.quantize4(halves, { shape: [100, 3], groupSize: 64 });
    const b = await api.quantize4(asF32, { shape: [100, 3], groupSize: 64 });
    expect(a).toEqual(b);
  });

  it('stores a constant group as codes 0 with scale Inf, and gives the constant back', async () => {
    const q = await api.quantize4(new Float32Array(8).fill(0.75), { groupSize: 8 });
    expect(Array.from(q.packed)).toEqual([0, 0, 0, 0]);
    expect(Array.from(q.scale)).toEqual([0x7c00, 0x3a00]);
    expect(Array.from(await api.dequantize4(q))).toEqual(new Array(8).fill(0.75));
  });

  it('rejects bad arguments with messages that say what to change', async () => {
    await expect(api.quantize4(new Float32Array(6), { groupSize: 3 })).rejects.toThrow(/groupSize is 3; it must be an even integer from 2 to 65536/);
    await expect(api.quantize4(new Float32Array(6), { shape: [2, 2] })).rejects.toThrow(/shape \[2, 2\] has 4 elements but src has 6/);
    await expect(api.quantize4(new Float32Array(6), { shape: [2, 3], groupDim: 2 })).rejects.toThrow(/groupDim is 2 but the tensor has 2 dimension/);
    await expect(api.quantize4(new Float64Array(6) as unknown as Float32Array)).rejects.toThrow(/src must be a Float32Array .* got Float64Array/);
    await expect(api.quantize4(new Float32Array(6), { groupsize: 4 } as never)).rejects.toThrow(/invalid options/);
    const q = await api.quantize4(new Float32Array(8), { groupSize: 4 });
    await expect(api.dequantize4({ ...q, packed: q.packed.subarray(1) })).rejects.toThrow(/packed has 3 bytes but shape \[8\] grouped by 4 along dimension 0 needs 4/);
    await expect(api.dequantize4(q, { dst: new Float32Array(7) })).rejects.toThrow(/dst holds 7 elements but the tensor has 8/);
  });
});

describe.runIf(native)('native and JS quantisation agree bit for bit', () => {
  const cases: Array<{ shape: number[]; groupSize: number; groupDim: number }> = [
    { shape: [64 * 3 + 5, 7], groupSize: 64, groupDim: 0 },
    { shape: [130], groupSize: 64, groupDim: 0 },
    { shape: [2, 3, 40, 5], groupSize: 16, groupDim: 2 },
    { shape: [5, 200], groupSize: 64, groupDim: 1 },
    { shape: [9, 4, 128], groupSize: 64, groupDim: -1 },
    { shape: [67, 129], groupSize: 2, groupDim: 0 },
    { shape: [33, 70], groupSize: 128, groupDim: 0 },
    { shape: [3, 65, 1], groupSize: 32, groupDim: 1 },
  ];
  for (const [index, layout] of cases.entries()) {
    for (const dtype of ['f32', 'f16'] as const) {
      it(`${dtype} shape [${layout.shape.join(', ')}] G=${layout.groupSize} dim ${layout.groupDim}`, async () => {
        const count = layout.shape.reduce((a, b) => a * b, 1);
        const values = withSpecialValues(randomWeights(count, 100 + index, 0.1), index);
        const src = dtype === 'f16' ? toHalves(values) : values;
        const expected = await js.quantize4(src, layout);
        for (const threads of [1, 3]) {
          const actual: Quantized4 = await native!.quantize4(src, { ...layout, threads });
          expect(Buffer.from(actual.packed).equals(Buffer.from(expected.packed))).toBe(true);
          expect(Buffer.from(actual.scale.buffer).equals(Buffer.from(expected.scale.buffer))).toBe(true);
          const back = await native!.dequantize4(actual, { threads });
          expect(bitsEqual(back, await js.dequantize4(expected))).toBe(true);
        }
      });
    }
  }

  it('agrees on a large tensor split over threads (the SIMD tiles and their remainders)', async () => {
    const shape = [1000, 1030];
    const values = randomWeights(shape[0]! * shape[1]!, 3, 0.02);
    const expected = await js.quantize4(values, { shape, groupSize: 64 });
    const actual = await native!.quantize4(values, { shape, groupSize: 64, threads: 2 });
    expect(Buffer.from(actual.packed).equals(Buffer.from(expected.packed))).toBe(true);
    expect(Buffer.from(actual.scale.buffer).equals(Buffer.from(expected.scale.buffer))).toBe(true);
  });
});

/** Sprinkles constant runs, signed zeros, tiny ranges (f16 scale overflow), huge values, Inf and NaN. */
function withSpecialValues(values: Float32Array, seed: number): Float32Array {
  const random = seededRandom(seed);
  const specials = [0, -0, 1e-6, -1e-6, 3e-5, 60000, -70000, 1e30, Infinity, -Infinity, NaN, 2 ** -130];
  for (let i = 0; i < values.length; i++) {
    const r = random();
    if (r < 0.02) values[i] = specials[Math.floor(random() * specials.length)]!;
    else if (r < 0.05) values[i] = 0.5; // runs of equal values make near-constant groups
  }
  if (values.length >= 64) values.fill(1e-4, 0, 64); // a tiny-range group
  return values;
}
