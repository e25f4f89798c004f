#!/usr/bin/env node
// `pnpm bench:backend [--json FILE] [--batch 8] [--prompt-len 512] [--rounds 3] [--models opt-125m,opt-1.3b]
//                     [--e2e-prompt-len 128] [--gen-len 32] [--skip-e2e]`
// Side by side in one run:
//  1. prefill GEMM FLOP/s on the opt-1.3b layer shapes (M = batch × prompt): oneDNN bf16 / int8 / fp32 against
//     onnxruntime fp32 (weights prepacked as initializers, as the engine's layers hold them);
//  2. decode weight streaming (M = 1 and M = batch over the same shapes): GB/s of packed weights read per call;
//  3. end-to-end generation on random opt-125m / opt-1.3b weights (`OptEngine.dummy`): onnxruntime vs oneDNN.
// Medians over interleaved rounds (this kind of VM has bursts of host interference). Not a test.
import { renameSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { OptEngine, OrtBackend, generate, measureMatMulGflops, optConfigByName, SeededUniform } from '@flexhelm/engine';
import { OneDnnBackend, oneDnnStatus } from '../dist/index.js';

const { values } = parseArgs({
  options: {
    json: { type: 'string' },
    batch: { type: 'string', default: '8' },
    'prompt-len': { type: 'string', default: '512' },
    rounds: { type: 'string', default: '3' },
    models: { type: 'string', default: 'opt-125m,opt-1.3b' },
    'e2e-prompt-len': { type: 'string', default: '128' },
    'gen-len': { type: 'string', default: '32' },
    'skip-e2e': { type: 'boolean', default: false },
  },
});
const batch = Number(values.batch);
const promptLen = Number(values['prompt-len']);
const rounds = Number(values.rounds);
const log = (...a) => console.error(...a);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const status = oneDnnStatus();
if (!status.available) {
  log(`oneDNN backend unavailable: ${status.reason}`);
  process.exit(1);
}
const native = status.binding;
log(`oneDNN ${status.features.version}, isa ${status.features.isa}, bf16 ${status.features.bf16Impl}, int8 ${status.features.int8Impl}, ${status.features.threads} threads`);

function weights(k, n) {
  const w = new Float32Array(k * n);
  for (let j = 0; j < w.length; j++) w[j] = ((j * 7919) % 1000) / 20000 - 0.025;
  return w;
}

/** Median seconds per call of a oneDNN linear over `repeats` calls after a warm-up. */
async function timeLinear(linear, m, k, n, repeats) {
  const x = native.allocFloat32(m * k).fill(0.25);
  const y = native.allocFloat32(m * n);
  await linear.run(x, m, y);
  const times = [];
  for (let r = 0; r < repeats; r++) {
    const t0 = performance.now();
    await linear.run(x, m, y);
    times.push((performance.now() - t0) / 1000);
  }
  return median(times);
}

const c13 = optConfigByName('opt-1.3b');
const E = c13.hiddenSize;
const F = c13.ffnDim;
const shapes = [
  { name: 'qkv', k: E, n: 3 * E },
  { name: 'out_proj', k: E, n: E },
  { name: 'fc1', k: E, n: F },
  { name: 'fc2', k: F, n: E },
];

// ---- 1 + 2: GEMMs ------------------------------------------------------------------------------------------------
const M = batch * promptLen;
const layerFlops = shapes.reduce((a, s) => a + 2 * M * s.k * s.n, 0);
const dtypes = ['bf16', 'int8', 'fp32'];
const prefill = Object.fromEntries([...dtypes, 'onnxruntime_fp32'].map((d) => [d, []]));
const decode = Object.fromEntries(dtypes.map((d) => [d, { m1: [], mBatch: [] }]));
const packed = {};
const linears = {};
for (const dtype of dtypes) {
  linears[dtype] = [];
  for (const s of shapes) linears[dtype].push(await native.createLinear(weights(s.k, s.n), new Float32Array(s.n), s.k, s.n, { dtype }));
  packed[dtype] = linears[dtype].reduce((a, l) => a + l.packedBytes, 0);
}
log(`prefill GEMMs: opt-1.3b layer shapes at M = ${batch} × ${promptLen} = ${M} (${(layerFlops / 1e9).toFixed(0)} GFLOP per layer), ${rounds} rounds`);
for (let round = 0; round < rounds; round++) {
  for (const dtype of dtypes) {
    let seconds = 0;
    for (const [i, s] of shapes.entries()) seconds += await timeLinear(linears[dtype][i], M, s.k, s.n, 2);
    prefill[dtype].push(layerFlops / seconds / 1e9);
    let m1 = 0;
    let mb = 0;
    for (const [i, s] of shapes.entries()) {
      m1 += await timeLinear(linears[dtype][i], 1, s.k, s.n, 20);
      mb += await timeLinear(linears[dtype][i], batch, s.k, s.n, 20);
    }
    decode[dtype].m1.push(packed[dtype] / m1 / 1e9);
    decode[dtype].mBatch.push(packed[dtype] / mb / 1e9);
  }
  const ort = await measureMatMulGflops(shapes.map((s) => ({ m: M, k: s.k, n: s.n })), { repeats: 2 });
  prefill.onnxruntime_fp32.push(ort);
  log(`  round ${round + 1}: ${Object.entries(prefill).map(([d, xs]) => `${d} ${xs.at(-1).toFixed(0)}`).join(', ')} GFLOP/s`);
}
const ortDecodeGflops = await measureMatMulGflops(shapes.map((s) => ({ m: 1, k: s.k, n: s.n })), { repeats: 20 });
const fp32Bytes = shapes.reduce((a, s) => a + 4 * s.k * s.n, 0);
const flopsM1 = shapes.reduce((a, s) => a + 2 * s.k * s.n, 0);
const gemm = {
  shapes: shapes.map((s) => `${M}x${s.k}·${s.k}x${s.n}`),
  prefill_gflops: Object.fromEntries(Object.entries(prefill).map(([d, xs]) => [d, +median(xs).toFixed(1)])),
  decode_weight_gbps_m1: { ...Object.fromEntries(dtypes.map((d) => [d, +median(decode[d].m1).toFixed(1)])), onnxruntime_fp32: +((ortDecodeGflops * 1e9 * fp32Bytes) / flopsM1 / 1e9).toFixed(1) },
  decode_weight_gbps_m_batch: Object.fromEntries(dtypes.map((d) => [d, +median(decode[d].mBatch).toFixed(1)])),
  packed_mib_per_layer: Object.fromEntries(dtypes.map((d) => [d, +(packed[d] / 2 ** 20).toFixed(1)])),
};
gemm.bf16_speedup_vs_onnxruntime = +(gemm.prefill_gflops.bf16 / gemm.prefill_gflops.onnxruntime_fp32).toFixed(2);
gemm.int8_speedup_vs_onnxruntime = +(gemm.prefill_gflops.int8 / gemm.prefill_gflops.onnxruntime_fp32).toFixed(2);
log(`prefill: bf16 ${gemm.prefill_gflops.bf16} vs onnxruntime ${gemm.prefill_gflops.onnxruntime_fp32} GFLOP/s = ${gemm.bf16_speedup_vs_onnxruntime}×`);
log(`decode weight streaming (M=1): ${JSON.stringify(gemm.decode_weight_gbps_m1)} GB/s`);
for (const d of dtypes) linears[d] = undefined;

// ---- 3: end to end -----------------------------------------------------------------------------------------------
const e2e = [];
if (!values['skip-e2e']) {
  const e2ePrompt = Number(values['e2e-prompt-len']);
  const genLen = Number(values['gen-len']);
  for (const model of values.models.split(',')) {
    const config = optConfigByName(model);
    const rng = new SeededUniform(7);
    const requests = Array.from({ length: batch }, () => ({
      prompt: [2, ...Array.from({ length: e2ePrompt - 1 }, () => 4 + Math.floor(rng.next() * (config.vocabSize - 4)))],
      maxNewTokens: genLen,
      stopAtEos: false,
    }));
    const runs = {};
    for (const [name, make] of [
      ['onnxruntime_fp32', () => new OrtBackend()],
      ['onednn_bf16', () => new OneDnnBackend({ dtype: 'bf16' })],
      ['onednn_int8', () => new OneDnnBackend({ dtype: 'int8', experimental: true })],
    ]) {
      const t0 = performance.now();
      const engine = await OptEngine.dummy(config, { backend: make() });
      const loadS = (performance.now() - t0) / 1000;
      const timings = { prefillMs: 0, prefillTokens: 0, decodeMs: 0, decodeTokens: 0 };
      await generate(engine, requests, { maxBatchSize: batch, timings });
      await engine.close();
      const seconds = (timings.prefillMs + timings.decodeMs) / 1000;
      runs[name] = {
        load_s: +loadS.toFixed(1),
        prefill_s: +(timings.prefillMs / 1000).toFixed(2),
        decode_s: +(timings.decodeMs / 1000).toFixed(2),
        prefill_tokens_per_s: +(timings.prefillTokens / (timings.prefillMs / 1000)).toFixed(1),
        decode_tokens_per_s: +(timings.decodeTokens / (timings.decodeMs / 1000)).toFixed(1),
        generation_throughput: +((batch * genLen) / seconds).toFixed(2),
      };
      log(`  ${model} ${name}: ${JSON.stringify(runs[name])}`);
    }
    e2e.push({ model, batch, prompt_len: e2ePrompt, gen_len: genLen, runs });
  }
}

const report = {
  date: new Date().toISOString(),
  machine: { cpu: cpus()[0]?.model, cores: cpus().length, loadavg_at_end: loadavg().map((x) => +x.toFixed(2)), node: process.version },
  onednn: status.features,
  gemm,
  end_to_end: e2e,
};
const text = `${JSON.stringify(report, null, 2)}\n`;
if (values.json) {
  const tmp = `${values.json}.tmp-${process.pid}`;
  writeFileSync(tmp, text);
  renameSync(tmp, values.json);
  log(`report written to ${values.json}`);
} else process.stdout.write(text);
