import { spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request, type Request } from '@flexhelm/core';
import { enqueueShardJobs, freePort, LocalRedis, parseRedisUrl, queueNameFor, queueStatus, requestToJson, type ShardJobData } from '@flexhelm/distributed';
import { pyFloat } from '@flexhelm/python-compat';
import { modelFingerprint, RUN_OUTPUT_FILES } from '@flexhelm/runner';
import { makeTinyOptModel } from '@flexhelm/runner/testing';
import { runFileWithoutTimings } from '../run-file-without-timings.js';
import { startCli, type CliProcess } from '../test-cli-process.js';

// Real worker processes against a real redis-server: poison shards, SIGTERM in the middle of a long shard, and Redis
// killed under a run (issue 26, items 4 and 10).
const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'flexhelm-cli-worker-faults-'));
const modelDir = join(root, 'tiny');
const fixed = ['--gpu-batch-size', '4', '--compute-dtype', 'fp32', '--percent', '100', '0', '100', '0', '100', '0'];
const modelArgs = ['--model', 'local/tiny-opt', '--path', modelDir, '--data-dir', join(root, 'data'), ...fixed];
let redis: LocalRedis;
let modelId: string;
const children: ChildProcess[] = [];

function start(args: string[], env?: NodeJS.ProcessEnv): CliProcess {
  const p = startCli(args, env);
  children.push(p.child);
  return p;
}

function worker(name: string, extra: string[] = []): CliProcess {
  return start(['worker', '--queue', redis.url, ...modelArgs, '--name', name, '--lock-duration', '5', '--cache-path', join(root, `${name}.sqlite`), ...extra]);
}

const helmRequest = (i: number, fields: Partial<Request> = {}) => request({ model: 'local/tiny-opt', prompt: `Question ${i}: what comes next?`, max_tokens: 3, temperature: pyFloat(0), ...fields });

function shardJob(runName: string, requests: Request[]): { jobId: string; data: ShardJobData } {
  return { jobId: `shard-${runName}`, data: { version: 1, modelId, runName, shardIndex: 0, shardCount: 1, requests: requests.map(requestToJson) } };
}

/** The shard's state and counters, as `flexhelm queue status --json` shows them. */
async function runState(runName: string) {
  const status = await queueStatus(parseRedisUrl(redis.url));
  const q = status.queues.find((x) => x.queue === queueNameFor(modelId));
  return { counts: q?.runs.get(runName), failures: q?.failures.filter((f) => f.runName === runName) ?? [] };
}

