import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { withInstanceIds, type RequestResult, type RequestState, type RunSpec, type ScenarioState, type Stat, type WindowService } from '@flexhelm/core';
import { getAdapter } from '@flexhelm/adapters';
import { DataPreprocessor, type DataOptions } from '@flexhelm/augmentation';
import { evaluateRunSpecMetrics, type BiasWordLists, type NotComputed } from '@flexhelm/metrics';
import { RUN_OUTPUT_FILES, runDirectory, writeRunOutputs } from './run-outputs.js';
import { serveRepeatedRequestsFromCache } from './repeated-requests.js';
import { createScenario, scenarioJson, scenarioOutputPath } from '@flexhelm/scenarios';
import type { ExecutionProgress, RequestExecutor } from './request-executor.js';

export type RunPhase = 'instances' | 'augmentation' | 'adapt' | 'execute' | 'metrics' | 'write' | 'done' | 'skipped';

export interface RunEvent {
  runName: string;
  phase: RunPhase;
  /** During `execute`. */
  progress?: ExecutionProgress;
  message?: string;
}

export interface RunOneOptions {
  /** HELM's `--output-path` (default `benchmark_output`). */
  outputPath: string;
  suite: string;
  executor: RequestExecutor;
  windowService: WindowService;
  /** Shared cache of downloaded scenario files; default `<outputPath>/scenarios/<name>` as in HELM. */
  dataDir?: string;
  offline?: boolean;
  /** Mirror for scenario source files (tests use a loopback server). */
  baseUrl?: string;
  /**
   * Where perturbation word lists are read or downloaded; default HELM's relative paths resolved against `outputPath`,
   * offline as `offline` (every command reads them from the same place).
   */
  augmentationData?: DataOptions;
  /** Skip a run whose five files already exist (HELM's `--skip-completed-runs`). */
  skipCompleted?: boolean;
  /** HELM's bias word lists for BiasMetric (`loadBiasWordLists`); without them BiasMetric is reported as not computed. */
  biasWordLists?: BiasWordLists;
  onEvent?: (event: RunEvent) => void;
  signal?: AbortSignal;
}

export interface RunOneResult {
  runName: string;
  runDir: string;
  skipped: boolean;
  stats: Stat[];
  notComputed: NotComputed[];
  numRequests: number;
  numInstances: number;
}

export function runIsComplete(runDir: string): boolean {
  return RUN_OUTPUT_FILES.every((f) => existsSync(join(runDir, f)));
}

/** A run up to its requests: everything `finishRun` needs once the requests have results. */
export interface PreparedRun {
  runSpec: RunSpec;
  runDir: string;
  scenario: ReturnType<typeof createScenario>;
  /** `<outputPath>/scenarios/<scenario name>`, as written into scenario.json. */
  scenarioOutputPath: string;
  /** The adapted ScenarioState: every request state without its result. */
  adapted: ScenarioState;
  numInstances: number;
}

function emitter(runSpec: RunSpec, options: Pick<RunOneOptions, 'onEvent'>) {
  return (phase: RunPhase, extra: Partial<RunEvent> = {}) => options.onEvent?.({ runName: runSpec.name, phase, ...extra });
}

/**
 * The first half of `runOne`: scenario → `with_instance_ids` → eval-instance selection → data augmentation →
 * adapter. Returns undefined when `skipCompleted` is set and the run's five files exist. A caller that executes
 * the requests elsewhere (e.g. on a queue of workers) then calls `finishRun` with their results.
 */
