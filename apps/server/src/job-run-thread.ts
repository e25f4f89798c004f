import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { RequestExecutor, RunEvent } from '@flexhelm/runner';
import { reviveRequest, type FromJobWorker, type JobRunWorkerData, type RunSummary, type ToJobWorker } from './job-run-protocol.js';
import { DEFAULT_JOB_WORKER_HEAP_MIB, threadLimits } from './server-memory-plan.js';

/** The compiled worker: beside this module, or in dist/ when this module runs from src/ (vitest). */
function workerPath(): string {
  const here = fileURLToPath(new URL('./job-run-worker.js', import.meta.url));
  if (existsSync(here)) return here;
  const dist = here.replace(/([\\/])src([\\/])job-run-worker\.js$/, '$1dist$2job-run-worker.js');
  if (existsSync(dist)) return dist;
  throw new Error(`job-run worker not found at ${here} or ${dist}: build @flexhelm/server first`);
}

/**
 * The worker thread of one job: it prepares each run (instances, augmentation, adapter), sends the requests here to be
 * executed (the engine and the request cache stay on the main thread), then computes the metrics and writes the
 * run's files. Started per job and terminated at its end, on a cancel or a stop; its heap is capped
 * (`resourceLimits`), and a worker that dies (out of memory, a crash) fails the run it had with a message saying so,
 * never the server.
 */
export class JobRunThread {
  private readonly worker: Worker;
  private current: { reject: (err: Error) => void } | undefined;
  private gone: Error | undefined;
  private terminating = false;
  /** The worker's thread id (tests check that runs were prepared off the main thread). */
  readonly threadId: number;

  constructor(data: JobRunWorkerData, heapMiB = DEFAULT_JOB_WORKER_HEAP_MIB) {
    this.worker = new Worker(workerPath(), { workerData: data, resourceLimits: threadLimits(heapMiB) });
    this.threadId = this.worker.threadId;
    this.worker.on('error', (err: Error & { code?: string }) => {
      const why = err.code === 'ERR_WORKER_OUT_OF_MEMORY' ? `ran out of its ${heapMiB} MiB heap (start flexhelm-server with a higher --job-worker-heap-mib, or ask for fewer instances)` : `crashed: ${err.message}`;
      this.fail(new Error(`the job's run worker ${why}`));
    });
    this.worker.on('exit', (code) => {
      if (!this.terminating) this.fail(new Error(`the job's run worker stopped unexpectedly (exit code ${code})`));
    });
  }

  private fail(err: Error): void {
    this.gone ??= err;
    this.current?.reject(this.gone);
  }

  /**
   * The job's run `index` (`name` in its record), as `runOne` does it with `executor`; resolves with what the job
   * record keeps of it. `signal` rejects at once with its reason (the caller terminates the worker).
   */
  run(index: number, name: string, executor: RequestExecutor, onEvent: (event: RunEvent) => void, signal: AbortSignal): Promise<RunSummary> {
    if (this.gone) return Promise.reject(this.gone);
    if (this.current) return Promise.reject(new Error('JobRunThread.run: a run is already in progress'));
    return new Promise<RunSummary>((resolve, reject) => {
      const onAbort = () => finish(() => reject(signal.reason));
      const finish = (settle: () => void) => {
        if (this.current !== entry) return;
        this.current = undefined;
        this.worker.off('message', onMessage);
        signal.removeEventListener('abort', onAbort);
        settle();
      };
      const entry = { reject: (err: Error) => finish(() => reject(err)) };
      const onMessage = (message: FromJobWorker) => {
        if (message.type === 'event') onEvent(message.event);
        else if (message.type === 'done') finish(() => resolve(message.summary));
        else if (message.type === 'error') finish(() => reject(new Error(message.message)));
        else {
          executor
            .execute(message.requests.map(reviveRequest), (progress) => onEvent({ runName: name, phase: 'execute', progress }))
            .then(
              (results) => {
                if (this.current === entry) this.worker.postMessage({ type: 'results', results } satisfies ToJobWorker);
              },
              (err: Error) => entry.reject(err),
            );
        }
      };
      if (signal.aborted) return reject(signal.reason);
      this.current = entry;
      this.worker.on('message', onMessage);
      signal.addEventListener('abort', onAbort, { once: true });
      this.worker.postMessage({ type: 'run', index, name } satisfies ToJobWorker);
    });
  }

  /** Stops the worker (whatever it was doing: a cancelled run's files are written atomically or not at all). */
  async terminate(): Promise<void> {
    this.terminating = true;
    await this.worker.terminate();
  }
}