/** `p`'s exit, or a failure showing its output (and the others') when it has not exited within `ms`. */
function exitOf(p: CliProcess, ms: number, others: CliProcess[] = []): Promise<{ status: number | null; signal: NodeJS.Signals | null }> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.exited.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no exit within ${ms} ms; output:\n${p.output()}\n---\n${others.map((o) => o.output()).join('\n---\n')}`)), ms);
    }),
  ]);
}

beforeAll(async () => {
  redis = await LocalRedis.start({ dir: join(root, 'redis') });
  makeTinyOptModel(modelDir, 13);
  modelId = `local/tiny-opt@${modelFingerprint(modelDir)}`;
}, 60_000);

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await redis?.stop();
});

describe('flexhelm worker given a poison shard', () => {
  it('fails it at once as unrecoverable, naming the field and the limit, and goes on with the next shard', async () => {
    const w = worker('poison');
    await w.waitFor(/serving local\/tiny-opt@/);
    const began = Date.now();
    // One valid-looking request asking for a million completions, then an ordinary shard.
    await enqueueShardJobs(parseRedisUrl(redis.url), [shardJob('poison', [helmRequest(0), helmRequest(1, { num_completions: 1_000_000 })]), shardJob('after-poison', [helmRequest(2), helmRequest(3)])]);
    await w.waitFor(/after-poison shard 1\/1: done in [\d.]+ s \(2 computed, 0 already recorded\)/, 60_000);
    expect(Date.now() - began).toBeLessThan(30_000);
    expect(w.output()).toMatch(/poison shard 1: failed \(unrecoverable, not retried\): shard 1\/1 of poison \(job shard-poison\) refused: request 1: num_completions is 1000000, above the limit of 16/);
    const poison = await runState('poison');
    expect(poison.counts).toEqual({ waiting: 0, active: 0, done: 0, failed: 1 });
    // Three attempts were allowed; one was made.
    expect(poison.failures).toEqual([expect.objectContaining({ attempts: 1, error: expect.stringMatching(/num_completions is 1000000, above the limit of 16/) })]);
    // Over --max-tokens: the message says how a worker takes more.
    await enqueueShardJobs(parseRedisUrl(redis.url), [shardJob('long-answers', [helmRequest(4, { max_tokens: 600 })])]);
    await w.waitFor(/long-answers shard 1: failed \(unrecoverable, not retried\): .*max_tokens is 600, above the limit of 512 \(a worker takes more with --max-tokens N\)/, 30_000);
    w.child.kill('SIGTERM');
    expect(await w.exited).toEqual({ status: 0, signal: null });
  }, 120_000);
});

describe('flexhelm worker stopped by SIGTERM in the middle of a long shard', () => {
  // Eight requests of 4 sampled completions × 128 tokens: seconds of work for the tiny model, one engine chunk.
  const long = Array.from({ length: 8 }, (_, i) => helmRequest(100 + i, { num_completions: 4, max_tokens: 128, temperature: pyFloat(1), random: `r${i}` }));

  it('cancels the rows in hand, gives the shard back and exits 0 within --stop-timeout; a second worker then does the shard', async () => {
    const first = worker('first', ['--stop-timeout', '8']);
    await first.waitFor(/serving local\/tiny-opt@/);
    await enqueueShardJobs(parseRedisUrl(redis.url), [shardJob('long', long)]);
    await first.waitFor(/long shard 1\/1: 8 requests \(attempt 1\)/);
    await new Promise((r) => setTimeout(r, 500));
    expect(first.output()).not.toMatch(/long shard 1\/1: done/);
    const began = Date.now();
    first.child.kill('SIGTERM');
    const exit = await first.exited;
    const seconds = (Date.now() - began) / 1000;
    expect(exit, first.output()).toEqual({ status: 0, signal: null });
    expect(seconds).toBeLessThan(8);
    expect(first.output()).toMatch(/SIGTERM: giving the shard in hand back to the queue and exiting \(within 8 s\)/);
    expect(first.output()).toMatch(/long shard 1: given back to the queue with 0\/8 requests recorded/);
    expect(first.output()).not.toMatch(/terminate called|internal error|did not stop/);
    // Back in the queue, not failed.
    expect((await runState('long')).counts).toEqual({ waiting: 1, active: 0, done: 0, failed: 0 });

    const second = worker('second');
    await second.waitFor(/long shard 1\/1: done in [\d.]+ s \(8 computed, 0 already recorded\)/, 120_000);
    expect((await runState('long')).counts).toEqual({ waiting: 0, active: 0, done: 1, failed: 0 });
    second.child.kill('SIGTERM');
    expect((await second.exited).status).toBe(0);
  }, 240_000);

  it('exits at once on a second SIGTERM, without a native abort', async () => {
    const w = worker('twice');
    await w.waitFor(/serving local\/tiny-opt@/);
    await enqueueShardJobs(parseRedisUrl(redis.url), [shardJob('twice', long.map((r, i) => ({ ...r, random: `t${i}` })))]);
    await w.waitFor(/twice shard 1\/1: 8 requests/);
    await new Promise((r) => setTimeout(r, 300));
    const began = Date.now();
    w.child.kill('SIGTERM');
    w.child.kill('SIGTERM');
    const exit = await w.exited;
    expect(Date.now() - began).toBeLessThan(5000);
    expect(exit.signal, w.output()).toBeNull();
    expect([0, 143]).toContain(exit.status);
    expect(w.output()).not.toMatch(/terminate called|Napi::Error|internal error/);
  }, 120_000);
});

describe('Redis killed under a distributed run', () => {
  it('stops the coordinator with one line, exit 2 and the command to resume; the resumed run writes the same files', async () => {
    const description = 'synthetic_reasoning:mode=pattern_match';
    const runArgs = (out: string) => ['run', '-d', description, '-m', '24', '-t', '1', '--output-path', out, ...modelArgs];
    const single = join(root, 'out-single');
    const r = spawnSync(process.execPath, [main, ...runArgs(single)], { encoding: 'utf8', timeout: 120_000 });
    expect(r.status, r.stderr).toBe(0);

    // One worker that waits out the outage (default --redis-timeout 60), one that gives up after 2 s.
    const patient = worker('patient');
    const brief = worker('brief', ['--redis-timeout', '2']);
    await Promise.all([patient.waitFor(/serving /), brief.waitFor(/serving /)]);
    const out = join(root, 'out-queue');
    const args = [...runArgs(out), '--queue', redis.url, '--shard-size', '8'];
    const coordinator = start(args, { FLEXHELM_REDIS_TIMEOUT: '3' });
    await Promise.race([patient, brief].map((w) => w.waitFor(/pattern_match,model=local_tiny-opt shard \d+: 8\/8 requests recorded/)));
    await redis.kill();

    const exit = await exitOf(coordinator, 60_000, [patient, brief]);
    expect(exit, coordinator.output()).toEqual({ status: 2, signal: null });
    const lines = coordinator.output().trimEnd().split('\n');
    expect(lines.at(-1)).toBe(
      `flexhelm run: ${description},model=local_tiny-opt: Redis at ${redis.url}: lost the connection to Redis (ECONNREFUSED) and it did not come back within 3 s. ` +
        `The results recorded so far are kept (in Redis, and in the workers' caches); once Redis is back, run the same command again to resume: flexhelm ${args.join(' ')}`,
    );
    expect(coordinator.output()).not.toMatch(/internal error|\n\s+at |Connection is closed/);

    // The impatient worker stops with one line and status 2; the patient one logged the outage once.
    expect(await exitOf(brief, 60_000)).toEqual({ status: 2, signal: null });
    expect(brief.output()).toMatch(/flexhelm worker: lost Redis at redis:\/\/127\.0\.0\.1:\d+\/0: ECONNREFUSED, not back within 2 s; .*Start the worker again once Redis is back\n$/);
    // The outage is logged at most once (the socket error seen first may be ECONNRESET rather than ECONNREFUSED).
    expect((brief.output().match(/lost Redis \([A-Z]+\); reconnecting/g) ?? []).length).toBeLessThanOrEqual(1);
    expect(brief.output()).not.toMatch(/queue error|terminate called|internal error/);

    await redis.restart();
    await patient.waitFor(/Redis is back after [\d.]+ s/, 60_000);
    expect(patient.output().match(/lost Redis/g)).toHaveLength(1);
    const resumed = start(args);
    expect((await exitOf(resumed, 120_000, [patient])).status, resumed.output()).toBe(0);
    patient.child.kill('SIGTERM');
    expect((await exitOf(patient, 30_000)).status).toBe(0);

    const runName = `${description},model=local_tiny-opt`;
    for (const f of RUN_OUTPUT_FILES) {
      expect(runFileWithoutTimings(join(out, 'runs', 'v1', runName, f), out), f).toBe(runFileWithoutTimings(join(single, 'runs', 'v1', runName, f), single));
    }
  }, 300_000);
});

