import { pyJsonDumps, type PyJsonValue } from '@flexhelm/python-compat';
import { helmJson, withInstanceIds, type Instance, type ScenarioSpec } from '@flexhelm/core';
import { parseObjectSpec, runEntriesToRunSpecs } from '@flexhelm/run-spec';
import { getRunInstances } from '@flexhelm/adapters';
import { createScenario, scenarioOutputPath } from '@flexhelm/scenarios';
import { DATA_MIRROR_OPTIONS, dataMirrorOption } from '../data-mirror-option.js';
import type { Command } from '../command.js';
import { integerOption } from '../option-values.js';

/** The model does not change a scenario's instances; it only has to exist for the run-spec functions. */
const PLACEHOLDER_MODEL = 'together/opt-66b';

const SPLITS: Record<string, readonly string[]> = { train: ['train'], valid: ['valid'], test: ['test'], eval: ['valid', 'test'] };

/** The description with a model added when it names none, so run-spec functions that need one can run. */
function withModel(description: string): string {
  if ('model' in parseObjectSpec(description).args) return description;
  return description.includes(':') ? `${description},model=${PLACEHOLDER_MODEL}` : `${description}:model=${PLACEHOLDER_MODEL}`;
}

/** `flexhelm instances`: a run entry description → its scenario's instances, as HELM sees them after `with_instance_ids`. */
export const instancesCommand: Command = {
  name: 'instances',
  summary: "Print a scenario's instances (after with_instance_ids) for a run entry description",
  options: {
    description: { type: 'string', short: 'd', valueName: 'D', description: 'a run entry description, e.g. synthetic_reasoning:mode=induction (model optional)' },
    split: { type: 'string', short: 's', valueName: 'S', description: 'keep only instances of split S: train, valid, test or eval (= valid and test)' },
    limit: { type: 'string', short: 'n', valueName: 'N', description: 'print at most N instances (after --split)' },
    'run-instances': { type: 'boolean', description: "apply HELM's eval-instance selection (get_run_instances) with the RunSpec's max_eval_instances" },
    'max-eval-instances': { type: 'string', short: 'm', valueName: 'N', description: 'set max_eval_instances (as helm-run does) and apply the selection; implies --run-instances' },
    array: { type: 'boolean', description: 'print one indented JSON array instead of JSON lines' },
    counts: { type: 'boolean', description: 'print only the number of instances per split' },
    'output-path': { type: 'string', short: 'o', valueName: 'DIR', description: 'HELM output folder; download scenarios keep their files in DIR/scenarios/<name> (default benchmark_output)' },
    'data-dir': { type: 'string', valueName: 'DIR', description: 'shared cache of downloaded source files (download scenarios)' },
    offline: { type: 'boolean', description: 'never download; fail if a needed source file is not cached' },
    ...DATA_MIRROR_OPTIONS,
  },
  details: [
    'The description expands to RunSpecs as in `flexhelm run-specs`; their scenario_spec is built into the scenario',
    "(a description without model= gets a placeholder model: the model never changes a scenario's instances).",
    'Instances get HELM ids (id0, id1, … in scenario order). With --run-instances / --max-eval-instances the list is',
    "what a HELM run uses: every train instance, then the eval instances picked by numpy seed(0), in that order.",
    '--split and --limit apply last.',
    '',
    'Output (stdout): JSON lines, one instance per line as json.dumps(asdict_without_nones(instance)) (Python',
    'separators, ASCII escapes). --array prints json.dumps(list, indent=2) followed by a newline, the form HELM uses',
    'in scenario_state.json. --counts prints {"total": N, "<split>": n, …} in split order of first appearance.',
    '',
    'examples:',
    '  flexhelm instances -d synthetic_reasoning:mode=pattern_match --split test --limit 3',
    '  flexhelm instances -d numeracy:relation_type=plane,mode=standard --array',
    '  flexhelm instances -d dyck_language:num_parenthesis_pairs=2 --max-eval-instances 10 --counts',
  ].join('\n'),
  async run({ options, stdout, usageError }) {
    const description = options.description as string | undefined;
    if (!description) throw usageError('give the run entry with --description D, e.g. -d synthetic_reasoning:mode=induction');
    const split = options.split as string | undefined;
    if (split !== undefined && !Object.hasOwn(SPLITS, split)) throw usageError(`--split must be one of ${Object.keys(SPLITS).join(', ')}, got '${split}'`);
    const limit = integerOption(options.limit, 'limit', 0);
    const maxEvalInstances = integerOption(options['max-eval-instances'], 'max-eval-instances', 0);

    const runSpecs = runEntriesToRunSpecs([{ description: withModel(description), priority: 1 }], { maxEvalInstances });
    const specs = new Map<string, ScenarioSpec>(runSpecs.map((rs) => [helmJson(rs.scenario_spec), rs.scenario_spec]));
    if (specs.size === 0) throw usageError(`the description ${JSON.stringify(description)} expands to no RunSpec`);
    if (specs.size > 1) {
      const listed = [...specs.values()].map((s) => `  ${pyJsonDumps(s as unknown as PyJsonValue)}`).join('\n');
      throw usageError(`the description expands to ${specs.size} different scenarios; make it more specific:\n${listed}`);
    }
    const [spec] = specs.values();
    const scenario = createScenario(spec!); // exactly one, checked above
    const outputPath = scenarioOutputPath((options['output-path'] as string | undefined) ?? 'benchmark_output', scenario.name);
    let instances: Instance[] = withInstanceIds(
      await scenario.getInstances({
        outputPath,
        dataDir: options['data-dir'] as string | undefined,
        offline: options.offline === true,
        baseUrl: dataMirrorOption(options),
      }),
    );
    if (options['run-instances'] || maxEvalInstances !== undefined) {
      instances = getRunInstances(instances, runSpecs[0]!.adapter_spec.max_eval_instances);
    }
    const splits = split === undefined ? undefined : SPLITS[split];
    if (splits !== undefined) instances = instances.filter((inst) => splits.includes(inst.split ?? ''));
    if (limit !== undefined) instances = instances.slice(0, limit);

    if (options.counts) {
      const counts = new Map<string, number>([['total', instances.length]]);
      for (const inst of instances) counts.set(inst.split ?? 'None', (counts.get(inst.split ?? 'None') ?? 0) + 1);
      stdout.write(`${helmJson(counts)}\n`);
    } else if (options.array) {
      stdout.write(`${helmJson(instances)}\n`);
    } else {
      stdout.write(instances.map((inst) => `${pyJsonDumps(inst as unknown as PyJsonValue)}\n`).join(""));
    }
  },
};
