// The mixed-load phase of `pnpm bench:server` (issue 26): the server binary in its own process (so its RSS is its own),
// small completions and /healthz measured while long prompts, a 1 M-character prompt, many-run jobs and clients that
// disconnect mid-answer press on it. Reports p50/p99 of the small requests and of /healthz, and the server's peak RSS
// (VmHWM) against the RAM its memory plan announced.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const main = fileURLToPath(new URL('../dist/bin.js', import.meta.url));

const percentile = (xs, p) => {
  if (xs.length === 0) return null;
  const sorted = [...xs].sort((a, b) => a - b);
  return Number(sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)].toFixed(1));
};
const summary = (xs) => ({ count: xs.length, p50: percentile(xs, 50), p99: percentile(xs, 99), max: xs.length ? Number(Math.max(...xs).toFixed(1)) : null });

/** Peak and current resident memory of a process (bytes), from /proc. */
function rssOf(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN) * 1024;
  return { peak: kb('VmHWM'), now: kb('VmRSS') };
}

async function timed(fn) {
  const t0 = performance.now();
  const status = await fn();
  return { ms: performance.now() - t0, status };
}

const postJson = (url, body) => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

/** A client that sends a large completion and goes away after `afterMs`, before its answer. */
function disconnectingClient(port, afterMs) {
  return new Promise((resolve) => {
    const body = JSON.stringify({ prompt: 'A client that will not wait', max_tokens: 64, n: 16, temperature: 1 });
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      setTimeout(() => socket.destroy(), afterMs);
    });
    socket.on('error', () => {});
    socket.on('close', resolve);
  });
}

/** Runs the mixed load for `seconds` against a fresh server in `root`; returns the report section. */
export async function mixedLoad({ root, seconds, model }) {
  const child = spawn(process.execPath, [main, '--model', model, '--data-dir', join(root, 'data'), '--output-path', join(root, 'mixed-out'), '--offline', '--port', '0', '--no-access-log'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  const url = await new Promise((resolve, reject) => {
    child.stderr.on('data', (d) => {
      stderr += d.toString();
      const m = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(stderr);
      if (m) resolve(m[1]);
    });
    child.on('exit', () => reject(new Error(`server exited early: ${stderr}`)));
  });
  // The server's whole-process plan (model, its threads at their heap caps, its modules); older servers: the model's.
  const plannedRam = /server RAM plan ([\d.]+) (GiB|MiB)/.exec(stderr) ?? /planned RAM ([\d.]+) (GiB|MiB)/.exec(stderr);
  const planBytes = plannedRam ? Number(plannedRam[1]) * (plannedRam[2] === 'GiB' ? 2 ** 30 : 2 ** 20) : null;
  const port = Number(new URL(url).port);
  await new Promise((r) => setTimeout(r, 500));
  const idle = rssOf(child.pid).now;
  const until = Date.now() + seconds * 1000;
  const smallMs = [];
  const jobSubmitMs = [];
  const smallStatus = {};
  const health = [];
  const other = { longPrompt: {}, hugePrompt: {}, jobs: {}, disconnects: 0 };
  const count = (bucket, status) => (bucket[status] = (bucket[status] ?? 0) + 1);
  let peak = 0;
  const loops = [];
  const errors = {};
  // A failed request is counted under its loop's name (with its cause), never the end of the bench.
  const skip = new Set((process.env.BENCH_MIXED_SKIP ?? '').split(',').filter(Boolean)); // e.g. jobs,disconnecting
  const loop = (fn, name = fn.name || 'other') =>
    skip.has(name) ||
    loops.push(
      (async () => {
        while (Date.now() < until) {
          try {
            await fn();
          } catch (err) {
            const key = `${name}: ${err.cause?.code ?? err.cause?.message ?? err.message}`;
            errors[key] = (errors[key] ?? 0) + 1;
          }
        }
      })(),
    );

  loop(async function healthz() {
    const r = await timed(async () => (await fetch(`${url}/healthz`)).status);
    health.push(r.ms);
    await new Promise((res) => setTimeout(res, 20));
  });
  loop(async function rss() {
    peak = Math.max(peak, rssOf(child.pid).peak);
    await new Promise((res) => setTimeout(res, 100));
  });
  for (let i = 0; i < 4; i++) {
    loop(async function small() {
      const r = await timed(async () => {
        const res = await postJson(`${url}/v1/completions`, { prompt: 'The quick brown fox', max_tokens: 4, temperature: 0 });
        await res.arrayBuffer();
        return res.status;
      });
      smallMs.push(r.ms);
      count(smallStatus, r.status);
    });
  }
  const longPrompt = 'hello world '.repeat(1400); // 16.8 k characters: tokenized, then over the 2048-token window
  for (let i = 0; i < 8; i++) {
    loop(async function longPrompt16k() {
      const res = await postJson(`${url}/v1/completions`, { prompt: longPrompt, max_tokens: 1 });
      await res.arrayBuffer();
      count(other.longPrompt, res.status);
    });
  }
  loop(async function hugePrompt() {
    const res = await postJson(`${url}/v1/completions`, { prompt: 'x'.repeat(1_000_000), max_tokens: 1 });
    await res.arrayBuffer();
    count(other.hugePrompt, res.status);
    await new Promise((r) => setTimeout(r, 500));
  });
  loop(async function disconnecting() {
    await disconnectingClient(port, 150);
    other.disconnects++;
  });
  // Jobs of many runs: submitted, left to run for a while, cancelled.
  loop(async function jobs() {
    const t0 = performance.now();
    const res = await postJson(`${url}/v1/runs`, { descriptions: Array(200).fill('synthetic_reasoning:mode=pattern_match'), max_eval_instances: 2 });
    jobSubmitMs.push(performance.now() - t0);
    const job = await res.json();
    count(other.jobs, res.status);
    await new Promise((r) => setTimeout(r, 3000));
    if (job.id) await (await fetch(`${url}/v1/runs/${job.id}`, { method: 'DELETE' })).arrayBuffer();
  });
  await Promise.all(loops);
  peak = Math.max(peak, rssOf(child.pid).peak);
  child.kill('SIGTERM');
  await new Promise((r) => child.on('exit', r));
  return {
    seconds,
    smallCompletions: { ...summary(smallMs), status: smallStatus },
    jobSubmit: summary(jobSubmitMs),
    healthz: { ...summary(health), goalP99Ms: 100 },
    errors,
    pressure: { clients: { small: 4, longPrompt: 8, hugePrompt: 1, disconnecting: 1, jobs: 1 }, ...other },
    serverRss: { idleBytes: idle, peakBytes: peak, growthBytes: peak - idle, plannedRamBytes: planBytes, peakOverPlan: planBytes ? Number((peak / planBytes).toFixed(2)) : null },
  };
}
