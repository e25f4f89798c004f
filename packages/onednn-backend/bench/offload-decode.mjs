#!/usr/bin/env node
// A partly offloaded model on each compute backend, side by side: OptEngine.dummy(model) under the OffloadingBackend
// with the given weight percents, greedy generation of `batch` prompts; prefill and decode rates per backend, and for
// oneDNN the packing of the streamed layer parts (what decides whether `auto` may pick oneDNN under offloading).
//   node bench/offload-decode.mjs [--model opt-1.3b] [--percent 50,50,100,0,100,0] [--batch 8] [--prompt 128]
//     [--gen 8] [--backends onnxruntime,onednn-bf16] [--json FILE]
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { OptEngine, OrtBackend, SeededUniform, generate, optConfigByName } from '@flexhelm/engine';
import { OffloadingBackend, parsePolicy, percentsFromArgs } from '@flexhelm/offload';
import { OneDnnBackend } from '../dist/index.js';

const { values: o } = parseArgs({
  options: {
    model: { type: 'string', default: 'opt-1.3b' },
    percent: { type: 'string', default: '50,50,100,0,100,0' },
    batch: { type: 'string', default: '8' },
    prompt: { type: 'string', default: '128' },
    gen: { type: 'string', default: '8' },
    backends: { type: 'string', default: 'onnxruntime,onednn-bf16' },
    json: { type: 'string' },
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
const config = optConfigByName(o.model);
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
const report = { model: o.model, percent: percents, batch, prompt_len: promptLen, gen_len: genLen, load_before: loadavg()[0], runs: {} };
for (const name of o.backends.split(',')) {
  const dir = mkdtempSync(join(tmpdir(), 'flexhelm-offload-decode-'));
  const inner = makers[name]();
  const policy = parsePolicy({ gpuBatchSize: batch, numGpuBatches: 1, ...percentsFromArgs(percents) });
  const backend = new OffloadingBackend(inner, policy, { offloadDir: dir });
  const t0 = performance.now();
  const engine = await OptEngine.dummy(config, { backend });
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
