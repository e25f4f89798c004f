import { describe, expect, it } from 'vitest';
import { batchTimes } from './engine-executor.js';

describe('batchTimes', () => {
  it('counts each forward batch a request rode in once, and its own rows for its share of the time', () => {
    // Request 0 (n = 3): two completions in an 8-row batch of 2 s, the third in a 4-row batch of 1 s. Request 1 rides
    // in the first batch only; request 2 needed no forward pass.
    const first = { rows: [[0, 0], [0, 1], [1, 0], [3, 0], [3, 1], [3, 2], [3, 3], [3, 4]] as [number, number][], seconds: 2, startedAt: 1700000000.9 };
    const second = { rows: [[0, 2], [4, 0], [4, 1], [4, 2]] as [number, number][], seconds: 1, startedAt: 1700000003.2 };
    const times = batchTimes(5, [first, second], 1699999999.5);
    // request_datetime: HELM's int(start_time), the start of the first batch the request rode in.
    expect(times[0]).toEqual({ request_time: 2 * (2 / 8) + 1 / 4, request_datetime: 1700000000, batch_size: 12, batch_request_time: 3 });
    expect(times[1]).toEqual({ request_time: 2 / 8, request_datetime: 1700000000, batch_size: 8, batch_request_time: 2 });
    expect(times[4]).toEqual({ request_time: 1 / 4 * 3, request_datetime: 1700000003, batch_size: 4, batch_request_time: 1 });
    // A request with no forward pass started when generate was called.
    expect(times[2]).toEqual({ request_time: 0, request_datetime: 1699999999 });
  });
});
