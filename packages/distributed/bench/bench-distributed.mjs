// Distributed-run benchmark: 1, 2 and 3 `flexhelm worker` processes (fp32, as the single-process baseline) on one
// small OPT model on this machine, with the coordinator (runOnQueue) in this process. Reports wall time, queue time per shard, the coordinator's own
// cost (queue operations + CPU while waiting) as a share of the run, and the effect of the shard size.
// Usage: pnpm bench:distributed [-- --requests N --max-tokens N --workers 1,2,3 --shard-sizes 8,32]
import { spawn } from 'node:child_process';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { request } from '@flexhelm/core';
import { pyFloat } from '@flexhelm/python-compat';
import { makeModel, Engine } from '@flexhelm/engine';
import { OrtBackend } from '@flexhelm/ort-backend';
import { EngineExecutor, modelFingerprint } from '@flexhelm/runner';
import { loadOptTokenizer, writeOptShapedTokenizerFolder } from '@flexhelm/tokenizer';
import { LocalRedis, parseRedisUrl, runOnQueue } from '../dist/index.js';
import { benchHost, finishHost, hostLine } from '../../../tooling/scripts/bench-host.mjs';

const host = benchHost();
console.log(`host: ${hostLine(host)}`);

const here = dirname(fileURLToPath(import.meta.url));
const cli = join(here, '..', '..', '..', 'apps', 'cli', 'dist', 'main.js');
const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '64' },
    'max-tokens': { type: 'string', default: '32' },
    workers: { type: 'string', default: '1,2,3' },
    'shard-sizes': { type: 'string', default: '8,32' },
    out: { type: 'string', default: join(here, 'last-run.json') },
  },
});
const numRequests = Number(values.requests);
const maxTokens = Number(values['max-tokens']);
const workerCounts = values.workers.split(',').map(Number);
const shardSizes = values['shard-sizes'].split(',').map(Number);
const batch = 8; // `flexhelm worker` default: gpu-batch-size 4 → chunks of max(8, 4)

const root = mkdtempSync(join(tmpdir(), 'flexhelm-bench-distributed-'));
const modelDir = join(root, 'small-opt');
const config = { hiddenSize: 256, numHiddenLayers: 4, numAttentionHeads: 4, vocabSize: 50272 };
makeModel({ config, outDir: modelDir, seed: 1, beforeCommit: (dir) => writeOptShapedTokenizerFolder(dir) });
const modelId = `local/bench-opt@${modelFingerprint(modelDir)}`;

const words = 'the of and a to in is you that it he was for on are as with his they at be this have from'.split(' ');
const requests = Array.from({ length: numRequests }, (_, i) =>
  request({
    model: 'local/bench-opt',
    prompt: Array.from({ length: 20 + ((i * 37) % 60) }, (_, k) => words[(i * 7 + k * 3) % words.length]).join(' '),
    max_tokens: maxTokens,
    temperature: pyFloat(0),
    stop_sequences: [],
  }),
);

const redis = await LocalRedis.start({ dir: join(root, 'redis') });
const connection = parseRedisUrl(redis.url);
const admin = new Redis({ ...connection });

