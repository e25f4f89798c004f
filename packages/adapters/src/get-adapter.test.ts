import { pyFloat } from '@flexhelm/python-compat';
import { CORRECT_TAG, adapterSpec, instance, reference, scenarioStateInstances, type Instance } from '@flexhelm/core';
import { getWindowService } from '@flexhelm/tokenizer';
import { describe, expect, it } from 'vitest';
import { getAdapter } from './get-adapter.js';
import type { InContextLearningAdapter } from './in-context-learning-adapter.js';
import type { LanguageModelingAdapter } from './language-modeling-adapter.js';
import { promptText } from './prompt.js';
import { labeled, openAiWindowService } from './test-support.js';

const ws = openAiWindowService();

describe('generation prompts (HELM test_generation_adapter.py)', () => {
  it('drops in-context examples before touching the eval instance', () => {
    const adapter = getAdapter(adapterSpec({ model: 'openai/davinci', method: 'generation', input_prefix: '', input_suffix: '', output_prefix: '', output_suffix: '', max_tokens: 100 }), ws) as InContextLearningAdapter;
    // HELM uses 2049 examples; 1100 (about 2200 tokens) exceed the window as well and keep the quadratic fitting loop fast.
    const train = Array.from({ length: 1100 }, () => instance({ input: { text: 'train' }, references: [reference('', [CORRECT_TAG])] }));
    const prompt = adapter.constructPrompt(train, instance({ input: { text: 'eval' }, references: [] }), false, undefined);
    const text = promptText(prompt);
    expect(ws.fitsWithinContextWindow(text)).toBe(true);
    expect(text.endsWith('eval')).toBe(true);
    expect(prompt.truncatedText).toBeUndefined();
  });

  it('truncates the eval instance from the right once no example is left (1948 "eval"s)', () => {
    const adapter = getAdapter(adapterSpec({ model: 'openai/davinci', method: 'generation', input_prefix: '', output_prefix: '', max_tokens: 100 }), ws) as InContextLearningAdapter;
    const train = Array.from({ length: 100 }, () => instance({ input: { text: 'train' }, references: [reference('', [CORRECT_TAG])] }));
    const prompt = adapter.constructPrompt(train, instance({ input: { text: 'eval'.repeat(2049) }, references: [] }), false, undefined);
    const text = promptText(prompt);
    expect(ws.fitsWithinContextWindow(text)).toBe(true);
    expect(text).not.toContain('train');
    expect(text.split('eval').length - 1).toBe(1948);
    expect(prompt.trainInstanceBlocks).toHaveLength(0);
  });

  it('adapts every eval instance once per trial', () => {
    const instances: Instance[] = [
      ...['a', 'b', 'c', 'd'].map((t, i) => labeled(t, `l${i % 2}`)),
      ...['x', 'y', 'z'].map((t) => labeled(t, 'l0', 'test')),
    ];
    const spec = adapterSpec({ method: 'generation', model: 'together/opt-175b', num_train_trials: 3, max_train_instances: 2, temperature: pyFloat(0), max_tokens: 5, num_outputs: 1 });
    const state = getAdapter(spec, getWindowService('together/opt-175b', { tokenizer: 'whitespace-stub' })).adapt(instances, 1);
    expect(state.request_states).toHaveLength(scenarioStateInstances(state).length * 3);
    expect(state.request_states.map((rs) => rs.train_trial_index)).toEqual([0, 0, 0, 1, 1, 1, 2, 2, 2]);
    const first = state.request_states[0];
    expect(first!.request.prompt.endsWith('Input: x\nOutput:')).toBe(true);
    expect(first!.num_train_instances).toBe(2);
    expect(first!.request.num_completions).toBe(1);
  });
});

describe('prompt assembly', () => {
  it('joins instructions, train and eval blocks, adds the global prefix, then substitutes', () => {
    const spec = adapterSpec({
      method: 'generation', model: 'together/opt-66b', instructions: 'Do it.\n', global_prefix: 'GP', max_train_instances: 1,
      substitutions: [{ source: '\n', target: '<br>\n' }], max_tokens: 1,
    });
    const adapter = getAdapter(spec, getWindowService('together/opt-66b', { tokenizer: 'whitespace-stub' })) as InContextLearningAdapter;
    const prompt = adapter.constructPrompt([labeled('q1', 'a1')], labeled('q2', 'a2', 'test'), false, undefined);
    expect(promptText(prompt)).toBe('GP Do it.<br>\n<br>\nInput: q1<br>\nOutput: a1<br>\n<br>\nInput: q2<br>\nOutput:');
  });
});

