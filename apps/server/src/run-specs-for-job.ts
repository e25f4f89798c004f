import { setImmediate as nextTurn } from 'node:timers/promises';
import type { RunSpec } from '@flexhelm/core';
import { descriptionForModel, runEntriesToRunSpecs } from '@flexhelm/run-spec';
import type { JobRequest } from './job-record.js';

/** The RunSpecs a job runs, expanded as `flexhelm run` expands its `-d` options (default 3 train trials, as helm_run.py). */
export function runSpecsForJob(request: JobRequest, helmModel: string): RunSpec[] {
  return runEntriesToRunSpecs(
    request.descriptions.map((d) => ({ description: descriptionForModel(d, helmModel), priority: 1 })),
    { maxEvalInstances: request.max_eval_instances, numTrainTrials: request.num_train_trials ?? 3 },
  );
}

/** Descriptions expanded per turn of the event loop by `runSpecsForJobInSlices`. */
const DESCRIPTIONS_PER_TURN = 16;

/**
 * `runSpecsForJob`, a slice of descriptions per turn of the event loop, calling `check` on each RunSpec as it is
 * built, and stopping once there are more than `stopAbove`: a job of a thousand descriptions (about half a second of expanding) never holds up /healthz or other requests.
 * The same RunSpecs, in the same order: HELM expands each run entry on its own.
 */
export async function runSpecsForJobInSlices(request: JobRequest, helmModel: string, check: (r: RunSpec) => void, stopAbove = Infinity): Promise<RunSpec[]> {
  const specs: RunSpec[] = [];
  for (let i = 0; i < request.descriptions.length; i += DESCRIPTIONS_PER_TURN) {
    if (i > 0) await nextTurn();
    const slice = runSpecsForJob({ ...request, descriptions: request.descriptions.slice(i, i + DESCRIPTIONS_PER_TURN) }, helmModel);
    for (const r of slice) check(r);
    specs.push(...slice);
    if (specs.length > stopAbove) break; // over the caller's limit already: expanding the rest only costs time
  }
  return specs;
}
