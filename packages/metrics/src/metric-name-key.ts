import { formatPyNumber, pyJsonDumps, pyStrRepr, type PyJsonValue, type PyNumber } from '@flexhelm/python-compat';
import type { MetricName, PerturbationDescription } from '@flexhelm/core';

/**
 * A string that is equal for two metric names exactly when HELM's frozen dataclasses compare equal
 * (name, split, sub_split and every field of the perturbation description, in order).
 */
export function metricNameKey(name: MetricName): string {
  // Built by hand (this runs for every stat merge); only the perturbation needs a full dump, cached per object.
  return `${name.name}\u0000${name.split ?? '\u0001'}\u0000${name.sub_split ?? '\u0001'}\u0000${perturbationKey(name.perturbation)}`;
}

const perturbationKeys = new WeakMap<object, string>();

/** The value of a perturbation description as a string (field order and int/float types included). */
export function perturbationKey(p: PerturbationDescription | undefined): string {
  if (!p) return 'None';
  let key = perturbationKeys.get(p);
  if (key === undefined) {
    key = pyJsonDumps(p as unknown as PyJsonValue);
    perturbationKeys.set(p, key);
  }
  return key;
}

/** HELM's `MetricContext{split, sub_split, perturbation}`: the non-name part of a metric name. */
export interface MetricContext {
  split?: string;
  sub_split?: string;
  perturbation?: PerturbationDescription;
}

export function contextKey(context: MetricContext): string {
  return `${context.split ?? '\u0001'}\u0000${context.sub_split ?? '\u0001'}\u0000${perturbationKey(context.perturbation)}`;
}

export function contextOfName(name: MetricName): MetricContext {
  return { split: name.split, sub_split: name.sub_split, perturbation: name.perturbation };
}

/** `dataclasses.replace(name, ...)` keeping field order. */
export function withName(name: MetricName, fields: Partial<MetricName>): MetricName {
  const merged = { ...name, ...fields };
  return { name: merged.name, split: merged.split, sub_split: merged.sub_split, perturbation: merged.perturbation };
}

function reprValue(v: unknown): string {
  if (v === undefined || v === null) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'string') return pyStrRepr(v);
  if (typeof v === 'number' || (typeof v === 'object' && v !== null && 'value' in v)) return formatPyNumber(v as PyNumber);
  return String(v);
}

/** `repr(MetricName)` as Python prints the dataclass (a perturbation prints as `PerturbationDescription(...)`). */
export function metricNameRepr(name: MetricName): string {
  const p = name.perturbation;
  const perturbation = p
    ? `PerturbationDescription(${Object.entries(p).map(([k, v]) => `${k}=${reprValue(v)}`).join(', ')})`
    : 'None';
  return `MetricName(name=${pyStrRepr(name.name)}, split=${reprValue(name.split)}, sub_split=${reprValue(name.sub_split)}, perturbation=${perturbation})`;
}
