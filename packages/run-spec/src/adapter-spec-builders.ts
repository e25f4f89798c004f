import { pyError, pyFloat as f, pyRepr } from '@flexhelm/python-compat';
import { adapterSpec, type AdapterSpec, type ArgValue } from '@flexhelm/core';

/**
 * The prototypical adapter specs of HELM 0.2.1's `run_specs.py` (`get_*_adapter_spec`). Values that come straight
 * from a description keep their Python type (a `temperature=1` argument stays the int 1), hence `ArgValue` fields.
 */
export type AdapterFields = { [K in keyof AdapterSpec]?: AdapterSpec[K] | ArgValue };

/** `AdapterSpec(**fields)`: HELM's defaults for every field not given, in dataclass order. */
export function makeAdapterSpec(fields: AdapterFields): AdapterSpec {
  const defined = Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined));
  return adapterSpec(defined as Partial<AdapterSpec>);
}

/** Appends a newline to non-empty instructions. */
function formatInstructions(instructions: string): string {
  return instructions.length > 0 ? `${instructions}\n` : instructions;
}

export const ADAPT_GENERATION = 'generation';
const ADAPT_LANGUAGE_MODELING = 'language_modeling';
export const ADAPT_MULTIPLE_CHOICE_JOINT = 'multiple_choice_joint';
export const ADAPT_MULTIPLE_CHOICE_SEPARATE_ORIGINAL = 'multiple_choice_separate_original';
const ADAPT_MULTIPLE_CHOICE_SEPARATE_CALIBRATED = 'multiple_choice_separate_calibrated';
export const ADAPT_RANKING_BINARY = 'ranking_binary';

function multipleChoiceJointAdapterSpec(
  instructions: string,
  inputNoun: string | undefined,
  outputNoun: string,
  maxTrainInstances: ArgValue = 5,
): AdapterSpec {
  return makeAdapterSpec({
    method: ADAPT_MULTIPLE_CHOICE_JOINT,
    instructions: formatInstructions(instructions),
    input_prefix: inputNoun !== undefined ? `${inputNoun}: ` : '',
    input_suffix: inputNoun !== undefined ? '\n' : '',
    output_prefix: `${outputNoun}: `,
    output_suffix: '\n',
    max_train_instances: maxTrainInstances,
    num_outputs: 1,
    max_tokens: 5,
    temperature: f(0),
    stop_sequences: ['\n'],
  });
}

function multipleChoiceSeparateAdapterSpec(method: string, emptyInput = false): AdapterSpec {
  return makeAdapterSpec({
    method,
    instructions: '',
    input_prefix: '',
    input_suffix: '',
    output_prefix: emptyInput ? '' : ' ',
    output_suffix: '',
    max_train_instances: 0,
    num_outputs: 1,
    max_tokens: 0,
    temperature: f(0),
  });
}

/** Joint or separate multiple choice, by `method` (HELM's `get_multiple_choice_adapter_spec`). */
export function multipleChoiceAdapterSpec(opts: {
  method: ArgValue;
  instructions: string;
  inputNoun: string | undefined;
  outputNoun: string;
  maxTrainInstances?: number;
  emptyInput?: boolean;
}): AdapterSpec {
  const { method } = opts;
  if (method === ADAPT_MULTIPLE_CHOICE_JOINT) {
    return multipleChoiceJointAdapterSpec(opts.instructions, opts.inputNoun, opts.outputNoun, opts.maxTrainInstances ?? 5);
  }
  if (method === ADAPT_MULTIPLE_CHOICE_SEPARATE_ORIGINAL || method === ADAPT_MULTIPLE_CHOICE_SEPARATE_CALIBRATED) {
    return multipleChoiceSeparateAdapterSpec(method, opts.emptyInput ?? false);
  }
  throw pyError(
    'ValueError',
    `Invalid adaptation method: ${pyRepr(method)}; use method=${ADAPT_MULTIPLE_CHOICE_JOINT}, ` +
      `method=${ADAPT_MULTIPLE_CHOICE_SEPARATE_ORIGINAL} or method=${ADAPT_MULTIPLE_CHOICE_SEPARATE_CALIBRATED}`,
  );
}

export function rankingBinaryAdapterSpec(opts: { maxTrainInstances: number; stopSequences: string[] }): AdapterSpec {
  if (opts.maxTrainInstances % 2 !== 0) {
    throw pyError('AssertionError', 'There must be an even number of in-context examples to ensure that an equal number of positive and negative examples are included.');
  }
  return makeAdapterSpec({
    method: ADAPT_RANKING_BINARY,
    instructions: formatInstructions(''),
    input_prefix: 'Query: ',
    input_suffix: '\n',
    reference_prefix: 'Passage: ',
    reference_suffix: '\n',
    output_prefix: 'Does the passage answer the query?\nAnswer: ',
    max_train_instances: Math.trunc(opts.maxTrainInstances / 2),
    num_outputs: 1,
    num_train_trials: 1,
    temperature: f(0),
    max_tokens: 5,
    stop_sequences: opts.stopSequences,
  });
}

