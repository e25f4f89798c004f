import { pyJsonParse } from '@flexhelm/python-compat';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeFilesAtomicAsync } from '@flexhelm/atomic-write';
import {
  HelmError,
  helmJson,
  parsePerInstanceStats,
  parseRunSpec,
  parseScenario,
  parseScenarioState,
  parseStats,
  scenarioStateToPy,
  type PerInstanceStats,
  type RunSpec,
  type ScenarioInfo,
  type ScenarioState,
  type Stat,
} from '@flexhelm/core';

/** HELM's five run files, in the order the runner writes them. */
export const RUN_OUTPUT_FILES = ['run_spec.json', 'scenario.json', 'scenario_state.json', 'stats.json', 'per_instance_stats.json'] as const;

export interface RunOutputs {
  runSpec: RunSpec;
  /** scenario.json: `{name, description, tags, output_path, definition_path}`. */
  scenario: ScenarioInfo;
  scenarioState: ScenarioState;
  stats: Stat[];
  perInstanceStats: PerInstanceStats[];
}

/** `<outputPath>/runs/<suite>/<runName>` (HELM's `benchmark_output/runs/<suite>/<run_spec.name>`). */
export function runDirectory(outputPath: string, suite: string, runName: string): string {
  if (!suite || suite.includes('/') || suite === '.' || suite === '..') throw new HelmError('ValueError', `invalid suite name "${suite}": use a plain folder name such as "v1"`);
  if (!runName || runName.includes('/')) throw new HelmError('ValueError', `invalid run name "${runName}": RunSpec names have "/" replaced by "_"`);
  return join(outputPath, 'runs', suite, runName);
}

/**
 * Writes HELM's five files into `runDir` exactly as HELM 0.2.1's runner does (`json.dumps(asdict_without_nones(x),
 * indent=2)`, no trailing newline), all or nothing: the texts are all rendered before the first write (a value that
 * cannot be serialized leaves the folder untouched), and all five are written and synced under temporary names before
 * the first is renamed into place (a full or read-only folder leaves none of them, and never a partial one). The
 * writes and syncs run off the event loop: a server running a job of many runs keeps answering while they go to disk.
 */
export async function writeRunOutputs(runDir: string, outputs: RunOutputs): Promise<void> {
  const texts: Record<(typeof RUN_OUTPUT_FILES)[number], string> = {
    'run_spec.json': helmJson(outputs.runSpec),
    'scenario.json': helmJson(outputs.scenario),
    // Token/sequence logprobs and timings are Python floats: `0.0`, not `0` (core's scenarioStateToPy boxes them).
    'scenario_state.json': helmJson(scenarioStateToPy(outputs.scenarioState)),
    'stats.json': helmJson(outputs.stats),
    'per_instance_stats.json': helmJson(outputs.perInstanceStats),
  };
  await writeFilesAtomicAsync(RUN_OUTPUT_FILES.map((file) => [join(runDir, file), texts[file]] as const));
}

function readJson(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new HelmError('FileNotFoundError', `cannot read ${path}: ${(err as Error).message}. Is this a HELM run directory (runs/<suite>/<run name>)?`, { cause: err });
  }
  try {
    return pyJsonParse(text);
  } catch (err) {
    throw new HelmError('ValueError', `${path} is not valid JSON: ${(err as Error).message}`, { cause: err });
  }
}

/** Reads one of the five files back (int/float preserved, schema-checked). */
export function readRunSpec(runDir: string): RunSpec {
  return parseRunSpec(readJson(join(runDir, 'run_spec.json')), join(runDir, 'run_spec.json'));
}

export function readScenario(runDir: string): ScenarioInfo {
  return parseScenario(readJson(join(runDir, 'scenario.json')), join(runDir, 'scenario.json'));
}

export function readScenarioState(runDir: string): ScenarioState {
  return parseScenarioState(readJson(join(runDir, 'scenario_state.json')), join(runDir, 'scenario_state.json'));
}

export function readStats(runDir: string): Stat[] {
  return parseStats(readJson(join(runDir, 'stats.json')), join(runDir, 'stats.json'));
}

export function readPerInstanceStats(runDir: string): PerInstanceStats[] {
  return parsePerInstanceStats(readJson(join(runDir, 'per_instance_stats.json')), join(runDir, 'per_instance_stats.json'));
}

/** All five files of a run directory. */
export function readRunOutputs(runDir: string): RunOutputs {
  return {
    runSpec: readRunSpec(runDir),
    scenario: readScenario(runDir),
    scenarioState: readScenarioState(runDir),
    stats: readStats(runDir),
    perInstanceStats: readPerInstanceStats(runDir),
  };
}
