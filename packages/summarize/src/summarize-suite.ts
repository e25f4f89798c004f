import { existsSync, lstatSync } from 'node:fs';
import { join } from 'node:path';
import { HelmError, helmJson, type Stat } from '@flexhelm/core';
import { pyAdd, type PyJsonValue, type PyNumber } from '@flexhelm/python-compat';
import { getOrInsert, GroupTables } from './group-tables.js';
import type { HelmSchema } from './helm-schema.js';
import { pyPathJoin } from './py-path-join.js';
import { readSuiteRuns, type SuiteRun } from './read-suite-runs.js';
import { runDisplayFiles } from './run-display.js';
import { StagedFiles } from './staged-files.js';
import { tableToLatex, tableToPy } from './table.js';
import type { SummarizeWarn } from './warning-digest.js';

export interface SummarizeOptions {
  /** The output folder as the user gave it (HELM writes it, unnormalised, into run_path and the table links). */
  outputPath: string;
  suite: string;
  /** HELM 0.2.1's schema.yaml ({@link loadHelmSchema}). */
  schema: HelmSchema;
  /** HELM's `--skip-write-run-display-json`: no instances.json / display_*.json per run. */
  skipRunDisplayJson?: boolean;
  /** HELM's `--debug`: each cell's description lists the run specs it aggregates. */
  verbose?: boolean;
  /** summary.json's date (`YYYY-MM-DD`); default today, local time, as `datetime.date.today()`. */
  date?: string;
  /** HELM's `hlog("WARNING: …")` lines: runs skipped, metrics undefined in the schema, missing stats. */
  warn?: SummarizeWarn;
}

export interface SummarizeResult {
  suiteDir: string;
  runs: SuiteRun[];
  /** Every file written, relative to the suite folder. */
  files: string[];
}

const COST_REPORT_FIELDS = ['num_prompt_tokens', 'num_completion_tokens', 'num_completions', 'num_requests'];

function today(): string {
  const d = new Date();
  return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
}

/**
 * A stat as HELM's summarizer re-reads it with dacite: the perturbation becomes a plain `PerturbationDescription`,
 * so fields of its subclasses (`prob`, …) are not in runs.json.
 */
function statToPy(stat: Stat): PyJsonValue {
  const p = stat.name.perturbation;
  return {
    name: {
      name: stat.name.name,
      split: stat.name.split,
      sub_split: stat.name.sub_split,
      perturbation: p && { name: p.name, robustness: p.robustness, fairness: p.fairness, computed_on: p.computed_on, seed: p.seed },
    },
    count: stat.count,
    sum: stat.sum,
    sum_squared: stat.sum_squared,
    min: stat.min,
    max: stat.max,
    mean: stat.mean,
    variance: stat.variance,
    stddev: stat.stddev,
  };
}

/** `write_cost_report`: per model, the token and request counts summed over the runs' split-less stats. */
function costReport(runs: SuiteRun[]): PyJsonValue {
  const models = new Map<string, Map<string, PyNumber>>();
  for (const run of runs) {
    for (const stat of run.stats) {
      if (!COST_REPORT_FIELDS.includes(stat.name.name) || stat.name.split) continue;
      const model = run.runSpec.adapter_spec.model;
      if (!models.has(model)) models.set(model, new Map());
      const costs = models.get(model)!;
      costs.set(stat.name.name, pyAdd(costs.get(stat.name.name) ?? 0, stat.sum));
    }
  }
  for (const costs of models.values()) {
    // defaultdict(int): reading a missing count inserts 0 before total_tokens.
    for (const k of ['num_prompt_tokens', 'num_completion_tokens']) if (!costs.has(k)) costs.set(k, 0);
    costs.set('total_tokens', pyAdd(costs.get('num_prompt_tokens')!, costs.get('num_completion_tokens')!));
  }
  return models;
}

function checkFileName(name: string, what: string): string {
  if (name.includes('/') || name.includes('\0') || name === '.' || name === '..') throw new HelmError('ValueError', `${what} "${name}" cannot be a file name; rename it`);
  return name;
}

