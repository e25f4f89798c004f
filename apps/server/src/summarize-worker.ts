// Writes a suite's HELM summaries (flexhelm summarize) off the server's main thread: summarizing reads every run of
// the suite and would otherwise hold up the API for as long as that takes.
import { parentPort, workerData } from 'node:worker_threads';
import { lowerThisThreadPriority } from './background-thread.js';
import { loadHelmSchema, summarizeSuite } from '@flexhelm/summarize';
import type { SuiteSummaryRequest } from './suite-summarizer.js';

lowerThisThreadPriority(); // the event loop first: health checks answer while this thread works
const request = workerData as SuiteSummaryRequest;
try {
  const schema = await loadHelmSchema({ dataDir: request.dataDir, offline: request.offline });
  const result = summarizeSuite({ outputPath: request.outputPath, suite: request.suite, schema });
  parentPort!.postMessage({ ok: true, files: result.files.length });
} catch (err) {
  parentPort!.postMessage({ ok: false, error: (err as Error).message ?? String(err) });
}
