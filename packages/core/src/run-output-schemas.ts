import { HelmError, PyFloat, pyJsonDumps, type PyJsonValue } from '@flexhelm/python-compat';
import { z } from 'zod';
import type { Instance } from './instance.js';
import type { ScenarioState } from './request-state.js';
import type { RunSpec } from './run-spec.js';
import type { PerInstanceStats, Stat } from './stat.js';

/** scenario.json as HELM writes it. */
export interface ScenarioInfo {
  name: string;
  description: string;
  tags: string[];
  output_path: string;
  definition_path?: string;
}

/**
 * Turns `pyJsonParse` output (Maps, PyFloats) into plain objects in source key order, keeping PyFloats so integral
 * floats are written back as `1.0`. `top_logprobs` stays a Map (its keys are token strings such as "1", whose order
 * a plain object would change).
 */
function fromPyJson(value: PyJsonValue, key?: string): unknown {
  if (value instanceof Map) {
    if (key === 'top_logprobs') return new Map([...value].map(([k, v]) => [k, fromPyJson(v)]));
    const out: Record<string, unknown> = {};
    for (const [k, v] of value) out[k] = fromPyJson(v, k);
    return out;
  }
  if (Array.isArray(value)) return value.map((v) => fromPyJson(v));
  return value;
}

const pyNumber = z.union([z.number(), z.instanceof(PyFloat)]);
const int = z.number().int();

const perturbation = z.looseObject({
  name: z.string(),
  robustness: z.boolean(),
  fairness: z.boolean(),
  computed_on: z.enum(['original', 'perturbed', 'worst']),
  seed: int.optional(),
});

const metricNameSchema = z.object({
  name: z.string(),
  split: z.string().optional(),
  sub_split: z.string().optional(),
  perturbation: perturbation.optional(),
});

const statSchema = z.object({
  name: metricNameSchema,
  count: int.nonnegative(),
  sum: pyNumber,
  sum_squared: pyNumber,
  min: pyNumber.optional(),
  max: pyNumber.optional(),
  mean: pyNumber.optional(),
  variance: pyNumber.optional(),
  stddev: pyNumber.optional(),
});

const perInstanceStatsSchema = z.object({
  instance_id: z.string(),
  perturbation: perturbation.optional(),
  train_trial_index: int.nonnegative(),
  stats: z.array(statSchema),
});

const objectSpecSchema = z.object({ class_name: z.string(), args: z.record(z.string(), z.unknown()) });

const adapterSpecSchema = z.object({
  method: z.string(),
  global_prefix: z.string(),
  instructions: z.string(),
  input_prefix: z.string(),
  input_suffix: z.string(),
  reference_prefix: z.string(),
  reference_suffix: z.string(),
  output_prefix: z.string(),
  output_suffix: z.string(),
  instance_prefix: z.string(),
  substitutions: z.array(z.object({ source: z.string(), target: z.string() })),
  max_train_instances: int,
  max_eval_instances: int.optional(),
  num_outputs: int,
  num_train_trials: int,
  model: z.string(),
  temperature: pyNumber,
  max_tokens: int,
  stop_sequences: z.array(z.string()),
  random: z.string().optional(),
});

const runSpecSchema = z.object({
  name: z.string(),
  scenario_spec: objectSpecSchema,
  adapter_spec: adapterSpecSchema,
  metric_specs: z.array(objectSpecSchema),
  data_augmenter_spec: z.object({
    perturbation_specs: z.array(objectSpecSchema),
    should_augment_train_instances: z.boolean(),
    should_include_original_train: z.boolean(),
    should_skip_unchanged_train: z.boolean(),
    should_augment_eval_instances: z.boolean(),
    should_include_original_eval: z.boolean(),
    should_skip_unchanged_eval: z.boolean(),
    seeds_per_instance: int,
  }),
  groups: z.array(z.string()),
});

const scenarioSchema = z.object({
  name: z.string(),
  description: z.string(),
  tags: z.array(z.string()),
  output_path: z.string(),
  definition_path: z.string().optional(),
});