describe('no Redis at all', () => {
  it('is one line and exit status 2 for the worker, the coordinator and queue status', async () => {
    const url = `redis://127.0.0.1:${await freePort()}/0`;
    const w = start(['worker', '--queue', url, ...modelArgs, '--cache-path', join(root, 'nowhere.sqlite')]);
    expect(await w.exited).toEqual({ status: 2, signal: null });
    expect(w.output().trimEnd().split('\n').at(-1)).toBe(`flexhelm worker: ${url}: cannot reach Redis (ECONNREFUSED); is Redis running there, and are the host, port and password right?`);
    const c = spawnSync(process.execPath, [main, 'run', '-d', 'synthetic_reasoning:mode=induction', '-m', '4', '-t', '1', '--output-path', join(root, 'out-nowhere'), ...modelArgs, '--queue', url], { encoding: 'utf8', timeout: 120_000 });
    expect(c.status, c.stderr).toBe(2);
    expect(c.stderr.trimEnd().split('\n').at(-1)).toMatch(/^flexhelm run: synthetic_reasoning:mode=induction,model=local_tiny-opt: Redis at redis:\/\/127\.0\.0\.1:\d+\/0: cannot reach Redis \(ECONNREFUSED\)\. .*run the same command again to resume: flexhelm run -d/);
    const q = spawnSync(process.execPath, [main, 'queue', 'status', '--queue', url], { encoding: 'utf8' });
    expect(q.status).toBe(2);
    expect(q.stderr).toBe(`flexhelm queue: ${url}: cannot reach Redis (ECONNREFUSED)\n`);
    for (const out of [w.output(), c.stderr, q.stderr]) expect(out).not.toMatch(/internal error|\n\s+at /);
  }, 180_000);
});
