import { pyJsonDumps, pyJsonParse, type PyJsonValue } from '@flexhelm/python-compat';
import { MISSING_LISTS, missingHelmLists } from './perturbations.js';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { EVAL_SPLITS, TRAIN_SPLIT, adapterSpec, dataAugmenterSpec, helmJson, instance, type AdapterSpec, type DataAugmenterSpec, type Instance, type RequestState } from '@flexhelm/core';
import { getAdapter, InContextLearningAdapter } from '@flexhelm/adapters';
import { CountingTokenizer, LocalWindowService, getTokenizer, getWindowService } from '@flexhelm/tokenizer';
import { CaseRecorder, describeDifference, type CheckResult } from '../check-result.js';

type PyMap = ReadonlyMap<string, PyJsonValue>;

const get = (m: PyJsonValue | undefined, key: string): PyJsonValue | undefined => (m instanceof Map ? m.get(key) : undefined);

/** A parsed golden value as plain objects, keeping `PyFloat`s (so `0.0` stays a float) and key order. */
function fromGolden(value: PyJsonValue): unknown {
  if (value instanceof Map) return Object.fromEntries([...value].map(([k, v]) => [k, fromGolden(v)]));
  if (Array.isArray(value)) return value.map(fromGolden);
  return value;
}

function toInstance(value: PyJsonValue): Instance {
  return instance(fromGolden(value) as Instance);
}

/** HELM's word lists for perturbations: a HELM checkout named by FLEXHELM_HELM_SOURCE_DIR, or the download cache. */
function helmSourceDir(): string | undefined {
  if (process.env.FLEXHELM_HELM_SOURCE_DIR) return process.env.FLEXHELM_HELM_SOURCE_DIR;
  const cache = resolve('benchmark_output/perturbations/helm_v0.2.1');
  return existsSync(cache) ? cache : undefined;
}

/**
 * The run spec HELM builds from the case's description, with the generator's overrides applied, when @flexhelm/run-spec
 * can build it; `undefined` when that package is missing or needs data it cannot get (the golden spec is used then).
 */
async function runSpecFromDescription(description: string, overrides: Record<string, unknown>): Promise<{ name: string; adapter: AdapterSpec; augmenter: DataAugmenterSpec } | undefined> {
  let runSpecModule: typeof import('@flexhelm/run-spec');
  try {
    runSpecModule = await import('@flexhelm/run-spec');
  } catch {
    return undefined;
  }
  let runSpecs: ReturnType<typeof runSpecModule.constructRunSpecs>;
  try {
    runSpecs = runSpecModule.constructRunSpecs(runSpecModule.parseObjectSpec(description), { checkScenarioArguments: false });
  } catch {
    return undefined;
  }
  const [first] = runSpecs;
  if (!first) return undefined;
  return { name: first.name, adapter: adapterSpec({ ...first.adapter_spec, ...overrides }), augmenter: first.data_augmenter_spec };
}

async function preprocess(instances: Instance[], spec: DataAugmenterSpec): Promise<Instance[]> {
  let augmentation: typeof import('@flexhelm/augmentation') | undefined;
  try {
    augmentation = await import('@flexhelm/augmentation');
  } catch {
    augmentation = undefined;
  }
  if (!augmentation) {
    if (spec.perturbation_specs.length > 0) throw new Error('augmentation not available: @flexhelm/augmentation could not be loaded');
    const isEval = (i: Instance) => (EVAL_SPLITS as readonly (string | undefined)[]).includes(i.split);
    return [...instances.filter((i) => i.split === TRAIN_SPLIT), ...instances.filter(isEval)];
  }
  return new augmentation.DataPreprocessor(spec, { offline: true, helmSourceDir: helmSourceDir() }).preprocess(instances);
}

/** The generator's flattened request state: instance identity, then RequestState fields, then the request. */
function flatten(rs: RequestState): PyJsonValue {
  return {
    instance_id: rs.instance.id ?? null,
    instance_split: rs.instance.split ?? null,
    perturbation: (rs.instance.perturbation as unknown as PyJsonValue) ?? null,
    instance_input_text: rs.instance.input.text,
    train_trial_index: rs.train_trial_index,
    reference_index: rs.reference_index ?? null,
    request_mode: rs.request_mode ?? null,
    output_mapping: rs.output_mapping ?? null,
    num_train_instances: rs.num_train_instances,
    prompt_truncated: rs.prompt_truncated,
    num_conditioning_tokens: rs.num_conditioning_tokens,
    request: rs.request as unknown as PyJsonValue,
  };
}

function compare(what: string, expected: PyJsonValue | undefined, actual: unknown): string | undefined {
  const diff = describeDifference(pyJsonDumps(expected ?? null, 2), pyJsonDumps(actual as PyJsonValue, 2));
  return diff ? `${what} ${diff}` : undefined;
}

