import { describe, expect, it } from 'vitest';
import { batchTimes } from './engine-executor.js';

describe('batchTimes', () => {
  it('counts each forward batch a request rode in once, and its own rows for its share of the time', () => {
    // Request 0 (n = 3): two completions in an 8-row batch of 2 s, the third in a 4-row batch of 1 s. Request 1 rides
    // in the first batch only; request 2 needed no forward pass.
    const first = { rows: [[0, 0], [0, 1], [1, 0], [3, 0], [3, 1], [3, 2], [3, 3], [3, 4]] as [number, number][], seconds: 2 };
    const second = { rows: [[0, 2], [4, 0], [4, 1], [4, 2]] as [number, number][], seconds: 1 };
    const times = batchTimes(5, [first, second]);
    expect(times[0]).toEqual({ request_time: 2 * (2 / 8) + 1 / 4, batch_size: 12, batch_request_time: 3 });
    expect(times[1]).toEqual({ request_time: 2 / 8, batch_size: 8, batch_request_time: 2 });
    expect(times[2]).toEqual({ request_time: 0 });
  });
});
