import type { PyJsonValue } from '@flexhelm/python-compat';

/**
 * A value of an ObjectSpec argument, as the description grammar or a run-spec function produces it: int, float
 * (`PyFloat` when integral), string, bool, None (`null`), or lists/dicts of those (metric specs take lists).
 */
export type ArgValue = PyJsonValue;

/** `ObjectSpec{class_name, args}`: the base of ScenarioSpec, MetricSpec and PerturbationSpec. */
export interface ObjectSpec {
  class_name: string;
  /** A plain Python dict: its order is kept and its `None` values are written as `null`. */
  args: Record<string, ArgValue>;
}

export type ScenarioSpec = ObjectSpec;
export type MetricSpec = ObjectSpec;
export type PerturbationSpec = ObjectSpec;

export function objectSpec(className: string, args: Record<string, ArgValue> = {}): ObjectSpec {
  return { class_name: className, args };
}
