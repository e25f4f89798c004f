#!/usr/bin/env node
// A partly offloaded model on each compute backend, side by side: Engine.dummy(model) under the OffloadingBackend
// with the given weight percents, greedy generation of `batch` prompts; prefill and decode rates per backend, and for
// oneDNN the packing of the streamed layer parts (what decides whether `auto` may pick oneDNN under offloading).
//   node bench/offload-decode.mjs [--model opt-1.3b] [--percent 50,50,100,0,100,0] [--batch 8] [--prompt 128]
//     [--gen 8] [--backends onnxruntime,onednn-bf16] [--json FILE]
// With --kv-compare: the compute-tier KV cache in place (InPlaceKvLayers, the default now) against the past → present
// copy path (the capability hidden), on one engine of the first backend, interleaved over --rounds rounds for each
// --batches size (identical prompts: the prefix is prefilled once and expanded, so the decode steps dominate), with
// the stream bandwidth measured each round and every decode step put against its floor (bytes read ÷ bandwidth).
//   node bench/offload-decode.mjs --kv-compare --percent 0,100,100,0,100,0 --batches 1,8 --prompt 512 --gen 8
//     --rounds 3 --backends onednn-bf16 --json FILE
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Engine, SeededUniform, generate, descriptionByName } from '@flexhelm/engine';
import { OrtBackend } from '@flexhelm/ort-backend';
import { OffloadingBackend, parsePolicy, percentsFromArgs } from '@flexhelm/offload';
import { benchHost, finishHost, hostLine } from '../../../tooling/scripts/bench-host.mjs';
import { OneDnnBackend, requireBinding } from '../dist/index.js';
import { streamBandwidth } from './stream-bandwidth.mjs';

const { values: o } = parseArgs({
  options: {
    model: { type: 'string', default: 'opt-1.3b' },
    percent: { type: 'string', default: '50,50,100,0,100,0' },
    batch: { type: 'string', default: '8' },
    prompt: { type: 'string', default: '128' },
    gen: { type: 'string', default: '8' },
    backends: { type: 'string', default: 'onnxruntime,onednn-bf16' },
    json: { type: 'string' },
    'kv-compare': { type: 'boolean', default: false },
    batches: { type: 'string', default: '1,8' },
    rounds: { type: 'string', default: '3' },
    // --kv-compare: which of the two to run (one alone shows what interleaving costs the other through the shared pool).
    modes: { type: 'string', default: 'in-place,copy' },
  },
});
// onednn-bf16-eager: streamed parts packed as they arrive, at every step (packAtRows 0; the default packs on the prompt only).
// onednn-bf16-f32-handover: the backend declines f16 weights, so the offloader widens its f16 copies to fp32 first (as
// before streamed layers read f16).
function fp32Handover(backend) {
  Object.defineProperty(backend, 'streamedLayers', { value: { ...backend.streamedLayers, acceptsF16: false } });
  return backend;
}
const makers = {
  'onednn-bf16-f32-handover': () => fp32Handover(new OneDnnBackend({ dtype: 'bf16' })),
  onnxruntime: () => new OrtBackend(),
  'onednn-bf16': () => new OneDnnBackend({ dtype: 'bf16' }),
  'onednn-bf16-eager': () => new OneDnnBackend({ dtype: 'bf16', packAtRows: 0 }),
  'onednn-fp32': () => new OneDnnBackend({ dtype: 'fp32' }),
};
const config = descriptionByName(o.model);
const batch = Number(o.batch);
const promptLen = Number(o.prompt);
const genLen = Number(o.gen);
const percents = o.percent.split(',').map(Number);
const rng = new SeededUniform(7);
const requests = Array.from({ length: batch }, () => ({
  prompt: [2, ...Array.from({ length: promptLen - 1 }, () => 4 + Math.floor(rng.next() * (config.vocabSize - 4)))],
  maxNewTokens: genLen,
  stopAtEos: false,
}));
if (o['kv-compare']) {
  await kvCompare();
  process.exit(0);
}
const report = { model: o.model, percent: percents, batch, prompt_len: promptLen, gen_len: genLen, load_before: loadavg()[0], runs: {} };
for (const name of o.backends.split(',')) {
  const dir = mkdtempSync(join(tmpdir(), 'flexhelm-offload-decode-'));
  const inner = makers[name]();
  const policy = parsePolicy({ gpuBatchSize: batch, numGpuBatches: 1, ...percentsFromArgs(percents) });
  const backend = new OffloadingBackend(inner, policy, { offloadDir: dir });
  const t0 = performance.now();
  const engine = await Engine.dummy(config, { backend });
  const loadS = (performance.now() - t0) / 1000;
  // One untimed warm-up at the same shape (first-touch memory, primitive creation), then the measured run.
  await generate(engine, requests, { maxBatchSize: batch });
  const packed = inner.packing ? { ...inner.packing } : undefined;
  const timings = { prefillMs: 0, prefillTokens: 0, decodeMs: 0, decodeTokens: 0 };
  await generate(engine, requests, { maxBatchSize: batch, timings });
  const run = {
    streamed_layers: backend.summary().streamedLayers,
    load_s: +loadS.toFixed(1),
    prefill_s: +(timings.prefillMs / 1000).toFixed(2),
    decode_s: +(timings.decodeMs / 1000).toFixed(2),
    prefill_tokens_per_s: +(timings.prefillTokens / (timings.prefillMs / 1000)).toFixed(1),
    decode_tokens_per_s: +(timings.decodeTokens / (timings.decodeMs / 1000)).toFixed(2),
    decode_step_ms: +(timings.decodeMs / Math.max(1, genLen - 1)).toFixed(0),
    generation_throughput: +((batch * genLen) / ((timings.prefillMs + timings.decodeMs) / 1000)).toFixed(2),
  };
  if (packed) {
    const layers = inner.packing.layers - packed.layers;
    run.packing_ms_per_layer = +((inner.packing.ms - packed.ms) / layers).toFixed(1);
    run.packed_mib_per_layer = +((inner.packing.packedBytes - packed.packedBytes) / layers / 2 ** 20).toFixed(1);
  }
  report.runs[name] = run;
  console.log(`${name}: ${JSON.stringify(run)}`);
  await engine.close();
  rmSync(dir, { recursive: true, force: true });
}
report.load_after = loadavg()[0];
if (o.json) writeFileSync(o.json, `${JSON.stringify(report, null, 2)}\n`);

