import { describe, expect, it } from 'vitest';
import { pyRound, pyRound3 } from './py-math.js';

describe('round', () => {
  it('round(x) and round(x, 3) break exact binary ties towards even, as Python 3.11', () => {
    // Python: [round(x) for x in [2.5, 3.5, -0.5, -1.5, 0.49999999999999994, 7.000000001]]
    expect([2.5, 3.5, -0.5, -1.5, 0.49999999999999994, 7.000000001].map(pyRound)).toEqual([2, 4, 0, -2, 0, 7]);
    // Python: [round(x, 3) for x in [0.0005, 0.1235, 0.0625, 0.1875, 2.0005, -0.0625, 1/3]]
    expect([0.0005, 0.1235, 0.0625, 0.1875, 2.0005, -0.0625, 1 / 3].map(pyRound3)).toEqual(PYTHON_ROUND3);
  });
});

const PYTHON_ROUND3 = [0.001, 0.123, 0.062, 0.188, 2.001, -0.062, 0.333];
