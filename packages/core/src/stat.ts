import type { PyNumber } from '@flexhelm/python-compat';
import type { PerturbationDescription } from './perturbation-description.js';

/** HELM 0.2.1 `MetricName{name, split=None, sub_split=None, perturbation=None}`. */
export interface MetricName {
  name: string;
  split?: string;
  sub_split?: string;
  perturbation?: PerturbationDescription;
}

export function metricName(name: string, fields: Omit<MetricName, 'name'> = {}): MetricName {
  return { name, split: fields.split, sub_split: fields.sub_split, perturbation: fields.perturbation };
}

/**
 * HELM 0.2.1 `Stat` as data (its arithmetic lives in @flexhelm/metrics). Numbers keep Python's int/float type
 * because stats.json shows it (`"sum": 1` vs `"sum": 1.0`).
 */
export interface Stat {
  name: MetricName;
  count: number;
  sum: PyNumber;
  sum_squared: PyNumber;
  min?: PyNumber;
  max?: PyNumber;
  mean?: PyNumber;
  variance?: PyNumber;
  stddev?: PyNumber;
}

/** HELM 0.2.1 `PerInstanceStats{instance_id, perturbation, train_trial_index, stats}`. */
export interface PerInstanceStats {
  instance_id: string;
  perturbation?: PerturbationDescription;
  train_trial_index: number;
  stats: Stat[];
}
