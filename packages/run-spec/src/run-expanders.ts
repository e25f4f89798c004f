import { dictWith, pyError, pyStr, PythonSet } from '@flexhelm/python-compat';
import { runSpec, type AdapterSpec, type ArgValue, type DataAugmenterSpec, type RunSpec, dataAugmenterSpec } from '@flexhelm/core';
import { ALL_MODELS, MODEL_TAGS, getAllCodeModels, getAllModels, getAllTextModels, getModelNamesWithTag } from './model-registry.js';
import { PERTURBATION_SPECS } from './perturbation-specs.js';

/** A RunExpander of HELM 0.2.1: turns one RunSpec into several (or one changed one). */
export interface RunExpander {
  name: string;
  expand(runSpec: RunSpec): RunSpec[];
}

/** `dataclasses.replace(run_spec, ...)`: RunSpec's `__post_init__` runs again, so `/` in the name becomes `_`. */
export function replaceRunSpec(
  base: RunSpec,
  changes: Partial<Pick<RunSpec, 'name' | 'scenario_spec' | 'adapter_spec' | 'data_augmenter_spec' | 'groups'>>,
): RunSpec {
  return runSpec({ ...base, ...changes });
}

function replaceAdapter(adapter: AdapterSpec, field: keyof AdapterSpec | string, value: ArgValue): AdapterSpec {
  return { ...adapter, [field]: value } as AdapterSpec;
}

const separator = (name: string) => (name.includes(':') ? ',' : ':');

function unknownValue(expander: string, value: ArgValue, choices: string[]): Error {
  return pyError('Exception', `Unknown value: ${pyStr(value)} for ${expander}; use ${expander}=${choices.join(` or ${expander}=`)}`);
}

/** Looks `value` up in a family table (only strings can match HELM's str keys), else the value itself. */
function familyValues(table: ReadonlyMap<string, ArgValue[]>, value: ArgValue): ArgValue[] {
  return (typeof value === 'string' ? table.get(value) : undefined) ?? [value];
}

/** ReplaceValueRunExpander: one RunSpec per value, `adapter_spec.<name> = value`, name `{sep}{name}={value}`. */
function replaceValueExpander(name: keyof AdapterSpec, table: ReadonlyMap<string, ArgValue[]>) {
  return (value: ArgValue): RunExpander => {
    const values = familyValues(table, value);
    return {
      name,
      expand: (rs) =>
        values.map((v) =>
          replaceRunSpec(rs, {
            name: `${rs.name}${separator(rs.name)}${name}=${pyStr(v).replaceAll('/', '_')}`,
            adapter_spec: replaceAdapter(rs.adapter_spec, name, v),
          }),
        ),
    };
  };
}

/** ScenarioSpecRunExpander: one RunSpec per value, `scenario_spec.args[name] = value`. */
function scenarioArgExpander(name: string, valuesFor: (rs: RunSpec) => ArgValue[]) {
  return (rs: RunSpec): RunSpec[] =>
    valuesFor(rs).map((v) =>
      replaceRunSpec(rs, {
        name: `${rs.name}${separator(rs.name)}${name}=${pyStr(v).replaceAll('/', '_')}`,
        scenario_spec: { class_name: rs.scenario_spec.class_name, args: dictWith(rs.scenario_spec.args, name, v) },
      }),
    );
}

/** A single-output expander with a fixed set of values, each changing the adapter spec. */
function choiceExpander(name: string, choices: Record<string, (adapter: AdapterSpec) => AdapterSpec>) {
  return (value: ArgValue): RunExpander => ({
    name,
    expand: (rs) => {
      const change = typeof value === 'string' && Object.hasOwn(choices, value) ? choices[value] : undefined;
      if (!change) throw unknownValue(name, value, Object.keys(choices));
      return [replaceRunSpec(rs, { name: `${rs.name},${name}=${pyStr(value)}`, adapter_spec: change(rs.adapter_spec) })];
    },
  });
}

const instructions = choiceExpander('instructions', {
  none: (a) => ({ ...a, instructions: '' }),
  expert: (a) => ({ ...a, instructions: `I am an expert AI assistant who is here to help you with the following. ${a.instructions}` }),
});

