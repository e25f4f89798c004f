import { describe, expect, it } from 'vitest';
import type { Completion, ForwardBatch } from '@flexhelm/engine';
import { batchTimes } from './engine-executor.js';

const completion = (batch?: ForwardBatch): Completion => ({ tokens: [], sumLogprob: 0, finishReason: 'length', batch });

describe('batchTimes', () => {
  it('counts each forward batch a request rode in once, and its own rows for its share of the time', () => {
    // n = 3: two completions in an 8-row batch of 2 s, the third in a 4-row batch of 1 s.
    const a: ForwardBatch = { rows: 8, seconds: 2 };
    const b: ForwardBatch = { rows: 4, seconds: 1 };
    expect(batchTimes([completion(a), completion(a), completion(b)])).toEqual({ request_time: 2 * (2 / 8) + 1 / 4, batch_size: 12, batch_request_time: 3 });
  });

  it('gives a request that needed no forward pass zero time and no batch', () => {
    expect(batchTimes([completion()])).toEqual({ request_time: 0 });
  });
});
