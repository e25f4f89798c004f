import { PyFloat } from '@flexhelm/python-compat';
import type { Request, RequestResult } from '@flexhelm/core';
import type { MetricRow, RunEvent } from '@flexhelm/runner';
import type { JobRequest } from './job-record.js';

/** How the job-run worker rebuilds the server's window service from the model folder (as `openSession` builds it). */
export type JobWindowSpec = { kind: 'helm-opt'; maxPositions: number } | { kind: 'model-folder' };

/** What one job's run worker is started with: where runs are written and how to tokenize (no engine: it stays on the main thread). */
export interface JobRunWorkerData {
  /**
   * The job as submitted: the worker expands its RunSpecs itself. RunSpecs hold Python floats (`PyFloat`), which a
   * message would turn into plain objects, and the run files would show them as such.
   */
  request: JobRequest & { suite: string };
  /** The served model's HELM name (registered in the worker as in the server). */
  helmModel: string;
  outputPath: string;
  dataDir?: string;
  offline?: boolean;
  tokenizerFolder: string;
  tokenizerName: string;
  window: JobWindowSpec;
}

/** Main thread → worker. */
export type ToJobWorker =
  /** Prepare, execute (through the main thread) and finish the job's run `index` (called `name` in the job record). */
  | { type: 'run'; index: number; name: string }
  /** The results of the worker's last `execute`, one per request, in order. */
  | { type: 'results'; results: RequestResult[] };

/** What the main thread keeps of a finished run: the job record's fields, computed in the worker. */
export interface RunSummary {
  runDir: string;
  skipped: boolean;
  numRequests: number;
  metrics: MetricRow[];
  notComputed: { metric: string; reason: string }[];
}

/** Worker → main thread. */
export type FromJobWorker =
  | { type: 'event'; event: RunEvent }
  /** The run's requests, to execute on the engine (through the cache) on the main thread. */
  | { type: 'execute'; requests: readonly Request[] }
  | { type: 'done'; summary: RunSummary }
  | { type: 'error'; message: string };

const PY_NUMBER_FIELDS = ['temperature', 'top_p', 'presence_penalty', 'frequency_penalty'] as const;

/**
 * A request as the worker built it. Posting a message keeps a class instance's fields but not its class: a Python
 * float such as `temperature: 1.0` (a `PyFloat`) arrives as `{ value: 1 }`, and the request cache's key (its JSON,
 * `1.0` vs `1`) would change. The request's Python numbers are boxed again here.
 */
export function reviveRequest(posted: Request): Request {
  const request = { ...posted };
  for (const field of PY_NUMBER_FIELDS) {
    const v = request[field] as unknown;
    if (typeof v === 'object' && v !== null && typeof (v as { value?: unknown }).value === 'number') request[field] = new PyFloat((v as { value: number }).value);
  }
  return request;
}
