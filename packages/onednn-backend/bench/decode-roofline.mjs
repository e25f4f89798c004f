#!/usr/bin/env node
// Decode against the memory-bandwidth limit: a decode step reads every weight once plus the KV cache, so its floor is
// (bytes read per step ÷ stream bandwidth). Measures this machine's stream bandwidth (native read on every core) and
// opt-1.3b-shaped decode layers after a prompt, per case, interleaved round by round so host noise hits every case:
//   resident       packed bf16 weights, KV cache in bf16 (what a bf16 backend keeps now)
//   resident-kv32  the same layer with a float32 KV cache (what it kept before)
//   streamed       a streamed (offloaded) layer as the backend gets it: fp32 [in, out] arrays multiplied unpacked
//                  (packAtRows) by the one-pass kernel, KV passed in and copied out (the per-layer path OffloadingBackend
//                  drives)
//   streamed-onednn  the same with oneDNN's fp32 GEMM on the plain layout (skinnyGemm: false; what it used before)
//   streamed-f16   a streamed layer handed its f16 copies (what the offloader keeps in pinned memory or reads from disk),
//                  multiplied as they are by the few-row kernel; KV as in `streamed`
//   streamed-f16-kv16  the same layer over a bf16 KV cache that grows in place (runCached)
// Each case's floor counts the bytes it reads as stored: its weights (fp32, f16 or packed bf16) and its KV cache.
// A step = numHiddenLayers layers + the bf16 output head (resident); ratio = step time ÷ (step bytes ÷ bandwidth).
// --model llama-3.2-1b: Llama-3.2-1B-shaped layers (GQA 32/8 heads of 64, SwiGLU 8192; the tied 128256-row head),
// resident cases only.
//   node bench/decode-roofline.mjs [--model opt-1.3b|llama-3.2-1b] [--batches 1,8] [--cases resident,streamed-f16,…] [--past 512] [--rounds 5] [--repeats 5] [--json FILE]
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { descriptionByName, ropeInvFreq, transposeLayerWeights } from '@flexhelm/engine';
import { createOptLayer } from '../dist/index.js';
import { median, nativeBinding, syntheticWeights } from './measure-backend.mjs';
import { streamBandwidth } from './stream-bandwidth.mjs';

const { values: o } = parseArgs({
  options: {
    model: { type: 'string', default: 'opt-1.3b' },
    batches: { type: 'string', default: '1,8' },
    cases: { type: 'string' },
    past: { type: 'string', default: '512' },
    rounds: { type: 'string', default: '5' },
    repeats: { type: 'string', default: '5' },
    json: { type: 'string' },
  },
});
const native = nativeBinding();
const features = native.features();
// Llama-3.2-1B (config.json of meta-llama/Llama-3.2-1B): 16 layers, 32 query / 8 kv heads of 64, tied embeddings.
const llama = o.model === 'llama-3.2-1b' ? { hidden: 2048, heads: 32, kvHeads: 8, headDim: 64, ffn: 8192 } : undefined;
const c = descriptionByName(o.model);
const E = c.hiddenSize;
const F = c.mlp.intermediateSize;
const H = c.attention.heads;
const D = E / H;
// K (or V) values per token: kv heads × head size.
const KVE = llama ? llama.kvHeads * llama.headDim : E;
const P = Number(o.past);
const batches = o.batches.split(',').map(Number);
const rounds = Number(o.rounds);
const repeats = Number(o.repeats);
const loadStart = loadavg();
const started = new Date().toISOString();
const log = (...a) => console.error(...a);

