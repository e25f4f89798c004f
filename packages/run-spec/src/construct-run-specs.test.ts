import { describe, expect, it } from 'vitest';
import { helmJson } from '@flexhelm/core';
import { CANONICAL_RUN_SPEC_FUNCS } from './canonical-run-spec-functions.js';
import { constructRunSpecs } from './construct-run-specs.js';
import { parseObjectSpec } from './parse-object-spec.js';

const construct = (description: string, resources = {}) => constructRunSpecs(parseObjectSpec(description), { resources });
const one = (description: string) => {
  const runs = construct(description);
  expect(runs).toHaveLength(1);
  return runs[0];
};
const failure = (description: string, resources = {}) => {
  try {
    construct(description, resources);
  } catch (err) {
    return err as { pythonClass: string; message: string };
  }
  throw new Error(`${description} did not fail`);
};

// One working description per run-spec function (raft and big_bench get their downloaded data injected).
const SAMPLES: Record<string, string> = {
  simple1: 'simple1',
  boolq: 'boolq:only_contrast=True',
  imdb: 'imdb',
  copyright: 'copyright:datatag=prompt_num_line_1-min_lines_20.json,temperature=0.2',
  mmlu: 'mmlu:subject=us_foreign_policy',
  interactive_qa_mmlu: 'interactive_qa_mmlu:subject=college_chemistry',
  msmarco: 'msmarco:track=trec,valid_topk=30',
  narrative_qa: 'narrative_qa',
  commonsense: 'commonsense:dataset=hellaswag,method=multiple_choice_separate_original',
  lsat_qa: 'lsat_qa:task=all',
  quac: 'quac',
  wikifact: 'wikifact:k=5,subject=plaintiff',
  babi_qa: 'babi_qa:task=15',
  real_toxicity_prompts: 'real_toxicity_prompts',
  summarization_xsum: 'summarization_xsum:temperature=0.3,device=cuda',
  summarization_xsum_sampled: 'summarization_xsum_sampled',
  summarization_cnndm: 'summarization_cnndm:temperature=0.3',
  truthful_qa: 'truthful_qa:task=mc_single',
  twitter_aae: 'twitter_aae:demographic=white',
  disinformation: 'disinformation:capability=wedging',
  gsm: 'gsm',
  math: 'math:subject=algebra,level=1,use_chain_of_thought=True',
  natural_qa: 'natural_qa:mode=openbook_longans',
  numeracy: 'numeracy:relation_type=plane,mode=standard',
  the_pile: 'the_pile:subset=ArXiv',
  raft: 'raft:subset=ade_corpus_v2',
  synthetic_efficiency: 'synthetic_efficiency:num_prompt_tokens=256,num_output_tokens=16,tokenizer=meta/opt,random=r1',
  synthetic_reasoning: 'synthetic_reasoning:mode=induction',
  synthetic_reasoning_natural: 'synthetic_reasoning_natural:difficulty=hard',
  news_qa: 'news_qa',
  wikitext_103: 'wikitext_103',
  blimp: 'blimp:phenomenon=island_effects',
  code: 'code:dataset=apps,timeout=5',
  empatheticdialogues: 'empatheticdialogues',
  bold: 'bold:subject=gender',
  bbq: 'bbq:subject=all',
  civil_comments: 'civil_comments:demographic=female',
  dyck_language: 'dyck_language:num_parenthesis_pairs=2',
  legal_support: 'legal_support',
  entity_matching: 'entity_matching:dataset=Abt_Buy',
  entity_data_imputation: 'entity_data_imputation:dataset=Restaurant',
  ice: 'ice:subset=ea,gender=male',
  big_bench: 'big_bench:task=auto_debugging,subtask=',
  lextreme: 'lextreme:subset=swiss_judgment_prediction',
  lex_glue: 'lex_glue:subset=case_hold',
  wmt_14: 'wmt_14:language_pair=de-en',
  covid_dialog: 'covid_dialog',
  me_q_sum: 'me_q_sum',
  med_dialog: 'med_dialog:subset=healthcaremagic',
  med_mcqa: 'med_mcqa',
  med_paragraph_simplification: 'med_paragraph_simplification',
  med_qa: 'med_qa',
  pubmed_qa: 'pubmed_qa',
};

const resources = {
  raftInstructions: (subset: unknown) => `Label the ${String(subset)} sentence.`,
  bigBenchTask: () => ({ metrics: ['exact_str_match', 'bleu'], task_prefix: 'Debug:\n', stop_string: '\n' }),
};