export async function prepareRun(runSpec: RunSpec, options: Omit<RunOneOptions, 'executor'>): Promise<PreparedRun | undefined> {
  const emit = emitter(runSpec, options);
  const runDir = runDirectory(options.outputPath, options.suite, runSpec.name);
  if (options.skipCompleted && runIsComplete(runDir)) {
    emit('skipped', { message: `${runDir} already has all five files` });
    return undefined;
  }

  const scenario = createScenario(runSpec.scenario_spec);
  const outputPath = scenarioOutputPath(options.outputPath, scenario.name);
  mkdirSync(outputPath, { recursive: true });
  const adapter = getAdapter(runSpec.adapter_spec, options.windowService);

  emit('instances');
  const all = withInstanceIds(
    await scenario.getInstances({
      outputPath,
      dataDir: options.dataDir,
      offline: options.offline,
      baseUrl: options.baseUrl,
      signal: options.signal,
      log: (message) => emit('instances', { message }),
    }),
  );
  const selected = adapter.getRunInstances(all);

  emit('augmentation');
  const augmentationData = options.augmentationData ?? { baseDir: options.outputPath, offline: options.offline };
  const instances = await new DataPreprocessor(runSpec.data_augmenter_spec, augmentationData).preprocess(selected);

  emit('adapt');
  const adapted = adapter.adapt(instances);
  return { runSpec, runDir, scenario, scenarioOutputPath: outputPath, adapted, numInstances: instances.length };
}

/**
 * The second half of `runOne`: the results (one per request state, in order) joined to the request states → every
 * metric of the run spec plus TokensMetric → the five files, each written atomically.
 */
export async function finishRun(
  prepared: PreparedRun,
  results: readonly RequestResult[],
  options: Pick<RunOneOptions, 'windowService' | 'onEvent' | 'biasWordLists'>,
): Promise<RunOneResult> {
  const { runSpec, runDir, adapted } = prepared;
  const emit = emitter(runSpec, options);
  if (results.length !== adapted.request_states.length) {
    throw new Error(`finishRun(${runSpec.name}): ${results.length} results for ${adapted.request_states.length} requests; give one result per request state, in order`);
  }
  const served = serveRepeatedRequestsFromCache(
    adapted.request_states.map((rs) => rs.request),
    results,
  );
  const scenarioState: ScenarioState = {
    adapter_spec: adapted.adapter_spec,
    request_states: adapted.request_states.map((rs, i): RequestState => ({ ...rs, result: served[i] })),
  };

  emit('metrics');
  const metrics = evaluateRunSpecMetrics(runSpec.metric_specs, scenarioState, { windowService: options.windowService, biasWordLists: options.biasWordLists });

  emit('write');
  await writeRunOutputs(runDir, {
    runSpec,
    scenario: scenarioJson(prepared.scenario, prepared.scenarioOutputPath),
    scenarioState,
    stats: metrics.stats,
    perInstanceStats: metrics.perInstanceStats,
  });
  emit('done', { message: runDir });
  return {
    runName: runSpec.name,
    runDir,
    skipped: false,
    stats: metrics.stats,
    notComputed: metrics.notComputed,
    numRequests: scenarioState.request_states.length,
    numInstances: prepared.numInstances,
  };
}

/**
 * HELM 0.2.1's `Runner.run_one`: `prepareRun` (scenario → `with_instance_ids` → eval-instance selection → data
 * augmentation → adapter) → execute every request (through `executor`, e.g. the cached OPT engine) → `finishRun`
 * (every metric of the run spec plus TokensMetric → the five files under `<outputPath>/runs/<suite>/<run name>/`).
 */
export async function runOne(runSpec: RunSpec, options: RunOneOptions): Promise<RunOneResult> {
  const prepared = await prepareRun(runSpec, options);
  if (!prepared) {
    const runDir = runDirectory(options.outputPath, options.suite, runSpec.name);
    return { runName: runSpec.name, runDir, skipped: true, stats: [], notComputed: [], numRequests: 0, numInstances: 0 };
  }
  const emit = emitter(runSpec, options);
  const requestStates = prepared.adapted.request_states;
  emit('execute', { progress: { done: 0, total: requestStates.length, generatedTokens: 0, cachedHits: 0 } });
  const results = await options.executor.execute(
    requestStates.map((rs) => rs.request),
    (progress) => emit('execute', { progress }),
  );
  return finishRun(prepared, results, options);
}