const shape = { hidden: E, heads: H, ffn: F, preLayerNorm: c.norm.placement === 'pre', eps: c.norm.eps };
const sizes = { qW: E * E, kW: E * E, vW: E * E, oW: E * E, fc1W: F * E, fc2W: E * F, fc1B: F };
const names = ['qW', 'qB', 'kW', 'kB', 'vW', 'vB', 'oW', 'oB', 'ln1W', 'ln1B', 'fc1W', 'fc1B', 'fc2W', 'fc2B', 'ln2W', 'ln2B'];
const layerWeights = (seed) => Object.fromEntries(names.map((n) => [n, n.startsWith('ln') && n.endsWith('W') ? new Float32Array(E).fill(1) : syntheticWeights(sizes[n] ?? E).map((v) => v * (1 + seed / 10))]));
// fp32 bytes of the linear weights a streamed layer's decode GEMMs read (biases and LayerNorms are noise beside them).
const fp32WeightBytes = 4 * (4 * E * E + 2 * E * F);
const matrices = ['qW', 'kW', 'vW', 'oW', 'fc1W', 'fc2W'];

/** float → IEEE half bits, rounded to nearest even (normal range: the synthetic weights are small). */
const f16Scratch = new Float32Array(1);
const f16Word = new Uint32Array(f16Scratch.buffer);
function f16Bits(v) {
  f16Scratch[0] = v;
  const u = f16Word[0];
  const sign = (u >>> 16) & 0x8000;
  const exp = ((u >>> 23) & 0xff) - 112;
  if (exp <= 0) return sign; // below the normal range: flushed (the synthetic weights never get there)
  if (exp >= 31) return sign | 0x7c00;
  const h = (exp << 10) | ((u >>> 13) & 0x3ff);
  const rem = u & 0x1fff;
  return sign | (rem > 0x1000 || (rem === 0x1000 && h & 1) ? h + 1 : h);
}
/** The layer's weight matrices as f16 (a streamed layer's host or disk copy); vectors stay fp32. */
function halfWeights(t) {
  const out = { ...t };
  for (const k of matrices) {
    const f = native.allocFloat32(Math.ceil(t[k].length / 2));
    const h = new Uint16Array(f.buffer, f.byteOffset, t[k].length);
    for (let i = 0; i < h.length; i++) h[i] = f16Bits(t[k][i]);
    out[k] = h;
  }
  return out;
}

// Two layers used in turn, so a step never finds the previous one's weights in the last-level cache.
log(`packing 2 resident${llama ? '' : ' and 2 streamed'} ${o.model} layers…`);
const resident = [];
const streamed = [];
const streamedOneDnn = [];
const streamedF16 = [];
/** A Llama layer's weights ([in, out]); the values do not change its speed. */
const llamaWeights = (seed) => {
  const { hidden: h, heads, kvHeads, headDim, ffn } = llama;
  const w = (n) => syntheticWeights(n).map((v) => v * (1 + seed / 10));
  return {
    inNormW: new Float32Array(h).fill(1), postNormW: new Float32Array(h).fill(1),
    qW: w(h * heads * headDim), kW: w(h * kvHeads * headDim), vW: w(h * kvHeads * headDim), oW: w(heads * headDim * h),
    gateW: w(h * ffn), upW: w(h * ffn), downW: w(ffn * h),
  };
};
const invFreq = llama ? ropeInvFreq(llama.headDim, 500000, { kind: 'llama3', factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 8192 }) : undefined;
for (let i = 0; llama && i < 2; i++) resident.push(await native.createDecoderLayer({ ...llama, eps: 1e-5 }, llamaWeights(i), { dtype: 'bf16' }));
for (let i = 0; !llama && i < 2; i++) {
  const w = layerWeights(i);
  resident.push(await createOptLayer(native, shape, w, { dtype: 'bf16' }));
  const t = transposeLayerWeights(c, w);
  streamed.push(await createOptLayer(native, shape, t, { dtype: 'bf16', transposed: true, recycle: true, packAtRows: 256 }));
  streamedOneDnn.push(await createOptLayer(native, shape, t, { dtype: 'bf16', transposed: true, recycle: true, packAtRows: 256, skinnyGemm: false }));
  streamedF16.push(await createOptLayer(native, shape, halfWeights(t), { dtype: 'bf16', transposed: true, recycle: true, packAtRows: 256 }));
}
const head = await native.createLinear(syntheticWeights(c.vocabSize * c.embedding.dim), null, c.embedding.dim, c.vocabSize, { dtype: 'bf16' });

