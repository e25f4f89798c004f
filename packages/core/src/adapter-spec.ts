import type { PyNumber } from '@flexhelm/python-compat';

export interface Substitution {
  source: string;
  target: string;
}

/** The adaptation methods of HELM 0.2.1 (`adapter_spec.method`). */
export const ADAPT_METHODS = [
  'generation',
  'language_modeling',
  'multiple_choice_joint',
  'multiple_choice_separate_original',
  'multiple_choice_separate_calibrated',
  'ranking_binary',
] as const;
export type AdaptMethod = (typeof ADAPT_METHODS)[number];

/** HELM 0.2.1 `AdapterSpec`; fields in dataclass order (the JSON order). `undefined` = Python None. */
export interface AdapterSpec {
  method: string;
  global_prefix: string;
  instructions: string;
  input_prefix: string;
  input_suffix: string;
  reference_prefix: string;
  reference_suffix: string;
  output_prefix: string;
  output_suffix: string;
  instance_prefix: string;
  substitutions: Substitution[];
  max_train_instances: number;
  max_eval_instances?: number;
  num_outputs: number;
  num_train_trials: number;
  model: string;
  /** `temperature: float = 1` in HELM: the default is the int 1; run-spec functions mostly pass `0.0`. */
  temperature: PyNumber;
  max_tokens: number;
  stop_sequences: string[];
  random?: string;
}

export const ADAPTER_SPEC_FIELDS = [
  'method', 'global_prefix', 'instructions', 'input_prefix', 'input_suffix', 'reference_prefix', 'reference_suffix',
  'output_prefix', 'output_suffix', 'instance_prefix', 'substitutions', 'max_train_instances', 'max_eval_instances',
  'num_outputs', 'num_train_trials', 'model', 'temperature', 'max_tokens', 'stop_sequences', 'random',
] as const satisfies readonly (keyof AdapterSpec)[];

/** An AdapterSpec with HELM's defaults for every field not given, in dataclass field order. */
export function adapterSpec(fields: Partial<AdapterSpec> = {}): AdapterSpec {
  const defaults: AdapterSpec = {
    method: '',
    global_prefix: '',
    instructions: '',
    input_prefix: 'Input: ',
    input_suffix: '\n',
    reference_prefix: 'A. ',
    reference_suffix: '\n',
    output_prefix: 'Output: ',
    output_suffix: '\n',
    instance_prefix: '\n',
    substitutions: [],
    max_train_instances: 5,
    max_eval_instances: undefined,
    num_outputs: 5,
    num_train_trials: 1,
    model: '',
    temperature: 1,
    max_tokens: 100,
    stop_sequences: [],
    random: undefined,
  };
  return orderFields({ ...defaults, ...fields }, ADAPTER_SPEC_FIELDS);
}

/** A copy of `obj` whose own keys are in `fields` order (JSON order follows insertion order). */
export function orderFields<T extends object>(obj: T, fields: readonly (keyof T)[]): T {
  const out = {} as T;
  for (const f of fields) out[f] = obj[f];
  return out;
}