const prompt = choiceExpander('prompt', {
  human_assistant: (a) => ({
    ...a,
    input_prefix: 'Human: What is the answer to "',
    input_suffix: '"?\n',
    output_prefix: 'Assistant: The answer is "',
    output_suffix: '".\n',
    stop_sequences: ['".'],
  }),
  question_answer: (a) => ({ ...a, input_prefix: 'Question: ', output_prefix: 'Answer: ' }),
  qa: (a) => ({ ...a, input_prefix: 'Q: ', output_prefix: 'A: ' }),
  input_output_html: (a) => ({ ...a, input_prefix: '<input>', input_suffix: '</input>\n', output_prefix: '<output>', output_suffix: '</output>\n' }),
  input_output: (a) => ({ ...a, input_prefix: 'Input: ', output_prefix: 'Output: ' }),
  i_o: (a) => ({ ...a, input_prefix: 'I: ', output_prefix: 'O: ' }),
});

const newline = choiceExpander('newline', {
  semicolon: (a) => ({ ...a, substitutions: [{ source: '\n', target: ';\n' }] }),
  br: (a) => ({ ...a, substitutions: [{ source: '\n', target: '<br>\n' }] }),
});

const STOPS: Record<string, string> = { hash: '###', semicolon: ';', br: '<br>' };
const stop = choiceExpander(
  'stop',
  Object.fromEntries(Object.entries(STOPS).map(([key, s]) => [key, (a: AdapterSpec) => ({ ...a, instance_prefix: `${s}\n\n`, stop_sequences: [s] })])),
);

const globalPrefix = choiceExpander('global_prefix', { nlg: (a) => ({ ...a, global_prefix: '[NLG]' }) });

const numTrainTrials = replaceValueExpander('num_train_trials', new Map([1, 2, 3, 4, 5].map((n) => [String(n), [n]])));

const maxTrainInstances = replaceValueExpander(
  'max_train_instances',
  new Map([
    ['zero', [0]],
    ['one', [1]],
    ['all', [0, 1, 2, 4, 8, 16]],
    ['big_bench_few_shot_setting', [0, 1, 2, 3]],
  ]),
);

const numOutputs = replaceValueExpander(
  'num_outputs',
  new Map([
    ['default', [1]],
    ['copyright_sweep', [1, 10]],
  ]),
);

/**
 * The `model=` families. HELM builds each `ablation_<family>` as `list(set(ablation_models) & set(family))`, so its
 * order is CPython's set order; flexhelm reproduces it for PYTHONHASHSEED=0 (HELM's golden data; other seeds differ).
 */
export const MODEL_FAMILIES: ReadonlyMap<string, string[]> = (() => {
  const families = new Map<string, string[]>([
    ['full_functionality_text', getModelNamesWithTag(MODEL_TAGS.fullFunctionalityText)],
    ['ai21/j1-jumbo', ['ai21/j1-jumbo']],
    ['openai/curie', ['openai/curie']],
    ['chat_run', ['openai/chat-gpt', 'openai/text-davinci-003']],
    ['all', getAllModels()],
    ['text_code', [...getAllTextModels(), ...getAllCodeModels()]],
    ['text', getAllTextModels()],
    ['code', getAllCodeModels()],
    ['limited_functionality_text', getModelNamesWithTag(MODEL_TAGS.limitedFunctionalityText)],
    ['gpt2_tokenizer', getModelNamesWithTag(MODEL_TAGS.gpt2Tokenizer)],
    ['ai21_tokenizer', getModelNamesWithTag(MODEL_TAGS.ai21Tokenizer)],
    ['cohere_tokenizer', getModelNamesWithTag(MODEL_TAGS.cohereTokenizer)],
    ['opt_tokenizer', getModelNamesWithTag(MODEL_TAGS.optTokenizer)],
    ['summarization_zs', ['openai/davinci', 'openai/curie', 'openai/text-davinci-002', 'openai/text-curie-001']],
    ['biomedical', ['openai/text-davinci-003']],
    ['interactive_qa', ['openai/text-davinci-001', 'openai/davinci', 'ai21/j1-jumbo', 'openai/text-babbage-001']],
  ]);
  const ablation = PythonSet.from(getModelNamesWithTag(MODEL_TAGS.ablation));
  for (const [family, models] of [...families]) {
    families.set(family === 'all' ? 'ablation' : `ablation_${family}`, [...ablation.intersection(PythonSet.from(models))]);
  }
  return families;
})();

const model = replaceValueExpander('model', MODEL_FAMILIES);