describe('multiple-choice and ranking requests', () => {
  const mc = instance({
    input: { text: 'Q?' }, split: 'test',
    references: [reference('r0'), reference('r1', [CORRECT_TAG]), reference('r2')],
  });
  const opt = getWindowService('together/opt-175b', { tokenizer: 'whitespace-stub' });

  it('multiple_choice_joint letters the references and asks for one token', () => {
    const spec = adapterSpec({ method: 'multiple_choice_joint', model: 'm', max_train_instances: 1, num_outputs: 5, reference_prefix: 'A. ', output_prefix: 'Answer: ' });
    const [rs] = getAdapter(spec, opt).adapt([labeled('T?', 'x'), mc]).request_states;
    expect(rs!.request.prompt).toBe('Input: T?\nA. x\nAnswer: A\n\nInput: Q?\nA. r0\nB. r1\nC. r2\nAnswer:');
    expect(rs!.output_mapping).toEqual({ A: 'r0', B: 'r1', C: 'r2' });
    expect([rs!.request.temperature, rs!.request.max_tokens, rs!.request.top_k_per_token, rs!.request.num_completions]).toEqual([0, 1, 5, 1]);
  });

  it('multiple_choice_separate_calibrated pairs each original request with an "Answer:" calibration request', () => {
    const spec = adapterSpec({ method: 'multiple_choice_separate_calibrated', model: 'm', max_train_instances: 0, input_prefix: '', input_suffix: '', output_prefix: ' ', output_suffix: '' });
    const states = getAdapter(spec, opt).adapt([mc]).request_states;
    expect(states.map((s) => [s.reference_index, s.request_mode, s.request.prompt])).toEqual([
      [0, 'original', 'Q? r0'], [0, 'calibration', 'Answer: r0'],
      [1, 'original', 'Q? r1'], [1, 'calibration', 'Answer: r1'],
      [2, 'original', 'Q? r2'], [2, 'calibration', 'Answer: r2'],
    ]);
    expect(states.every((s) => s.request.echo_prompt && s.request.max_tokens === 0 && s.instance === mc)).toBe(true);
  });

  it('ranking_binary asks about one passage per request, train instances give Yes/No blocks', () => {
    const spec = adapterSpec({ method: 'ranking_binary', model: 'm', max_train_instances: 1, reference_prefix: 'Passage: ', input_prefix: 'Query: ', output_prefix: 'Answer: ', num_outputs: 1 });
    const train = instance({ input: { text: 'tq' }, split: 'train', references: [reference('good', [CORRECT_TAG]), reference('bad')] });
    const states = getAdapter(spec, opt).adapt([train, mc]).request_states;
    expect(states).toHaveLength(3);
    expect(states[1]!.request.prompt).toBe('Passage: good\nQuery: tq\nAnswer: Yes\n\nPassage: bad\nQuery: tq\nAnswer: No\n\nPassage: r1\nQuery: Q?\nAnswer:');
  });
});

describe('language_modeling (HELM test_language_modeling_adapter.py)', () => {
  const spec = adapterSpec({ method: 'language_modeling', input_prefix: '', model: 'openai/davinci', output_prefix: '', max_tokens: 0 });
  const lm = getAdapter(spec, ws) as LanguageModelingAdapter;

  it('strips partial characters and counts conditioning tokens ("Excuse me", 1)', () => {
    expect(lm.constructLanguageModelingPrompt([110, 40127], [1904, 502, 447], 5, '')).toEqual(['Excuse me', 1]);
  });

  it('drops predicted tokens that do not fit the request', () => {
    const [prompt, pred] = lm.fitsTokensWithinContextWindow([50256], [464, ...Array(2048).fill(262)], ws.maxRequestLength);
    expect(prompt).toBe(`<|endoftext|>The${' the'.repeat(2047)}`);
    expect(pred).toEqual([464, ...Array(2047).fill(262)]);
  });

  it('cuts long documents into windows conditioned on the preceding tokens', () => {
    const gpt2 = getWindowService('huggingface/gpt2', { tokenizer: 'whitespace-stub' });
    const text = Array.from({ length: 2500 }, (_, i) => `w${i}`).join(' ');
    const states = getAdapter(adapterSpec({ method: 'language_modeling', model: 'huggingface/gpt2', max_tokens: 0, max_train_instances: 0 }), gpt2)
      .adapt([instance({ input: { text }, references: [], split: 'test' })]).request_states;
    // Windows: 1024 predicted after the prefix, 1024 after 1 token, the last 452 after 2500 - 1025 - 452 = 573 tokens.
    expect(states.map((s) => s.num_conditioning_tokens)).toEqual([1, 1, 573]);
    expect(states[0]!.request.prompt.startsWith('<|endoftext|>w0 w1')).toBe(true);
    expect(states[2]!.request.prompt.endsWith(' w2499')).toBe(true);
    expect(states.map((s) => gpt2.getNumTokens(s.request.prompt))).toEqual([1024, 1025, 1025]); // the stub reads "<|endoftext|>w0" as one token
  });
});

describe('getAdapter', () => {
  it('rejects unknown methods', () => {
    expect(() => getAdapter(adapterSpec({ method: 'nope' }), ws)).toThrow(/Invalid adaptation method: nope; use one of generation/);
  });
});
