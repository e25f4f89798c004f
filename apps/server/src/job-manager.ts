import { randomBytes } from 'node:crypto';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { isAbsolute, relative, resolve } from 'node:path';
import { DEFAULT_MAX_N, DEFAULT_MAX_TOKENS, type RunSpec, type WindowService } from '@flexhelm/core';
import { CachingExecutor, headlineMetrics, runOne, type RequestExecutor, type RunEvent } from '@flexhelm/runner';
import type { RequestCache } from '@flexhelm/request-cache';
import { createScenario } from '@flexhelm/scenarios';
import { ApiError } from './api-error.js';
import { CacheCountingExecutor } from './cache-counting-executor.js';
import type { EngineGate } from './engine-gate.js';
import { GatedExecutor } from './gated-executor.js';
import { adapterLimitProblem, DEFAULT_JOB_LIMITS, type JobLimits, type JobRequestLimits } from './job-limits.js';
import { isFinished, JobRequestSchema, type JobRecord, type JobRequest } from './job-record.js';
import type { JobWindowSpec, RunSummary } from './job-run-protocol.js';
import { JobRunThread } from './job-run-thread.js';
import type { JobStore } from './job-store.js';
import { relativePaths } from './relative-paths.js';
import { runSpecsForJob, runSpecsForJobInSlices } from './run-specs-for-job.js';

export interface JobManagerOptions {
  store: JobStore;
  gate: EngineGate;
  /** The engine executor shared with nothing else; jobs reach it through the gate and the request cache. */
  engineExecutor: RequestExecutor;
  cache: RequestCache;
  /** Requests per engine call of a job (the cache is written after each). */
  chunkSize: number;
  windowService: WindowService;
  /** HELM model name of the served model, e.g. `facebook/opt-125m`. */
  helmModel: string;
  outputPath: string;
  dataDir?: string;
  offline?: boolean;
  /**
   * Called with the suite after each job that succeeded, to write its HELM summaries for the results site; a failure
   * is logged with the command that writes them by hand, and the job stays succeeded.
   */
  summarize?: (suite: string) => Promise<unknown>;
  /** What one job may ask for (default {@link DEFAULT_JOB_LIMITS}). */
  limits?: Partial<JobLimits>;
  /** The completion-request limits its runs' requests are held to (default `@flexhelm/core`'s, as the server's). */
  requestLimits?: Partial<JobRequestLimits>;
  /**
   * Prepare and finish each job's runs (instances, prompts, metrics, files) in a worker thread of the job's, which
   * loads the tokenizer from this folder; the engine calls stay on the main thread. Without it the runs are prepared
   * on the event loop (a job of many runs then delays other requests by a run's preparation at a time).
   */
  runWorker?: { tokenizerFolder: string; tokenizerName: string; window: JobWindowSpec; /** V8 heap cap (MiB). */ heapMiB?: number };
  log?: (message: string) => void;
}

type Listener = (job: JobRecord) => void;

/**
 * `inner` with a turn of the event loop before and after each execution: a run answered from the cache never waits
 * for I/O, so its preparation (instances, prompts) and its ending (metrics, files) become separate turns, and a
 * request arriving meanwhile waits for one of them, not for the whole run.
 */
function yieldingExecutor(inner: RequestExecutor): RequestExecutor {
  return {
    modelId: inner.modelId,
    async execute(requests, onProgress) {
      await nextTurn();
      try {
        return await inner.execute(requests, onProgress);
      } finally {
        await nextTurn();
      }
    },
  };
}

const STOPPING = 'server stopping';
const CANCELLED = 'cancelled';
const MAX_SAMPLES = 600;
/**
 * Each notification sends the whole record to every event stream: a job of more runs than this (a larger record,
 * more changes) notifies its listeners of progress at most every {@link NOTIFY_INTERVAL_MS}, with the latest state.
 */
const NOTIFY_EVERY_CHANGE_UP_TO_RUNS = 50;
const NOTIFY_INTERVAL_MS = 100;

/** A 400 naming the request field, the server's limit and the option that raises it. */
function overLimit(field: string, what: string, limit: number, flag?: string): ApiError {
  const raise = flag ? `, or start flexhelm-server with a higher ${flag}` : '';
  return new ApiError(400, `${field}: ${what}, over this server's limit of ${limit}; ask for less${raise}`, 'invalid_request_error', field, 'job_limit_exceeded');
}

