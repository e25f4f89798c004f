import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RUN_OUTPUT_FILES } from '@flexhelm/runner';
import type { JobRecord } from './job-record.js';
import { JobStore } from './job-store.js';
import { runSpecsForJob } from './run-specs-for-job.js';
import type { RunningServer } from './start-server.js';
import { get, loadTinyModel, MODEL_NAME, post, serve, type TinyModel } from './test-server.js';

// Finished jobs write their suite's HELM summaries, which need HELM's schema.yaml (from the HELM data files beside the
// project, as CI exports it).
process.env.FLEXHELM_HELM_SOURCE_DIR ??= fileURLToPath(new URL('../../../../shared/helm-v0.2.1', import.meta.url));

let model: TinyModel;
beforeAll(async () => {
  model = await loadTinyModel();
}, 120_000);
afterAll(async () => {
  await model?.engine.close();
});

/** Reads a job's server-sent events until its `end` event; returns every event. */
async function readEvents(url: string): Promise<{ event: string; job: JobRecord }[]> {
  const res = await fetch(url);
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const events: { event: string; job: JobRecord }[] = [];
  let buffer = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body!) {
    buffer += decoder.decode(chunk as Uint8Array, { stream: true });
    for (let at = buffer.indexOf('\n\n'); at >= 0; at = buffer.indexOf('\n\n')) {
      const block = buffer.slice(0, at);
      buffer = buffer.slice(at + 2);
      const event = /^event: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (event && data) events.push({ event, job: JSON.parse(data) as JobRecord });
    }
  }
  return events;
}

/** What summarize adds to each run folder (HELM's run display files). */
const DISPLAY_FILES = ['display_predictions.json', 'display_requests.json', 'instances.json'];

const job = { descriptions: ['synthetic_reasoning:mode=pattern_match'], max_eval_instances: 4, num_train_trials: 1, suite: 'srv' };

