import type { AdapterSpec } from './adapter-spec.js';
import type { MetricSpec, PerturbationSpec, ScenarioSpec } from './object-spec.js';

/** HELM 0.2.1 `DataAugmenterSpec` (field order = JSON order). */
export interface DataAugmenterSpec {
  perturbation_specs: PerturbationSpec[];
  should_augment_train_instances: boolean;
  should_include_original_train: boolean;
  should_skip_unchanged_train: boolean;
  should_augment_eval_instances: boolean;
  should_include_original_eval: boolean;
  should_skip_unchanged_eval: boolean;
  seeds_per_instance: number;
}

export function dataAugmenterSpec(fields: Partial<DataAugmenterSpec> = {}): DataAugmenterSpec {
  return {
    perturbation_specs: fields.perturbation_specs ?? [],
    should_augment_train_instances: fields.should_augment_train_instances ?? false,
    should_include_original_train: fields.should_include_original_train ?? false,
    should_skip_unchanged_train: fields.should_skip_unchanged_train ?? false,
    should_augment_eval_instances: fields.should_augment_eval_instances ?? false,
    should_include_original_eval: fields.should_include_original_eval ?? false,
    should_skip_unchanged_eval: fields.should_skip_unchanged_eval ?? false,
    seeds_per_instance: fields.seeds_per_instance ?? 1,
  };
}

/** HELM 0.2.1 `RunSpec`. `name` has `/` replaced by `_` (HELM's `__post_init__`): build it with {@link runSpec}. */
export interface RunSpec {
  name: string;
  scenario_spec: ScenarioSpec;
  adapter_spec: AdapterSpec;
  metric_specs: MetricSpec[];
  data_augmenter_spec: DataAugmenterSpec;
  groups: string[];
}

export function runSpec(fields: Omit<RunSpec, 'data_augmenter_spec' | 'groups'> & Partial<Pick<RunSpec, 'data_augmenter_spec' | 'groups'>>): RunSpec {
  return {
    name: fields.name.replaceAll('/', '_'),
    scenario_spec: fields.scenario_spec,
    adapter_spec: fields.adapter_spec,
    metric_specs: fields.metric_specs,
    data_augmenter_spec: fields.data_augmenter_spec ?? dataAugmenterSpec(),
    groups: fields.groups ?? [],
  };
}

/** `RunEntry(description, priority, groups)` of a conf file or the command line. */
export interface RunEntry {
  description: string;
  priority: number;
  groups?: string[];
}
