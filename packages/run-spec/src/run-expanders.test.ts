import { describe, expect, it } from 'vitest';
import { helmJson, type ArgValue, type RunSpec } from '@flexhelm/core';
import { CANONICAL_RUN_SPEC_FUNCS } from './canonical-run-spec-functions.js';
import { bindArguments } from './run-spec-function.js';
import { MODEL_FAMILIES, MODEL_TO_TOKENIZER, RUN_EXPANDERS } from './run-expanders.js';

function base(name: string, args: [string, ArgValue][] = []): RunSpec {
  const fn = CANONICAL_RUN_SPEC_FUNCS.get(name)!;
  return fn.build(bindArguments(fn, args), {});
}
const expand = (key: string, value: ArgValue, rs: RunSpec) => RUN_EXPANDERS.get(key)!(value).expand(rs);

describe('RUN_EXPANDERS', () => {
  it('has the 13 expanders of HELM 0.2.1 (no temperature expander)', () => {
    expect([...RUN_EXPANDERS.keys()]).toEqual([
      'instructions', 'prompt', 'newline', 'stop', 'global_prefix', 'num_train_trials', 'max_train_instances', 'num_outputs',
      'model', 'data_augmentation', 'tokenizer', 'num_prompt_tokens', 'num_output_tokens',
    ]);
  });

  it('instructions: none clears, expert prefixes', () => {
    const rs = base('mmlu', [['subject', 'anatomy']]);
    expect(expand('instructions', 'none', rs)[0]!.adapter_spec.instructions).toBe('');
    const [expert] = expand('instructions', 'expert', rs);
    expect(expert!.name).toBe('mmlu:subject=anatomy,method=multiple_choice_joint,instructions=expert');
    expect(expert!.adapter_spec.instructions).toBe(
      'I am an expert AI assistant who is here to help you with the following. The following are multiple choice questions (with answers) about anatomy.\n',
    );
  });

  it('prompt: presets of prefixes and suffixes', () => {
    const rs = base('boolq');
    const [ha] = expand('prompt', 'human_assistant', rs);
    expect([ha!.adapter_spec.input_prefix, ha!.adapter_spec.input_suffix, ha!.adapter_spec.output_prefix, ha!.adapter_spec.output_suffix]).toEqual([
      'Human: What is the answer to "', '"?\n', 'Assistant: The answer is "', '".\n',
    ]);
    expect(ha!.adapter_spec.stop_sequences).toEqual(['".']);
    const [io] = expand('prompt', 'i_o', rs);
    expect([io!.name, io!.adapter_spec.input_prefix, io!.adapter_spec.output_prefix]).toEqual(['boolq,prompt=i_o', 'I: ', 'O: ']);
  });

  it('newline: substitutions', () => {
    expect(expand('newline', 'semicolon', base('boolq'))[0]!.adapter_spec.substitutions).toEqual([{ source: '\n', target: ';\n' }]);
    expect(expand('newline', 'br', base('boolq'))[0]!.adapter_spec.substitutions).toEqual([{ source: '\n', target: '<br>\n' }]);
  });

  it('stop: instance prefix and stop sequence', () => {
    const [rs] = expand('stop', 'semicolon', base('boolq'));
    expect([rs!.name, rs!.adapter_spec.instance_prefix, rs!.adapter_spec.stop_sequences]).toEqual(['boolq,stop=semicolon', ';\n\n', [';']]);
  });

  it.each(['instructions', 'prompt', 'newline', 'stop', 'global_prefix'])('%s: an unknown value is an Exception when expanding', (key) => {
    const expander = RUN_EXPANDERS.get(key)!('bogus');
    expect(() => expander.expand(base('boolq'))).toThrow(expect.objectContaining({ pythonClass: 'Exception', message: expect.stringMatching(/^Unknown value: bogus/) }));
  });

  it('global_prefix: nlg', () => {
    expect(expand('global_prefix', 'nlg', base('boolq'))[0]!.adapter_spec.global_prefix).toBe('[NLG]');
  });

  it('num_train_trials: the string keys and any other value', () => {
    expect(expand('num_train_trials', '2', base('boolq')).map((r) => [r.name, r.adapter_spec.num_train_trials])).toEqual([['boolq:num_train_trials=2', 2]]);
    expect(expand('num_train_trials', 7, base('boolq')).map((r) => r.adapter_spec.num_train_trials)).toEqual([7]);
  });

  it('max_train_instances: families (name separator depends on a colon in the name)', () => {
    expect(expand('max_train_instances', 'all', base('quac')).map((r) => r.name)).toEqual(
      [0, 1, 2, 4, 8, 16].map((n) => `quac:max_train_instances=${n}`),
    );
    expect(expand('max_train_instances', 'big_bench_few_shot_setting', base('boolq')).map((r) => r.adapter_spec.max_train_instances)).toEqual([0, 1, 2, 3]);
    expect(expand('max_train_instances', 'one', base('mmlu', [['subject', 'x']]))[0]!.name).toBe('mmlu:subject=x,method=multiple_choice_joint,max_train_instances=1');
  });

  it('num_outputs: copyright_sweep', () => {
    expect(expand('num_outputs', 'copyright_sweep', base('boolq')).map((r) => r.adapter_spec.num_outputs)).toEqual([1, 10]);
  });

  it('model: families in registry order, / → _ in names', () => {
    expect(MODEL_FAMILIES.get('text')).toHaveLength(44);
    expect(MODEL_FAMILIES.get('text')![0]).toBe('ai21/j1-jumbo');
    expect(MODEL_FAMILIES.get('opt_tokenizer')).toEqual(['together/opt-175b', 'together/opt-66b']);
    expect(MODEL_FAMILIES.get('code')).toEqual(['huggingface/santacoder', 'openai/code-davinci-002', 'openai/code-davinci-001', 'openai/code-cushman-001']);
    // HELM's ablation families are Python sets: CPython order with PYTHONHASHSEED=0.
    expect(MODEL_FAMILIES.get('ablation_opt_tokenizer')).toEqual(['together/opt-66b', 'together/opt-175b']);
    expect(MODEL_FAMILIES.get('ablation_limited_functionality_text')).toEqual(['together/ul2', 'together/glm', 'together/t5-11b', 'together/yalm', 'together/t0pp']);
    expect(MODEL_FAMILIES.get('ablation')).toHaveLength(11);
    const runs = expand('model', 'chat_run', base('legal_support'));
    expect(runs.map((r) => r.name)).toEqual(['legal_support,method=multiple_choice_joint:model=openai_chat-gpt', 'legal_support,method=multiple_choice_joint:model=openai_text-davinci-003']);
    expect(runs.map((r) => r.adapter_spec.model)).toEqual(['openai/chat-gpt', 'openai/text-davinci-003']);
  });

  it('data_augmentation: one RunSpec per augmentation name; unknown names fail when the expander is created', () => {
    const runs = expand('data_augmentation', 'misspelling_sweep', base('boolq'));
    expect(runs.map((r) => r.name)).toEqual(['boolq,data_augmentation=misspelling0', 'boolq,data_augmentation=misspelling0.05', 'boolq,data_augmentation=misspelling0.2', 'boolq,data_augmentation=misspelling0.5']);
    expect(helmJson(runs[0]!.data_augmenter_spec)).toBe(
      '{\n  "perturbation_specs": [\n    {\n      "class_name": "helm.benchmark.augmentations.misspelling_perturbation.MisspellingPerturbation",\n      "args": {\n        "prob": 0\n      }\n    }\n  ],\n' +
        '  "should_augment_train_instances": false,\n  "should_include_original_train": true,\n  "should_skip_unchanged_train": true,\n' +
        '  "should_augment_eval_instances": true,\n  "should_include_original_eval": true,\n  "should_skip_unchanged_eval": true,\n  "seeds_per_instance": 1\n}',
    );
    const [contract] = expand('data_augmentation', 'contract', base('boolq'));
    expect(contract!.data_augmenter_spec.perturbation_specs.map((p) => p.class_name)).toEqual([
      'helm.benchmark.augmentations.contraction_expansion_perturbation.ContractionPerturbation',
      'helm.benchmark.augmentations.contraction_expansion_perturbation.ExpansionPerturbation',
    ]);
    const [dialect] = expand('data_augmentation', 'dialect_deterministic', base('boolq'));
    expect(dialect!.name).toBe('boolq,data_augmentation=dialect_prob=1.0_source=SAE_target=AAVE');
    expect(helmJson(dialect!.data_augmenter_spec.perturbation_specs[0]!.args)).toBe(
      '{\n  "prob": 1.0,\n  "source_class": "SAE",\n  "target_class": "AAVE",\n  "mapping_file_path": null\n}',
    );
    expect(() => RUN_EXPANDERS.get('data_augmentation')!('nope')).toThrow(expect.objectContaining({ pythonClass: 'ValueError', message: expect.stringMatching(/^Unknown data_augmentation: nope; possible choices: extra_space, /) }));
  });

  it('tokenizer: default follows the model; unknown model → no run spec', () => {
    expect(MODEL_TO_TOKENIZER.get('together/opt-66b')).toBe('meta/opt');
    expect(MODEL_TO_TOKENIZER.get('together/gpt-j-6b')).toBe('eleutherai/gptj');
    const rs = base('synthetic_efficiency', [['num_prompt_tokens', 512]]);
    const withModel = { ...rs, adapter_spec: { ...rs.adapter_spec, model: 'together/opt-175b' } };
    const [out] = expand('tokenizer', 'default', withModel);
    expect(out!.name).toBe('synthetic_efficiency:random=None,tokenizer=meta_opt');
    expect(out!.scenario_spec.args).toEqual({ num_prompt_tokens: 512, num_instances: 10, tokenizer: 'meta/opt' });
    expect(expand('tokenizer', 'default', { ...rs, adapter_spec: { ...rs.adapter_spec, model: 'simple/model1' } })).toEqual([]);
    expect(expand('tokenizer', 'huggingface/gpt2', rs)[0]!.scenario_spec.args.tokenizer).toBe('huggingface/gpt2');
  });

  it('num_prompt_tokens and num_output_tokens sweeps', () => {
    const rs = base('synthetic_efficiency');
    expect(expand('num_prompt_tokens', 'default_sweep', rs).map((r) => r.scenario_spec.args.num_prompt_tokens)).toEqual([1, 256, 512, 1024, 1536]);
    const outs = expand('num_output_tokens', 'default_sweep', rs);
    expect(outs.map((r) => r.adapter_spec.max_tokens)).toEqual([1, 2, 4, 8, 16, 32, 64]);
    expect(outs[0]!.name).toBe('synthetic_efficiency:random=None,num_output_tokens=1');
  });
});
