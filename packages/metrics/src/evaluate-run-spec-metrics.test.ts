import { pyFloat, toNumber } from '@flexhelm/python-compat';
import { describe, expect, it } from 'vitest';
import { adapterSpec, instance, objectSpec, perturbationDescription, reference, request, requestResult, requestState, runSpec, type Instance, type RequestState, type Sequence, type Stat } from '@flexhelm/core';
import { REFERENCE_METRIC_FUNCTIONS } from './basic-metric.js';
import { evaluateRunSpecMetrics } from './evaluate-run-spec-metrics.js';
import { WhitespaceWindowService } from './test-window-service.js';

const window = new WhitespaceWindowService();
const MODEL = 'together/opt-66b';

function completion(text: string, logprob: number, reason = 'stop'): Sequence {
  const tokens = window.tokenize(text).map((t, _i, all) => ({ text: t, logprob: logprob / all.length, top_logprobs: new Map([[t, logprob / all.length]]) }));
  return { text, logprob, tokens, finish_reason: { reason } };
}

const robustness = perturbationDescription('mild_mix', { robustness: true });
const questions: [string, string, Sequence[]][] = [
  ['Capital of France?', 'Paris', [completion(' Paris', -0.5), completion(' Lyon', -2)]],
  ['Capital of Italy?', 'Rome', [completion(' Milan', -0.25), completion(' Rome', -1)]],
  ['Capital of Spain?', 'Madrid', [completion(' Madrid is', -0.75, 'length'), completion(' Seville', -3)]],
];

function buildState() {
  const spec = adapterSpec({ method: 'generation', model: MODEL, num_outputs: 2, num_train_trials: 2, max_tokens: 5, temperature: pyFloat(0), max_train_instances: 0 });
  const states: RequestState[] = [];
  const instances: Instance[] = [];
  questions.forEach(([q, a], i) => {
    instances.push(instance({ input: { text: q }, references: [reference(a, ['correct']), reference('Berlin', [])], split: 'test', id: `id${i}` }));
    instances.push(instance({ input: { text: q.toLowerCase() }, references: [reference(a, ['correct']), reference('Berlin', [])], split: 'test', id: `id${i}`, perturbation: robustness }));
  });
  for (let trial = 0; trial < 2; trial++) {
    instances.forEach((inst, k) => {
      const [, , completions] = questions[Math.floor(k / 2)]!;
      const perturbed = inst.perturbation !== undefined;
      states.push(
        requestState({
          instance: inst,
          train_trial_index: trial,
          request: request({ model: MODEL, prompt: `Question: ${inst.input.text}\nAnswer:`, temperature: pyFloat(0), num_completions: 2, max_tokens: 5, stop_sequences: ['\n'] }),
          // The perturbed copy of question 1 is answered correctly: robustness worst-case must take the minimum.
          result: requestResult({ success: true, completions: perturbed && k === 3 ? [completion(' Rome', -0.1), completion(' Milan', -2)] : completions, cached: false, request_time: 0.5 + trial, request_datetime: 1700000000 }),
          num_train_instances: 0,
          prompt_truncated: false,
        }),
      );
    });
  }
  return { spec, state: { adapter_spec: spec, request_states: states } };
}

const names = Object.keys(REFERENCE_METRIC_FUNCTIONS);
const { spec, state } = buildState();
const rs = runSpec({
  name: 'capitals:model=together/opt-66b',
  scenario_spec: objectSpec('helm.benchmark.scenarios.simple_scenarios.Simple1Scenario', {}),
  adapter_spec: spec,
  metric_specs: [objectSpec('helm.benchmark.basic_metrics.BasicMetric', { names })],
});

describe('evaluateRunSpecMetrics', () => {
  const result = evaluateRunSpecMetrics(rs.metric_specs, state, { windowService: window });
  const find = (name: string, computedOn?: string, perturbed = false): Stat | undefined =>
    result.stats.find((s) => s.name.name === name && (perturbed ? s.name.perturbation?.computed_on === computedOn : s.name.perturbation === undefined));

  it('evaluates every basic metric and the token metric', () => {
    for (const n of names) {
      expect(find(n), n).toBeDefined();
      expect(find(`${n}@2`), `${n}@2`).toBeDefined();
    }
    // exact_match per trial: id0 1, id1 0, id2 0 (" Madrid is") → mean 1/3, same in both trials.
    expect(toNumber(find('exact_match')!.mean!)).toBeCloseTo(1 / 3, 15);
    expect(find('exact_match')!.count).toBe(2);
    expect(find('prefix_exact_match')!.sum).toBe(2 * (2 / 3));
    // Worst case over original and perturbed copies: id1's perturbed copy is right, its original wrong → min 0.
    expect(toNumber(find('exact_match', 'worst', true)!.mean!)).toBeCloseTo(1 / 3, 15);
    expect(toNumber(find('exact_match', 'perturbed', true)!.mean!)).toBeCloseTo(2 / 3, 15);
    expect(find('num_instances')!.mean).toEqual(pyFloat(3));
    expect(find('num_requests')!.sum).toBe(12);
    expect(find('estimated_num_tokens_cost')!.sum).toBe(0);
    expect(find('training_co2_cost')!.mean).toEqual(pyFloat(65.6));
    expect(find('inference_runtime')!.sum).toEqual(pyFloat(0.5 + 1.5));
    expect(find('finish_reason_length')!.mean).toBeCloseTo(1 / 3, 15);
    expect(find('ece_10_bin')).toBeDefined();
    // BasicMetric per-instance entries (6 instances × 2 trials) then TokensMetric entries (one per request state).
    expect(result.perInstanceStats).toHaveLength(12 + 12);
    expect(result.notComputed).toEqual([]);
  });

  it('rejects what HELM rejects, with a useful message', () => {
    expect(() => evaluateRunSpecMetrics([objectSpec('helm.benchmark.basic_metrics.NoSuchMetric', {})], state)).toThrow(/unknown metric class/);
    expect(() => evaluateRunSpecMetrics([objectSpec('helm.benchmark.basic_metrics.BasicMetric', { names: ['nope'] })], state)).toThrow(/NameError: nope/);
    // An inherited property name is no metric function either.
    expect(() => evaluateRunSpecMetrics([objectSpec('helm.benchmark.basic_metrics.BasicMetric', { names: ['constructor'] })], state)).toThrow(/NameError: constructor/);
    expect(() => evaluateRunSpecMetrics(rs.metric_specs, state)).toThrow(/window service/);
    const toxic = evaluateRunSpecMetrics([objectSpec('helm.benchmark.toxicity_metrics.ToxicityMetric', {})], state, { windowService: window });
    expect(toxic.notComputed[0]!.reason).toMatch(/Perspective API/);
  });
});
