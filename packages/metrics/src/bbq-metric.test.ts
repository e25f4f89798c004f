import { instance, request, requestResult, requestState } from '@flexhelm/core';
import { describe, expect, it } from 'vitest';
import { BBQMetric } from './bbq-metric.js';

describe('BBQMetric', () => {
  it('names the instance that has no references (its tags carry the answer letters)', () => {
    const rs = requestState({
      instance: instance({ input: { text: 'Who?' }, references: [], split: 'test', id: 'id3' }),
      train_trial_index: 0,
      request: request({ model: 'together/opt-66b', prompt: 'Who?', temperature: 0, max_tokens: 1 }),
      result: requestResult({ success: true, completions: [{ text: ' A', logprob: 0, tokens: [] }], request_time: 0 }),
      num_train_instances: 0,
      prompt_truncated: false,
    });
    expect(() => new BBQMetric().evaluateInstances([rs])).toThrow('list index out of range: BBQ instance id3 has no references');
  });
});
