#!/usr/bin/env node
// `pnpm bench:helm [--quick] [--instances 100] [--trials 3] [--config opt-1.3b] [--computes bf16,fp32] [--peer-batch 4] [--gpu-batch-size 16] [--json FILE] [--work-dir DIR]`
// One HELM run end to end against @huggingface/transformers: `flexhelm run -d mmlu:subject=philosophy,model=text`
// (--instances eval instances, --trials in-context draws) on a random OPT checkpoint of the given shape made with
// `flexhelm make-model`, MMLU's data.tar served from a loopback HTTP server in the real file layout (synthetic
// philosophy questions, the real split sizes), then the very same requests, read from the run's scenario_state.json,
// through @huggingface/transformers on the `flexhelm export-onnx` copy, one request batch at a time
// (packages/engine/bench/helm-peer.mjs). Reports both wall times and ours ÷ peer for each compute dtype: the runs
// go ours (first dtype), peer, ours (second dtype), so host noise falls on both sides.
// `--quick`: a tiny model and 4 instances, 1 trial — the plumbing only, for a smoke test. Not a test: the numbers
// depend on the machine and its load (run it under /tmp/flexhelm-bench.lock). Needs `pnpm build`.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { LoopbackFileServer, tarArchive } from '@flexhelm/downloads/testing';
import { benchHost, finishHost, hostLine } from '../../../tooling/scripts/bench-host.mjs';

const cli = fileURLToPath(new URL('../dist/main.js', import.meta.url));
const peerScript = fileURLToPath(new URL('../../../packages/engine/bench/helm-peer.mjs', import.meta.url));
/** The quick mode's model: the smallest shape that still gets the OPT tokenizer files (vocabulary ≥ 50265). */
export const QUICK_CONFIG = { hiddenSize: 32, numHiddenLayers: 2, numAttentionHeads: 4, ffnDim: 64, vocabSize: 50272, maxPositionEmbeddings: 2050 };
/** MMLU philosophy's split sizes (dev, val, test), so instance sampling sees the real pool. */
const PHILOSOPHY_ROWS = { dev: 5, val: 34, test: 311 };
const DTYPE_GOALS = { bf16: 0.15, fp32: 0.5 };

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    instances: { type: 'string' },
    trials: { type: 'string' },
    config: { type: 'string' },
    computes: { type: 'string', default: 'bf16,fp32' },
    'peer-batch': { type: 'string', default: '4' },
    'gpu-batch-size': { type: 'string', default: '16' },
    json: { type: 'string' },
    'work-dir': { type: 'string' },
  },
});
const quick = values.quick;
const instances = Number(values.instances ?? (quick ? 4 : 100));
const trials = Number(values.trials ?? (quick ? 1 : 3));
const config = values.config ?? (quick ? JSON.stringify(QUICK_CONFIG) : 'opt-1.3b');
const computes = values.computes.split(',').filter(Boolean);
for (const [flag, n] of [['--instances', instances], ['--trials', trials], ['--peer-batch', Number(values['peer-batch'])], ['--gpu-batch-size', Number(values['gpu-batch-size'])]]) {
  if (!Number.isInteger(n) || n < 1) usage(`${flag} must be a whole number ≥ 1`);
}
for (const c of computes) if (!(c in DTYPE_GOALS)) usage(`--computes takes bf16 and/or fp32, got '${c}'`);
const log = (...a) => console.error(...a);

function usage(message) {
  console.error(`bench-helm: ${message}`);
  process.exit(2);
}

/** Deterministic filler words: the questions need no meaning, only the length and shape of real MMLU rows. */
const WORDS = 'the of a which is that moral argument view according to theory claim reason knowledge virtue mind free will good justice belief truth being duty nature'.split(' ');
function sentence(seed, words) {
  let x = seed;
  const out = [];
  for (let i = 0; i < words; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    out.push(WORDS[x % WORDS.length]);
  }
  return out.join(' ');
}

