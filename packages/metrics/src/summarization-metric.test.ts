import { toNumber } from '@flexhelm/python-compat';
import { describe, expect, it } from 'vitest';
import { adapterSpec, instance, reference, request, requestResult, requestState } from '@flexhelm/core';
import { approximateSpacyTokenize, dataStats } from './data-stats.js';
import { SummarizationMetric } from './summarization-metric.js';

describe('SummarizationMetric', () => {
  it('computes extractive fragment statistics (coverage, density, compression)', () => {
    expect(approximateSpacyTokenize("The cat's mat (red), isn't it?")).toEqual(['The', 'cat', "'s", 'mat', '(', 'red', ')', ',', 'is', "n't", 'it', '?']);
    expect(dataStats('the cat sat', 'The cat sat on the mat')).toEqual({ coverage: 1, density: 3, compression: 2 });
    // "dog" is novel; "on the mat" is a fragment of 3, "the" of 1 (greedy longest match from the left).
    expect(dataStats('the dog on the mat', 'the cat sat on the mat')).toEqual({ coverage: 4 / 5, density: (1 + 9) / 5, compression: 6 / 5 });
  });

  it('scores rouge against the best reference and strips braces and whitespace from the prediction', () => {
    const rs = requestState({
      instance: instance({ input: { text: '{The cat sat on the mat.}' }, references: [reference('A cat sat.'), reference('The cat sat on the mat.')], split: 'test', id: 'id0' }),
      train_trial_index: 0,
      request: request({ model: 'together/opt-66b' }),
      result: requestResult({ success: true, completions: [{ text: ' {The cat sat on the mat.} ', logprob: -1, tokens: [] }], request_time: 1 }),
      num_train_instances: 0,
      prompt_truncated: false,
    });
    const stats = new SummarizationMetric('summarization_xsum').evaluateGeneration(adapterSpec(), rs, {});
    const get = (n: string) => toNumber(stats.find((s) => s.name.name === n)!.sum);
    expect(get('rouge_1')).toBe(1);
    expect(get('rouge_l')).toBe(1);
    expect(get('summarization_coverage')).toBe(1);
    expect(get('summarization_compression')).toBe(1);
    expect(new SummarizationMetric('summarization_xsum', 'cuda').notComputed).toContain('BERTScore-F');
  });
});