/**
 * Evaluation jobs, one at a time in submission order. A new job's record is on disk before it is accepted; after
 * that every change costs O(1) here: the store writes the latest state asynchronously (at once on a status change,
 * at most once a second while it progresses), and listeners of a job of more than 50 runs hear of its progress at
 * most every 100 ms. The job yields the event loop between runs and around each run's requests, so requests (health
 * checks, a cancel) are answered while a job of many runs works.
 * Jobs that were queued or running when the server stopped run again on the next start, finding the requests
 * already computed in the request cache.
 */
export class JobManager {
  private readonly jobs = new Map<string, JobRecord>();
  private readonly listeners = new Map<string, Set<Listener>>();
  private running: { job: JobRecord; controller: AbortController } | undefined;
  private loop: Promise<void> | undefined;
  private stopping = false;
  private readonly notified = new Map<string, { at: number; timer?: NodeJS.Timeout }>();
  private readonly limits: JobLimits;
  private readonly requestLimits: JobRequestLimits;
  /** Submissions being checked and expanded (counted against `maxPendingJobs`). */
  private submitting = 0;
  /** The thread id of the running job's run worker, while one runs (tests check where runs are prepared). */
  runThreadId: number | undefined;

  constructor(private readonly options: JobManagerOptions) {
    this.limits = { ...DEFAULT_JOB_LIMITS, ...options.limits };
    this.requestLimits = { maxN: options.requestLimits?.maxN ?? DEFAULT_MAX_N, maxTokens: options.requestLimits?.maxTokens ?? DEFAULT_MAX_TOKENS };
  }

  /** `text` without the server's absolute folders (paths under the output folder become relative to it). */
  private shown(text: string): string {
    const o = this.options;
    return relativePaths(text, [
      { dir: o.outputPath, as: '' },
      { dir: o.store.dir, as: '<state-dir>' },
      { dir: o.dataDir ?? '', as: '<data-dir>' },
    ]);
  }

  /** Loads saved jobs and starts the unfinished ones. */
  start(): void {
    for (const job of this.options.store.loadAll((f, err) => this.options.log?.(`job record ${f} is unreadable and was skipped: ${err.message}`))) {
      // Records written before paths were kept relative: show them as today's are.
      for (const r of job.runs) if (r.runDir && isAbsolute(r.runDir)) r.runDir = this.shown(r.runDir);
      if (job.error) job.error = this.shown(job.error);
      if (job.status === 'running') {
        job.status = 'queued';
        job.resumed++;
        this.options.store.save(job, true);
      }
      this.jobs.set(job.id, job);
    }
    this.kick();
  }

  list(): JobRecord[] {
    return [...this.jobs.values()].sort((a, b) => b.createdAt.localeCompare(a.createdAt));
  }

  get(id: string): JobRecord {
    const job = this.jobs.get(id);
    if (!job) throw new ApiError(404, `no evaluation job ${id}; GET /v1/runs lists them`, 'invalid_request_error', 'id', 'job_not_found');
    return job;
  }

