import { spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalRedis, parseRedisUrl, queueStatus } from '@flexhelm/distributed';
import { readRunOutputs, RUN_OUTPUT_FILES } from '@flexhelm/runner';
import { runFileWithoutTimings } from '../run-file-without-timings.js';
import { startCli, type CliProcess } from '../test-cli-process.js';
import { makeTinyOptModel } from '@flexhelm/runner/testing';

const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'flexhelm-cli-distributed-'));
const modelDir = join(root, 'tiny');
// Fixed batches and the exact fp32 path: the files are compared with a single-process run's, byte for byte, and the
// coordinator aligns shards with its own policy's batch (so it gets the same policy as the workers).
const fixed = ['--gpu-batch-size', '4', '--compute-dtype', 'fp32'];
const resident = ['--percent', '100', '0', '100', '0', '100', '0'];
const common = ['--model', 'local/tiny-opt', '--path', modelDir, '--data-dir', join(root, 'data'), '-t', '1', ...fixed];
const modelArgs = ['--model', 'local/tiny-opt', '--path', modelDir, '--data-dir', join(root, 'data'), ...fixed];
let redis: LocalRedis;
const children: ChildProcess[] = [];

type Proc = CliProcess;

function start(args: string[]): Proc {
  const p = startCli(args);
  children.push(p.child);
  return p;
}

function worker(name: string): Proc {
  return start(['worker', '--queue', redis.url, ...modelArgs, ...resident, '--name', name, '--lock-duration', '4', '--cache-path', join(root, `${name}.sqlite`)]);
}


async function stopAll(procs: Proc[]): Promise<void> {
  for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGTERM');
  await Promise.all(procs.map((p) => p.exited));
}

beforeAll(async () => {
  // No redis-server on this machine fails here, saying how to install it.
  redis = await LocalRedis.start({ dir: join(root, 'redis') });
  makeTinyOptModel(modelDir, 11);
}, 60_000);

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await redis?.stop();
});

