import { formatGiB, RUNTIME_BYTES } from '@flexhelm/offload';

const MiB = 2 ** 20;
/** V8 old-generation cap of each text worker (tokenizing, chat templates): `resourceLimits` in TextWorkers. */
export const TEXT_WORKER_HEAP_MIB = 512;
/** Default V8 old-generation cap of a job's run worker and of the suite summarizer (`--job-worker-heap-mib`). */
export const DEFAULT_JOB_WORKER_HEAP_MIB = 512;
/** V8 young-generation cap of every server worker thread (MiB): bounded too, so a thread's heap is its caps' sum. */
const YOUNG_GENERATION_MIB = 16;
/**
 * What a worker thread holds beyond its V8 heap (its isolate, compiled code, stack, the tokenizer's buffers): measured
 * 16 MiB for a text worker with OPT's 50k-token tokenizer loaded (RSS growth 91 MiB, heap 75 MiB), rounded up.
 */
const THREAD_BASE_BYTES = 24 * MiB;

/** `resourceLimits` of a server worker thread whose old generation may grow to `heapMiB`. */
export function threadLimits(heapMiB: number): { maxOldGenerationSizeMb: number; maxYoungGenerationSizeMb: number } {
  return { maxOldGenerationSizeMb: heapMiB, maxYoungGenerationSizeMb: YOUNG_GENERATION_MIB };
}

/** The most RAM one worker thread with an old generation of `heapMiB` can hold. */
function threadBytes(heapMiB: number): number {
  return (heapMiB + YOUNG_GENERATION_MIB) * MiB + THREAD_BASE_BYTES;
}

export interface ServerRamParts {
  /** The two text-worker pools (tokenizing; chat templates), each `textWorkers` threads. */
  textThreads: number;
  /** A job's run worker or the suite summarizer: never both at once (a job's worker ends before its summaries). */
  jobThread: number;
  /** Measured: the server's RSS at its start (Node and its modules) beyond the model plan's runtime term. */
  runtime: number;
  /** What the server reserves beside the model plan: the sum of the parts. */
  bytes: number;
  /** The parts in words, for the start line and a refusal. */
  text: string;
}

/**
 * What the server's process holds beside the model's memory plan (weights, KV cache, workspace and the engine's
 * runtime, `planMemory`): its worker threads, each bounded by its heap caps, and what its own modules add to the
 * runtime the plan counts. The whole process stays within the model plan plus this.
 */
export function serverRamParts(o: { textWorkers?: number; jobWorkerHeapMiB?: number; startRssBytes: number }): ServerRamParts {
  const textWorkers = Math.max(1, o.textWorkers ?? 2);
  const jobHeap = o.jobWorkerHeapMiB ?? DEFAULT_JOB_WORKER_HEAP_MIB;
  const textThreads = 2 * textWorkers * threadBytes(TEXT_WORKER_HEAP_MIB);
  const jobThread = threadBytes(jobHeap);
  const runtime = Math.max(0, o.startRssBytes - RUNTIME_BYTES);
  const bytes = textThreads + jobThread + runtime;
  const text =
    `${2 * textWorkers} text-worker threads ${formatGiB(textThreads)} (${TEXT_WORKER_HEAP_MIB} MiB heap each), ` +
    `the job/summarize thread ${formatGiB(jobThread)} (${jobHeap} MiB heap, --job-worker-heap-mib), ` +
    `server modules ${formatGiB(runtime)} (measured RSS ${formatGiB(o.startRssBytes)} at start, less the plan's runtime ${formatGiB(RUNTIME_BYTES)})`;
  return { textThreads, jobThread, runtime, bytes, text };
}
