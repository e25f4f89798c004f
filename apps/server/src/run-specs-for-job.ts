import type { RunSpec } from '@flexhelm/core';
import { parseObjectSpec, runEntriesToRunSpecs } from '@flexhelm/run-spec';
import type { JobRequest } from './job-record.js';

/**
 * A description with its `model=` argument pointing at the served model (kept where it stood, since the model
 * expander's position shapes the run name), or `model=<name>` appended when it has none — as `flexhelm run` does.
 */
export function withServedModel(description: string, model: string): string {
  const spec = parseObjectSpec(description);
  const colon = description.indexOf(':');
  if (colon < 0) return `${description}:model=${model}`;
  if (!('model' in spec.args)) return `${description},model=${model}`;
  const args = description.slice(colon + 1).split(',');
  const key = (a: string) => a.slice(0, a.indexOf('=')).trim();
  return `${description.slice(0, colon)}:${args.map((a) => (key(a) === 'model' ? `model=${model}` : a)).join(',')}`;
}

/** The RunSpecs a job runs, expanded as `flexhelm run` expands its `-d` options (default 3 train trials, as helm_run.py). */
export function runSpecsForJob(request: JobRequest, helmModel: string): RunSpec[] {
  return runEntriesToRunSpecs(
    request.descriptions.map((d) => ({ description: withServedModel(d, helmModel), priority: 1 })),
    { maxEvalInstances: request.max_eval_instances, numTrainTrials: request.num_train_trials ?? 3 },
  );
}