/** data.tar in MMLU's layout: data/{dev,val,test}/philosophy_{split}.csv, rows `question,A,B,C,D,letter`. */
export function philosophyTar() {
  const files = {};
  let seed = 1;
  for (const [split, rows] of Object.entries(PHILOSOPHY_ROWS)) {
    const lines = [];
    for (let r = 0; r < rows; r++) {
      seed += 7;
      const answers = [0, 1, 2, 3].map((a) => sentence(seed * 13 + a, 3 + ((seed + a) % 5)));
      lines.push([`${sentence(seed, 12 + (seed % 20))}?`, ...answers, 'ABCD'[seed % 4]].join(','));
    }
    files[`data/${split}/philosophy_${split}.csv`] = `${lines.join('\n')}\n`;
  }
  return tarArchive(files);
}

/** A child node process; async, because the loopback data server runs in this process and must keep answering. */
async function run(args, what, env = process.env) {
  const t0 = performance.now();
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d) => {
    stdout += d;
  });
  child.stderr.setEncoding('utf8').on('data', (d) => {
    stderr += d;
  });
  const [status, signal] = await new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, sig) => resolve([code, sig]));
  });
  const wall = (performance.now() - t0) / 1000;
  if (status !== 0) throw new Error(`${what} failed (${signal ?? `exit ${status}`}): ${stderr.trim().split('\n').slice(-3).join(' | ')}`);
  return { wall, stdout, stderr };
}

/** `timing: <phase> <ms> ms …` lines (FLEXHELM_TIMINGS) → {phase: ms}. */
export function phaseTimings(stderr) {
  const phases = {};
  for (const m of stderr.matchAll(/^timing: (\S+) (\d+) ms/gm)) phases[m[1]] = Number(m[2]);
  return phases;
}

/** The policy the run used (`--percent auto` searches one): the session's `model … ; policy <flags>; planned …` line. */
function runPolicy(stderr) {
  return /^model .*; policy (.+?); planned /m.exec(stderr)?.[1] ?? null;
}

/** The one scenario_state.json under an output folder. */
function scenarioState(out) {
  const runs = join(out, 'runs', 'v1');
  const names = readdirSync(runs);
  if (names.length !== 1) throw new Error(`expected one run in ${runs}, found ${names.join(', ')}`);
  return { name: names[0], state: JSON.parse(readFileSync(join(runs, names[0], 'scenario_state.json'), 'utf8')) };
}

