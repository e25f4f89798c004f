import { npExp, pyFloat, toNumber } from '@flexhelm/python-compat';
import { describe, expect, it } from 'vitest';
import { adapterSpec, helmJson, instance, metricName, reference, request, requestResult, requestState, type RequestState, type Stat } from '@flexhelm/core';
import { BasicMetric, computeCalibrationMetrics, numBytesOfTokens } from './basic-metric.js';
import { WhitespaceWindowService } from './test-window-service.js';

const window = new WhitespaceWindowService();
const tok = (text: string, logprob: number) => ({ text, logprob, top_logprobs: new Map<string, number>() });
const statSum = (stats: Stat[], name: string) => stats.find((s) => s.name.name === name && !s.name.perturbation && !s.name.split)?.sum;

describe('BasicMetric multiple choice (separate / calibrated) scoring', () => {
  const inst = instance({ input: { text: 'The sky is' }, references: [reference('blue', ['correct']), reference('green', [])], split: 'test', id: 'id0' });
  const echoed = (prompt: string, answerLogprobs: number[]): RequestState['result'] =>
    requestResult({
      success: true,
      completions: [{ text: prompt, logprob: 0, tokens: [tok('The', -1), tok(' sky', -1), ...answerLogprobs.map((lp, i) => tok(` w${i}`, lp))] }],
      request_time: 0.25,
    });
  const state = (refIndex: number, mode: 'original' | 'calibration', lps: number[]) =>
    requestState({
      instance: inst,
      reference_index: refIndex,
      request_mode: mode,
      train_trial_index: 0,
      request: request({ model: 'together/opt-66b', prompt: 'The sky is x', temperature: 0, max_tokens: 0, echo_prompt: true }),
      result: echoed('The sky is x', lps),
      num_train_instances: 0,
      prompt_truncated: false,
    });

  it('original: per-token mean logprob of the answer tokens, softmax max_prob, ties count as correct', () => {
    const metric = new BasicMetric([]);
    const spec = adapterSpec({ method: 'multiple_choice_separate_original', model: 'together/opt-66b' });
    // " blue" and " green" are one token each for the whitespace window: only the last token counts.
    const stats = metric.evaluateReferences(spec, [state(0, 'original', [-5, -0.5]), state(1, 'original', [-0.1, -1.5])], { windowService: window });
    expect(toNumber(statSum(stats, 'exact_match')!)).toBe(1);
    expect(statSum(stats, 'predicted_index')).toBe(0);
    const e = npExp(-1.5 - -0.5);
    expect(toNumber(statSum(stats, 'max_prob')!)).toBe(1 / (1 + e));
    expect(statSum(stats, 'num_output_tokens')).toBe(0);
    expect(statSum(stats, 'num_prompt_tokens')).toBe(4);
  });

  it('calibrated: original minus calibration logprob (unnormalized)', () => {
    const metric = new BasicMetric([]);
    const spec = adapterSpec({ method: 'multiple_choice_separate_calibrated', model: 'together/opt-66b' });
    const stats = metric.evaluateReferences(
      spec,
      [state(0, 'original', [-2]), state(0, 'calibration', [-1]), state(1, 'original', [-1.5]), state(1, 'calibration', [-3])],
      { windowService: window },
    );
    // scores: blue -1, green +1.5 → green predicted, wrong.
    expect(statSum(stats, 'predicted_index')).toBe(1);
    expect(helmJson(stats.find((s) => s.name.name === 'exact_match')!.sum)).toBe('0.0');
  });

  it('a reference index the instance does not have is an IndexError naming the instance', () => {
    const spec = adapterSpec({ method: 'multiple_choice_separate_original', model: 'together/opt-66b' });
    expect(() => new BasicMetric([]).evaluateReferences(spec, [state(0, 'original', [-1]), state(2, 'original', [-1])], { windowService: window })).toThrow(
      'list index out of range: reference_index 2 of instance id0, which has 2 references',
    );
  });
});

describe('BasicMetric language modeling', () => {
  it('sums logprobs after the conditioning tokens and derives perplexity and bits per byte', () => {
    const inst = instance({ input: { text: 'hello wide world' }, references: [], split: 'test', id: 'id0' });
    const tokens = [tok('</s>', 0), tok('hello', -2), tok(' wide', -1), tok(' world', -0.5), tok('bytes:\\xe2\\x80', -0.25)];
    const rs = requestState({
      instance: inst,
      train_trial_index: 0,
      request: request({ model: 'together/opt-66b', prompt: '</s>hello wide world', temperature: 0, max_tokens: 0, echo_prompt: true }),
      result: requestResult({ success: true, completions: [{ text: '', logprob: -3.75, tokens }], request_time: 1 }),
      num_train_instances: 0,
      prompt_truncated: false,
      num_conditioning_tokens: 1,
    });
    const spec = adapterSpec({ method: 'language_modeling', model: 'together/opt-66b', max_train_instances: 0, num_outputs: 1, max_tokens: 0 });
    const result = new BasicMetric([]).evaluate({ adapter_spec: spec, request_states: [rs] }, { windowService: window });
    const get = (n: string) => result.aggregatedStats.find((s) => s.name.name === n)!;
    expect(get('logprob').sum).toBe(-3.75);
    expect(get('num_perplexity_tokens').mean).toEqual(pyFloat(4));
    expect(numBytesOfTokens(tokens.slice(1))).toBe(5 + 5 + 6 + 2);
    expect(get('perplexity').sum).toBe(Math.E ** (3.75 / 4));
    expect(toNumber(get('bits_per_byte').sum)).toBeCloseTo(3.75 / 18 / Math.LN2, 15);
    expect(get('num_instances').sum).toEqual(pyFloat(1));
    expect(result.perInstanceStats).toHaveLength(1);
  });
});

describe('calibration', () => {
  it('computes ECE, selective accuracy and Platt scaling as uncertainty-calibration does', () => {
    const probs = [0.9, 0.8, 0.7, 0.6, 0.55, 0.95, 0.3, 0.85, 0.65, 0.75, 0.4, 0.5];
    const correct = [1, 1, 0, 1, 0, 1, 0, 1, 1, 0, 0, 1];
    const perInstance = new Map(
      probs.map((p, i) => [
        instance({ input: { text: `${i}` }, references: [], id: `id${i}` }),
        [statOfPair('max_prob', p), statOfPair('exact_match', correct[i]!)],
      ]),
    );
    const stats = computeCalibrationMetrics(perInstance);
    const get = (n: string) => toNumber(stats.find((s) => s.name.name === n)!.sum);
    // |mean(p) - accuracy| for one bin.
    const meanP = probs.reduce((a, b) => a + b, 0) / probs.length;
    expect(get('ece_1_bin')).toBeCloseTo(Math.abs(meanP - 7 / 12), 14);
    expect(get('selective_acc@10')).toBe(1);
    expect(get('ece_10_bin')).toBeGreaterThan(0);
    expect(get('platt_coef')).toBeGreaterThan(0);
    expect(stats.map((s) => s.name.name)).toEqual(['ece_10_bin', 'ece_1_bin', 'selective_cov_acc_area', 'selective_acc@10', 'platt_coef', 'platt_intercept', 'platt_ece_10_bin', 'platt_ece_1_bin']);
  });
});

function statOfPair(name: string, value: number): Stat {
  const s: Stat = { name: metricName(name), count: 1, sum: value, sum_squared: value * value, min: value, max: value, mean: pyFloat(value), variance: pyFloat(0), stddev: pyFloat(0) };
  return s;
}