describe('flexhelm run --queue with flexhelm workers', () => {
  it('survives a worker killed mid-shard: every request recorded once, the five files equal a single-process run', async () => {
    const description = 'synthetic_reasoning:mode=induction';
    const single = join(root, 'out-single');
    const r = spawnSync(process.execPath, [main, 'run', '-d', description, '-m', '24', '--output-path', single, ...common, ...resident], { encoding: 'utf8', timeout: 120_000 });
    expect(r.stderr).not.toMatch(/internal error/);
    expect(r.status).toBe(0);

    const workers = ['w1', 'w2', 'w3'].map(worker);
    await Promise.all(workers.map((w) => w.waitFor(/serving local\/tiny-opt@/)));
    const distributed = join(root, 'out-queue');
    const coordinator = start(['run', '-d', description, '-m', '24', '--output-path', distributed, ...common, ...resident, '--queue', redis.url, '--shard-size', '16']);
    // A worker that has recorded the first chunk (8 of 16) of its shard, and is working on the second: kill it.
    const victim = await Promise.race(workers.map((w) => w.waitFor(/shard \d+: 8\/16 requests recorded/).then(() => w)));
    victim.child.kill('SIGKILL');
    expect((await coordinator.exited).status, coordinator.output()).toBe(0);
    const survivors = workers.filter((w) => w !== victim);
    // The dead worker's shard was redelivered and resumed: its recorded half was skipped.
    expect(survivors.map((w) => w.output()).join('')).toMatch(/done in [\d.]+ s \(8 computed, 8 already recorded\)/);
    await stopAll(survivors);

    const runName = 'synthetic_reasoning:mode=induction,model=local_tiny-opt';
    const singleDir = join(single, 'runs', 'v1', runName);
    const queueDir = join(distributed, 'runs', 'v1', runName);
    expect(readdirSync(queueDir).sort()).toEqual([...RUN_OUTPUT_FILES].sort());
    for (const f of RUN_OUTPUT_FILES) {
      expect(runFileWithoutTimings(join(queueDir, f), distributed), f).toBe(runFileWithoutTimings(join(singleDir, f), single));
    }
    expect(readRunOutputs(queueDir).scenarioState.request_states).toHaveLength(24);
    const store = await queueStatus(parseRedisUrl(redis.url));
    expect(store.recordedResults).toBe(24);
    expect(store.duplicateWrites).toBe(0);

    // Submitting the same run again adds no work and writes the same files.
    const again = spawnSync(process.execPath, [main, 'run', '-d', description, '-m', '24', '--output-path', join(root, 'out-again'), ...common, ...resident, '--queue', redis.url, '--shard-size', '16'], { encoding: 'utf8', timeout: 60_000 });
    expect(again.status, again.stderr).toBe(0);
    expect(again.stderr).toMatch(/2 shards \(2 already done, 24 requests already recorded\)/);

    const status = spawnSync(process.execPath, [main, 'queue', 'status', '--queue', redis.url], { encoding: 'utf8' });
    expect(status.status).toBe(0);
    expect(status.stdout).toMatch(/synthetic_reasoning:mode=induction,model=local_tiny-opt\s+0\s+0\s+2\s+0/);
    expect(status.stdout).toMatch(/results recorded: 24; duplicate writes ignored: 0/);
  }, 150_000);

  it('completes a run when Redis (AOF on) is killed and restarted in the middle', async () => {
    const workers = ['r1', 'r2'].map(worker);
    await Promise.all(workers.map((w) => w.waitFor(/serving local\/tiny-opt@/)));
    const out = join(root, 'out-restart');
    const coordinator = start(['run', '-d', 'synthetic_reasoning:mode=pattern_match', '-m', '24', '--output-path', out, ...common, ...resident, '--queue', redis.url, '--shard-size', '8']);
    await Promise.race(workers.map((w) => w.waitFor(/shard \d+: 8\/8 requests recorded/)));
    await redis.kill();
    await new Promise((r) => setTimeout(r, 1000));
    await redis.restart();
    expect((await coordinator.exited).status, coordinator.output()).toBe(0);
    await stopAll(workers);
    const runDir = join(out, 'runs', 'v1', 'synthetic_reasoning:mode=pattern_match,model=local_tiny-opt');
    const outputs = readRunOutputs(runDir);
    expect(outputs.scenarioState.request_states).toHaveLength(24);
    for (const rs of outputs.scenarioState.request_states) expect(rs.result?.success).toBe(true);
  }, 120_000);

  it('serves shards with an offloading policy: the same files as a single-process run with that policy', async () => {
    // Half the weights in pinned RAM (f16), half in files on disk: results depend on the policy, not on the queue.
    const policy = ['--percent', '0', '50', '100', '0', '100', '0', '--offload-dir', join(root, 'offload')];
    const description = 'synthetic_reasoning:mode=induction';
    // Database 1: the earlier tests recorded these requests (computed with the default policy) in database 0.
    const queue = redis.url.replace(/\/0$/, '/1');
    const single = join(root, 'out-offload-single');
    const r = spawnSync(process.execPath, [main, 'run', '-d', description, '-m', '12', '--output-path', single, ...common, ...policy], { encoding: 'utf8', timeout: 120_000 });
    expect(r.status, r.stderr).toBe(0);

    const w = start(['worker', '--queue', queue, ...modelArgs, ...policy, '--name', 'offloader', '--cache-path', join(root, 'offloader.sqlite')]);
    await w.waitFor(/serving local\/tiny-opt@/);
    expect(w.output()).toMatch(/layer weights: .*host [\d.]+ MiB \(\d+ tensors.*disk [\d.]+ MiB \([1-9]\d* tensors/);
    const distributed = join(root, 'out-offload-queue');
    const coordinator = start(['run', '-d', description, '-m', '12', '--output-path', distributed, ...common, ...policy, '--queue', queue, '--shard-size', '8']);
    expect((await coordinator.exited).status, coordinator.output()).toBe(0);
    expect(w.output()).toMatch(/shard 2\/2: done in [\d.]+ s \(4 computed, 0 already recorded\)/);
    await stopAll([w]);

    const runName = `${description},model=local_tiny-opt`;
    for (const f of RUN_OUTPUT_FILES) {
      expect(runFileWithoutTimings(join(distributed, 'runs', 'v1', runName, f), distributed), f).toBe(
        runFileWithoutTimings(join(single, 'runs', 'v1', runName, f), single),
      );
    }
  }, 150_000);

  it('takes --percent auto: the same search and printout as flexhelm run, then serves with the chosen policy', async () => {
    const w = start(['worker', '--queue', redis.url, ...modelArgs, '--percent', 'auto', '--offload-dir', join(root, 'offload-auto'), '--name', 'auto', '--cache-path', join(root, 'auto.sqlite')]);
    await w.waitFor(/serving /, 120_000);
    const out = w.output();
    // --gpu-batch-size 4 was given: the search keeps it and chooses the placement and the number of batches.
    expect(out).toMatch(/policy \(auto\): --percent \d+ \d+ 100 0 100 0 --gpu-batch-size 4 --num-gpu-batches \d+ — predicted [\d.]+ tok\/s .*peak RAM [\d.]+ GiB/);
    expect(out).toMatch(/searched \d+ policies \(\d+ fit\)/);
    expect(out.indexOf('policy (auto)')).toBeLessThan(out.indexOf('serving'));
    expect(out).not.toMatch(/internal error/);
    await stopAll([w]);
  }, 150_000);

  it('refuses to start a worker whose policy does not fit --max-ram, with the budget message', async () => {
    const w = start(['worker', '--queue', redis.url, ...modelArgs, '--max-ram', '0.0001']);
    expect((await w.exited).status).toBe(2);
    expect(w.output()).toMatch(/does not fit: needs [\d.]+ GiB of RAM but the budget is [\d.]+ GiB/);
    expect(w.output()).toMatch(/a policy that fits: --percent|no policy fits/);
    expect(w.output()).not.toMatch(/serving|internal error/);
  }, 60_000);

  it('says what is wrong with a bad --queue', () => {
    const r = spawnSync(process.execPath, [main, 'queue', 'status', '--queue', 'localhost:6379'], { encoding: 'utf8' });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/expected redis:\/\/\[USER:PASSWORD@\]HOST:PORT\[\/DB\]/);
    const w = spawnSync(process.execPath, [main, 'worker', ...modelArgs], { encoding: 'utf8' });
    expect(w.status).not.toBe(0);
    expect(w.stderr).toMatch(/give --queue redis:\/\/HOST:PORT/);
  });
});
