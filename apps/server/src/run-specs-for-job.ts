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