const inputSchema = z.object({ text: z.string() });
const referenceSchema = z.object({ output: z.object({ text: z.string() }), tags: z.array(z.string()) });
const instanceSchema = z.object({
  input: inputSchema,
  references: z.array(referenceSchema),
  split: z.string().optional(),
  sub_split: z.string().optional(),
  id: z.string().optional(),
  perturbation: perturbation.optional(),
  contrast_inputs: z.array(inputSchema).optional(),
  contrast_references: z.array(z.array(referenceSchema)).optional(),
});

const tokenSchema = z.object({ text: z.string(), logprob: pyNumber, top_logprobs: z.instanceof(Map) });
const sequenceSchema = z.object({
  text: z.string(),
  logprob: pyNumber,
  tokens: z.array(tokenSchema),
  finish_reason: z.record(z.string(), z.string()).optional(),
});

const requestStateSchema = z.object({
  instance: instanceSchema,
  reference_index: int.optional(),
  request_mode: z.enum(['original', 'calibration']).optional(),
  train_trial_index: int.nonnegative(),
  output_mapping: z.record(z.string(), z.string()).optional(),
  request: z.object({
    model: z.string(),
    embedding: z.boolean(),
    prompt: z.string(),
    temperature: pyNumber,
    num_completions: int,
    top_k_per_token: int,
    max_tokens: int,
    stop_sequences: z.array(z.string()),
    echo_prompt: z.boolean(),
    top_p: pyNumber,
    presence_penalty: pyNumber,
    frequency_penalty: pyNumber,
    random: z.string().optional(),
  }),
  result: z
    .object({
      success: z.boolean(),
      embedding: z.array(pyNumber),
      completions: z.array(sequenceSchema),
      cached: z.boolean(),
      request_time: pyNumber.optional(),
      request_datetime: pyNumber.optional(),
      error: z.string().optional(),
      batch_size: int.optional(),
      batch_request_time: pyNumber.optional(),
    })
    .optional(),
  num_train_instances: int,
  prompt_truncated: z.boolean(),
  num_conditioning_tokens: int,
});

const scenarioStateSchema = z.object({ adapter_spec: adapterSpecSchema, request_states: z.array(requestStateSchema) });

function parseWith<T>(schema: z.ZodType, value: unknown, path: string): T {
  const result = schema.safeParse(fromPyJson(value as PyJsonValue));
  if (!result.success) {
    const issue = result.error.issues[0]!; // a failed parse has at least one issue
    throw new HelmError('ValueError', `${path} does not match HELM 0.2.1's format at ${issue.path.join('.') || '(top)'}: ${issue.message} (${result.error.issues.length} problem(s)); was it written by HELM 0.2.1 or flexhelm?`);
  }
  return result.data as T;
}

export function parseRunSpec(value: unknown, path = 'run_spec.json'): RunSpec {
  return parseWith<RunSpec>(runSpecSchema, value, path);
}

export function parseScenario(value: unknown, path = 'scenario.json'): ScenarioInfo {
  return parseWith<ScenarioInfo>(scenarioSchema, value, path);
}

export function parseStats(value: unknown, path = 'stats.json'): Stat[] {
  return parseWith<Stat[]>(z.array(statSchema), value, path);
}

export function parsePerInstanceStats(value: unknown, path = 'per_instance_stats.json'): PerInstanceStats[] {
  return parseWith<PerInstanceStats[]>(z.array(perInstanceStatsSchema), value, path);
}

/**
 * scenario_state.json back into a ScenarioState. HELM's metrics group request states by instance identity; the
 * file repeats each instance per request state, so equal instance records are re-linked to one object.
 */
export function parseScenarioState(value: unknown, path = 'scenario_state.json'): ScenarioState {
  const state = parseWith<ScenarioState>(scenarioStateSchema, value, path);
  const seen = new Map<string, Instance>();
  for (const rs of state.request_states) {
    const key = pyJsonDumps(rs.instance as unknown as PyJsonValue);
    const existing = seen.get(key);
    if (existing) rs.instance = existing;
    else seen.set(key, rs.instance);
  }
  return state;
}
