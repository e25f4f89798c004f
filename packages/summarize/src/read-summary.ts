import { existsSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { HelmError } from '@flexhelm/core';
import { toPlain, type PyJsonValue } from '@flexhelm/python-compat';
import { readRunJson, suitePath } from './read-suite-runs.js';

/** A table cell as read back (numbers plain). `value` is absent for HELM's None ("not computed", no runs, …). */
export interface SummaryCell {
  value?: number | string;
  display_value?: string;
  description?: string;
  href?: string;
  style?: Record<string, string>;
  markdown: boolean;
  contamination_level?: string;
  /** Header cells only. */
  lower_is_better?: boolean;
  metadata?: Record<string, string>;
}

export interface SummaryTable {
  title: string;
  header: SummaryCell[];
  rows: SummaryCell[][];
  links: { text: string; href: string }[];
  name?: string;
  description?: string;
}

/** runs.json entries: `{run_path, run_spec, stats}`. */
export interface SummaryRun {
  run_path: string;
  run_spec: { name: string; scenario_spec: { class_name: string; args: Record<string, unknown> }; adapter_spec: Record<string, unknown> & { model: string; method: string }; groups: string[] } & Record<string, unknown>;
  stats: ({ name: { name: string; split?: string; sub_split?: string; perturbation?: Record<string, unknown> }; count: number; sum: number; mean?: number } & Record<string, unknown>)[];
}

export interface GroupMetadata {
  display_name: string | null;
  description: string | null;
  taxonomy: Record<string, string> | null;
}

/** The suite-level files `flexhelm summarize` (or HELM's `helm-summarize`) wrote. */
export interface SuiteSummary {
  suiteDir: string;
  summary: { suite: string; date: string };
  runs: SummaryRun[];
  /** groups.json: one index table per category. */
  groups: SummaryTable[];
  groupsMetadata: Record<string, GroupMetadata>;
  costs: Record<string, Record<string, number>>;
}

/** One run's display files: instances, predictions (with per-instance stats) and requests. */
export interface RunDisplay {
  instances: ({ id: string; input: { text: string }; references: { output: { text: string }; tags: string[] }[]; split?: string; perturbation?: Record<string, unknown> } & Record<string, unknown>)[];
  predictions: ({ instance_id: string; train_trial_index: number; predicted_text: string; truncated_predicted_text?: string; mapped_output?: string; reference_index?: number; stats: Record<string, number>; perturbation?: Record<string, unknown> })[];
  requests: ({ instance_id: string; train_trial_index: number; request: Record<string, unknown> & { prompt: string }; perturbation?: Record<string, unknown> })[];
}

function readPlain<T>(path: string, root: string): T {
  if (!existsSync(path)) throw new HelmError('FileNotFoundError', `${path} is missing; run \`flexhelm summarize --suite …\` first`);
  return toPlain(readRunJson(path, root) as PyJsonValue) as T;
}

/** Reads summary.json, runs.json, groups.json, groups_metadata.json and costs.json of a summarised suite. */
export function readSuiteSummary(outputPath: string, suite: string): SuiteSummary {
  const suiteDir = suitePath(outputPath, suite);
  const root = realpathSync(suiteDir);
  return {
    suiteDir,
    summary: readPlain(join(suiteDir, 'summary.json'), root),
    runs: readPlain(join(suiteDir, 'runs.json'), root),
    groups: readPlain(join(suiteDir, 'groups.json'), root),
    groupsMetadata: readPlain(join(suiteDir, 'groups_metadata.json'), root),
    costs: readPlain(join(suiteDir, 'costs.json'), root),
  };
}

/** `groups/<group>.json`: the group's leaderboard tables; undefined when the suite has no runs of that group. */
export function readGroupTables(outputPath: string, suite: string, group: string): SummaryTable[] | undefined {
  if (!/^[\w.:=-]+$/.test(group) || group.startsWith('.')) throw new HelmError('ValueError', `invalid group name "${group}"`);
  const suiteDir = suitePath(outputPath, suite);
  const path = join(suiteDir, 'groups', `${group}.json`);
  return existsSync(path) ? readPlain(path, realpathSync(suiteDir)) : undefined;
}

/** instances.json, display_predictions.json and display_requests.json of one run folder of the suite. */
export function readRunDisplay(outputPath: string, suite: string, runDirName: string): RunDisplay {
  if (!runDirName || runDirName.includes('/') || runDirName === '.' || runDirName === '..') throw new HelmError('ValueError', `invalid run folder name "${runDirName}"`);
  const suiteDir = suitePath(outputPath, suite);
  const runDir = join(suiteDir, runDirName);
  const root = realpathSync(outputPath);
  return {
    instances: readPlain(join(runDir, 'instances.json'), root),
    predictions: readPlain(join(runDir, 'display_predictions.json'), root),
    requests: readPlain(join(runDir, 'display_requests.json'), root),
  };
}
