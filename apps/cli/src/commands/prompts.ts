import { resolve } from 'node:path';
import { helmJson, type RequestState, type RunSpec, type ScenarioState } from '@flexhelm/core';
import { prepareRun } from '@flexhelm/runner';
import { runEntriesToRunSpecs } from '@flexhelm/run-spec';
import { getWindowService } from '@flexhelm/tokenizer';
import { DATA_MIRROR_OPTIONS, dataMirrorOption } from '../data-mirror-option.js';
import type { Command, CommandContext } from '../command.js';
import { integerOption } from '../option-values.js';

/** One request state in the `--prompts` listing: which instance and request, then the prompt as the model sees it. */
function promptListing(rs: RequestState): string {
  const where = [
    `instance ${rs.instance.id ?? '?'} (${rs.instance.split ?? 'no split'}${rs.instance.perturbation ? `, ${rs.instance.perturbation.name}` : ''})`,
    `trial ${rs.train_trial_index}`,
    ...(rs.reference_index !== undefined ? [`reference ${rs.reference_index}`] : []),
    ...(rs.request_mode ? [rs.request_mode] : []),
    `${rs.num_train_instances} in-context examples`,
    ...(rs.prompt_truncated ? ['truncated'] : []),
  ];
  return `=== ${where.join(', ')}\n${rs.request.prompt}\n`;
}

/** The request states of one RunSpec, built exactly as `flexhelm run` builds them (runner's `prepareRun`). */
async function adaptRunSpec(runSpec: RunSpec, options: CommandContext['options']): Promise<ScenarioState> {
  const windowService = getWindowService(runSpec.adapter_spec.model, {
    tokenizer: options.tokenizer as string | undefined,
    modelFolder: options['model-folder'] as string | undefined,
  });
  const prepared = await prepareRun(runSpec, {
    outputPath: resolve((options['output-path'] as string | undefined) ?? 'benchmark_output'),
    suite: 'v1', // only names the run folder, which prompts never writes
    windowService,
    dataDir: options['data-dir'] as string | undefined,
    offline: options.offline === true,
    baseUrl: dataMirrorOption(options),
  });
  return prepared!.adapted; // undefined only with skipCompleted
}

/** `flexhelm prompts`: a run entry → the request states HELM's adapter builds for it (prompts byte for byte). */
export const promptsCommand: Command = {
  name: 'prompts',
  summary: 'Build the requests (prompts) of a run entry, as HELM 0.2.1 adapts it, without running a model',
  options: {
    description: { type: 'string', short: 'd', valueName: 'D', description: 'a run entry description, e.g. boolq:model=together/opt-175b' },
    tokenizer: { type: 'string', valueName: 'NAME', description: "count tokens with NAME instead of the model's tokenizer: whitespace-stub, huggingface/gpt2, facebook/opt-66b or a model folder" },
    'model-folder': { type: 'string', valueName: 'DIR', description: 'a local OPT model folder whose tokenizer files give the real OPT tokenizer' },
    'max-eval-instances': { type: 'string', short: 'm', valueName: 'N', description: 'set max_eval_instances (as helm-run does)' },
    'num-train-trials': { type: 'string', short: 't', valueName: 'T', description: 'set num_train_trials (zero-shot RunSpecs keep 1)' },
    prompts: { type: 'boolean', description: 'print each prompt under a header line instead of the JSON' },
    'output-path': { type: 'string', short: 'o', valueName: 'DIR', description: 'HELM output folder; download scenarios keep their files in DIR/scenarios/<name> (default benchmark_output)' },
    'data-dir': { type: 'string', valueName: 'DIR', description: 'shared cache of downloaded source files (download scenarios)' },
    offline: { type: 'boolean', description: 'never download; fail if a needed file (scenario data, perturbation word lists) is not cached' },
    ...DATA_MIRROR_OPTIONS,
  },
  details: [
    'The description expands to RunSpecs as in `flexhelm run-specs`. For each, the scenario instances get HELM ids,',
    'eval instances are picked (get_run_instances), perturbations applied (data_augmenter_spec), and the adapter of',
    'adapter_spec.method builds every request state, fitting prompts to the model\'s window (see @flexhelm/tokenizer',
    'for the window of each model; --tokenizer replaces only the tokenizer, not the window limits).',
    '',
    'Output (stdout): per RunSpec, its scenario state before execution, as HELM writes scenario_state.json',
    '(json.dumps(asdict_without_nones(scenario_state), indent=2)) followed by a newline; with several RunSpecs a JSON',
    'array of them. --prompts prints "=== instance …, trial …" headers each followed by the prompt text.',
    '',
    'examples:',
    '  flexhelm prompts -d dyck_language:num_parenthesis_pairs=2,model=together/opt-175b -m 3 -t 1 --prompts',
    '  flexhelm prompts -d synthetic_reasoning:mode=pattern_match,model=together/opt-66b --tokenizer whitespace-stub -m 5',
  ].join('\n'),
  async run({ options, stdout, usageError }) {
    const description = options.description as string | undefined;
    if (!description) throw usageError('give the run entry with --description D, e.g. -d boolq:model=together/opt-175b');
    const runSpecs = runEntriesToRunSpecs([{ description, priority: 1 }], {
      maxEvalInstances: integerOption(options['max-eval-instances'], 'max-eval-instances', 0),
      numTrainTrials: integerOption(options['num-train-trials'], 'num-train-trials', 1),
    });
    if (runSpecs.length === 0) throw usageError(`the description ${JSON.stringify(description)} expands to no RunSpec`);
    const states: ScenarioState[] = [];
    for (const runSpec of runSpecs) states.push(await adaptRunSpec(runSpec, options));
    if (options.prompts) {
      runSpecs.forEach((rs, i) => {
        stdout.write(`##### ${rs.name}\n`);
        stdout.write(states[i]!.request_states.map(promptListing).join(''));
      });
    } else {
      stdout.write(`${states.length === 1 ? helmJson(states[0]) : helmJson(states)}\n`);
    }
  },
};
