import { comparePyStrings, pyEquals } from '@flexhelm/python-compat';
import { HelmError, type RunEntry, type RunSpec } from '@flexhelm/core';
import { constructRunSpecs, type ConstructOptions } from './construct-run-specs.js';
import { parseObjectSpec } from './parse-object-spec.js';
import { replaceRunSpec } from './run-expanders.js';

/** The entry as error messages quote it: in full unless it is long enough to drown the message. */
function quotedEntry(description: string): string {
  return description.length > 200 ? `${JSON.stringify(description.slice(0, 80))}… (${description.length} characters)` : JSON.stringify(description);
}

/** The RunSpecs of one entry; errors name the entry so a bad line in a long conf file is easy to find. */
function constructEntry(entry: RunEntry, options: ConstructOptions): RunSpec[] {
  try {
    return constructRunSpecs(parseObjectSpec(entry.description), options);
  } catch (err) {
    if (err instanceof HelmError) throw new HelmError(err.pythonClass, `run entry ${quotedEntry(entry.description)}: ${err.message}`, { cause: err });
    throw err;
  }
}

export interface RunEntriesOptions extends ConstructOptions {
  maxEvalInstances?: number;
  numTrainTrials?: number;
  modelsToRun?: readonly string[];
  groupsToRun?: readonly string[];
  priority?: number;
}

/**
 * HELM's `run_entries_to_run_specs`: every entry's RunSpecs, filtered by priority, model and group, with the
 * `max_eval_instances` / `num_train_trials` overrides applied and the entry's groups appended.
 */
export function runEntriesToRunSpecs(entries: readonly RunEntry[], options: RunEntriesOptions = {}): RunSpec[] {
  const { maxEvalInstances, numTrainTrials, modelsToRun, groupsToRun, priority } = options;
  const out: RunSpec[] = [];
  for (const entry of entries) {
    if (priority !== undefined && entry.priority > priority) continue;
    for (let rs of constructEntry(entry, options)) {
      if (modelsToRun?.length && !modelsToRun.includes(rs.adapter_spec.model)) continue;
      if (groupsToRun?.length && !rs.groups.some((g) => groupsToRun.includes(g))) continue;
      let adapter = rs.adapter_spec;
      if (maxEvalInstances !== undefined) adapter = { ...adapter, max_eval_instances: maxEvalInstances };
      // Zero-shot runs have nothing to resample, so HELM forces a single trial for them.
      const zeroShot = pyEquals(adapter.max_train_instances, 0);
      if (numTrainTrials !== undefined || zeroShot) adapter = { ...adapter, num_train_trials: zeroShot ? 1 : numTrainTrials! };
      rs = replaceRunSpec(rs, { adapter_spec: adapter });
      if (entry.groups !== undefined) {
        const suffix = entry.groups.length === 0 ? '' : `,groups=${[...entry.groups].sort(comparePyStrings).join('-')}`;
        rs = replaceRunSpec(rs, { name: rs.name + suffix, groups: [...rs.groups, ...entry.groups] });
      }
      out.push(rs);
    }
  }
  return out;
}
