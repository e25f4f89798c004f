import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { withInstanceIds, type RequestState, type RunSpec, type ScenarioState, type Stat, type WindowService } from '@flexhelm/core';
import { getAdapter } from '@flexhelm/adapters';
import { DataPreprocessor, type DataOptions } from '@flexhelm/augmentation';
import { evaluateRunSpecMetrics, RUN_OUTPUT_FILES, runDirectory, writeRunOutputs, type NotComputed } from '@flexhelm/metrics';
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
  /** Where perturbation word lists are read or downloaded. */
  augmentationData?: DataOptions;
  /** Skip a run whose five files already exist (HELM's `--skip-completed-runs`). */
  skipCompleted?: boolean;
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

/**
 * HELM 0.2.1's `Runner.run_one`: scenario → `with_instance_ids` → eval-instance selection → data augmentation →
 * adapter → execute every request (through `executor`, e.g. the cached OPT engine) → every metric of the run spec
 * plus TokensMetric → the five files under `<outputPath>/runs/<suite>/<run name>/`, each written atomically.
 */
export async function runOne(runSpec: RunSpec, options: RunOneOptions): Promise<RunOneResult> {
  const emit = (phase: RunPhase, extra: Partial<RunEvent> = {}) => options.onEvent?.({ runName: runSpec.name, phase, ...extra });
  const runDir = runDirectory(options.outputPath, options.suite, runSpec.name);
  if (options.skipCompleted && runIsComplete(runDir)) {
    emit('skipped', { message: `${runDir} already has all five files` });
    return { runName: runSpec.name, runDir, skipped: true, stats: [], notComputed: [], numRequests: 0, numInstances: 0 };
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
  const instances = await new DataPreprocessor(runSpec.data_augmenter_spec, options.augmentationData).preprocess(selected);

  emit('adapt');
  const adapted = adapter.adapt(instances);

  emit('execute', { progress: { done: 0, total: adapted.request_states.length, generatedTokens: 0, cachedHits: 0 } });
  const results = await options.executor.execute(
    adapted.request_states.map((rs) => rs.request),
    (progress) => emit('execute', { progress }),
  );
  const scenarioState: ScenarioState = {
    adapter_spec: adapted.adapter_spec,
    request_states: adapted.request_states.map((rs, i): RequestState => ({ ...rs, result: results[i] })),
  };

  emit('metrics');
  const metrics = evaluateRunSpecMetrics(runSpec.metric_specs, scenarioState, { windowService: options.windowService });

  emit('write');
  writeRunOutputs(runDir, {
    runSpec,
    scenario: scenarioJson(scenario, outputPath),
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
    numInstances: instances.length,
  };
}
