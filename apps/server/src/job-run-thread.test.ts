import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { threadId } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobRecord } from './job-record.js';
import type { RunningServer } from './start-server.js';
import { get, loadTinyModel, post, serve, type TinyModel } from './test-server.js';

let model: TinyModel;
beforeAll(async () => {
  model = await loadTinyModel();
}, 120_000);
afterAll(async () => {
  await model?.engine.close();
});

/** Polls the job until it has finished; calls `meanwhile` between polls. */
async function finished(server: RunningServer, id: string, meanwhile: () => Promise<void> = async () => {}): Promise<JobRecord> {
  const deadline = Date.now() + 240_000;
  for (;;) {
    const job = (await get(`${server.url}/v1/runs/${id}`)).json as JobRecord;
    if (job.status !== 'queued' && job.status !== 'running') return job;
    if (Date.now() > deadline) throw new Error(`job ${id} still ${job.status}`);
    await meanwhile();
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Every file of every run folder of a suite, by `<run>/<file>`. */
function suiteFiles(outputPath: string, suite: string): Map<string, string> {
  const files = new Map<string, string>();
  const dir = join(outputPath, 'runs', suite);
  for (const run of readdirSync(dir).sort()) for (const f of readdirSync(join(dir, run)).sort()) files.set(`${run}/${f}`, readFileSync(join(dir, run, f), 'utf8'));
  return files;
}

// Three scenarios' runs: different adapters (generation with temperature 0, a Python float elsewhere), metrics, splits.
const descriptions = ['synthetic_reasoning:mode=pattern_match', 'synthetic_reasoning:mode=variable_substitution', 'synthetic_reasoning:mode=induction'];

describe('a job’s run worker', () => {
  it('prepares and scores the runs off the main thread and writes the bytes the in-process runner writes', async () => {
    const out = join(model.root, 'out-worker');
    const job = { descriptions, max_eval_instances: 3, num_train_trials: 2 };
    // 1. The worker server computes every request once (the request cache keeps them for the next two jobs).
    let server = await serve(model, { outputPath: out, summarizeSuites: false });
    const threads = new Set<number>();
    let healthChecks = 0;
    try {
      const first = await post(`${server.url}/v1/runs`, { ...job, suite: 'fill' });
      expect(first.status).toBe(201);
      const filled = await finished(server, first.json.id);
      expect(filled.status).toBe('succeeded');
      // 2. The same job again, answered from the cache, while /healthz is asked: the job's runs are prepared in a
      // worker thread, never on the main thread, and the server answers throughout.
      const second = await post(`${server.url}/v1/runs`, { ...job, suite: 'worker' });
      const done = await finished(server, second.json.id, async () => {
        const id = server.jobs.runThreadId;
        if (id !== undefined) threads.add(id);
        expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
        healthChecks++;
      });
      expect(done.status).toBe('succeeded');
      expect(done.progress.cachedHits).toBeGreaterThan(0);
      expect(done.runs.every((r) => r.status === 'done')).toBe(true);
    } finally {
      await server.close();
    }
    expect(healthChecks).toBeGreaterThan(0);
    expect(threads.size).toBe(1);
    expect([...threads][0]).not.toBe(threadId); // a worker thread's id, not the main thread's
    expect(server.jobs.runThreadId).toBeUndefined(); // the worker ends with its job

    // 3. The same job on a server that prepares runs on its main thread (no tokenizer folder: `flexhelm run`'s path).
    server = await serve(model, { outputPath: out, summarizeSuites: false, tokenizerFolder: undefined });
    try {
      const third = await post(`${server.url}/v1/runs`, { ...job, suite: 'in-process' });
      const done = await finished(server, third.json.id);
      expect(done.status).toBe('succeeded');
      expect(server.jobs.runThreadId).toBeUndefined();
    } finally {
      await server.close();
    }
    const fromWorker = suiteFiles(out, 'worker');
    const inProcess = suiteFiles(out, 'in-process');
    expect(fromWorker.size).toBe(descriptions.length * 5); // HELM's five files per run
    expect([...fromWorker.keys()]).toEqual([...inProcess.keys()]);
    for (const [file, text] of inProcess) expect(fromWorker.get(file), file).toBe(text);
    // The requests' Python floats survived the messages: the worker's requests had the cache keys of the first job's,
    // so their results (with the first job's request times) were the cached ones.
    expect(suiteFiles(out, 'fill')).toEqual(fromWorker);
  }, 600_000);

  it('fails the job, not the server, when its worker dies, with a message that says why', async () => {
    const out = join(model.root, 'out-worker-oom');
    // A heap far too small to load the scenarios: the worker runs out of memory at its start.
    const server = await serve(model, { outputPath: out, summarizeSuites: false, jobWorkerHeapMiB: 1 });
    try {
      const created = await post(`${server.url}/v1/runs`, { descriptions: descriptions.slice(0, 1), max_eval_instances: 2, num_train_trials: 1, suite: 'oom' });
      const failed = await finished(server, created.json.id);
      expect(failed.status).toBe('failed');
      expect(failed.error).toMatch(/^the job's run worker (ran out of its 1 MiB heap \(start flexhelm-server with a higher --job-worker-heap-mib|crashed: |stopped unexpectedly)/);
      expect(failed.runs[0]!.status).toBe('failed');
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    } finally {
      await server.close();
    }
  }, 120_000);
});
