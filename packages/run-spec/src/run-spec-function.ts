import { pyDict, pyError } from '@flexhelm/python-compat';
import type { ArgValue, RunSpec } from '@flexhelm/core';

/** Task definition fields of a BIG-bench `task.json` that `get_big_bench_spec` reads. */
export interface BigBenchTask {
  metrics: string[];
  task_prefix?: string;
  example_input_prefix?: string;
  example_output_prefix?: string;
  stop_string?: string | null;
}

/**
 * Data two run-spec functions download in HELM while building the RunSpec: RAFT's per-subset instructions
 * (`prompt_construction_settings.json`) and BIG-bench's `task.json`. flexhelm never downloads while constructing run
 * specs; give these to use `raft` or `big_bench`.
 */
export interface RunSpecResources {
  raftInstructions?: (subset: ArgValue) => string;
  bigBenchTask?: (task: ArgValue, subtask: ArgValue) => BigBenchTask;
}

/** A parameter of a run-spec function: required unless it has a default (None is `null`). */
export type Param = string | readonly [name: string, defaultValue: ArgValue];

/** One entry of HELM's `CANONICAL_RUN_SPEC_FUNCS`, with its Python signature so keyword binding fails like Python's. */
export interface RunSpecFunction {
  pythonName: string;
  params: readonly Param[];
  /** `**kwargs`: every keyword is accepted and passed on in call order. */
  acceptsAnyKeyword: boolean;
  build(args: Record<string, ArgValue>, resources: RunSpecResources): RunSpec;
}

const paramName = (p: Param): string => (typeof p === 'string' ? p : p[0]);

function quotedList(names: string[]): string {
  const q = names.map((n) => `'${n}'`);
  if (q.length <= 1) return q.join('');
  if (q.length === 2) return `${q[0]} and ${q[1]}`;
  return `${q.slice(0, -1).join(', ')}, and ${q[q.length - 1]}`;
}

/**
 * Binds keyword arguments to `fn`'s parameters as a Python call `fn(**args)` does: an unknown keyword or a missing
 * required parameter is a TypeError (with the accepted parameters listed); defaults fill the rest.
 */
export function bindArguments(fn: RunSpecFunction, entries: readonly [string, ArgValue][]): Record<string, ArgValue> {
  const names = fn.params.map(paramName);
  const accepted = names.length ? `accepted arguments: ${names.join(', ')}` : 'it takes no arguments besides run expanders';
  if (fn.acceptsAnyKeyword) return pyDict(entries);
  const given = new Map(entries);
  for (const [key] of entries) {
    if (!names.includes(key)) {
      throw pyError('TypeError', `${fn.pythonName}() got an unexpected keyword argument '${key}' (${accepted})`);
    }
  }
  const missing = fn.params.filter((p) => typeof p === 'string' && !given.has(p)).map(paramName);
  if (missing.length) {
    throw pyError(
      'TypeError',
      `${fn.pythonName}() missing ${missing.length} required positional argument${missing.length > 1 ? 's' : ''}: ${quotedList(missing)} ` +
        `(add ${missing.map((n) => `${n}=<value>`).join(',')} to the description)`,
    );
  }
  const bound: Record<string, ArgValue> = {};
  for (const p of fn.params) {
    const name = paramName(p);
    bound[name] = given.has(name) ? given.get(name)! : (p as readonly [string, ArgValue])[1];
  }
  return bound;
}