/**
 * HELM 0.2.1's `helm-summarize --suite S -o P`: reads every run of `P/runs/S/` and writes summary.json, runs.json,
 * run_specs.json, groups.json, groups_metadata.json, groups/… and costs.json into the suite folder, and each run's
 * display files into its folder. Everything is computed and staged before the first file is replaced, so a failure
 * (a corrupt run, a full disk) leaves the folder as it was.
 */
export function summarizeSuite(options: SummarizeOptions): SummarizeResult {
  const warn = options.warn ?? (() => {});
  const { schema, suite, outputPath } = options;
  const runs = readSuiteRuns(outputPath, suite, warn);
  const suiteDir = pyPathJoin(outputPath, 'runs', suite);

  // check_metrics_defined
  const metricRuns = new Map<string, string[]>();
  for (const run of runs) for (const stat of run.stats) getOrInsert(metricRuns, stat.name.name, () => []).push(run.runSpec.name);
  for (const [metric, names] of metricRuns) {
    if (!schema.nameToMetric.has(metric)) warn(`WARNING: metric name ${metric} undefined in schema.yaml but appears in ${names.length} run specs, including ${names[0]}`, 'metric-undefined');
  }

  // A planted link must not redirect the table files out of the suite folder.
  for (const sub of ['groups', 'groups/json', 'groups/latex']) {
    const path = join(suiteDir, sub);
    if (existsSync(path) && lstatSync(path).isSymbolicLink()) {
      throw new HelmError('ValueError', `${path} is a link; summarize writes its tables only inside the suite folder: remove the link and run it again`);
    }
  }

  const staged = new StagedFiles();
  const files: string[] = [];
  const stage = (relative: string, text: string) => {
    staged.stage(join(suiteDir, relative), text);
    files.push(relative);
  };
  try {
    stage('summary.json', helmJson({ suite, date: options.date ?? today() }));
    stage('runs.json', helmJson(runs.map((run) => ({ run_path: run.runPath, run_spec: run.runSpec as unknown as PyJsonValue, stats: run.stats.map(statToPy) }))));
    stage('run_specs.json', helmJson(runs.map((run) => run.runSpec as unknown as PyJsonValue)));

    const tables = new GroupTables(schema, runs, warn, options.verbose);
    stage('groups.json', helmJson(tables.indexTables().map(tableToPy)));
    stage('groups_metadata.json', helmJson(tables.groupsMetadata()));
    const groupsPath = pyPathJoin(suiteDir, 'groups');
    for (const group of schema.run_groups) {
      const groupTables = tables.groupTables(group);
      if (groupTables.length === 0) continue;
      const groupName = checkFileName(group.name, 'run group');
      for (const t of groupTables) {
        const tableName = checkFileName(`${groupName}_${t.name ?? 'None'}`, 'table');
        // HELM links each table to its LaTeX and JSON files by their paths under the output folder as typed.
        const latexPath = pyPathJoin(groupsPath, 'latex', `${tableName}.tex`);
        t.links.push({ text: 'LaTeX', href: latexPath });
        stage(`groups/latex/${tableName}.tex`, tableToLatex(t, `${t.name ?? 'None'} (${group.name})`));
        const jsonPath = pyPathJoin(groupsPath, 'json', `${tableName}.json`);
        t.links.push({ text: 'JSON', href: jsonPath });
        stage(`groups/json/${tableName}.json`, helmJson(tableToPy(t)));
      }
      stage(`groups/${groupName}.json`, helmJson(groupTables.map(tableToPy)));
    }
    stage('costs.json', helmJson(costReport(runs)));

    if (!options.skipRunDisplayJson) {
      for (const run of runs) {
        const display = runDisplayFiles(run.realDir, run.runSpec, schema, run.runPath);
        for (const [file, text] of Object.entries(display)) {
          staged.stage(join(run.realDir, file), text);
          files.push(`${run.dirName}/${file}`);
        }
      }
    }
    staged.commit();
  } catch (err) {
    staged.abort();
    throw err;
  }
  return { suiteDir, runs, files };
}
