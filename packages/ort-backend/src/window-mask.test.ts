import { describe, expect, it } from 'vitest';
import { MASK_BIAS } from '@flexhelm/contract';
import { windowMask } from './window-mask.js';

describe('windowMask', () => {
  it('hides keys j with i − j ≥ window (padded slots), keeps what the mask already hides', () => {
    // One row, a cached step: 3 past keys, 2 new queries (slots 3 and 4), 5 keys; slot 0 is a pad.
    // Compared as float32 (the mask bias rounds when stored).
    const B = Math.fround(MASK_BIAS);
    const mask = Float32Array.from([B, 0, 0, 0, B, B, 0, 0, 0, 0]);
    // Window 3: slot 3 sees 1…3, slot 4 sees 2…4.
    expect(Array.from(windowMask(mask, 1, 2, 3, 3))).toEqual([B, 0, 0, 0, B, B, B, 0, 0, 0]);
    // A window wider than the sequence changes nothing; the input is not modified.
    expect(Array.from(windowMask(mask, 1, 2, 3, 8))).toEqual(Array.from(mask));
    expect(mask[1]).toBe(0);
  });

  it('refuses a mask of the wrong size, naming the shape it needs', () => {
    expect(() => windowMask(new Float32Array(7), 2, 2, 1, 4)).toThrow('windowMask: the mask holds 7 values, [2, 1, 2, 3] needs 12');
  });
});
