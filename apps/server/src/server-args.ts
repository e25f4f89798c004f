import { parseArgs } from 'node:util';
import { DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_ROWS_PER_REQUEST, DEFAULT_MAX_TOKENS } from '@flexhelm/core';
import type { Policy } from '@flexhelm/offload';
import { DEFAULT_JOB_LIMITS, type JobLimits } from './job-limits.js';
import { DEFAULT_JOB_WORKER_HEAP_MIB } from './server-memory-plan.js';
import { autoParts, COMPUTE_DTYPES, policyFromRequest, withPlaceholders, type ComputeDtype, type PolicyRequest } from '@flexhelm/session';

export interface ServerArgs {
  help: boolean;
  model?: string;
  /** The name clients use as `model` (vLLM's --served-model-name); default the HELM model name. */
  servedModelName?: string;
  /** Print one access-log line per request (default true; --no-access-log turns it off). */
  accessLog: boolean;
  path?: string;
  dataDir?: string;
  outputPath: string;
  stateDir?: string;
  cachePath?: string;
  host: string;
  port: number;
  apiKey?: string;
  /** Rows per engine batch: `--max-batch-size`, else the policy's gpu_batch_size × num_gpu_batches (known after the search with `auto`). */
  maxBatchSize?: number;
  /** The placement as asked (FlexLLMGen's flags, as `flexhelm run`; `auto` parts are searched when the model opens). */
  policyRequest: PolicyRequest;
  /** The policy, with FlexLLMGen's defaults standing in for `auto` parts. */
  policy: Policy;
  offloadDir?: string;
  /** RAM budget in GiB (default 80% of this machine's memory). */
  maxRamGiB?: number;
  computeDtype: ComputeDtype;
  batchWindowMs: number;
  maxTokens: number;
  maxBodyBytes: number;
  // Connection limits (issue 17 item 7).
  /** Time for a request's headers to arrive, ms. */
  headersTimeoutMs: number;
  /** Time for a whole request (headers and body) to arrive, ms. */
  bodyTimeoutMs: number;
  /** Idle time allowed between requests on a keep-alive connection, ms. */
  keepAliveTimeoutMs: number;
  /** Open connections beyond this are closed on arrival. */
  maxConnections: number;
  /** Completions scheduling bounds: rows (prompts × n) and rows × tokens × top-k per request. */
  maxRowsPerRequest: number;
  maxResponseEntries: number;
  /** Unsent bytes of an event stream (beyond one engine step's burst) before a client that does not read is dropped. */
  maxStreamBufferBytes: number;
  /** What one evaluation job may ask for (SECURITY.md, "Jobs"). */
  jobLimits: JobLimits;
  /** Heap cap (MiB) of a job's run worker and of the suite summarizer. */
  jobWorkerHeapMiB: number;
  offline: boolean;
}

export const USAGE = `usage: flexhelm-server [options]

OpenAI-compatible completions (POST /v1/completions, GET /v1/models), HELM evaluation jobs (/v1/runs) and a
results viewer (/) on one local OPT model.

  --model M             OPT model, e.g. facebook/opt-125m (default: the embedded flexhelm/opt-tiny-random)
  --served-model-name NAME
                        the name clients send as model and GET /v1/models lists (default: the model's HELM
                        name, e.g. facebook/opt-125m or local/<folder>)
  --no-access-log       do not print one line per request (method, path, status, tokens, ms) to stderr
  --path DIR            folder with the weights (default: the download cache)
  --data-dir DIR        downloaded models and datasets (default $FLEXHELM_DATA_DIR or ~/.cache/flexhelm)
  --output-path DIR     HELM output folder for jobs (default benchmark_output)
  --state-dir DIR       job records (default <output-path>/server/jobs)
  --cache-path FILE     request cache (default <output-path>/cache/<model>.sqlite, shared with flexhelm run)
  --host H              address to bind (default 127.0.0.1; any other needs an API key)
  --port N              port (default 8000; 0 picks a free one)
  --api-key KEY         bearer token required on /v1 (or env FLEXHELM_API_KEY)
  --max-batch-size N    rows per engine batch (default: --gpu-batch-size × --num-gpu-batches)
  --percent WG WC CG CC HG HC | auto
                        placement percents of weights, KV cache, activations on compute/host, the rest on disk
                        (default 100 0 100 0 100 0: everything in RAM); auto: the cost model picks the fastest
                        policy that fits --max-ram, as flexhelm run
  --gpu-batch-size N|auto
                        sequences per compute call (default 8; searched with --percent auto)
  --num-gpu-batches N|auto
                        micro-batches sharing one weight load (default 1; searched with --percent auto)
  --pin-weight, --cpu-cache-compute, --compress-weight, --compress-cache
                        as flexhelm run (4-bit group-wise compression of weights / KV cache)
  --offload-dir DIR     where disk-tier data goes (default <data-dir>/offload)
  --max-ram GIB         RAM budget for model, cache and workspace (default 80% of this machine's memory)
  --compute-dtype D     fp32 (default: onnxruntime, exact logprobs), bf16, int8 or auto (oneDNN where available)
  --batch-window-ms N   how long a batch waits for more requests (default 10)
  --max-tokens N        largest max_tokens accepted (default 512)
  --max-body-bytes N    largest request body (default 1048576)
  --headers-timeout-ms N
                        a request's headers must arrive within N ms, else 408 (default 10000)
  --body-timeout-ms N   a whole request, body included, must arrive within N ms, else 408 (default 30000);
                        responses (long generations, event streams) are not limited
  --keep-alive-timeout-ms N
                        close a keep-alive connection idle for N ms between requests (default 5000)
  --max-connections N   open connections at most; more are closed as they arrive (default 256)
  --max-rows-per-request N
                        most rows (prompts × n) in one completions request (default 1024)
  --max-response-entries N
                        most rows × tokens × top-k one completions request may return (default 262144)
  --max-stream-buffer N bytes of a token stream a client may leave unread (beyond one engine step's burst)
                        before its stream is closed and its rows cancelled (default 4194304)
  --max-job-runs N      most runs one evaluation job may expand to (default 1000)
  --max-job-eval-instances N
                        largest max_eval_instances of a job (default 10000)
  --max-job-train-trials N
                        largest num_train_trials of a job (default 10)
  --max-pending-jobs N  jobs queued or running at once; more are refused with 429 (default 100)
  --job-worker-heap-mib N
                        heap cap (MiB) of the thread that prepares and scores a job's runs, and of the one that
                        writes its suite's summaries; counted in the server's RAM plan (default 512)
  --offline             never download models or datasets
  -h, --help            this text
`;

