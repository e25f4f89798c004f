import { mkdirSync } from 'node:fs';
import type { RunSpec } from '@flexhelm/core';
import { createScenario, scenarioOutputPath } from '@flexhelm/scenarios';
import { runIsComplete, type RunOneOptions } from './run-one.js';
import { runDirectory } from './run-outputs.js';

export type FetchRunDataOptions = Pick<RunOneOptions, 'outputPath' | 'suite' | 'dataDir' | 'offline' | 'baseUrl' | 'skipCompleted' | 'signal'> & {
  log?: (message: string) => void;
};

/**
 * Downloads (or, offline, checks for) the dataset of every run spec, once per distinct scenario, so that a missing
 * or unreachable dataset is reported before the machine profile, the policy search and the model load rather than
 * after them. The instances are read and dropped; `runOne` reads them again from the local files. Runs that
 * `skipCompleted` would skip are not fetched. Throws what the scenario throws (a `DownloadError` says what is missing
 * and where to put it).
 */
export async function fetchRunData(runSpecs: readonly RunSpec[], options: FetchRunDataOptions): Promise<void> {
  const seen = new Set<string>();
  for (const runSpec of runSpecs) {
    if (options.skipCompleted && runIsComplete(runDirectory(options.outputPath, options.suite, runSpec.name))) continue;
    const key = JSON.stringify(runSpec.scenario_spec);
    if (seen.has(key)) continue;
    seen.add(key);
    const scenario = createScenario(runSpec.scenario_spec);
    // The same folder prepareRun gives the scenario (HELM's output_path), so a dataset kept there is found.
    const outputPath = scenarioOutputPath(options.outputPath, scenario.name);
    mkdirSync(outputPath, { recursive: true });
    await scenario.getInstances({ outputPath, dataDir: options.dataDir, offline: options.offline, baseUrl: options.baseUrl, signal: options.signal, log: options.log });
  }
}