  async submit(body: unknown): Promise<JobRecord> {
    if (this.stopping) throw new ApiError(503, 'the server is shutting down; submit the job again once it is back', 'server_error');
    const parsed = JobRequestSchema.safeParse(body);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!; // a failed parse has at least one issue
      throw new ApiError(400, `${issue.path.length ? `${issue.path.join('.')}: ` : ''}${issue.message}`, 'invalid_request_error', issue.path.length ? String(issue.path[0]) : null);
    }
    const request = { ...parsed.data, suite: parsed.data.suite ?? 'v1' };
    this.checkLimits(request);
    const pending = [...this.jobs.values()].filter((j) => !isFinished(j.status)).length + this.submitting;
    if (pending >= this.limits.maxPendingJobs) {
      throw new ApiError(
        429,
        `${pending} jobs are queued or running, this server's limit of ${this.limits.maxPendingJobs}; submit this one once one has finished (or cancel one), or start flexhelm-server with a higher --max-pending-jobs`,
        'invalid_request_error',
        null,
        'too_many_jobs',
      );
    }
    this.submitting++; // expanding takes turns of the event loop: submissions meanwhile see this one
    try {
      return await this.accept(request);
    } finally {
      this.submitting--;
    }
  }

  private async accept(request: JobRequest & { suite: string }): Promise<JobRecord> {
    let runSpecs: RunSpec[];
    try {
      // What the job will run, built now: a description or scenario argument that cannot run is the client's 400,
      // with HELM's message, not an accepted job that fails later. Building a scenario reads no file.
      runSpecs = await runSpecsForJobInSlices(
        request,
        this.options.helmModel,
        (r) => {
          const problem = adapterLimitProblem(r.name, r.adapter_spec, this.limits, this.requestLimits);
          if (problem) throw overLimit(problem.field, problem.what, problem.limit, problem.flag);
          createScenario(r.scenario_spec);
        },
        this.limits.maxRuns,
      );
    } catch (err) {
      if (err instanceof ApiError) throw err;
      throw new ApiError(400, `descriptions: ${this.shown((err as Error).message)}`, 'invalid_request_error', 'descriptions');
    }
    if (runSpecs.length === 0) throw new ApiError(400, 'the descriptions expanded to no RunSpecs', 'invalid_request_error', 'descriptions');
    if (runSpecs.length > this.limits.maxRuns) throw overLimit('descriptions', `the descriptions expand to at least ${runSpecs.length} runs`, this.limits.maxRuns, '--max-job-runs');
    const now = new Date();
    const job: JobRecord = {
      id: `run-${now.getTime().toString(36)}-${randomBytes(4).toString('hex')}`,
      status: 'queued',
      request,
      createdAt: now.toISOString(),
      resumed: 0,
      runs: runSpecs.map((r) => ({ name: r.name, status: 'pending' })),
      progress: { runIndex: 0, runCount: runSpecs.length, done: 0, total: 0, cachedHits: 0, generatedTokens: 0 },
      samples: [],
    };
    try {
      this.options.store.saveNow(job); // on disk before the 201: a job the client was told about survives a crash
    } catch (err) {
      // A full or read-only state folder: the message names it (as <state-dir>), nothing is left half-written.
      throw new ApiError(507, `the job was not accepted: ${this.shown((err as Error).message)}`, 'server_error', null, 'job_not_saved');
    }
    this.jobs.set(job.id, job);
    const submitted = structuredClone(job); // as submitted: the job may start before the caller reads it
    this.kick();
    return submitted;
  }

  cancel(id: string): JobRecord {
    const job = this.get(id);
    if (isFinished(job.status)) throw new ApiError(409, `job ${id} already ${job.status}; nothing to cancel`, 'invalid_request_error', 'id', 'job_finished');
    if (this.running?.job.id === id) {
      this.running.controller.abort(CANCELLED);
    } else {
      job.status = 'cancelled';
      job.finishedAt = new Date().toISOString();
      for (const r of job.runs) if (r.status === 'pending') r.status = 'cancelled';
      this.changed(job, true);
    }
    return job;
  }

  /** Calls `listener` on every change of the job until the returned function is called. */
  subscribe(id: string, listener: Listener): () => void {
    this.get(id);
    let set = this.listeners.get(id);
    if (!set) {
      set = new Set();
      this.listeners.set(id, set);
    }
    set.add(listener);
    return () => set.delete(listener);
  }

  /**
   * Stops taking jobs; the running one is interrupted between engine calls (or runs) and saved as queued, to resume
   * on the next start. Every record's last state is on disk when this resolves.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    this.running?.controller.abort(STOPPING);
    await this.loop;
    for (const n of this.notified.values()) clearTimeout(n.timer);
    await this.options.store.flush();
  }

  /** The request's sizes against the server's limits, before anything is expanded. */
  private checkLimits(request: JobRequest): void {
    const { maxRuns, maxEvalInstances, maxTrainTrials } = this.limits;
    if (request.descriptions.length > maxRuns) throw overLimit('descriptions', `${request.descriptions.length} descriptions`, maxRuns, '--max-job-runs');
    if (request.max_eval_instances !== undefined && request.max_eval_instances > maxEvalInstances) {
      throw overLimit('max_eval_instances', `${request.max_eval_instances} instances per run`, maxEvalInstances, '--max-job-eval-instances');
    }
    if (request.num_train_trials !== undefined && request.num_train_trials > maxTrainTrials) {
      throw overLimit('num_train_trials', `${request.num_train_trials} trials per run`, maxTrainTrials, '--max-job-train-trials');
    }
  }

  /**
   * Records a change: the store saves it (at once for a status change, `statusChanged`), listeners hear of it (at
   * once, except the progress of a job of many runs: at most every {@link NOTIFY_INTERVAL_MS}, the latest state).
   */
  private changed(job: JobRecord, statusChanged: boolean): void {
    this.options.store.save(job, statusChanged);
    this.announce(job, statusChanged);
  }

  private announce(job: JobRecord, statusChanged: boolean): void {
    const n = this.notified.get(job.id) ?? { at: 0 };
    this.notified.set(job.id, n);
    const wait = statusChanged || job.runs.length <= NOTIFY_EVERY_CHANGE_UP_TO_RUNS ? 0 : n.at + NOTIFY_INTERVAL_MS - Date.now();
    if (wait <= 0) {
      clearTimeout(n.timer);
      n.timer = undefined;
      this.notify(job, n);
    } else {
      n.timer ??= setTimeout(() => {
        n.timer = undefined;
        this.notify(job, n);
      }, wait);
    }
  }

  private notify(job: JobRecord, n: { at: number }): void {
    n.at = Date.now();
    if (isFinished(job.status)) this.notified.delete(job.id);
    for (const l of this.listeners.get(job.id) ?? []) l(job);
  }

  private kick(): void {
    if (this.loop || this.stopping) return;
    this.loop = (async () => {
      for (;;) {
        const next = [...this.jobs.values()].filter((j) => j.status === 'queued').sort((a, b) => a.createdAt.localeCompare(b.createdAt))[0];
        if (!next || this.stopping) break;
        await this.runJob(next);
      }
    })().finally(() => {
      this.loop = undefined;
    });
  }

  /** One run on the event loop, as `flexhelm run` runs it (a server without `runWorker`). */
  private async runInProcess(runSpec: RunSpec, request: JobRecord['request'], executor: RequestExecutor, onEvent: (e: RunEvent) => void, signal: AbortSignal): Promise<RunSummary> {
    const o = this.options;
    const result = await runOne(runSpec, { outputPath: o.outputPath, suite: request.suite, executor, windowService: o.windowService, dataDir: o.dataDir, offline: o.offline, skipCompleted: request.skip_completed_runs, signal, onEvent });
    return { runDir: result.runDir, skipped: result.skipped, numRequests: result.numRequests, metrics: headlineMetrics(result.stats), notComputed: result.notComputed };
  }

  private async runJob(job: JobRecord): Promise<void> {
    const controller = new AbortController();
    this.running = { job, controller };
    const o = this.options;
    const executor = yieldingExecutor(new CacheCountingExecutor(new CachingExecutor(new GatedExecutor(o.engineExecutor, o.gate, controller.signal), o.cache, o.chunkSize), o.cache));
    job.status = 'running';
    job.startedAt ??= new Date().toISOString();
    job.error = undefined;
    const started = Date.parse(job.startedAt);
    if (job.samples.length === 0) job.samples.push({ t: 0, done: 0, generatedTokens: 0 });
    this.changed(job, true);
    let index = 0;
    let thread: JobRunThread | undefined;
    try {
      const w = o.runWorker;
      // The worker expands the job's RunSpecs itself (they do not survive a message); in process they are expanded here.
      thread = w && new JobRunThread({ request: job.request, helmModel: o.helmModel, outputPath: o.outputPath, dataDir: o.dataDir, offline: o.offline, tokenizerFolder: w.tokenizerFolder, tokenizerName: w.tokenizerName, window: w.window }, w.heapMiB);
      this.runThreadId = thread?.threadId;
      const runSpecs = thread ? undefined : runSpecsForJob(job.request, o.helmModel);
      const runCount = runSpecs?.length ?? job.runs.length;
      let doneBefore = 0;
      let tokensBefore = 0;
      for (index = 0; index < runCount; index++) {
        // Runs answered from the cache never wait for anything but promises: without this turn of the event loop a
        // job of many runs would answer no request (health checks, its own cancel) until it ended.
        await nextTurn();
        controller.signal.throwIfAborted();
        const run = job.runs[index];
        if (!run) throw new Error(`job ${job.id} records ${job.runs.length} runs but its description expands to ${runCount}`);
        if (run.status === 'done' || run.status === 'skipped') {
          doneBefore += run.numRequests ?? 0;
          tokensBefore += run.generatedTokens ?? 0;
          continue;
        }
        run.status = 'running';
        // A run resumed after a restart starts from the progress it had saved, never from 0: the requests it had
        // done are in the cache and are counted again as soon as the executor looks them up.
        const resumed = job.progress.runIndex === index && job.progress.runName === run.name;
        let runDone = resumed ? job.progress.done : 0;
        let runTokens = resumed ? Math.max(0, job.progress.generatedTokens - tokensBefore) : 0;
        job.progress = { ...job.progress, runIndex: index, runName: run.name, phase: 'instances', done: runDone, total: resumed ? job.progress.total : 0, cachedHits: 0, generatedTokens: tokensBefore + runTokens };
        this.changed(job, false); // a run's start or end is progress: thousands of runs must not mean thousands of writes
        const onEvent = (e: RunEvent) => {
          job.progress.phase = e.phase;
          if (e.progress) {
            // Monotonic: the runner announces each execution at 0 before the cache lookups report what is done.
            runDone = Math.max(runDone, e.progress.done);
            runTokens = Math.max(runTokens, e.progress.generatedTokens);
            job.progress.done = runDone;
            job.progress.total = e.progress.total;
            job.progress.cachedHits = e.progress.cachedHits;
            job.progress.generatedTokens = tokensBefore + runTokens;
            job.samples.push({ t: (Date.now() - started) / 1000, done: doneBefore + runDone, generatedTokens: job.progress.generatedTokens });
            // Keep the curve's shape with a bounded record: drop every other point once full.
            if (job.samples.length > MAX_SAMPLES) job.samples = job.samples.filter((_, i) => i % 2 === 0 || i === job.samples.length - 1);
          }
          this.changed(job, false);
        };
        const result = thread
          ? await thread.run(index, run.name, executor, onEvent, controller.signal)
          : await this.runInProcess(runSpecs![index]!, job.request, executor, onEvent, controller.signal);
        // Relative to the output folder: records and answers never show the server's absolute paths.
        run.runDir = relative(resolve(o.outputPath), resolve(result.runDir));
        run.status = result.skipped ? 'skipped' : 'done';
        run.numRequests = result.numRequests;
        run.generatedTokens = result.skipped ? 0 : runTokens;
        run.metrics = result.metrics;
        run.notComputed = [...new Set(result.notComputed.map((n) => this.shown(`${n.metric}: ${n.reason}`)))];
        doneBefore += result.numRequests;
        tokensBefore += run.generatedTokens;
        job.progress.generatedTokens = tokensBefore;
        this.changed(job, false);
      }
      // The run worker ends before the summaries' worker starts: the server's RAM plan counts one of the two.
      await thread?.terminate();
      thread = undefined;
      if (o.summarize) {
        job.progress.phase = 'summarize';
        this.changed(job, false);
        try {
          await o.summarize(job.request.suite);
        } catch (err) {
          o.log?.(`job ${job.id}: the suite's summaries were not written (${this.shown((err as Error).message)}); write them with flexhelm summarize --suite ${job.request.suite}`);
        }
      }
      job.status = 'succeeded';
      job.finishedAt = new Date().toISOString();
    } catch (err) {
      const reason = controller.signal.aborted ? String(controller.signal.reason) : undefined;
      const run = job.runs[index];
      if (reason === STOPPING) {
        job.status = 'queued';
        job.resumed++;
        if (run) run.status = 'pending';
      } else if (reason === CANCELLED) {
        job.status = 'cancelled';
        job.finishedAt = new Date().toISOString();
        for (const r of job.runs) if (r.status === 'pending' || r.status === 'running') r.status = 'cancelled';
      } else {
        job.status = 'failed';
        job.error = this.shown((err as Error).message);
        job.finishedAt = new Date().toISOString();
        if (run) run.status = 'failed';
        o.log?.(`job ${job.id} failed: ${(err as Error).stack ?? String(err)}`);
      }
    } finally {
      this.running = undefined;
      this.runThreadId = undefined;
      await thread?.terminate(); // a cancelled or stopped run's preparation ends here, not when it would have finished
      // A job reported finished (or saved as queued at a stop) is on disk first.
      this.options.store.save(job, true);
      await this.options.store.settled(job.id);
      this.announce(job, true);
    }
  }
}