/** `--percent 20 80 0 100 0 100` as one argument, as `flexhelm run` takes it. */
function joinPercent(argv: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] !== '--percent') {
      out.push(argv[i]!);
      continue;
    }
    if (argv[i + 1]?.trim() === 'auto') {
      out.push('--percent', 'auto');
      i += 1;
      continue;
    }
    const values = argv.slice(i + 1, i + 7);
    if (values.length < 6 || values.some((v) => v.startsWith('--'))) {
      throw new Error(`--percent takes 6 values (WG WC CG CC HG HC), got ${values.filter((v) => !v.startsWith('--')).length}`);
    }
    out.push('--percent', values.join(' '));
    i += 6;
  }
  return out;
}

function integer(value: string | undefined, flag: string, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value.trim()) || Number(value) < min) throw new Error(`--${flag} must be an integer ≥ ${min}, got '${value}'`);
  return Number(value);
}

/** Command-line options of `flexhelm-server`; a bad value throws an Error saying which and why. */
export function parseServerArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): ServerArgs {
  const { values } = parseArgs({
    args: joinPercent(argv),
    strict: true,
    options: {
      help: { type: 'boolean', short: 'h' },
      model: { type: 'string' },
      'served-model-name': { type: 'string' },
      'no-access-log': { type: 'boolean' },
      path: { type: 'string' },
      'data-dir': { type: 'string' },
      'output-path': { type: 'string' },
      'state-dir': { type: 'string' },
      'cache-path': { type: 'string' },
      host: { type: 'string' },
      port: { type: 'string' },
      'api-key': { type: 'string' },
      'max-batch-size': { type: 'string' },
      'batch-window-ms': { type: 'string' },
      'max-tokens': { type: 'string' },
      'max-body-bytes': { type: 'string' },
      'headers-timeout-ms': { type: 'string' },
      'body-timeout-ms': { type: 'string' },
      'keep-alive-timeout-ms': { type: 'string' },
      'max-connections': { type: 'string' },
      'max-rows-per-request': { type: 'string' },
      'max-response-entries': { type: 'string' },
      'max-stream-buffer': { type: 'string' },
      'max-job-runs': { type: 'string' },
      'max-job-eval-instances': { type: 'string' },
      'max-job-train-trials': { type: 'string' },
      'max-pending-jobs': { type: 'string' },
      'job-worker-heap-mib': { type: 'string' },
      offline: { type: 'boolean' },
      percent: { type: 'string' },
      'gpu-batch-size': { type: 'string' },
      'num-gpu-batches': { type: 'string' },
      'pin-weight': { type: 'boolean' },
      'cpu-cache-compute': { type: 'boolean' },
      'compress-weight': { type: 'boolean' },
      'compress-cache': { type: 'boolean' },
      'offload-dir': { type: 'string' },
      'max-ram': { type: 'string' },
      'compute-dtype': { type: 'string' },
    },
  });
  const port = integer(values.port, 'port', 8000, 0);
  // Without --percent the server keeps every weight resident, with 8 sequences per call unless searched (`auto`).
  const policyRequest: PolicyRequest = {
    percent: values.percent,
    gpuBatchSize: values['gpu-batch-size'],
    numGpuBatches: values['num-gpu-batches'],
    pinWeight: true, // --pin-weight is FlexLLMGen's default, accepted for the same command lines as flexhelm run
    cpuCacheCompute: Boolean(values['cpu-cache-compute']),
    compressWeight: values['compress-weight'],
    compressCache: Boolean(values['compress-cache']),
  };
  const auto = autoParts(policyRequest, 'resident');
  if (!auto?.gpuBatchSize) policyRequest.gpuBatchSize ??= '8';
  // The policy's message lists every problem (percents over 100, a bad batch size…) in flexhelm run's words.
  const policy = policyFromRequest(auto ? withPlaceholders(policyRequest, auto) : policyRequest);
  const maxRam = values['max-ram'] === undefined ? undefined : Number(values['max-ram']);
  if (maxRam !== undefined && !(maxRam > 0)) throw new Error(`--max-ram must be a positive number of GiB, got '${values['max-ram']}'`);
  const computeDtype = values['compute-dtype'] ?? 'fp32';
  if (!COMPUTE_DTYPES.includes(computeDtype as ComputeDtype)) throw new Error(`--compute-dtype takes ${COMPUTE_DTYPES.join(', ')}, got '${computeDtype}'`);
  if (port > 65535) throw new Error(`--port must be at most 65535, got ${port}`);
  const headersTimeoutMs = integer(values['headers-timeout-ms'], 'headers-timeout-ms', 10_000, 100);
  const bodyTimeoutMs = integer(values['body-timeout-ms'], 'body-timeout-ms', 30_000, 100);
  // Node refuses a headers timeout longer than the whole-request one; say so rather than clamp silently.
  if (headersTimeoutMs > bodyTimeoutMs) throw new Error(`--headers-timeout-ms (${headersTimeoutMs}) must not exceed --body-timeout-ms (${bodyTimeoutMs})`);
  const served = values['served-model-name'];
  if (served !== undefined && (!/^[\x21-\x7e]{1,256}$/.test(served))) {
    throw new Error(`--served-model-name must be 1 to 256 printable ASCII characters without spaces, got ${JSON.stringify(served.slice(0, 80))}`);
  }
  return {
    help: Boolean(values.help),
    model: values.model,
    servedModelName: served,
    accessLog: !values['no-access-log'],
    path: values.path,
    dataDir: values['data-dir'],
    outputPath: values['output-path'] ?? 'benchmark_output',
    stateDir: values['state-dir'],
    cachePath: values['cache-path'],
    host: values.host ?? '127.0.0.1',
    port,
    apiKey: values['api-key'] ?? (env.FLEXHELM_API_KEY || undefined),
    maxBatchSize: values['max-batch-size'] === undefined && auto ? undefined : integer(values['max-batch-size'], 'max-batch-size', policy.gpuBatchSize * policy.numGpuBatches, 1),
    policyRequest,
    policy,
    offloadDir: values['offload-dir'],
    maxRamGiB: maxRam,
    computeDtype: computeDtype as ComputeDtype,
    batchWindowMs: integer(values['batch-window-ms'], 'batch-window-ms', 10, 0),
    maxTokens: integer(values['max-tokens'], 'max-tokens', DEFAULT_MAX_TOKENS, 1),
    maxBodyBytes: integer(values['max-body-bytes'], 'max-body-bytes', DEFAULT_MAX_BODY_BYTES, 1024),
    headersTimeoutMs,
    bodyTimeoutMs,
    keepAliveTimeoutMs: integer(values['keep-alive-timeout-ms'], 'keep-alive-timeout-ms', 5_000, 100),
    maxConnections: integer(values['max-connections'], 'max-connections', 256, 1),
    maxRowsPerRequest: integer(values['max-rows-per-request'], 'max-rows-per-request', DEFAULT_MAX_ROWS_PER_REQUEST, 1),
    maxResponseEntries: integer(values['max-response-entries'], 'max-response-entries', 262_144, 1),
    maxStreamBufferBytes: integer(values['max-stream-buffer'], 'max-stream-buffer', 4 * 1024 * 1024, 1024),
    jobLimits: {
      maxRuns: integer(values['max-job-runs'], 'max-job-runs', DEFAULT_JOB_LIMITS.maxRuns, 1),
      maxEvalInstances: integer(values['max-job-eval-instances'], 'max-job-eval-instances', DEFAULT_JOB_LIMITS.maxEvalInstances, 1),
      maxTrainTrials: integer(values['max-job-train-trials'], 'max-job-train-trials', DEFAULT_JOB_LIMITS.maxTrainTrials, 1),
      maxPendingJobs: integer(values['max-pending-jobs'], 'max-pending-jobs', DEFAULT_JOB_LIMITS.maxPendingJobs, 1),
    },
    jobWorkerHeapMiB: integer(values['job-worker-heap-mib'], 'job-worker-heap-mib', DEFAULT_JOB_WORKER_HEAP_MIB, 64),
    offline: Boolean(values.offline),
  };
}