function startWorker(name, cachePath) {
  const child = spawn(process.execPath, [cli, 'worker', '--queue', redis.url, '--model', 'local/bench-opt', '--path', modelDir, '--data-dir', join(root, 'data'), '--name', name, '--cache-path', cachePath, '--compute-dtype', 'fp32'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let text = '';
  const ready = new Promise((resolve, reject) => {
    child.stderr.on('data', (c) => {
      text += c.toString();
      if (text.includes(' serving ')) resolve();
    });
    child.on('exit', (code) => reject(new Error(`worker ${name} exited with ${code}:\n${text}`)));
  });
  return { child, ready, exited: new Promise((r) => child.on('exit', r)) };
}

// This process's CPU while idle (after a second to settle from making the model): nothing of the coordinator yet.
await new Promise((r) => setTimeout(r, 1000));
const idleCpu = process.cpuUsage();
await new Promise((r) => setTimeout(r, 2000));
const idleCpuMsPerSecond = ((c) => (c.user + c.system) / 1000 / 2)(process.cpuUsage(idleCpu));
console.log(`idle CPU of the benchmark process: ${idleCpuMsPerSecond.toFixed(2)} ms/s`);

// The coordinator's idle floor: runOnQueue waiting on a shard no worker serves (its timers, the event stream),
// measured from 1 s in (after its setup) for 3 s.
const coordinatorIdleCpuMsPerSecond = await new Promise((resolve) => {
  const abort = new AbortController();
  let from;
  setTimeout(() => (from = process.cpuUsage()), 1000);
  setTimeout(() => {
    const c = process.cpuUsage(from);
    resolve((c.user + c.system) / 1000 / 3);
    abort.abort(new Error('idle measurement done'));
  }, 4000);
  runOnQueue(requests.slice(0, batch), { connection, modelId: `${modelId}#idle`, runName: 'bench:idle', shardSize: batch, signal: abort.signal }).catch(() => undefined);
});
console.log(`idle CPU of a waiting coordinator: ${coordinatorIdleCpuMsPerSecond.toFixed(2)} ms/s`);

// The fixed cost of one runOnQueue call (connections, BullMQ's Lua scripts, QueueEvents), paid once per run spec.
const setupCpu = process.cpuUsage();
const setupBegan = performance.now();
await runOnQueue([], { connection, modelId, runName: 'bench:setup', shardSize: 8 });
const setupCpuMs = (() => {
  const c = process.cpuUsage(setupCpu);
  return (c.user + c.system) / 1000;
})();
const setupWallMs = performance.now() - setupBegan;
console.log(`coordinator fixed cost per run spec: ${setupCpuMs.toFixed(0)} ms CPU, ${setupWallMs.toFixed(0)} ms wall`);

const runs = [];
try {
  for (const shardSize of shardSizes) {
    for (const n of workerCounts) {
      await admin.flushall();
      const workers = Array.from({ length: n }, (_, i) => startWorker(`bench-w${i + 1}`, join(root, `cache-${shardSize}-${n}-${i}.sqlite`)));
      await Promise.all(workers.map((w) => w.ready));
      const cpuBefore = process.cpuUsage();
      const began = performance.now();
      const out = await runOnQueue(requests, { connection, modelId, runName: `bench:shard=${shardSize},workers=${n}`, shardSize, pollIntervalMs: 1000 });
      const wallMs = performance.now() - began;
      const cpu = process.cpuUsage(cpuBefore);
      const coordinatorCpuMs = (cpu.user + cpu.system) / 1000;
      for (const w of workers) w.child.kill('SIGTERM');
      await Promise.all(workers.map((w) => w.exited));
      const queued = out.timings.map((t) => t.queuedMs).sort((a, b) => a - b);
      const processed = out.timings.map((t) => t.processMs);
      const run = {
        workers: n,
        shardSize,
        shards: out.shards,
        wallSeconds: wallMs / 1000,
        requestsPerSecond: numRequests / (wallMs / 1000),
        queueMsPerShard: { median: queued[Math.floor(queued.length / 2)], max: queued.at(-1) },
        processMsPerShard: { mean: processed.reduce((s, x) => s + x, 0) / processed.length },
        // Coordinator overhead: its process CPU over the whole submit-wait-fetch (it includes enqueue, event
        // handling, polling and decoding the results), as a share of the run's wall time.
        coordinatorCpuMs,
        coordinatorQueueOpsMs: out.enqueueMs + out.fetchMs,
        coordinatorCpuMsPerShard: coordinatorCpuMs / out.shards,
        coordinatorCpuMsPerRequest: coordinatorCpuMs / numRequests,
        coordinatorOverheadPercent: (100 * coordinatorCpuMs) / wallMs,
        // The same without the fixed per-run-spec cost measured above: what grows with the run.
        coordinatorSteadyOverheadPercent: (100 * Math.max(0, coordinatorCpuMs - setupCpuMs)) / wallMs,
      };
      runs.push(run);
      console.log(
        `workers ${n}, shard ${shardSize} (${out.shards} shards): ${run.wallSeconds.toFixed(2)} s, ${run.requestsPerSecond.toFixed(2)} req/s, ` +
          `queue time/shard median ${run.queueMsPerShard.median} ms max ${run.queueMsPerShard.max} ms, coordinator ${run.coordinatorOverheadPercent.toFixed(2)}% of the run (${run.coordinatorSteadyOverheadPercent.toFixed(2)}% without the fixed cost)`,
      );
    }
  }
} finally {
  admin.disconnect();
  await redis.stop();
}

// Baseline: the same requests in one process, in the workers' chunks (after the distributed runs, so this
// process's engine threads never count as coordinator CPU).
const engine = await Engine.load(modelDir, { backend: new OrtBackend() });
const executor = new EngineExecutor(engine, loadOptTokenizer(modelDir), { modelId, maxBatchSize: 4 });
const singleBegan = performance.now();
for (let s = 0; s < requests.length; s += batch) await executor.execute(requests.slice(s, s + batch));
const singleSeconds = (performance.now() - singleBegan) / 1000;
await engine.close();
console.log(`single process: ${numRequests} requests in ${singleSeconds.toFixed(2)} s`);

for (const run of runs) run.speedupVsSingleProcess = singleSeconds / run.wallSeconds;

const report = {
  host: finishHost(host),
  model: { ...config, note: 'random weights (makeModel), fp32, onnxruntime-node CPU' },
  requests: numRequests,
  maxTokens,
  engineBatch: batch,
  singleProcessSeconds: singleSeconds,
  coordinatorFixedCost: { cpuMs: setupCpuMs, wallMs: setupWallMs },
  processIdleCpuMsPerSecond: idleCpuMsPerSecond,
  coordinatorIdleCpuMsPerSecond,
  runs,
};
const tmp = `${values.out}.tmp-${process.pid}`;
writeFileSync(tmp, `${JSON.stringify(report, null, 2)}\n`);
renameSync(tmp, values.out);
console.log(`report: ${values.out}`);
rmSync(root, { recursive: true, force: true });
