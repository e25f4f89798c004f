import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { HelmError, helmJson, parsePerInstanceStats, parseScenarioState, type Instance, type PerturbationDescription, type RequestState, type RunSpec } from '@flexhelm/core';
import { perturbationKey } from '@flexhelm/metrics';
import { pyFloat, pyStrip, toNumber, type PyJsonValue, type PyNumber } from '@flexhelm/python-compat';
import { getOrInsert } from './group-tables.js';
import { substituteMatcher, type HelmSchema } from './helm-schema.js';
import { readRunJson } from './read-suite-runs.js';

const MULTIPLE_CHOICE_SEPARATE_METHODS = ['multiple_choice_separate_original', 'multiple_choice_separate_calibrated'];

/** The three files HELM's `write_run_display_json` writes into a run folder for the frontend. */
export interface RunDisplayFiles {
  'instances.json': string;
  'display_predictions.json': string;
  'display_requests.json': string;
}

/** `_get_metric_names_for_groups`: the unperturbed metric names the run's groups show. */
function metricNamesForGroups(groups: string[], schema: HelmSchema): Set<string> {
  const names = new Set<string>();
  for (const groupName of groups) {
    const group = schema.nameToRunGroup.get(groupName);
    if (!group) continue;
    for (const metricGroupName of group.metric_groups) {
      for (const matcher of schema.nameToMetricGroup.get(metricGroupName)?.metrics ?? []) {
        if (matcher.perturbation_name) continue;
        names.add(substituteMatcher(matcher, group.environment).name);
      }
    }
  }
  return names;
}

/** `_truncate_predicted_text`: the completion without the echoed input (multiple choice separate, language modeling). */
function truncatePredictedText(predicted: string, rs: RequestState, method: string): string | undefined {
  let prefix = '';
  if (MULTIPLE_CHOICE_SEPARATE_METHODS.includes(method)) prefix = rs.instance.input.text;
  else if (method === 'language_modeling') {
    const first = rs.result?.completions[0]?.tokens[0];
    if (first && first.top_logprobs.size === 0) prefix = first.text;
  }
  if (prefix && predicted.startsWith(prefix)) return predicted.slice(prefix.length);
  return undefined;
}

const trialKey = (instanceId: string, perturbation: PerturbationDescription | undefined, trial: number) => `${instanceId}\u0000${perturbationKey(perturbation)}\u0000${trial}`;

/** HELM's codec (cattrs) writes an Instance with its None fields left out. */
function instanceToPy(instance: Instance): PyJsonValue {
  return instance as unknown as PyJsonValue;
}

/** cattrs structures `float` fields with `float(x)`, so the display files always show floats there (`1.0`). */
function requestToPy(request: RequestState['request']): PyJsonValue {
  const f = (x: PyNumber) => pyFloat(toNumber(x));
  return {
    model: request.model,
    embedding: request.embedding,
    prompt: request.prompt,
    temperature: f(request.temperature),
    num_completions: request.num_completions,
    top_k_per_token: request.top_k_per_token,
    max_tokens: request.max_tokens,
    stop_sequences: request.stop_sequences,
    echo_prompt: request.echo_prompt,
    top_p: f(request.top_p),
    presence_penalty: f(request.presence_penalty),
    frequency_penalty: f(request.frequency_penalty),
    random: request.random,
  };
}

/**
 * HELM 0.2.1's `write_run_display_json` without the writing: reads scenario_state.json and per_instance_stats.json of
 * `runDir` and returns the texts of instances.json, display_predictions.json and display_requests.json.
 */
export function runDisplayFiles(runDir: string, runSpec: RunSpec, schema: HelmSchema, shownDir = runDir): RunDisplayFiles {
  for (const file of ['scenario_state.json', 'per_instance_stats.json']) {
    if (!existsSync(join(runDir, file))) {
      throw new HelmError('ValueError', `Could not load ${file === 'scenario_state.json' ? 'ScenarioState' : 'PerInstanceStats'} from ${join(shownDir, file)}: the run is incomplete; re-run it, move it out of the suite, or pass --skip-write-run-display-json`);
    }
  }
  const state = parseScenarioState(readRunJson(join(runDir, 'scenario_state.json'), runDir), join(shownDir, 'scenario_state.json'));
  const perInstance = parsePerInstanceStats(readRunJson(join(runDir, 'per_instance_stats.json'), runDir), join(shownDir, 'per_instance_stats.json'));
  const method = runSpec.adapter_spec.method;
  const metricNames = metricNamesForGroups(runSpec.groups, schema);
  if (MULTIPLE_CHOICE_SEPARATE_METHODS.includes(method)) metricNames.add('predicted_index');

  const statsByTrial = new Map<string, Map<string, PyNumber>>();
  const trialStats = (key: string) => getOrInsert(statsByTrial, key, () => new Map<string, PyNumber>());
  for (const entry of perInstance) {
    const stats = trialStats(trialKey(entry.instance_id, entry.perturbation, entry.train_trial_index));
    for (const stat of entry.stats) {
      // Stat.mean is a float field: cattrs makes it one.
      if (metricNames.has(stat.name.name) && stat.mean !== undefined) stats.set(stat.name.name, pyFloat(toNumber(stat.mean)));
    }
  }

  const instances = new Map<string, Instance>();
  const predictions: PyJsonValue[] = [];
  const requests: PyJsonValue[] = [];
  for (const rs of state.request_states) {
    if (rs.instance.id === undefined) throw new HelmError('AssertionError', `${join(shownDir, 'scenario_state.json')}: a request state's instance has no id`);
    if (!rs.result) continue;
    // multiple_choice_separate_calibrated: only the original prediction is shown.
    if (method === 'multiple_choice_separate_calibrated' && rs.request_mode === 'calibration') continue;
    const stats = trialStats(trialKey(rs.instance.id, rs.instance.perturbation, rs.train_trial_index));
    // multiple_choice_separate_*: only the chosen reference's prediction.
    const predictedIndex = stats.get('predicted_index');
    if (MULTIPLE_CHOICE_SEPARATE_METHODS.includes(method) && predictedIndex !== undefined && toNumber(predictedIndex) !== rs.reference_index) continue;
    const predicted = rs.result.completions[0]?.text ?? '';
    const mapping = rs.output_mapping && Object.keys(rs.output_mapping).length > 0 ? rs.output_mapping : undefined;
    const mapped = mapping ? (Object.hasOwn(mapping, pyStrip(predicted)) ? mapping[pyStrip(predicted)] : undefined) : undefined;
    const instanceKey = `${rs.instance.id}\u0000${perturbationKey(rs.instance.perturbation)}`;
    // An OrderedDict: the first insertion fixes the position, the last one the value (as Map.set does).
    instances.set(instanceKey, rs.instance);
    predictions.push({
      instance_id: rs.instance.id,
      perturbation: rs.instance.perturbation as PyJsonValue,
      train_trial_index: rs.train_trial_index,
      predicted_text: predicted,
      truncated_predicted_text: truncatePredictedText(predicted, rs, method),
      mapped_output: mapped,
      reference_index: rs.reference_index,
      stats: new Map(stats),
    });
    requests.push({
      instance_id: rs.instance.id,
      perturbation: rs.instance.perturbation as PyJsonValue,
      train_trial_index: rs.train_trial_index,
      request: requestToPy(rs.request),
    });
  }
  return {
    'instances.json': helmJson([...instances.values()].map(instanceToPy)),
    'display_predictions.json': helmJson(predictions),
    'display_requests.json': helmJson(requests),
  };
}
