#!/usr/bin/env node
// A Llama-3.2-1B-shaped decoder layer (hidden 2048, 32/8 heads of 64, intermediate 8192; random weights) beside an
// opt-1.3b-shaped one, in the same run: prefill (batch × prompt rows, causal mask) and one decode step after it, with
// the KV cache growing in place (runCached), and the output head's GEMM (vocab × hidden) for the rows each step
// samples. Whole-model figures are layers × the layer time + the head (the embedding lookup is a copy). With
// --engine, the whole Llama-3.2-1B-shaped model (random weights, Engine.dummy) also runs on OneDnnBackend: one
// prefill step of batch × prompt tokens and --gen decode steps.
//   node bench/llama-shape.mjs [--batch 8] [--prompt 512] [--dtype bf16] [--repeats 3] [--engine] [--gen 8] [--json FILE]
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { llamaDescriptionFromHf, Engine, descriptionByName, ropeInvFreq } from '@flexhelm/engine';
import { createOptLayer, OneDnnBackend } from '../dist/index.js';
import { median, nativeBinding, syntheticWeights } from './measure-backend.mjs';

const { values: o } = parseArgs({
  options: {
    batch: { type: 'string', default: '8' },
    prompt: { type: 'string', default: '512' },
    dtype: { type: 'string', default: 'bf16' },
    repeats: { type: 'string', default: '3' },
    engine: { type: 'boolean', default: false },
    gen: { type: 'string', default: '8' },
    json: { type: 'string' },
  },
});
const native = nativeBinding();
const B = Number(o.batch);
const P = Number(o.prompt);
const repeats = Number(o.repeats);
const dtype = o.dtype;
const alloc = (n) => native.allocFloat32(n).fill(0.01);

// Llama-3.2-1B (config.json of meta-llama/Llama-3.2-1B): 16 layers, rope_theta 500000, llama3 scaling.
const llama = { name: 'llama-3.2-1b', layers: 16, hidden: 2048, heads: 32, kvHeads: 8, headDim: 64, ffn: 8192, vocab: 128256 };
const opt = descriptionByName('opt-1.3b');

function causal(S, past) {
  const T = past + S;
  const m = alloc(B * S * T);
  for (let b = 0; b < B; b++) for (let s = 0; s < S; s++) for (let t = 0; t < T; t++) m[(b * S + s) * T + t] = t <= past + s ? 0 : -1e30;
  return m;
}

async function timed(run) {
  await run();
  const ms = [];
  for (let r = 0; r < repeats; r++) {
    const t0 = performance.now();
    await run();
    ms.push(performance.now() - t0);
  }
  return median(ms);
}

/** The prefill and decode runs of one layer (runCached, the backend's path), each returning its milliseconds. */
function layerRuns(runCached, kvRow) {
  const capacity = P + 64;
  const cacheK = alloc(B * capacity * kvRow);
  const cacheV = alloc(B * capacity * kvRow);
  const step = (S, past) => {
    const x = alloc(B * S * llama.hidden).map((_, i) => Math.sin(i) * 0.5);
    const mask = causal(S, past);
    const positions = Int32Array.from({ length: B * S }, (_, i) => past + (i % S));
    const y = alloc(B * S * llama.hidden);
    return async () => {
      const t0 = performance.now();
      await runCached(x, mask, positions, B, S, past, y, cacheK, cacheV, capacity);
      return performance.now() - t0;
    };
  };
  return { prefill: step(P, 0), decode: step(1, P) };
}

/**
 * Medians over interleaved rounds (Llama prefill, OPT prefill, Llama decode, OPT decode, …) after a warm-up of each:
 * on a shared machine the load drifts within seconds, and back-to-back blocks would give it to one model only.
 */
async function interleaved(runsByModel) {
  const names = Object.keys(runsByModel);
  const samples = Object.fromEntries(names.map((n) => [n, { prefill: [], decode: [] }]));
  for (const n of names) for (const kind of ['prefill', 'decode']) await runsByModel[n][kind]();
  for (let r = 0; r < repeats; r++) {
    for (const kind of ['prefill', 'decode']) for (const n of names) samples[n][kind].push(await runsByModel[n][kind]());
  }
  return Object.fromEntries(names.map((n) => [n, { prefillMs: median(samples[n].prefill), decodeMs: median(samples[n].decode) }]));
}

async function headMs(vocab, hidden, rows) {
  const head = await native.createLinear(syntheticWeights(vocab * hidden), null, hidden, vocab, { dtype });
  const x = alloc(rows * hidden);
  const y = alloc(rows * vocab);
  return timed(() => head.run(x, rows, y));
}

const invFreq = ropeInvFreq(llama.headDim, 500000, { kind: 'llama3', factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 8192 });
const { hidden: H, heads, kvHeads, headDim: D, ffn: I } = llama;
const Q = heads * D;
const KV = kvHeads * D;
const lw = {
  inNormW: new Float32Array(H).fill(1), postNormW: new Float32Array(H).fill(1),
  qW: syntheticWeights(H * Q), kW: syntheticWeights(H * KV), vW: syntheticWeights(H * KV), oW: syntheticWeights(Q * H),
  gateW: syntheticWeights(H * I), upW: syntheticWeights(H * I), downW: syntheticWeights(I * H),
};
const llamaLayer = await native.createDecoderLayer({ hidden: H, heads, kvHeads, headDim: D, ffn: I, eps: 1e-5 }, lw, { dtype });