const alloc = (n) => native.allocFloat32(n).fill(0.01);
const bandwidthGBs = streamBandwidth(native);

/** Per batch: buffers of one decode step after a prompt of P tokens (all visible). */
function stepBuffers(B) {
  const cap = P + 64;
  const kv = B * cap * KVE;
  const bits = (n) => { const f = native.allocFloat32(Math.ceil(n / 2)); return new Uint16Array(f.buffer, f.byteOffset, n); };
  return {
    B,
    x: alloc(B * E).map((_, i) => Math.sin(i) * 0.5),
    y: alloc(B * E),
    mask: alloc(B * (P + 1)).fill(0),
    positions: new Int32Array(B).fill(P),
    cap,
    k16: bits(kv).fill(0x3c00),
    v16: bits(kv).fill(0x3c00),
    k32: alloc(kv),
    v32: alloc(kv),
    pastK: alloc(B * H * P * D),
    pastV: alloc(B * H * P * D),
    presentK: alloc(B * H * (P + 1) * D),
    presentV: alloc(B * H * (P + 1) * D),
    headIn: alloc(B * c.embedding.dim),
    logits: alloc(B * c.vocabSize),
  };
}

/** A resident layer's decode step over the cache (k, v). */
const runResident = (b, layer, k, v) =>
  llama ? resident[layer].runCached(b.x, b.mask, b.positions, invFreq, b.B, 1, P, b.y, k, v, b.cap) : resident[layer].runCached(b.x, b.mask, b.B, 1, P, b.y, k, v, b.cap);
const cases = {
  resident: {
    run: (b, layer) => runResident(b, layer, b.k16, b.v16),
    weightBytes: () => resident[0].packedBytes,
    kvBytes: (B) => 2 * 2 * B * P * KVE,
  },
  'resident-kv32': {
    run: (b, layer) => runResident(b, layer, b.k32, b.v32),
    weightBytes: () => resident[0].packedBytes,
    kvBytes: (B) => 2 * 4 * B * P * KVE,
  },
  streamed: {
    run: (b, layer) => streamed[layer].run(b.x, b.pastK, b.pastV, b.mask, b.B, 1, P, b.y, b.presentK, b.presentV),
    weightBytes: () => fp32WeightBytes,
    kvBytes: (B) => 2 * 4 * B * P * E,
  },
  'streamed-onednn': {
    run: (b, layer) => streamedOneDnn[layer].run(b.x, b.pastK, b.pastV, b.mask, b.B, 1, P, b.y, b.presentK, b.presentV),
    weightBytes: () => fp32WeightBytes,
    kvBytes: (B) => 2 * 4 * B * P * E,
  },
  'streamed-f16': {
    run: (b, layer) => streamedF16[layer].run(b.x, b.pastK, b.pastV, b.mask, b.B, 1, P, b.y, b.presentK, b.presentV),
    weightBytes: () => fp32WeightBytes / 2,
    kvBytes: (B) => 2 * 4 * B * P * E,
  },
  'streamed-f16-kv16': {
    run: (b, layer) => streamedF16[layer].runCached(b.x, b.mask, b.B, 1, P, b.y, b.k16, b.v16, b.cap),
    weightBytes: () => fp32WeightBytes / 2,
    kvBytes: (B) => 2 * 2 * B * P * E,
  },
};