async function checkCase(golden: PyMap, c: PyMap): Promise<string | undefined> {
  const problems: string[] = [];
  const note = (p: string | undefined) => {
    if (p) problems.push(p);
  };
  const instanceSet = get(golden.get('instance_sets'), get(c, 'instance_set') as string) as PyJsonValue[] | undefined;
  if (!instanceSet) return `instance set ${String(get(c, 'instance_set'))} is not in the file`;
  const instances = instanceSet.map(toInstance);

  const goldenAdapterSpec = adapterSpec(fromGolden(get(c, 'adapter_spec')!) as Partial<AdapterSpec>);
  const goldenAugmenterSpec = dataAugmenterSpec(fromGolden(get(c, 'data_augmenter_spec')!) as Partial<DataAugmenterSpec>);
  const built = await runSpecFromDescription(get(c, 'run_spec_description') as string, fromGolden(get(c, 'overrides') ?? new Map()) as Record<string, unknown>);
  if (built) {
    note(built.name === get(c, 'run_spec_name') ? undefined : `run spec name ${built.name} != ${String(get(c, 'run_spec_name'))}`);
    note(describeDifference(helmJson(goldenAdapterSpec), helmJson(built.adapter)) && `@flexhelm/run-spec built a different adapter_spec: ${describeDifference(helmJson(goldenAdapterSpec), helmJson(built.adapter))}`);
    note(describeDifference(helmJson(goldenAugmenterSpec), helmJson(built.augmenter)) && `@flexhelm/run-spec built a different data_augmenter_spec: ${describeDifference(helmJson(goldenAugmenterSpec), helmJson(built.augmenter))}`);
  }
  const spec = goldenAdapterSpec;

  // The case describes the window service HELM used; flexhelm's factory must give the same one for the model.
  const counting = new CountingTokenizer(getTokenizer(get(c, 'tokenizer') as string));
  const wsGolden = get(c, 'window_service');
  const described = new LocalWindowService(counting, {
    className: get(wsGolden, 'class') as string,
    tokenizerName: get(wsGolden, 'tokenizer_name') as string,
    maxSequenceLength: get(wsGolden, 'max_sequence_length') as number,
    maxRequestLength: get(wsGolden, 'max_request_length') as number,
    endOfTextToken: get(wsGolden, 'end_of_text_token') as string,
    prefixToken: get(wsGolden, 'prefix_token') as string,
  });
  const fields = (ws: LocalWindowService) => ({
    class: ws.className, max_sequence_length: ws.maxSequenceLength, max_request_length: ws.maxRequestLength,
    end_of_text_token: ws.endOfTextToken, prefix_token: ws.prefixToken, tokenizer_name: ws.tokenizerName,
  });
  let windowService = described;
  try {
    const fromFactory = getWindowService(spec.model, { tokenizer: counting });
    if (fromFactory instanceof LocalWindowService) {
      note(compare('window_service', wsGolden, fields(fromFactory)));
      windowService = fromFactory;
    }
  } catch {
    // A model whose tokenizer flexhelm cannot run offline (e.g. OpenAI's): the described window service stands in.
  }

  const adapter = getAdapter(spec, windowService);
  const runInstances = adapter.getRunInstances(instances);
  note(compare('run_instance_ids', get(c, 'run_instance_ids'), runInstances.map((i) => i.id ?? null)));

  const preprocessed = await preprocess(runInstances, goldenAugmenterSpec);
  note(
    compare(
      'preprocessed_instances',
      get(c, 'preprocessed_instances'),
      preprocessed.map((i) => ({ id: i.id ?? null, split: i.split ?? null, perturbation: (i.perturbation as unknown as PyJsonValue) ?? null, input_text: i.input.text })),
    ),
  );

  const sampledGolden = get(c, 'sampled_train_ids_per_trial');
  if (sampledGolden !== undefined) {
    if (!(adapter instanceof InContextLearningAdapter)) note(`sampled_train_ids_per_trial given for a ${spec.method} adapter`);
    else {
      const train = preprocessed.filter((i) => i.split === TRAIN_SPLIT);
      const sampled = Array.from({ length: spec.num_train_trials }, (_, t) => adapter.sampleExamples(train, t).map((i) => i.id ?? null));
      note(compare('sampled_train_ids_per_trial', sampledGolden, sampled));
    }
  }

  const state = adapter.adapt(preprocessed, 1);
  note(compare('num_request_states', get(c, 'num_request_states'), state.request_states.length));
  note(compare('request_states', get(c, 'request_states'), state.request_states.map(flatten)));
  const callsGolden = get(c, 'tokenizer_calls');
  if (callsGolden !== undefined) note(compare('tokenizer_calls', callsGolden, counting.calls));
  return problems.length > 0 ? problems.join('; ') : undefined;
}

/**
 * helm/adapters.json: each case runs HELM's adaptation pipeline (get_run_instances → DataPreprocessor → adapt) on one of
 * the file's instance sets with the `whitespace-stub` tokenizer, and compares run instance ids, preprocessed
 * instances, sampled train ids per trial, every request state (prompt byte for byte), their number and the tokenizer
 * calls. The adapter spec is the case's own; when @flexhelm/run-spec builds the same run from the description it is
 * checked against it too.
 */
export async function check(path: string): Promise<CheckResult> {
  const golden = pyJsonParse(await readFile(path, 'utf8')) as PyMap;
  const recorder = new CaseRecorder();
  const configured = helmSourceDir() !== undefined;
  for (const c of golden.get('cases') as PyMap[]) {
    // A case whose data augmentation needs HELM's word lists cannot run where they are not available (see checks/perturbations.ts).
    let missing = false;
    await recorder.check(String(c.get('case')), async () => {
      try {
        return await checkCase(golden, c);
      } catch (err) {
        if (missingHelmLists(err, configured)) {
          missing = true;
          return undefined;
        }
        throw err;
      }
    });
    if (missing) {
      recorder.passed--;
      recorder.notRun(MISSING_LISTS);
    }
  }
  return recorder.result();
}
