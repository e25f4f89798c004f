import { describe, expect, it } from 'vitest';

// The public entry point with the addon switched off: the env var is read when index.js loads, so it is set first.
process.env.FLEXHELM_NATIVE_DISABLE = '1';
const pinned = await import('./index.js');

describe('FLEXHELM_NATIVE_DISABLE=1', () => {
  it('uses the pure-JS implementation', () => {
    expect(pinned.isNative).toBe(false);
    expect(pinned.nativeFeatures).toBeUndefined();
  });

  it('still offers every operation with the same results', async () => {
    const buffer = await pinned.allocPinned(4096);
    expect(buffer.byteLength).toBe(4096);
    expect(pinned.isPinned(buffer)).toBe(false);
    await pinned.copy(buffer, new Uint8Array([1, 2, 3]));
    expect(Array.from(new Uint8Array(buffer, 0, 4))).toEqual([1, 2, 3, 0]);
    expect(Array.from(await pinned.f16ToF32(new Uint16Array([0x3c00, 0x0001, 0xfc00])))).toEqual([1, 2 ** -24, -Infinity]);
    const q = await pinned.quantize4(new Float32Array([0, 1, 2, 3]), { groupSize: 4 });
    expect(Array.from(q.packed)).toEqual([0x05, 0xaf]);
    expect(Array.from(await pinned.dequantize4(q))).toEqual([0, 1, 2, 3]);
  });
});
