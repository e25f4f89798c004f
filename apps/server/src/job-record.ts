import { z } from 'zod';
import type { MetricRow } from '@flexhelm/runner';

/** What `POST /v1/runs` takes: the CLI's `flexhelm run` options. */
export const JobRequestSchema = z
  .object({
    descriptions: z.array(z.string().min(1, 'a description must not be empty')).min(1, 'give at least one run description, e.g. "synthetic_reasoning:mode=pattern_match"'),
    max_eval_instances: z.number().int().positive().optional(),
    num_train_trials: z.number().int().positive().optional(),
    suite: z
      .string()
      .regex(/^[\w.-]+$/, 'suite must be a plain folder name such as "v1" (letters, digits, "_", "-", ".")')
      .refine((s) => s !== '.' && s !== '..', 'suite must not be "." or ".."')
      .optional(),
    skip_completed_runs: z.boolean().optional(),
  })
  .strict();

export type JobRequest = z.infer<typeof JobRequestSchema>;

export type JobStatus = 'queued' | 'running' | 'succeeded' | 'failed' | 'cancelled';

interface JobRun {
  name: string;
  status: 'pending' | 'running' | 'done' | 'skipped' | 'failed' | 'cancelled';
  /** The run's folder relative to the output folder, e.g. `runs/v1/<run name>`. */
  runDir?: string;
  /** Tokens the engine generated for the run's requests (cached ones included). */
  generatedTokens?: number;
  metrics?: MetricRow[];
  notComputed?: string[];
  numRequests?: number;
}

/** A point of the job's progress curve: seconds since the job started, requests done in its runs, tokens generated. */
interface ProgressSample {
  t: number;
  done: number;
  generatedTokens: number;
}

interface JobProgress {
  runIndex: number;
  runCount: number;
  runName?: string;
  phase?: string;
  done: number;
  total: number;
  cachedHits: number;
  generatedTokens: number;
}

export interface JobRecord {
  id: string;
  status: JobStatus;
  request: JobRequest & { suite: string };
  createdAt: string;
  startedAt?: string;
  finishedAt?: string;
  /** How many times the job was picked up again after a server stop. */
  resumed: number;
  runs: JobRun[];
  progress: JobProgress;
  samples: ProgressSample[];
  error?: string;
}

export const isFinished = (s: JobStatus) => s === 'succeeded' || s === 'failed' || s === 'cancelled';