if (o.cases) {
  const wanted = new Set(o.cases.split(','));
  for (const name of Object.keys(cases)) if (!wanted.has(name)) delete cases[name];
}
if (llama) {
  for (const name of Object.keys(cases)) if (!name.startsWith('resident')) delete cases[name];
  if (Object.keys(cases).length === 0) throw new Error(`--model ${o.model}: only the resident cases (resident, resident-kv32) are measured for it`);
}
const buffers = batches.map(stepBuffers);
const samples = {}; // `${case}/${B}` → per-round median layer seconds
const headSamples = {};
const bandwidth = [];
for (let round = 0; round < rounds; round++) {
  bandwidth.push(await bandwidthGBs());
  for (const b of buffers) {
    for (const [name, k] of Object.entries(cases)) {
      await k.run(b, 0);
      await k.run(b, 1);
      const times = [];
      for (let r = 0; r < repeats; r++) {
        const t0 = performance.now();
        await k.run(b, r % 2);
        times.push((performance.now() - t0) / 1000);
      }
      samples[`${name}/${b.B}`] ??= [];
      samples[`${name}/${b.B}`].push(median(times));
    }
    await head.run(b.headIn, b.B, b.logits);
    const times = [];
    for (let r = 0; r < repeats; r++) {
      const t0 = performance.now();
      await head.run(b.headIn, b.B, b.logits);
      times.push((performance.now() - t0) / 1000);
    }
    headSamples[b.B] ??= [];
    headSamples[b.B].push(median(times));
  }
  log(`round ${round + 1}/${rounds}: bandwidth ${bandwidth.at(-1).toFixed(1)} GB/s`);
}

const bw = median(bandwidth) * 1e9;
const headS = Object.fromEntries(batches.map((B) => [B, median(headSamples[B])]));
const results = [];
for (const B of batches) {
  for (const [name, k] of Object.entries(cases)) {
    const layerS = median(samples[`${name}/${B}`]);
    const layerBytes = k.weightBytes() + k.kvBytes(B);
    const stepS = c.layers * layerS + headS[B];
    const stepBytes = c.layers * layerBytes + head.packedBytes;
    // What a step would read with 16-bit weights and a bf16 KV cache: the target the streamed case is measured against too.
    const ideal16 = c.layers * (resident[0].packedBytes + 2 * 2 * B * P * KVE) + head.packedBytes;
    results.push({
      case: name, batch: B, past: P,
      layer_ms: +(layerS * 1e3).toFixed(2),
      step_ms: +(stepS * 1e3).toFixed(1),
      step_bytes: stepBytes,
      floor_ms: +((stepBytes / bw) * 1e3).toFixed(1),
      ratio: +(stepS / (stepBytes / bw)).toFixed(2),
      ratio_vs_16bit_bytes: +(stepS / (ideal16 / bw)).toFixed(2),
    });
  }
}
const report = {
  benchmark: 'decode-roofline',
  model: o.model,
  host: {
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    onednn: features.version,
    isa: features.isa,
    bf16Impl: features.bf16Impl,
    amx: /amx/.test(features.isa) || /amx/.test(features.bf16Impl),
    threads: features.threads,
  },
  date: started,
  loadavg: { start: loadStart.map((v) => +v.toFixed(2)), end: loadavg().map((v) => +v.toFixed(2)) },
  rounds, repeats,
  stream_bandwidth_gbs: +(bw / 1e9).toFixed(1),
  stream_bandwidth_rounds_gbs: bandwidth.map((v) => +v.toFixed(1)),
  head_ms: Object.fromEntries(batches.map((B) => [B, +(headS[B] * 1e3).toFixed(2)])),
  results,
};
log(`${report.host.cpu} (${report.host.isa}, ${report.host.bf16Impl}), stream ${report.stream_bandwidth_gbs} GB/s, load ${report.loadavg.start.join(' ')} → ${report.loadavg.end.join(' ')}`);
for (const r of results) log(`  ${r.case.padEnd(14)} batch ${r.batch}: layer ${r.layer_ms} ms, step ${r.step_ms} ms vs floor ${r.floor_ms} ms → ratio ${r.ratio} (vs 16-bit bytes ${r.ratio_vs_16bit_bytes})`);
if (o.json) writeFileSync(o.json, `${JSON.stringify(report, null, 2)}\n`);
