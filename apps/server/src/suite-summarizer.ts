import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { DEFAULT_JOB_WORKER_HEAP_MIB, threadLimits } from './server-memory-plan.js';

export interface SuiteSummaryRequest {
  outputPath: string;
  suite: string;
  /** flexhelm's data folder, where HELM's schema.yaml is kept when no HELM checkout is given. */
  dataDir?: string;
  offline?: boolean;
}

/** The compiled worker: beside this module, or in dist/ when this module runs from src/ (vitest). */
function workerPath(): string {
  const here = fileURLToPath(new URL('./summarize-worker.js', import.meta.url));
  if (existsSync(here)) return here;
  const dist = here.replace(/([\\/])src([\\/])summarize-worker\.js$/, '$1dist$2summarize-worker.js');
  if (existsSync(dist)) return dist;
  throw new Error(`summarize worker not found at ${here} or ${dist}: build @flexhelm/server first`);
}

/**
 * Writes what `flexhelm summarize --suite S` writes (HELM's summary files, which the results site reads) in a worker
 * thread; resolves with the number of files written, rejects with summarize's one-line reason.
 */
export function summarizeSuiteInWorker(request: SuiteSummaryRequest, heapMiB = DEFAULT_JOB_WORKER_HEAP_MIB): Promise<number> {
  return new Promise((resolve, reject) => {
    // Capped as a job's run worker is (the two never run at once): the server's RAM plan counts one such thread.
    const worker = new Worker(workerPath(), { workerData: request, resourceLimits: threadLimits(heapMiB) });
    let settled = false;
    worker.once('message', (reply: { ok: true; files: number } | { ok: false; error: string }) => {
      settled = true;
      if (reply.ok) resolve(reply.files);
      else reject(new Error(reply.error));
    });
    worker.once('error', (err: Error & { code?: string }) => {
      settled = true;
      reject(err.code === 'ERR_WORKER_OUT_OF_MEMORY' ? new Error(`the summarize worker ran out of its ${heapMiB} MiB heap (start flexhelm-server with a higher --job-worker-heap-mib)`) : err);
    });
    worker.once('exit', (code) => {
      if (!settled) reject(new Error(`the summarize worker stopped (exit code ${code})`));
    });
  });
}