const E = opt.hiddenSize;
const F = opt.mlp.intermediateSize;
const ow = {};
const sizes = { qW: E * E, kW: E * E, vW: E * E, oW: E * E, fc1W: F * E, fc2W: E * F, fc1B: F };
for (const name of ['qW', 'qB', 'kW', 'kB', 'vW', 'vB', 'oW', 'oB', 'ln1W', 'ln1B', 'fc1W', 'fc1B', 'fc2W', 'fc2B', 'ln2W', 'ln2B']) {
  ow[name] = name.startsWith('ln') && name.endsWith('W') ? new Float32Array(E).fill(1) : syntheticWeights(sizes[name] ?? E);
}
const optLayer = await createOptLayer(native, { hidden: E, heads: opt.attention.heads, ffn: F, preLayerNorm: true, eps: opt.norm.eps }, ow, { dtype });
const times = await interleaved({
  llama: layerRuns((x, m, pos, b, s, p, y, k, v, cap) => llamaLayer.runCached(x, m, pos, invFreq, b, s, p, y, k, v, cap), KV),
  opt: layerRuns((x, m, _pos, b, s, p, y, k, v, cap) => optLayer.runCached(x, m, b, s, p, y, k, v, cap), E),
});
llamaLayer.release();
optLayer.release();

// GEMM FLOPs per token and layer (attention's q·k and p·v not counted, as in bench:backend's GFLOP/s).
const gemmFlops = { llama: 2 * (H * (Q + 2 * KV) + Q * H + 3 * H * I), opt: 2 * (4 * E * E + 2 * E * F) };
async function model(name, layers, times, flopsPerToken, vocab, hidden) {
  // Prefill samples each row's last position; a decode step one row each.
  const head = await headMs(vocab, hidden, B);
  const prefillMs = layers * times.prefillMs + head;
  const decodeStepMs = layers * times.decodeMs + head;
  return {
    name, layers,
    layer: { prefillMs: times.prefillMs, decodeMs: times.decodeMs, prefillGemmGflops: (B * P * flopsPerToken) / (times.prefillMs * 1e6) },
    headMs: head,
    prefillMs, prefillTokensPerS: (B * P) / (prefillMs / 1000),
    decodeStepMs, decodeTokensPerS: B / (decodeStepMs / 1000),
  };
}
/** The whole model on OneDnnBackend: prefill of B × P random tokens, then `gen` decode steps of one token per row. */
async function wholeModel() {
  const d = llamaDescriptionFromHf({
    model_type: 'llama', _name_or_path: 'llama-3.2-1b-shaped', vocab_size: llama.vocab, hidden_size: H, num_hidden_layers: llama.layers, num_attention_heads: heads,
    num_key_value_heads: kvHeads, head_dim: D, intermediate_size: I, max_position_embeddings: 131072, rms_norm_eps: 1e-5, rope_theta: 500000, tie_word_embeddings: true,
    rope_scaling: { rope_type: 'llama3', factor: 32, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 },
  });
  const t0 = performance.now();
  const engine = await Engine.dummy(d, { backend: new OneDnnBackend({ dtype }), seed: 1 });
  const loadS = (performance.now() - t0) / 1000;
  const ids = Array.from({ length: B }, (_, b) => Array.from({ length: P }, (__, i) => 1 + ((b * 7919 + i * 104729) % (llama.vocab - 1))));
  const run = engine.startBatch(B);
  const t1 = performance.now();
  const hidden = await run.step(ids, ids.map((r) => r.map(() => 1)));
  await run.logits(hidden, P, ids.map((_, row) => ({ row, pos: P - 1 })));
  const prefillMs = performance.now() - t1;
  const steps = [];
  for (let s = 0; s < Number(o.gen); s++) {
    const t = performance.now();
    const h = await run.step(ids.map((r) => [r[s]]), ids.map(() => [1]));
    await run.logits(h, 1, ids.map((_, row) => ({ row, pos: 0 })));
    steps.push(performance.now() - t);
  }
  await run.close();
  await engine.close();
  return { loadS, prefillMs, prefillTokensPerS: (B * P) / (prefillMs / 1000), decodeStepMs: median(steps), decodeTokensPerS: B / (median(steps) / 1000) };
}

const report = {
  host: `${cpus()[0]?.model} × ${cpus().length}`, loadAverage: loadavg()[0], features: native.features(), batch: B, prompt: P, dtype, repeats,
  llama: await model(llama.name, llama.layers, times.llama, gemmFlops.llama, llama.vocab, H),
  opt: await model('opt-1.3b', opt.layers, times.opt, gemmFlops.opt, opt.vocabSize, E),
  ...(o.engine ? { llamaEngine: await wholeModel() } : {}),
};
for (const m of [report.llama, report.opt]) {
  console.log(`${m.name} ${dtype} (B ${B}, prompt ${P}): layer prefill ${m.layer.prefillMs.toFixed(0)} ms (${m.layer.prefillGemmGflops.toFixed(0)} GEMM GFLOP/s), layer decode ${m.layer.decodeMs.toFixed(1)} ms, head ${m.headMs.toFixed(1)} ms; model prefill ${m.prefillTokensPerS.toFixed(1)} tok/s, decode step ${m.decodeStepMs.toFixed(0)} ms`);
}
if (report.llamaEngine) {
  const e = report.llamaEngine;
  console.log(`llama-3.2-1b-shaped engine on OneDnnBackend ${dtype}: load ${e.loadS.toFixed(1)} s, prefill ${e.prefillTokensPerS.toFixed(1)} tok/s (${(e.prefillMs / 1000).toFixed(1)} s), decode step ${e.decodeStepMs.toFixed(0)} ms (median of ${o.gen})`);
}
console.log(`host ${report.host}, load average ${report.loadAverage.toFixed(1)}, oneDNN ${report.features.version} ${report.features.isa}`);
if (o.json) writeFileSync(o.json, `${JSON.stringify(report, null, 2)}\n`);