/** `[input][output_prefix][output][output_suffix]` (HELM's `get_completion_adapter_spec`). */
export function completionAdapterSpec(opts: {
  instructions?: string;
  inputPrefix?: string;
  outputPrefix?: string;
  outputSuffix?: string;
  maxTrainInstances?: ArgValue;
  temperature?: ArgValue;
  numOutputs?: ArgValue;
  maxTokens?: ArgValue;
  stopSequences?: string[];
  random?: ArgValue;
}): AdapterSpec {
  return makeAdapterSpec({
    method: ADAPT_GENERATION,
    instructions: formatInstructions(opts.instructions ?? ''),
    input_prefix: opts.inputPrefix ?? '',
    input_suffix: '',
    output_prefix: opts.outputPrefix ?? '',
    output_suffix: opts.outputSuffix ?? '',
    max_train_instances: opts.maxTrainInstances ?? 0,
    temperature: opts.temperature ?? f(0),
    num_outputs: opts.numOutputs ?? 1,
    max_tokens: opts.maxTokens ?? 100,
    stop_sequences: opts.stopSequences ?? [],
    random: opts.random,
  });
}

function formatPrefix(noun: string | undefined, newline: boolean): string {
  const prefix = noun !== undefined ? `${noun}:` : '';
  return prefix.length > 0 ? prefix + (newline ? '\n' : ' ') : prefix;
}

/** `[input_noun]: [input]\n[output_noun]: [output]\n` (HELM's `get_generation_adapter_spec`). */
export function generationAdapterSpec(opts: {
  instructions?: string;
  inputNoun?: string;
  newlineAfterInputNoun?: boolean;
  outputNoun?: string;
  newlineAfterOutputNoun?: boolean;
  maxTrainInstances?: number;
  numOutputs?: number;
  maxTokens?: number;
  stopSequences?: string[];
  temperature?: ArgValue;
}): AdapterSpec {
  return makeAdapterSpec({
    method: ADAPT_GENERATION,
    instructions: formatInstructions(opts.instructions ?? ''),
    input_prefix: formatPrefix(opts.inputNoun, opts.newlineAfterInputNoun ?? false),
    input_suffix: '\n',
    output_prefix: formatPrefix(opts.outputNoun, opts.newlineAfterOutputNoun ?? false),
    output_suffix: '\n',
    max_train_instances: opts.maxTrainInstances ?? 5,
    num_outputs: opts.numOutputs ?? 1,
    max_tokens: opts.maxTokens ?? 5,
    temperature: opts.temperature ?? f(0),
    stop_sequences: opts.stopSequences ?? ['\n'],
  });
}

export function languageModelingAdapterSpec(): AdapterSpec {
  return makeAdapterSpec({
    method: ADAPT_LANGUAGE_MODELING,
    instructions: '',
    input_prefix: '',
    input_suffix: '',
    output_prefix: '',
    output_suffix: '',
    max_train_instances: 0,
    num_outputs: 1,
    max_tokens: 0,
    temperature: f(0),
  });
}

export function summarizationAdapterSpec(numSents: number, extra: { maxTokens: ArgValue; temperature: ArgValue }): AdapterSpec {
  const outputPrefix = numSents === 1 ? 'Summarize the above article in 1 sentence.\n' : `Summarize the above article in ${numSents} sentences.\n`;
  return makeAdapterSpec({
    method: ADAPT_GENERATION,
    instructions: '',
    input_prefix: '###\nArticle: ',
    input_suffix: '\n\n',
    output_prefix: outputPrefix,
    output_suffix: '\n',
    max_train_instances: 5,
    num_outputs: 1,
    stop_sequences: ['###'],
    max_tokens: extra.maxTokens,
    temperature: extra.temperature,
  });
}

export function machineTranslationAdapterSpec(sourceLanguage: string, targetLanguage: string, maxTrainInstances: ArgValue): AdapterSpec {
  return makeAdapterSpec({
    method: ADAPT_GENERATION,
    instructions: `Translate ${sourceLanguage} to ${targetLanguage}:`,
    input_prefix: '',
    input_suffix: ' = ',
    output_prefix: '',
    output_suffix: '\n',
    max_train_instances: maxTrainInstances,
    num_outputs: 1,
    stop_sequences: ['\n\n'],
    temperature: f(0),
  });
}
