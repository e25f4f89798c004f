import { pyRepr } from '@flexhelm/python-compat';
import { join } from 'node:path';
import { helmJson, type RunEntry } from '@flexhelm/core';
import {
  ALL_MODELS,
  CANONICAL_RUN_SPEC_FUNCS,
  MODEL_FAMILIES,
  PERTURBATION_SPECS,
  RUN_EXPANDERS,
  readRunEntries,
  runEntriesToRunSpecs,
} from '@flexhelm/run-spec';
import type { Command } from '../command.js';
import { integerOption, listOption } from '../option-values.js';
import { writeFileAtomic } from '@flexhelm/atomic-write';

const defaultText = (value: unknown) => (value === null ? 'None' : pyRepr(value as string));

/** `--list WHAT`: the names a description may use, one per line. */
const LISTINGS: Record<string, () => string[]> = {
  functions: () =>
    [...CANONICAL_RUN_SPEC_FUNCS].map(([name, fn]) => {
      const params = fn.acceptsAnyKeyword ? '<any key>=<value>' : fn.params.map((p) => (typeof p === 'string' ? p : `${p[0]}=${defaultText(p[1])}`)).join(', ');
      return params ? `${name}: ${params}` : name;
    }),
  models: () => ALL_MODELS.map((m) => `${m.name}${m.tags.length ? `  [${m.tags.join(', ')}]` : ''}`),
  families: () => [...MODEL_FAMILIES].map(([name, models]) => `${name}: ${models.join(', ')}`),
  augmentations: () => [...PERTURBATION_SPECS].map(([name, options]) => `${name}: ${[...options.keys()].join(', ')}`),
  expanders: () => [...RUN_EXPANDERS.keys()],
};

/** `flexhelm run-specs`: descriptions / conf files → RunSpecs, printed as HELM writes `run_spec.json`. */
export const runSpecsCommand: Command = {
  name: 'run-specs',
  summary: 'Expand run entries (descriptions and conf files) into RunSpecs, as helm-run does',
  options: {
    description: { type: 'string', short: 'd', multiple: true, valueName: 'D', description: 'a run entry description, e.g. mmlu:subject=anatomy,model=text (priority 1)' },
    'conf-path': { type: 'string', short: 'c', multiple: true, valueName: 'FILE', description: 'a HOCON conf file of run entries ({entries: [{description, priority, groups}]})' },
    'max-eval-instances': { type: 'string', short: 'm', valueName: 'N', description: 'set adapter_spec.max_eval_instances of every RunSpec' },
    'num-train-trials': { type: 'string', short: 't', valueName: 'T', description: 'set adapter_spec.num_train_trials (zero-shot RunSpecs keep 1)' },
    'models-to-run': { type: 'string', multiple: true, valueName: 'M', description: 'keep only RunSpecs of these models (comma-separated or repeated)' },
    'groups-to-run': { type: 'string', multiple: true, valueName: 'G', description: 'keep only RunSpecs in one of these groups (comma-separated or repeated)' },
    priority: { type: 'string', valueName: 'P', description: 'skip entries whose priority is greater than P (1 is the highest)' },
    names: { type: 'boolean', description: 'print only the RunSpec names, one per line' },
    array: { type: 'boolean', description: 'always print a JSON array, even for a single RunSpec' },
    'output-path': { type: 'string', short: 'o', valueName: 'DIR', description: 'also write DIR/<run_spec.name>/run_spec.json for each RunSpec' },
    list: { type: 'string', valueName: 'WHAT', description: `list what descriptions may use instead of expanding: ${Object.keys(LISTINGS).join(', ')}` },
  },
  details: [
    'Entries are the --description values (priority 1, no extra groups) followed by the entries of each',
    '--conf-path file, in order; they expand exactly as HELM 0.2.1 run_entries_to_run_specs does.',
    '',
    'Output (stdout): with exactly one RunSpec, its run_spec.json text (json.dumps(asdict_without_nones(run_spec),',
    'indent=2), byte for byte); otherwise (or with --array) a JSON array of them in the same form',
    '(json.dumps(list, indent=2)), `[]` when nothing matched. A newline follows the JSON.',
    '--list functions|models|families|augmentations|expanders prints what descriptions may use.',
    '--names prints one name per line instead. --output-path writes each run_spec.json exactly as HELM does',
    '(no trailing newline) and prints the files written to stderr.',
    '',
    'examples:',
    '  flexhelm run-specs -d mmlu:subject=anatomy,model=together/opt-66b -m 100 -t 3',
    '  flexhelm run-specs -c run_specs.conf --models-to-run together/opt-175b --priority 2 --names',
  ].join('\n'),
  run({ options, stdout, stderr, usageError }) {
    if (options.list !== undefined) {
      const what = options.list as string;
      const listing = Object.hasOwn(LISTINGS, what) ? LISTINGS[what] : undefined;
      if (!listing) throw usageError(`--list takes one of ${Object.keys(LISTINGS).join(', ')}, got '${what}'`);
      stdout.write(listing().map((line) => `${line}\n`).join(''));
      return;
    }
    const descriptions = (options.description as string[] | undefined) ?? [];
    const confPaths = (options['conf-path'] as string[] | undefined) ?? [];
    if (descriptions.length === 0 && confPaths.length === 0) {
      throw usageError('give at least one --description D or --conf-path FILE');
    }
    const entries: RunEntry[] = [...descriptions.map((description) => ({ description, priority: 1 })), ...readRunEntries(confPaths)];
    const runSpecs = runEntriesToRunSpecs(entries, {
      maxEvalInstances: integerOption(options['max-eval-instances'], 'max-eval-instances', 0),
      numTrainTrials: integerOption(options['num-train-trials'], 'num-train-trials', 1),
      priority: integerOption(options.priority, 'priority', 0),
      modelsToRun: listOption(options['models-to-run']),
      groupsToRun: listOption(options['groups-to-run']),
    });
    const outputPath = options['output-path'] as string | undefined;
    if (outputPath !== undefined) {
      for (const rs of runSpecs) {
        const file = join(outputPath, rs.name, 'run_spec.json');
        writeFileAtomic(file, helmJson(rs));
        stderr.write(`wrote ${file}\n`);
      }
    }
    if (options.names) stdout.write(runSpecs.map((rs) => `${rs.name}\n`).join(''));
    else stdout.write(`${runSpecs.length === 1 && !options.array ? helmJson(runSpecs[0]) : helmJson(runSpecs)}\n`);
  },
};
