/** How much one evaluation job may ask for; each is a `flexhelm-server` option (SECURITY.md, "Jobs"). */
export interface JobLimits {
  /** RunSpecs one job may expand to (and descriptions it may list): `--max-job-runs`. */
  maxRuns: number;
  /** `max_eval_instances` per run: `--max-job-eval-instances`. */
  maxEvalInstances: number;
  /** `num_train_trials` per run: `--max-job-train-trials`. */
  maxTrainTrials: number;
}

export const DEFAULT_JOB_LIMITS: JobLimits = { maxRuns: 1000, maxEvalInstances: 10_000, maxTrainTrials: 10 };