describe('evaluation jobs', () => {
  let server: RunningServer;
  const out = () => join(model.root, 'out-jobs');
  beforeAll(async () => {
    server = await serve(model, { outputPath: out() });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('runs a job to completion, streams its progress and writes HELM’s five files', async () => {
    const created = await post(`${server.url}/v1/runs`, job);
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ status: 'queued', request: job, runs: [{ name: 'synthetic_reasoning:mode=pattern_match,model=local_tiny-opt', status: 'pending' }] });
    const events = await readEvents(`${server.url}/v1/runs/${created.json.id}/events`);
    expect(events.at(-1)!.event).toBe('end');
    const phases = new Set(events.map((e) => e.job.progress.phase));
    expect(phases).toContain('execute');
    const done = (await get(`${server.url}/v1/runs/${created.json.id}`)).json as JobRecord;
    expect(done.status).toBe('succeeded');
    const run = done.runs[0];
    expect(run!.status).toBe('done');
    expect(run!.runDir).toBe(join('runs', 'srv', run!.name)); // relative to the output folder
    // HELM's five files, and the display files summarize adds
    expect(readdirSync(join(out(), run!.runDir!)).sort()).toEqual([...RUN_OUTPUT_FILES, ...DISPLAY_FILES].sort());
    expect(run!.metrics!.find((m) => m.name === 'exact_match' && m.split === 'test')).toMatchObject({ count: 1 });
    expect(done.samples.length).toBeGreaterThan(0);
    expect(done.samples.at(-1)!.done).toBe(4);
    // predictions: every request with its prompt, completion, references and per-instance correctness
    const predictions = await get(`${server.url}/v1/runs/${done.id}/predictions?run=0`);
    expect(predictions.status).toBe(200);
    const state = JSON.parse(readFileSync(join(out(), run!.runDir!, 'scenario_state.json'), 'utf8'));
    expect(predictions.json.data).toHaveLength(state.request_states.length);
    const first = predictions.json.data[0];
    expect(first.prompt).toBe(state.request_states[0].request.prompt);
    expect(first.completion).toBe(state.request_states[0].result.completions[0].text);
    expect(first.references.some((r: { correct: boolean }) => r.correct)).toBe(true);
    expect(first.correctnessMetric).toBe('exact_match');
    expect(first.correct).toBe(first.stats.exact_match > 0);
    // listed, newest first
    const list = await get(`${server.url}/v1/runs`);
    expect(list.json.data[0].id).toBe(done.id);
    // the job record is on disk
    expect(JSON.parse(readFileSync(join(out(), 'server', 'jobs', `${done.id}.json`), 'utf8')).status).toBe('succeeded');
    // the suite's HELM summaries are written before the job ends, so the results site shows it at once
    expect(phases).toContain('summarize');
    expect(existsSync(join(out(), 'runs', 'srv', 'summary.json'))).toBe(true);
    const suite = await get(`${server.url}/v1/results/suites/srv`);
    expect(suite.status).toBe(200);
    expect(JSON.stringify(suite.json)).toContain('synthetic_reasoning');
  });

  it('keeps a job succeeded when its summaries cannot be written, and logs how to write them', async () => {
    const logs: string[] = [];
    const saved = process.env.FLEXHELM_HELM_SOURCE_DIR;
    const empty = mkdtempSync(join(tmpdir(), 'flexhelm-no-helm-'));
    process.env.FLEXHELM_HELM_SOURCE_DIR = empty; // no schema.yaml there
    const other = await serve(model, { outputPath: join(model.root, 'out-no-schema'), log: (m) => logs.push(m) });
    try {
      const created = await post(`${other.url}/v1/runs`, { ...job, suite: 'nosummary' });
      const events = await readEvents(`${other.url}/v1/runs/${created.json.id}/events`);
      expect(events.at(-1)!.job.status).toBe('succeeded');
      expect(logs.join('\n')).toMatch(/the suite's summaries were not written \(.*schema\.yaml.*\); write them with flexhelm summarize --suite nosummary/);
      expect(existsSync(join(model.root, 'out-no-schema', 'runs', 'nosummary', 'summary.json'))).toBe(false);
    } finally {
      process.env.FLEXHELM_HELM_SOURCE_DIR = saved;
      await other.close();
    }
  });

  it('rejects bad job requests with a message saying what to fix', async () => {
    const none = await post(`${server.url}/v1/runs`, { descriptions: [] });
    expect(none.status).toBe(400);
    expect(none.json.error.message).toMatch(/at least one run description/);
    const unknown = await post(`${server.url}/v1/runs`, { descriptions: ['no_such_scenario:x=1'] });
    expect(unknown.status).toBe(400);
    expect(unknown.json.error.param).toBe('descriptions');
    const extra = await post(`${server.url}/v1/runs`, { ...job, maxEvalInstances: 3 });
    expect(extra.status).toBe(400);
    expect(extra.json.error.message).toMatch(/maxEvalInstances/);
    const suite = await post(`${server.url}/v1/runs`, { ...job, suite: '../x' });
    expect(suite.status).toBe(400);
    expect((await get(`${server.url}/v1/runs/run-nope`)).status).toBe(404);
  });

  it('validates scenario arguments at submission: a job that cannot run is a 400 with HELM’s message, not a failed job', async () => {
    const before = (await get(`${server.url}/v1/runs`)).json.data.length;
    const bad = await post(`${server.url}/v1/runs`, { ...job, descriptions: ['synthetic_reasoning:mode=nonsense'] });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({ type: 'invalid_request_error', param: 'descriptions' });
    expect(bad.json.error.message).toBe('descriptions: Unsupported mode: nonsense. Use mode=variable_substitution, mode=pattern_match, mode=induction.');
    const boolq = await post(`${server.url}/v1/runs`, { ...job, descriptions: ['boolq:only_contrast=maybe'] });
    expect(boolq.status).toBe(400);
    expect(boolq.json.error.message).toMatch(/only_contrast' must be True or False/);
    expect((await get(`${server.url}/v1/runs`)).json.data.length).toBe(before);
  });

  it('never shows the server’s absolute paths in job records or errors', async () => {
    // A dataset missing offline fails at run time with an error about the data folder.
    const failing = await post(`${server.url}/v1/runs`, { ...job, descriptions: ['mmlu:subject=philosophy'], suite: 'paths' });
    expect(failing.status).toBe(201);
    const events = await readEvents(`${server.url}/v1/runs/${failing.json.id}/events`);
    const failed = events.at(-1)!.job;
    expect(failed.status).toBe('failed');
    expect(failed.error!.length).toBeGreaterThan(0);
    const records = readdirSync(join(out(), 'server', 'jobs')).map((f) => readFileSync(join(out(), 'server', 'jobs', f), 'utf8'));
    const answers = [JSON.stringify((await get(`${server.url}/v1/runs`)).json)];
    for (const text of [...records, ...answers, failed.error!]) {
      expect(text).not.toContain(model.root);
      expect(text).not.toContain(tmpdir());
    }
  });

  it('cancels a job', async () => {
    const a = await post(`${server.url}/v1/runs`, { ...job, max_eval_instances: 30, suite: 'cancel' });
    const b = await post(`${server.url}/v1/runs`, { ...job, suite: 'cancel-queued' });
    const cancelledQueued = await fetch(`${server.url}/v1/runs/${b.json.id}`, { method: 'DELETE' });
    expect(((await cancelledQueued.json()) as JobRecord).status).toBe('cancelled');
    await fetch(`${server.url}/v1/runs/${a.json.id}`, { method: 'DELETE' });
    const events = await readEvents(`${server.url}/v1/runs/${a.json.id}/events`);
    const last = events.at(-1)!.job;
    expect(['cancelled', 'succeeded']).toContain(last.status); // it may have finished before the cancel arrived
    if (last.status === 'cancelled') expect(last.runs[0]!.status).toBe('cancelled');
    const again = await fetch(`${server.url}/v1/runs/${b.json.id}`, { method: 'DELETE' });
    expect(again.status).toBe(409);
  });
});

describe('restart', () => {
  it('saves a running job when the server stops and finishes it on the next start, reusing cached requests', async () => {
    const out = join(model.root, 'out-restart');
    const first = await serve(model, { outputPath: out, maxBatchSize: 4 });
    const created = (await post(`${first.url}/v1/runs`, { ...job, max_eval_instances: 12 })).json as JobRecord;
    // Stop the server as soon as the first chunk of requests is computed (in process, so no race with the job).
    await new Promise<void>((resolve) => {
      const unsubscribe = first.jobs.subscribe(created.id, (j) => {
        if (j.progress.phase === 'execute' && j.progress.done > 0) {
          unsubscribe();
          resolve();
        }
      });
    });
    await first.close();
    const saved = JSON.parse(readFileSync(join(out, 'server', 'jobs', `${created.id}.json`), 'utf8')) as JobRecord;
    expect(saved.status).toBe('queued');
    expect(saved.resumed).toBe(1);
    expect(saved.runs[0]!.status).toBe('pending');
    const doneBefore = saved.progress.done;
    expect(doneBefore).toBeGreaterThan(0);
    expect(doneBefore).toBeLessThan(saved.progress.total);
    expect(existsSync(join(out, 'runs', 'v1', saved.runs[0]!.name, 'stats.json'))).toBe(false);

    const second = await serve(model, { outputPath: out, maxBatchSize: 4 });
    try {
      const events = await readEvents(`${second.url}/v1/runs/${created.id}/events`);
      const last = events.at(-1)!.job;
      expect(last.status).toBe('succeeded');
      expect(last.progress.cachedHits).toBeGreaterThanOrEqual(doneBefore);
      expect(readdirSync(join(out, last.runs[0]!.runDir!)).sort()).toEqual([...RUN_OUTPUT_FILES, ...DISPLAY_FILES].sort());
    } finally {
      await second.close();
    }
  });

  it('continues a resumed job’s progress from what the cache holds: done and generated tokens never fall back', async () => {
    const out = join(model.root, 'out-resume-progress');
    const first = await serve(model, { outputPath: out, maxBatchSize: 4 });
    const created = (await post(`${first.url}/v1/runs`, { ...job, max_eval_instances: 12 })).json as JobRecord;
    await new Promise<void>((resolve) => {
      const unsubscribe = first.jobs.subscribe(created.id, (j) => {
        if (j.progress.phase === 'execute' && j.progress.done > 0 && j.progress.generatedTokens > 0) {
          unsubscribe();
          resolve();
        }
      });
    });
    await first.close();
    const saved = JSON.parse(readFileSync(join(out, 'server', 'jobs', `${created.id}.json`), 'utf8')) as JobRecord;
    expect(saved.progress.done).toBeGreaterThan(0);
    expect(saved.progress.generatedTokens).toBeGreaterThan(0);

    const second = await serve(model, { outputPath: out, maxBatchSize: 4 });
    try {
      const events = await readEvents(`${second.url}/v1/runs/${created.id}/events`);
      const last = events.at(-1)!.job;
      expect(last.status).toBe('succeeded');
      for (const { job: j } of events) {
        expect(j.progress.done).toBeGreaterThanOrEqual(saved.progress.done);
        expect(j.progress.generatedTokens).toBeGreaterThanOrEqual(saved.progress.generatedTokens);
      }
      for (let i = 1; i < last.samples.length; i++) {
        expect(last.samples[i]!.done).toBeGreaterThanOrEqual(last.samples[i - 1]!.done);
        expect(last.samples[i]!.generatedTokens).toBeGreaterThanOrEqual(last.samples[i - 1]!.generatedTokens);
      }
      // Every distinct request's tokens, computed before or after the restart, are counted once.
      const state = JSON.parse(readFileSync(join(out, last.runs[0]!.runDir!, 'scenario_state.json'), 'utf8'));
      const tokens = new Map<string, number>();
      for (const rs of state.request_states) tokens.set(JSON.stringify(rs.request), rs.result.completions.reduce((s: number, c: { tokens: unknown[] }) => s + c.tokens.length, 0));
      const expected = [...tokens.values()].reduce((a, b) => a + b, 0);
      expect(last.progress.generatedTokens).toBe(expected);
      expect(last.runs[0]!.generatedTokens).toBe(expected);
      expect(last.progress.done).toBe(last.progress.total);
    } finally {
      await second.close();
    }
  });

  it('picks up a job whose server was killed while it ran (record left as running)', async () => {
    const out = join(model.root, 'out-killed');
    const store = new JobStore(join(out, 'server', 'jobs'));
    const request = { ...job, max_eval_instances: 3 };
    const runName = runSpecsForJob(request, MODEL_NAME)[0]!.name;
    store.saveNow({
      id: 'run-killed-1',
      status: 'running',
      request,
      createdAt: new Date().toISOString(),
      startedAt: new Date().toISOString(),
      resumed: 0,
      runs: [{ name: runName, status: 'running' }],
      progress: { runIndex: 0, runCount: 1, runName, phase: 'execute', done: 0, total: 6, cachedHits: 0, generatedTokens: 0 },
      samples: [],
    });
    writeFileSync(join(out, 'server', 'jobs', 'run-killed-1.json.tmp-999-abcd'), '{"half-written'); // a crash mid-write
    const server = await serve(model, { outputPath: out });
    try {
      const events = await readEvents(`${server.url}/v1/runs/run-killed-1/events`);
      const last = events.at(-1)!.job;
      expect(last).toMatchObject({ status: 'succeeded', resumed: 1, runs: [{ name: runName, status: 'done' }] });
      expect(readdirSync(join(out, 'server', 'jobs'))).toEqual(['run-killed-1.json']);
    } finally {
      await server.close();
    }
  });

  it('keeps serving completions that are in flight when it stops, and refuses new connections after', async () => {
    const server = await serve(model, { outputPath: join(model.root, 'out-stop') });
    const inFlight = post(`${server.url}/v1/completions`, { prompt: 'Hello', max_tokens: 8, temperature: 0 });
    while (server.batcher.inFlight === 0) await new Promise((r) => setTimeout(r, 1)); // the request reached the engine queue
    const closing = server.close();
    const r = await inFlight;
    expect(r.status).toBe(200);
    expect(r.json.choices[0].text.length).toBeGreaterThan(0);
    await closing;
    await expect(fetch(`${server.url}/v1/models`)).rejects.toThrow();
  });
});

describe('limits of a job', () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await serve(model, { outputPath: join(model.root, 'out-limits') });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('refuses what is over a limit with a 400 naming the limit and the option that raises it', async () => {
    const many = await post(`${server.url}/v1/runs`, { ...job, descriptions: Array(1001).fill(job.descriptions[0]) });
    expect(many.status).toBe(400);
    expect(many.json.error).toEqual({
      message: "descriptions: 1001 descriptions, over this server's limit of 1000; ask for less, or start flexhelm-server with a higher --max-job-runs",
      type: 'invalid_request_error',
      param: 'descriptions',
      code: 'job_limit_exceeded',
    });
    const instances = await post(`${server.url}/v1/runs`, { ...job, max_eval_instances: 1e12 });
    expect(instances.status).toBe(400);
    expect(instances.json.error.message).toBe("max_eval_instances: 1000000000000 instances per run, over this server's limit of 10000; ask for less, or start flexhelm-server with a higher --max-job-eval-instances");
    const trials = await post(`${server.url}/v1/runs`, { ...job, num_train_trials: 1e6 });
    expect(trials.status).toBe(400);
    expect(trials.json.error.message).toBe("num_train_trials: 1000000 trials per run, over this server's limit of 10; ask for less, or start flexhelm-server with a higher --max-job-train-trials");
    expect((await get(`${server.url}/v1/runs`)).json.data).toEqual([]);
  });

  it('holds every expanded run to the limits: run expanders in a description cannot ask more than the request may', async () => {
    // Issue 26 item 4's poison job, through the server: `num_outputs=1000000` in a description was accepted (201).
    const base = job.descriptions[0]!;
    const cases: [string, string, RegExp][] = [
      [`${base},num_outputs=1000000`, 'num_outputs', /^num_outputs: run .*num_outputs=1000000.* asks for 1000000, over this server's limit of 16; ask for less$/],
      [`${base},num_outputs=-5`, 'num_outputs', /^num_outputs: run .* has -5, not a whole number from 1, over this server's limit of 16; ask for less$/],
      [`${base},num_output_tokens=100000`, 'max_tokens', /^max_tokens: run .* asks for 100000, over this server's limit of 512; ask for less, or start flexhelm-server with a higher --max-tokens$/],
    ];
    for (const [description, param, message] of cases) {
      const r = await post(`${server.url}/v1/runs`, { ...job, descriptions: [description] });
      expect(r.status, description).toBe(400);
      expect(r.json.error.param, description).toBe(param);
      expect(r.json.error.code, description).toBe('job_limit_exceeded');
      expect(r.json.error.message, description).toMatch(message);
    }
    // A description's num_train_trials is replaced by the request's (3 when it has none), as helm-run does.
    expect((await post(`${server.url}/v1/runs`, { ...job, descriptions: [`${base},num_train_trials=1000000`] })).status).toBe(201);
  });

  it('refuses a job beyond the jobs queued or running at once with a 429, and takes one again once they are done', async () => {
    // Without this bound a client could queue jobs without end (each up to 1000 runs), all held in memory.
    const few = await serve(model, { outputPath: join(model.root, 'out-limits-pending'), jobLimits: { maxPendingJobs: 2 } });
    try {
      const [a, b, c] = await Promise.all([1, 2, 3].map(() => post(`${few.url}/v1/runs`, { ...job, suite: 'pending' })));
      expect([a!.status, b!.status, c!.status].sort()).toEqual([201, 201, 429]);
      const refused = [a, b, c].find((r) => r!.status === 429)!;
      expect(refused.json.error).toEqual({
        message: "2 jobs are queued or running, this server's limit of 2; submit this one once one has finished (or cancel one), or start flexhelm-server with a higher --max-pending-jobs",
        type: 'invalid_request_error',
        param: null,
        code: 'too_many_jobs',
      });
      const ids = [a, b, c].filter((r) => r!.status === 201).map((r) => r!.json.id as string);
      for (const id of ids) await fetch(`${few.url}/v1/runs/${id}`, { method: 'DELETE' });
      expect((await post(`${few.url}/v1/runs`, { ...job, suite: 'pending' })).status).toBe(201);
    } finally {
      await few.close();
    }
  });

  it('takes other limits from the server options', async () => {
    const strict = await serve(model, { outputPath: join(model.root, 'out-limits-strict'), jobLimits: { maxRuns: 2, maxEvalInstances: 3 } });
    try {
      const three = await post(`${strict.url}/v1/runs`, { ...job, descriptions: Array(3).fill(job.descriptions[0]) });
      expect(three.json.error.message).toMatch(/^descriptions: 3 descriptions, over this server's limit of 2;/);
      expect((await post(`${strict.url}/v1/runs`, { ...job, max_eval_instances: 4 })).json.error.message).toMatch(/limit of 3;.*--max-job-eval-instances$/);
    } finally {
      await strict.close();
    }
  });
});

describe('a job of many runs', () => {
  async function until<T>(what: string, probe: () => Promise<T | undefined>, ms: number): Promise<T> {
    const deadline = Date.now() + ms;
    for (;;) {
      const value = await probe();
      if (value !== undefined) return value;
      if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  it('keeps /healthz answering while thousands of runs work, and its cancel answers at once', async () => {
    const out = join(model.root, 'out-many');
    const runs = 3000;
    const server = await serve(model, { outputPath: out, jobLimits: { maxRuns: runs } });
    try {
      const created = await post(`${server.url}/v1/runs`, { descriptions: Array(runs).fill(job.descriptions[0]), max_eval_instances: 1, num_train_trials: 1, suite: 'many' });
      expect(created.status).toBe(201);
      expect(created.json.runs).toHaveLength(runs);
      const url = `${server.url}/v1/runs/${created.json.id}`;
      // Past the first run, the runs are answered from the request cache: nothing but promises to wait for.
      await until('the third run', async () => ((await get(url)).json.progress.runIndex >= 2 ? true : undefined), 120_000);
      let slowest = 0;
      for (let i = 0; i < 20; i++) {
        const t0 = performance.now();
        const health = await fetch(`${server.url}/healthz`);
        expect(health.status).toBe(200);
        slowest = Math.max(slowest, performance.now() - t0);
        await new Promise((r) => setTimeout(r, 20));
      }
      // Generous for a loaded machine: before, /healthz waited for the whole job (minutes at this size).
      expect(slowest).toBeLessThan(5000);
      expect((await get(url)).json.status).toBe('running');
      const t0 = performance.now();
      const cancel = await fetch(url, { method: 'DELETE' });
      expect(cancel.status).toBe(200);
      expect(performance.now() - t0).toBeLessThan(5000);
      const ended = await until('the cancelled job', async () => {
        const j = (await get(url)).json as JobRecord;
        return j.status === 'cancelled' ? j : undefined;
      }, 30_000);
      const done = ended.runs.filter((r) => r.status === 'done').length;
      expect(done).toBeGreaterThanOrEqual(2);
      expect(done).toBeLessThan(runs);
      expect(ended.runs.filter((r) => r.status === 'cancelled')).toHaveLength(runs - done);
      await server.close();
      // The record on disk is the final one, compact (one line).
      const text = readFileSync(join(out, 'server', 'jobs', `${ended.id}.json`), 'utf8');
      expect(text.trimEnd().split('\n')).toHaveLength(1);
      expect((JSON.parse(text) as JobRecord).status).toBe('cancelled');
    } finally {
      await server.close();
    }
  }, 300_000);
});

describe('job records on disk', () => {
  const record = (done: number): JobRecord => ({
    id: 'run-store-1',
    status: 'running',
    request: { ...job, suite: 'srv' },
    createdAt: '2026-12-03T00:00:00.000Z',
    resumed: 0,
    runs: [{ name: 'r', status: 'running' }],
    progress: { runIndex: 0, runCount: 1, done, total: 1000, cachedHits: 0, generatedTokens: 0 },
    samples: [],
  });
  const read = (dir: string) => JSON.parse(readFileSync(join(dir, 'run-store-1.json'), 'utf8')) as JobRecord;

  it('coalesces changes: one write takes the latest state, the next waits for the interval, flush writes the last', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'flexhelm-job-store-'));
    const store = new JobStore(dir, { intervalMs: 60_000 });
    store.save(record(0));
    for (let done = 1; done <= 1000; done++) store.save(record(done));
    await store.settled('run-store-1');
    // One write, with the latest state: all 1000 changes came before it ran.
    expect(read(dir).progress.done).toBe(1000);
    store.save(record(1001));
    await new Promise((r) => setTimeout(r, 200));
    expect(read(dir).progress.done).toBe(1000); // within the interval: not written yet
    await store.flush();
    expect(read(dir).progress.done).toBe(1001);
    expect(readdirSync(dir)).toEqual(['run-store-1.json']);
  });

  const canMount = process.getuid?.() === 0 && spawnSync('mount', ['--version']).status === 0;
  it.skipIf(!canMount)('a full disk: the error names the folder, the last good record stands, no temporary is left, and flush retries', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'flexhelm-job-store-full-'));
    expect(spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir]).status).toBe(0);
    try {
      const errors: string[] = [];
      const store = new JobStore(dir, { intervalMs: 0, onError: (_id, err) => errors.push(err.message) });
      store.saveNow(record(1));
      const big = record(2);
      big.samples = Array.from({ length: 5000 }, (_, i) => ({ t: i, done: i, generatedTokens: i }));
      store.save(big, true);
      await store.flush();
      expect(errors[0]).toBe(`cannot write ${join(dir, 'run-store-1.json')}: the folder ${dir} is full (ENOSPC); free space there or write to another folder`);
      expect(read(dir).progress.done).toBe(1);
      expect(readdirSync(dir)).toEqual(['run-store-1.json']);
      store.save(record(3), true);
      await store.flush();
      expect(read(dir).progress.done).toBe(3);
    } finally {
      spawnSync('umount', [dir]);
    }
  });

  it.skipIf(!canMount)('a read-only state folder: a new job is refused with 507 naming <state-dir>, and the server keeps serving', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'flexhelm-job-state-ro-'));
    expect(spawnSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=64k', 'tmpfs', stateDir]).status).toBe(0);
    const server = await serve(model, { outputPath: join(model.root, 'out-ro-state'), stateDir });
    try {
      const refused = await post(`${server.url}/v1/runs`, job);
      expect(refused.status).toBe(507);
      expect(refused.json.error.code).toBe('job_not_saved');
      expect(refused.json.error.message).toMatch(/^the job was not accepted: cannot write <state-dir>\/run-[\w-]+\.json: the folder <state-dir> is on a read-only file system \(EROFS\); make it writable or write to another folder$/);
      expect((await get(`${server.url}/v1/runs`)).json.data).toEqual([]);
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    } finally {
      await server.close();
      spawnSync('umount', [stateDir]);
    }
  });
});
