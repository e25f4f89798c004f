#!/usr/bin/env node
// Where one decoder layer's time goes (native layerProfile): an opt-1.3b-shaped layer in bf16 at prefill (batch ×
// prompt rows, causal mask) and at a decode step after that prompt, with the KV cache growing in place (runCached).
// Buffers are allocated and touched once before the timed runs (fresh memory is slow to touch on this VM), so the
// figures are the layer's own work.
//   node bench/profile-layer.mjs [--model opt-1.3b] [--batch 8] [--prompt 512] [--dtype bf16] [--repeats 3] [--chunk-bytes N] [--json FILE]
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { descriptionByName } from '@flexhelm/engine';
import { createOptLayer } from '../dist/index.js';
import { median, nativeBinding, syntheticWeights } from './measure-backend.mjs';

const { values: o } = parseArgs({
  options: {
    model: { type: 'string', default: 'opt-1.3b' },
    batch: { type: 'string', default: '8' },
    prompt: { type: 'string', default: '512' },
    dtype: { type: 'string', default: 'bf16' },
    repeats: { type: 'string', default: '3' },
    // GEMM column blocks (LinearOptions.chunkBytes); the backend's default when absent.
    'chunk-bytes': { type: 'string' },
    json: { type: 'string' },
  },
});
const native = nativeBinding();
const c = descriptionByName(o.model);
const B = Number(o.batch);
const P = Number(o.prompt);
const E = c.hiddenSize;
const F = c.mlp.intermediateSize;
const H = c.attention.heads;
const repeats = Number(o.repeats);
const shape = { hidden: E, heads: H, ffn: F, preLayerNorm: c.norm.placement === 'pre', eps: c.norm.eps };
const sizes = { qW: E * E, kW: E * E, vW: E * E, oW: E * E, fc1W: F * E, fc2W: E * F, fc1B: F };
const weights = {};
for (const name of ['qW', 'qB', 'kW', 'kB', 'vW', 'vB', 'oW', 'oB', 'ln1W', 'ln1B', 'fc1W', 'fc1B', 'fc2W', 'fc2B', 'ln2W', 'ln2B']) {
  weights[name] = name.startsWith('ln') && name.endsWith('W') ? new Float32Array(E).fill(1) : syntheticWeights(sizes[name] ?? E);
}
const layer = await createOptLayer(native, shape, weights, { dtype: o.dtype, ...(o['chunk-bytes'] ? { chunkBytes: Number(o['chunk-bytes']) } : {}) });

const alloc = (n) => native.allocFloat32(n).fill(0.01);
const causal = (S, past) => {
  const T = past + S;
  const m = alloc(B * S * T);
  for (let b = 0; b < B; b++) for (let s = 0; s < S; s++) for (let t = 0; t < T; t++) m[(b * S + s) * T + t] = t <= past + s ? 0 : -1e30;
  return m;
};

// The KV cache as the backend keeps it: [B, H, capacity, D], filled up to `past`, the step's keys written in place.
const capacity = P + 64;
// A bf16 layer keeps its cache in bf16 (Uint16Array views of aligned memory), as the backend does.
const kvAlloc = (n) => {
  if (o.dtype !== 'bf16') return alloc(n);
  const f = native.allocFloat32(Math.ceil(n / 2));
  return new Uint16Array(f.buffer, f.byteOffset, n).fill(0x3c00);
};
const cacheK = kvAlloc(B * H * capacity * (E / H));
const cacheV = kvAlloc(B * H * capacity * (E / H));

async function profile(label, S, past) {
  const x = alloc(B * S * E).map((_, i) => Math.sin(i) * 0.5);
  const mask = causal(S, past);
  const y = alloc(B * S * E);
  const run = () => layer.runCached(x, mask, B, S, past, y, cacheK, cacheV, capacity);
  await run();
  const runs = [];
  for (let r = 0; r < repeats; r++) {
    native.layerProfile(true);
    const t0 = performance.now();
    await run();
    const wall = performance.now() - t0;
    runs.push({ wall, ...native.layerProfile(false).ms });
  }
  const parts = Object.keys(runs[0]);
  const result = Object.fromEntries(parts.map((p) => [p, median(runs.map((r) => r[p]))]));
  const line = parts.map((p) => `${p} ${result[p].toFixed(1)}`).join(', ');
  console.log(`${label} (B ${B}, S ${S}, past ${past}), ms median of ${repeats}: ${line}`);
  return result;
}

const report = {
  model: o.model, batch: B, prompt: P, dtype: o.dtype,
  prefill: await profile('prefill', P, 0),
  decode: await profile('decode', 1, P),
};
if (o.json) writeFileSync(o.json, `${JSON.stringify(report, null, 2)}\n`);