const host = benchHost();
log(`host: ${hostLine(host)}`);
const work = values['work-dir'] ?? mkdtempSync(join(tmpdir(), 'flexhelm-bench-helm-'));
mkdirSync(work, { recursive: true });
const server = await LoopbackFileServer.start();
const report = { kind: 'bench-helm', host, quick, description: 'mmlu:subject=philosophy,model=text', instances, trials, config, peer_batch: Number(values['peer-batch']), gpu_batch_size: Number(values['gpu-batch-size']), runs: [] };
try {
  server.set('/people.eecs.berkeley.edu/~hendrycks/data.tar', philosophyTar());
  const modelDir = join(work, 'model');
  const peerDir = join(work, 'peer-models');
  const t0 = performance.now();
  // A --work-dir kept from an earlier run of the same config keeps its model and ONNX copy (both are made from seed 1).
  const made = join(work, 'made-config.json');
  const reuse = existsSync(made) && readFileSync(made, 'utf8') === config;
  if (!reuse) {
    rmSync(made, { force: true });
    rmSync(modelDir, { recursive: true, force: true });
    rmSync(peerDir, { recursive: true, force: true });
    await run([cli, 'make-model', '--config', config, '--out', modelDir, '--seed', '1', '--dtype', 'f16'], 'make-model');
    await run([cli, 'export-onnx', '--model', modelDir, '--out', join(peerDir, 'peer')], 'export-onnx');
    writeFileSync(made, config);
  }
  // The data once, untimed: every timed run then reads the same unpacked copy (the peer reads no data at all).
  await run([cli, 'instances', '-d', report.description, '--counts', '--data-mirror', server.baseUrl, '--data-dir', join(work, 'data'), '-o', join(work, 'out-instances')], 'flexhelm instances (data download)');
  // The machine profile the policy search reads, also untimed: `flexhelm run` measures it on first use only.
  await run([cli, 'profile', '--quick', '--path', modelDir, '--data-dir', join(work, 'data')], 'flexhelm profile');
  log(`model, its ONNX copy, the data and the machine profile ready in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  const modelName = quick || values.config?.startsWith('{') ? 'local/bench-opt' : `facebook/${config}`;
  const ours = async (compute) => {
    const out = join(work, `out-${compute}`);
    // A fresh output folder: its request cache would otherwise answer a rerun in a kept --work-dir.
    rmSync(out, { recursive: true, force: true });
    const args = [cli, 'run', '-d', report.description, '--model', modelName, '--path', modelDir, '-m', String(instances), '-t', String(trials)];
    args.push('--data-mirror', server.baseUrl, '--data-dir', join(work, 'data'), '-o', out, '--compute-dtype', compute, '--gpu-batch-size', values['gpu-batch-size'], '--num-gpu-batches', '1');
    // FLEXHELM_TIMINGS=1: the run's fixed cost (startup, session, engine load by phase, first batch) in the report.
    const r = await run(args, `flexhelm run --compute-dtype ${compute}`, { ...process.env, FLEXHELM_TIMINGS: '1' });
    const { name, state } = scenarioState(out);
    const phases = phaseTimings(r.stderr);
    log(`ours (${compute}): ${r.wall.toFixed(1)} s, run ${name}, ${state.request_states.length} requests; engine load ${((phases['engine.load'] ?? 0) / 1000).toFixed(1)} s, session open ${((phases['session.start'] ?? 0) / 1000).toFixed(1)} s`);
    return { compute, wall_s: +r.wall.toFixed(2), run_name: name, requests: state.request_states.map((s) => s.request), backend_notice: r.stderr.split('\n').find((l) => l.startsWith('backend:')) ?? null, policy: runPolicy(r.stderr), phases_ms: phases };
  };
  const peer = async (requests) => {
    const file = join(work, 'requests.json');
    writeFileSync(file, JSON.stringify(requests));
    const r = await run([peerScript, peerDir, 'peer', file, values['peer-batch']], 'the @huggingface/transformers peer');
    const out = JSON.parse(r.stdout.trim().split('\n').pop());
    log(`peer: ${r.wall.toFixed(1)} s (${out.distinct} distinct of ${out.requests} requests; load ${out.load_s} s, generate ${out.generate_s} s)`);
    return { ...out, wall_s: +r.wall.toFixed(2) };
  };
  // ours, peer, ours: the peer sits between our two runs.
  const results = [];
  let peerResult;
  for (const compute of computes) {
    const r = await ours(compute);
    results.push(r);
    if (!peerResult) {
      peerResult = await peer(r.requests);
      report.peer = peerResult;
    }
  }
  const sameRequests = results.every((r) => JSON.stringify(r.requests) === JSON.stringify(results[0].requests));
  if (!sameRequests) throw new Error('the runs made different requests; the comparison needs the same ones');
  for (const r of results) {
    const ratio = +(r.wall_s / peerResult.wall_s).toFixed(3);
    report.runs.push({ compute: r.compute, run_name: r.run_name, requests: r.requests.length, backend_notice: r.backend_notice, policy: r.policy, phases_ms: r.phases_ms, wall_s: r.wall_s, peer_wall_s: peerResult.wall_s, prompt_tokens: peerResult.prompt_tokens, prompt_tokens_per_s: +(peerResult.prompt_tokens / r.wall_s).toFixed(1), peer_prompt_tokens_per_s: +(peerResult.prompt_tokens / peerResult.wall_s).toFixed(1), ratio_ours_over_peer: ratio, goal: DTYPE_GOALS[r.compute], meets_goal: ratio <= DTYPE_GOALS[r.compute] });
    log(`${r.compute}: ours ${r.wall_s} s ÷ peer ${peerResult.wall_s} s = ${ratio} (goal ≤ ${DTYPE_GOALS[r.compute]})`);
  }
} finally {
  await server.close();
  if (!values['work-dir']) rmSync(work, { recursive: true, force: true });
}
report.host = finishHost(host);
const text = `${JSON.stringify(report, null, 2)}\n`;
if (values.json) {
  writeFileSync(`${values.json}.tmp`, text);
  renameSync(`${values.json}.tmp`, values.json);
  log(`wrote ${values.json}`);
} else process.stdout.write(text);