describe('CANONICAL_RUN_SPEC_FUNCS', () => {
  it('lists every run-spec name of HELM 0.2.1, in order', () => {
    expect(CANONICAL_RUN_SPEC_FUNCS.size).toBe(53);
    expect(Object.keys(SAMPLES)).toEqual([...CANONICAL_RUN_SPEC_FUNCS.keys()]);
  });

  it.each(Object.entries(SAMPLES))('%s constructs', (_name, description) => {
    const runs = constructRunSpecs(parseObjectSpec(`${description}${description.includes(':') ? ',' : ':'}model=together/opt-66b`), { resources });
    expect(runs).toHaveLength(1);
    expect(runs[0]!.adapter_spec.model).toBe('together/opt-66b');
    expect(runs[0]!.scenario_spec.class_name).toMatch(/^helm\.benchmark\.scenarios\.[a-z0-9_]+\.[A-Za-z0-9]+$/);
    expect(runs[0]!.metric_specs.length).toBeGreaterThan(0);
  });
});

describe('constructRunSpecs', () => {
  it('the spec example: mmlu with the canonical augmentation', () => {
    const rs = one('mmlu:model=together/opt-175b,subject=abstract_algebra,data_augmentation=canonical');
    expect(rs!.name).toBe('mmlu:subject=abstract_algebra,method=multiple_choice_joint,model=together_opt-175b,data_augmentation=canonical');
    expect(rs!.data_augmenter_spec.perturbation_specs.map((p) => p.class_name.split('.').pop())).toEqual([
      'MildMixPerturbation', 'DialectPerturbation', 'GenderPerturbation', 'PersonNamePerturbation',
    ]);
  });

  it('names without a colon get one from the model expander', () => {
    expect(one('legal_support:model=together/opt-66b')!.name).toBe('legal_support,method=multiple_choice_joint:model=together_opt-66b');
    expect(one('dyck_language:num_parenthesis_pairs=2,model=together/opt-66b')!.name).toBe('dyck_language_np=2:model=together_opt-66b');
    expect(one('summarization_xsum_sampled:model=together/opt-66b')!.name).toBe('summarization_xsum:temperature=0.3,device=cpu,model=together_opt-66b');
  });

  it('expanders apply in description order as a cartesian product', () => {
    const runs = construct('quac:max_train_instances=big_bench_few_shot_setting,model=opt_tokenizer');
    expect(runs.map((r) => r.name)).toEqual(
      [0, 1, 2, 3].flatMap((n) => ['175b', '66b'].map((m) => `quac:max_train_instances=${n},model=together_opt-${m}`)),
    );
  });

  it('alter_run_spec: no-newline models stop at ###, UL2 also gets the [NLG] prefix', () => {
    const t0 = one('boolq:model=together/t0pp');
    expect([t0!.name, t0!.adapter_spec.stop_sequences, t0!.adapter_spec.instance_prefix]).toEqual(['boolq:model=together_t0pp,stop=hash', ['###'], '###\n\n']);
    const ul2 = one('boolq:model=together/ul2');
    expect([ul2!.name, ul2!.adapter_spec.global_prefix]).toEqual(['boolq:model=together_ul2,stop=hash,global_prefix=nlg', '[NLG]']);
    expect(one('the_pile:subset=ArXiv,model=together/t5-11b')!.name).toBe('the_pile:subset=ArXiv,model=together_t5-11b');
  });

  it('keeps description value types in the output', () => {
    const rs = one('copyright:temperature=1,normalize_by_prefix_length=False,model=together/opt-66b');
    expect(rs!.adapter_spec.temperature).toBe(1);
    expect(rs!.metric_specs[0]!.args).toEqual({ normalize_by_prefix_length: 'False', normalize_newline_space_tab: false, name: 'longest_common_prefix_length' });
    expect(one('babi_qa:task=1.5,model=together/opt-66b')!.name).toBe('babi_qa:task=1.5,model=together_opt-66b');
    expect(one('wikifact:k=2.9,subject=author,model=together/opt-66b')!.adapter_spec.num_outputs).toBe(2);
  });

  it('numeracy: instructions header and per-mode adapter settings', () => {
    const standard = one('numeracy:relation_type=paraboloid,mode=standard,model=together/opt-66b');
    expect([standard!.adapter_spec.instructions, standard!.adapter_spec.max_eval_instances, standard!.adapter_spec.instance_prefix]).toEqual(['x, y, z', 100, '\n']);
    const fn = one('numeracy:model=together/opt-66b');
    expect(helmJson(fn!.scenario_spec)).toBe('{\n  "class_name": "helm.benchmark.scenarios.numeracy_scenario.NumeracyScenario",\n  "args": {\n    "seed": 0,\n    "relation_type": "linear",\n    "mode": "function"\n  }\n}');
    expect([fn!.adapter_spec.instructions, fn!.adapter_spec.instance_prefix, fn!.adapter_spec.temperature]).toEqual(['', '\n\n', 0]);
    expect(one('numeracy:run_solver=True,model=together/opt-66b')!.metric_specs.map((m) => m.class_name.split('.').pop())).toEqual(['BasicMetric', 'DistanceMetric']);
  });

  it('ice sorts its keyword arguments into the name', () => {
    expect(one('ice:subset=ea,gender=female,model=together/opt-66b')!.name).toBe('ice:gender=female,subset=ea,model=together_opt-66b');
    expect(one('ice:model=together/opt-66b')!.name).toBe('ice:model=together_opt-66b');
  });

  it('big_bench uses the injected task definition', () => {
    const rs = constructRunSpecs(parseObjectSpec('big_bench:task=t,subtask=s,model=together/opt-66b'), { resources })[0];
    expect(rs!.name).toBe('big_bench:task=t,subtask=s,model=together_opt-66b');
    expect([rs!.adapter_spec.method, rs!.adapter_spec.instructions, rs!.adapter_spec.stop_sequences]).toEqual(['generation', 'Debug:\n', ['\n']]);
    // A Python set in HELM: CPython's order with PYTHONHASHSEED=0.
    expect(rs!.metric_specs[0]!.args).toEqual({ names: ['quasi_exact_match', 'bleu_4', 'bleu_1', 'exact_match'] });
  });

  it.each([
    ['hellaswag:model=text', 'ValueError', /^Unknown run spec name: hellaswag; did you mean /],
    ['mmlux:subject=a', 'ValueError', /did you mean mmlu/],
    ['', 'ValueError', /the description is empty/],
    ['mmlu', 'TypeError', /get_mmlu_spec\(\) missing 1 required positional argument: 'subject'/],
    ['commonsense', 'TypeError', /missing 2 required positional arguments: 'dataset' and 'method'/],
    ['mmlu:subject=a,foo=bar', 'TypeError', /unexpected keyword argument 'foo' \(accepted arguments: subject, method\)/],
    ['quac:x=1', 'TypeError', /get_quac_spec\(\) got an unexpected keyword argument 'x'/],
    ['boolq', 'ValueError', /No model with name: .*add model=<name>/],
    ['mmlu:subject=a,model=nonexistent/model', 'ValueError', /^No model with name: nonexistent\/model/],
    ['mmlu:subject=a,method=generation,model=text', 'ValueError', /Invalid adaptation method: 'generation'/],
    ['mmlu:subject=5,model=text', 'AttributeError', /subject must be text/],
    ['boolq:model=text,data_augmentation=nope', 'ValueError', /Unknown data_augmentation: nope/],
    ['boolq:model=together/opt-66b,stop=bogus', 'Exception', /Unknown value: bogus/],
    ['numeracy:mode=other,model=text', 'ValueError', /Invalid mode: other/],
    ['numeracy:relation_type=cubic,model=text', 'KeyError', /'cubic': unknown numeracy relation_type/],
    ['numeracy:seed=abc', 'ValueError', /invalid literal for int\(\) with base 10: 'abc'/],
    ['wikifact:k=inf,subject=x', 'OverflowError', /cannot convert float infinity/],
    ['math:subject=a,level=1,use_official_examples=True,use_chain_of_thought=True', 'AssertionError', /Cannot use official examples/],
    ['msmarco:track=bogus,model=text', 'KeyError', /unknown msmarco track/],
    ['disinformation:capability=x', 'ValueError', /Unsupported evaluation for disinformation capability 'x'/],
    ['wmt_14:language_pair=de', 'ValueError', /not enough values to unpack/],
    ['wmt_14:language_pair=de-xx', 'KeyError', /'xx': unknown WMT14 language/],
    ['lextreme:subset=all', 'KeyError', /'all': unknown lextreme subset/],
    ['raft:subset=ade_corpus_v2,model=text', 'FileNotFoundError', /pass resources\.raftInstructions/],
    ['big_bench:task=a,subtask=b', 'FileNotFoundError', /pass resources\.bigBenchTask/],
  ])('%j → %s', (description, pythonClass, message) => {
    const error = failure(description);
    expect(error.pythonClass).toBe(pythonClass);
    expect(error.message).toMatch(message);
  });
});

describe('registerLocalModel', () => {
  it('lets run specs name a locally run model (no tags, so alter_run_spec leaves it alone)', async () => {
    const { registerLocalModel } = await import('./model-registry.js');
    expect(() => one('boolq:model=facebook/opt-125m')).toThrow(/No model with name: facebook\/opt-125m/);
    expect(registerLocalModel('facebook/opt-125m')).toEqual({ name: 'facebook/opt-125m', group: 'facebook', tags: [] });
    expect(one('boolq:model=facebook/opt-125m')!.name).toBe('boolq:model=facebook_opt-125m');
    expect(registerLocalModel('together/t0pp').tags).toContain('no_newlines');
    expect(() => registerLocalModel('opt')).toThrow(/local model names are written organization\/name/);
  });
});
