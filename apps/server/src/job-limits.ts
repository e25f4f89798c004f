/** How much one evaluation job may ask for; each is a `flexhelm-server` option (SECURITY.md, "Jobs"). */
export interface JobLimits {
  /** RunSpecs one job may expand to (and descriptions it may list): `--max-job-runs`. */
  maxRuns: number;
  /** `max_eval_instances` per run: `--max-job-eval-instances`. */
  maxEvalInstances: number;
  /** `num_train_trials` per run: `--max-job-train-trials`. */
  maxTrainTrials: number;
  /**
   * Jobs queued or running at once (those being submitted count too): `--max-pending-jobs`. Without it a client
   * could queue jobs without end, each up to `maxRuns` runs, held in memory and listed by every `GET /v1/runs`.
   */
  maxPendingJobs: number;
}

export const DEFAULT_JOB_LIMITS: JobLimits = { maxRuns: 1000, maxEvalInstances: 10_000, maxTrainTrials: 10, maxPendingJobs: 100 };

/** The server's completion-request limits a job's requests are held to, as one client request would be. */
export interface JobRequestLimits {
  /** Largest `num_outputs` (a request's `n`, the `maxN` option). */
  maxN: number;
  /** Largest `max_tokens`: `--max-tokens`. */
  maxTokens: number;
}

/** A RunSpec field over a limit: the field (the 400's `param`), what it asks, the limit, and the option that raises it. */
export interface AdapterLimitProblem {
  field: string;
  what: string;
  limit: number;
  /** The command-line option that raises the limit (none for `n`, a library option only). */
  flag?: string;
}

/**
 * The first field of an expanded RunSpec's adapter spec over the server's limits. Run expanders in a description
 * (`num_outputs=1000000`, `num_train_trials=…`) and scenario arguments set these after the request's own fields are
 * checked, so each RunSpec is checked as it is built; a value that is not a whole number in range is refused too.
 */
export function adapterLimitProblem(
  runName: string,
  adapter: { num_outputs?: unknown; max_tokens?: unknown; num_train_trials?: unknown; max_eval_instances?: unknown },
  limits: JobLimits,
  request: JobRequestLimits,
): AdapterLimitProblem | undefined {
  const check = (field: string, value: unknown, min: number, max: number, flag?: string): AdapterLimitProblem | undefined => {
    if (value === undefined || value === null) return undefined;
    if (typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max) return undefined;
    const what = typeof value === 'number' && Number.isInteger(value) && value > max ? `run ${runName} asks for ${value}` : `run ${runName} has ${JSON.stringify(value)}, not a whole number from ${min}`;
    return { field, what, limit: max, flag };
  };
  return (
    check('num_outputs', adapter.num_outputs, 1, request.maxN) ??
    check('max_tokens', adapter.max_tokens, 0, request.maxTokens, '--max-tokens') ??
    check('num_train_trials', adapter.num_train_trials, 1, limits.maxTrainTrials, '--max-job-train-trials') ??
    check('max_eval_instances', adapter.max_eval_instances, 1, limits.maxEvalInstances, '--max-job-eval-instances')
  );
}