function dataAugmentation(value: ArgValue): RunExpander {
  const options = typeof value === 'string' ? PERTURBATION_SPECS.get(value) : undefined;
  if (!options) {
    throw pyError('ValueError', `Unknown data_augmentation: ${pyStr(value)}; possible choices: ${[...PERTURBATION_SPECS.keys()].join(', ')}`);
  }
  return {
    name: 'data_augmentation',
    expand: (rs) =>
      [...options].map(([augName, perturbationSpecs]) => {
        const augmenter: DataAugmenterSpec = dataAugmenterSpec({
          perturbation_specs: [...perturbationSpecs],
          should_augment_train_instances: false,
          should_include_original_train: true,
          should_skip_unchanged_train: true,
          should_augment_eval_instances: true,
          should_include_original_eval: true,
          should_skip_unchanged_eval: true,
          seeds_per_instance: 1,
        });
        return replaceRunSpec(rs, { name: `${rs.name},data_augmentation=${augName}`, data_augmenter_spec: augmenter });
      }),
  };
}

/** `tokenizer=default` → the tokenizer of each RunSpec's model (no RunSpec for a model without one). */
export const MODEL_TO_TOKENIZER: ReadonlyMap<string, string> = (() => {
  const mapping = new Map<string, string>([
    ['together/yalm', 'yandex/yalm'],
    ['together/bloom', 'bigscience/bloom'],
    ['together/t0pp', 'bigscience/t0pp'],
    ['together/t5-11b', 'google/t5'],
    ['together/ul2', 'google/ul2'],
    ['together/glm', 'tsinghua/glm'],
    ['AlephAlpha/luminous-base', 'AlephAlpha/luminous-base'],
    ['AlephAlpha/luminous-extended', 'AlephAlpha/luminous-extended'],
    ['AlephAlpha/luminous-supreme', 'AlephAlpha/luminous-supreme'],
    ['AlephAlpha/luminous-world', 'AlephAlpha/luminous-world'],
    ['huggingface/santacoder', 'bigcode/santacoder'],
  ]);
  const byTag: [string, string][] = [
    [MODEL_TAGS.gpt2Tokenizer, 'huggingface/gpt2'],
    [MODEL_TAGS.ai21Tokenizer, 'ai21/j1'],
    [MODEL_TAGS.cohereTokenizer, 'cohere/cohere'],
    [MODEL_TAGS.optTokenizer, 'meta/opt'],
    [MODEL_TAGS.gptjTokenizer, 'eleutherai/gptj'],
    [MODEL_TAGS.gptneoTokenizer, 'eleutherai/gptneox'],
  ];
  for (const [tag, tokenizer] of byTag) for (const m of ALL_MODELS) if (m.tags.includes(tag)) mapping.set(m.name, tokenizer);
  return mapping;
})();

function tokenizer(value: ArgValue): RunExpander {
  const expand =
    value === 'default'
      ? scenarioArgExpander('tokenizer', (rs) => {
          const tok = typeof rs.adapter_spec.model === 'string' ? MODEL_TO_TOKENIZER.get(rs.adapter_spec.model) : undefined;
          return tok === undefined ? [] : [tok];
        })
      : scenarioArgExpander('tokenizer', () => [value]);
  return { name: 'tokenizer', expand };
}

function numPromptTokens(value: ArgValue): RunExpander {
  const values = familyValues(new Map([['default_sweep', [1, 256, 512, 1024, 1536]]]), value);
  return { name: 'num_prompt_tokens', expand: scenarioArgExpander('num_prompt_tokens', () => values) };
}

function numOutputTokens(value: ArgValue): RunExpander {
  const values = familyValues(new Map([['default_sweep', [1, 2, 4, 8, 16, 32, 64]]]), value);
  return {
    name: 'num_output_tokens',
    expand: (rs) =>
      values.map((v) =>
        replaceRunSpec(rs, {
          name: `${rs.name}${separator(rs.name)}num_output_tokens=${pyStr(v)}`,
          adapter_spec: replaceAdapter(rs.adapter_spec, 'max_tokens', v),
        }),
      ),
  };
}

/**
 * HELM 0.2.1's `RUN_EXPANDERS`: description keys that expand run specs instead of being passed to the run-spec
 * function. Creating an expander validates what HELM's constructor validates (only `data_augmentation` does).
 */
export const RUN_EXPANDERS: ReadonlyMap<string, (value: ArgValue) => RunExpander> = new Map([
  ['instructions', instructions],
  ['prompt', prompt],
  ['newline', newline],
  ['stop', stop],
  ['global_prefix', globalPrefix],
  ['num_train_trials', numTrainTrials],
  ['max_train_instances', maxTrainInstances],
  ['num_outputs', numOutputs],
  ['model', model],
  ['data_augmentation', dataAugmentation],
  ['tokenizer', tokenizer],
  ['num_prompt_tokens', numPromptTokens],
  ['num_output_tokens', numOutputTokens],
]);