/** In place vs the copy path, interleaved on one engine (see the header). */
async function kvCompare() {
  const host = benchHost();
  const native = requireBinding();
  const name = o.backends.split(',')[0];
  const batches = o.batches.split(',').map(Number);
  const rounds = Number(o.rounds);
  const dir = mkdtempSync(join(tmpdir(), 'flexhelm-offload-decode-'));
  const inner = makers[name]();
  const inPlaceKv = inner.inPlaceKv;
  if (!inPlaceKv) throw new Error(`${name} has no in-place KV layers to compare`);
  // One micro-batch up to the largest batch; the offloader reads `inPlaceKv` when each batch opens its cache.
  const policy = parsePolicy({ gpuBatchSize: Math.max(...batches), numGpuBatches: 1, ...percentsFromArgs(percents) });
  const backend = new OffloadingBackend(inner, policy, { offloadDir: dir });
  const engine = await Engine.dummy(config, { backend });
  const allModes = {
    'in-place': () => Object.defineProperty(inner, 'inPlaceKv', { value: inPlaceKv, configurable: true }),
    copy: () => Object.defineProperty(inner, 'inPlaceKv', { value: undefined, configurable: true }),
  };
  const modes = Object.fromEntries(o.modes.split(',').map((m) => [m, allModes[m]]));
  if (Object.values(modes).some((m) => !m)) throw new Error(`--modes takes in-place and/or copy, got ${o.modes}`);
  const prompt = requests[0].prompt;
  // Each step ends with one head call: the gaps between their ends are the decode steps one by one (a batch's first
  // decode step also pays for fresh cache memory where a path does not reuse it; the median leaves that out).
  const headEnds = [];
  const head = backend.head.bind(backend);
  backend.head = async (...args) => {
    const r = await head(...args);
    headEnds.push(performance.now());
    return r;
  };
  const run = async (mode, B) => {
    modes[mode]();
    const timings = { prefillMs: 0, prefillTokens: 0, decodeMs: 0, decodeTokens: 0 };
    const before = { ...backend.stats };
    headEnds.length = 0;
    await generate(engine, Array.from({ length: B }, () => ({ prompt, maxNewTokens: genLen, stopAtEos: false })), { maxBatchSize: B, timings });
    const steps = headEnds.slice(1).map((t, i) => t - headEnds[i]);
    return { stepMs: median(steps), meanStepMs: timings.decodeMs / (genLen - 1), firstStepMs: steps[0], stallMs: backend.stats.stallMs - before.stallMs };
  };
  const bandwidthGBs = streamBandwidth(native);
  // Warm-up: each (mode, batch) once (first-touch memory, primitives).
  for (const B of batches) for (const mode of Object.keys(modes)) await run(mode, B);
  const samples = {};
  const bandwidth = [];
  for (let round = 0; round < rounds; round++) {
    for (const B of batches) {
      // ABBA: each mode first in every other round.
      const order = round % 2 ? Object.keys(modes).reverse() : Object.keys(modes);
      for (const mode of order) {
        // The bandwidth right before each run: other tenants move it a lot, so each step is put against its own.
        const gbs = await bandwidthGBs();
        bandwidth.push(gbs);
        const r = { ...(await run(mode, B)), gbs };
        const key = `${mode}@${B}`;
        samples[key] = [...(samples[key] ?? []), r];
        console.error(`round ${round + 1}/${rounds} batch ${B} ${mode}: step ${r.stepMs.toFixed(1)} ms (mean ${r.meanStepMs.toFixed(1)}, first ${r.firstStepMs.toFixed(1)}; weight stalls ${r.stallMs.toFixed(0)} ms), bandwidth before ${gbs.toFixed(1)} GB/s`);
      }
    }
  }
  // Bytes a decode step reads with 16-bit weights and a bf16 cache: the streamed layers' f16 matrices (fp32 vectors),
  // the resident bf16 head, and the past K and V (2 bytes each; the copy path's fp32 cache reads twice that).
  const d = config;
  const layerBytes = d.layerTensors.reduce((a, t) => a + t.shape.reduce((x, y) => x * y, 1) * (t.shape.length >= 2 ? 2 : 4), 0);
  const headBytes = d.vocabSize * d.embedding.dim * 2;
  const past = promptLen + (genLen - 2) / 2; // mean past over the decode steps
  const bw = median(bandwidth) * 1e9;
  const cases = [];
  for (const B of batches) {
    const kvBytes = d.layers * B * 2 * past * d.attention.kvHeads * d.attention.headDim * 2;
    const bytes = d.layers * layerBytes + headBytes + kvBytes;
    const floorMs = (bytes / bw) * 1000;
    for (const mode of Object.keys(modes)) {
      const list = samples[`${mode}@${B}`];
      const step = median(list.map((r) => r.stepMs));
      // Each run against the bandwidth measured just before it, then the median.
      const ratios = list.map((r) => r.stepMs / ((bytes / (r.gbs * 1e9)) * 1000));
      cases.push({
        mode,
        batch: B,
        // Median of the decode steps of a run (median over rounds); the mean with the first step, and the first alone.
        decode_step_ms: +step.toFixed(1),
        decode_step_ms_rounds: list.map((r) => +r.stepMs.toFixed(1)),
        mean_decode_step_ms_rounds: list.map((r) => +r.meanStepMs.toFixed(1)),
        first_decode_step_ms_rounds: list.map((r) => +r.firstStepMs.toFixed(1)),
        bandwidth_before_rounds_gbs: list.map((r) => +r.gbs.toFixed(1)),
        weight_stall_ms_per_run: +median(list.map((r) => r.stallMs)).toFixed(0),
        step_bytes_16bit: Math.round(bytes),
        floor_ms_median_bandwidth: +floorMs.toFixed(1),
        step_over_floor_median_bandwidth: +(step / floorMs).toFixed(2),
        step_over_floor_own_bandwidth: +median(ratios).toFixed(2),
      });
    }
  }
  await engine.close();
  rmSync(dir, { recursive: true, force: true });
  const done = finishHost(host);
  const report = {
    bench: 'offload-decode --kv-compare',
    host: done,
    model: o.model,
    backend: name,
    percent: percents,
    prompt_len: promptLen,
    gen_len: genLen,
    rounds,
    stream_bandwidth_gbs: +(bw / 1e9).toFixed(1),
    stream_bandwidth_rounds_gbs: bandwidth.map((v) => +v.toFixed(1)),
    cases,
  };
  console.log(hostLine(done));
  for (const c of cases) console.log(`batch ${c.batch} ${c.mode}: step ${c.decode_step_ms} ms, ÷ floor ${c.step_over_floor_own_bandwidth} (own bandwidth), ${c.step_over_floor_median_bandwidth} (median ${report.stream_bandwidth_gbs} GB/s)`);
  if (o.json) writeFileSync(o.json, `${JSON.stringify(report, null, 2)}\n`);
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}
