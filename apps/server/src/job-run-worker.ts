// Prepares and finishes a job's runs off the server's main thread: generating a scenario's instances (one synchronous
// call of tens of milliseconds per run), augmenting and adapting them, computing the metrics and writing the five
// files. Only the requests go back to the main thread, which executes them on the engine through the request cache.
import { parentPort, workerData } from 'node:worker_threads';
import type { RequestResult, RunSpec } from '@flexhelm/core';
import { registerLocalModel } from '@flexhelm/run-spec';
import { headlineMetrics } from '@flexhelm/runner/metric-table';
import { runOne } from '@flexhelm/runner/run-one';
import { loadTokenizerFolder, localOptWindowService, modelFolderWindowService } from '@flexhelm/tokenizer';
import { lowerThisThreadPriority } from './background-thread.js';
import type { FromJobWorker, JobRunWorkerData, ToJobWorker } from './job-run-protocol.js';
import { runSpecsForJob } from './run-specs-for-job.js';

lowerThisThreadPriority(); // the event loop first: health checks answer while this thread prepares runs
const data = workerData as JobRunWorkerData;
const port = parentPort!;
const send = (message: FromJobWorker) => port.postMessage(message);
const tokenizer = loadTokenizerFolder(data.tokenizerFolder, data.tokenizerName);
const windowService = data.window.kind === 'helm-opt' ? localOptWindowService(tokenizer, data.window.maxPositions) : modelFolderWindowService(data.tokenizerFolder, tokenizer);

registerLocalModel(data.helmModel); // the registry is per thread: the server registered its model in its own
let runSpecs: RunSpec[] | undefined;

/** The job's run `index`, checked against the name the job record gave it when the job was accepted. */
function runSpecAt(index: number, name: string): RunSpec {
  runSpecs ??= runSpecsForJob(data.request, data.helmModel);
  const runSpec = runSpecs[index];
  if (runSpec?.name !== name) throw new Error(`the job records run ${index + 1} as ${name}, but its descriptions now expand to ${runSpec ? runSpec.name : `${runSpecs.length} runs`}`);
  return runSpec;
}

/** The run's `execute` waiting for the main thread's results (one run at a time, one execution per run). */
let waiting: ((results: RequestResult[]) => void) | undefined;

/** One run, as `flexhelm run` runs it, with the requests executed on the main thread. */
async function run(index: number, name: string): Promise<FromJobWorker> {
  const result = await runOne(runSpecAt(index, name), {
    outputPath: data.outputPath,
    suite: data.request.suite,
    dataDir: data.dataDir,
    offline: data.offline,
    skipCompleted: data.request.skip_completed_runs,
    windowService,
    executor: {
      modelId: 'main-thread', // unused: the main thread's executor has the model's identity and the cache
      execute: (requests) =>
        new Promise<RequestResult[]>((resolve) => {
          waiting = resolve;
          send({ type: 'execute', requests });
        }),
    },
    onEvent: (event) => send({ type: 'event', event }),
  });
  return {
    type: 'done',
    summary: {
      runDir: result.runDir,
      skipped: result.skipped,
      numRequests: result.numRequests,
      metrics: headlineMetrics(result.stats),
      notComputed: result.notComputed.map((n) => ({ metric: n.metric, reason: n.reason })),
    },
  };
}

port.on('message', (message: ToJobWorker) => {
  if (message.type === 'results') {
    const resolve = waiting;
    waiting = undefined;
    resolve?.(message.results);
    return;
  }
  run(message.index, message.name).then(send, (err: unknown) => send({ type: 'error', message: err instanceof Error ? err.message : String(err) }));
});
