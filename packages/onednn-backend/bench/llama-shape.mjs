#!/usr/bin/env node
// A Llama-3.2-1B-shaped decoder layer (hidden 2048, 32/8 heads of 64, intermediate 8192; random weights) beside an
// opt-1.3b-shaped one, in the same run: prefill (batch × prompt rows, causal mask) and one decode step after it, with
// the KV cache growing in place (runCached), and the output head's GEMM (vocab × hidden) for the rows each step
// samples. Whole-model figures are layers × the layer time + the head (the embedding lookup is a copy).
//   node bench/llama-shape.mjs [--batch 8] [--prompt 512] [--dtype bf16] [--repeats 3] [--json FILE]
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { optConfigByName, ropeInvFreq } from '@flexhelm/engine';
import { median, nativeBinding, syntheticWeights } from './measure-backend.mjs';

const { values: o } = parseArgs({
  options: {
    batch: { type: 'string', default: '8' },
    prompt: { type: 'string', default: '512' },
    dtype: { type: 'string', default: 'bf16' },
    repeats: { type: 'string', default: '3' },
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
const opt = optConfigByName('opt-1.3b');

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

/** Prefill and decode milliseconds of one layer (runCached, the backend's path). */
async function layerTimes(runCached, kvRow) {
  const capacity = P + 64;
  const cacheK = alloc(B * capacity * kvRow);
  const cacheV = alloc(B * capacity * kvRow);
  const step = async (S, past) => {
    const x = alloc(B * S * llama.hidden).map((_, i) => Math.sin(i) * 0.5);
    const mask = causal(S, past);
    const positions = Int32Array.from({ length: B * S }, (_, i) => past + (i % S));
    const y = alloc(B * S * llama.hidden);
    return timed(() => runCached(x, mask, positions, B, S, past, y, cacheK, cacheV, capacity));
  };
  return { prefillMs: await step(P, 0), decodeMs: await step(1, P) };
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
const llamaLayer = await native.createLlamaLayer({ hidden: H, heads, kvHeads, headDim: D, ffn: I, eps: 1e-5 }, lw, { dtype });
const llamaTimes = await layerTimes((x, m, pos, b, s, p, y, k, v, cap) => llamaLayer.runCached(x, m, pos, invFreq, b, s, p, y, k, v, cap), KV);
llamaLayer.release();

const E = opt.hiddenSize;
const F = opt.ffnDim;
const ow = {};
const sizes = { qW: E * E, kW: E * E, vW: E * E, oW: E * E, fc1W: F * E, fc2W: E * F, fc1B: F };
for (const name of ['qW', 'qB', 'kW', 'kB', 'vW', 'vB', 'oW', 'oB', 'ln1W', 'ln1B', 'fc1W', 'fc1B', 'fc2W', 'fc2B', 'ln2W', 'ln2B']) {
  ow[name] = name.startsWith('ln') && name.endsWith('W') ? new Float32Array(E).fill(1) : syntheticWeights(sizes[name] ?? E);
}
const optLayer = await native.createLayer({ hidden: E, heads: opt.numAttentionHeads, ffn: F, preLayerNorm: true, eps: opt.layerNormEps }, ow, { dtype });
const optTimes = await layerTimes((x, m, _pos, b, s, p, y, k, v, cap) => optLayer.runCached(x, m, b, s, p, y, k, v, cap), E);
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
const report = {
  host: `${cpus()[0]?.model} × ${cpus().length}`, loadAverage: loadavg()[0], features: native.features(), batch: B, prompt: P, dtype, repeats,
  llama: await model(llama.name, llama.layers, llamaTimes, gemmFlops.llama, llama.vocab, H),
  opt: await model('opt-1.3b', opt.numHiddenLayers, optTimes, gemmFlops.opt, opt.vocabSize, E),
};
for (const m of [report.llama, report.opt]) {
  console.log(`${m.name} ${dtype} (B ${B}, prompt ${P}): layer prefill ${m.layer.prefillMs.toFixed(0)} ms (${m.layer.prefillGemmGflops.toFixed(0)} GEMM GFLOP/s), layer decode ${m.layer.decodeMs.toFixed(1)} ms, head ${m.headMs.toFixed(1)} ms; model prefill ${m.prefillTokensPerS.toFixed(1)} tok/s, decode step ${m.decodeStepMs.toFixed(0)} ms`);
}
console.log(`host ${report.host}, load average ${report.loadAverage.toFixed(1)}, oneDNN ${report.features.version} ${report.features.isa}`);
if (o.json) writeFileSync(o.json, `${JSON.stringify(report, null, 2)}\n`);
