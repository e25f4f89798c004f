#!/usr/bin/env node
// `node bench/llama-smoke.mjs [--steps 8] [--batch 1] [--prompt-len 32] [--layers 16]`
// A Llama-3.2-1B-shaped model with random weights (Engine.dummy, onnxruntime fp32): load time, the process's RSS
// (the onnxruntime worker thread is in it) after loading and its peak, prefill time and per-step decode time.
// Not a test: numbers depend on the machine and its load. Needs a built @flexhelm/engine (dist/).
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { llamaDescriptionFromHf, Engine } from '../dist/index.js';
import { OrtBackend } from '../../ort-backend/dist/index.js';

const { values } = parseArgs({ options: { steps: { type: 'string', default: '8' }, batch: { type: 'string', default: '1' }, 'prompt-len': { type: 'string', default: '32' }, layers: { type: 'string', default: '16' } } });
const steps = Number(values.steps);
const B = Number(values.batch);
const L = Number(values['prompt-len']);

// meta-llama/Llama-3.2-1B's config.json sizes (tied head, llama3 rope scaling).
const description = llamaDescriptionFromHf({
  model_type: 'llama', _name_or_path: 'llama-3.2-1b-shaped', hidden_size: 2048, num_hidden_layers: Number(values.layers), num_attention_heads: 32,
  num_key_value_heads: 8, head_dim: 64, intermediate_size: 8192, vocab_size: 128256, max_position_embeddings: 131072, rms_norm_eps: 1e-5,
  rope_theta: 500000, rope_scaling: { rope_type: 'llama3', factor: 32, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 },
  tie_word_embeddings: true, bos_token_id: 128000, eos_token_id: 128001,
});

const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
/** Peak RSS of this process so far (VmHWM), bytes. */
const peakRss = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))[1]) * 1024;

const t0 = performance.now();
const engine = await Engine.dummy(description, { backend: new OrtBackend(), seed: 1 });
const loadS = (performance.now() - t0) / 1000;
console.log(`${description.name}: ${description.layers} layers, loaded in ${loadS.toFixed(1)} s; RSS ${mib(process.memoryUsage().rss)}, peak ${mib(peakRss())}`);

const argmax = (x, from, n) => {
  let best = 0;
  for (let i = 1; i < n; i++) if (x[from + i] > x[from + best]) best = i;
  return best;
};
const V = description.vocabSize;
const run = engine.startBatch(B);
const ids = Array.from({ length: B }, (_, b) => [128000, ...Array.from({ length: L - 1 }, (_, j) => 1000 + ((b * 7919 + j * 104729) % 120000))]);
let t = performance.now();
let hidden = await run.step(ids, ids.map((r) => r.map(() => 1)));
let logits = await run.logits(hidden, L, ids.map((_, row) => ({ row, pos: L - 1 })));
console.log(`prefill ${B}×${L}: ${(performance.now() - t).toFixed(0)} ms`);
const times = [];
let next = ids.map((_, b) => argmax(logits, b * V, V));
for (let s = 0; s < steps; s++) {
  t = performance.now();
  hidden = await run.step(next.map((id) => [id]), next.map(() => [1]));
  logits = await run.logits(hidden, 1, next.map((_, row) => ({ row, pos: 0 })));
  times.push(performance.now() - t);
  next = next.map((_, b) => argmax(logits, b * V, V));
}
await run.close();
const sorted = [...times].sort((a, b) => a - b);
console.log(`decode ${steps} steps at batch ${B}: ${times.map((x) => x.toFixed(0)).join(' ')} ms (median ${sorted[Math.floor(steps / 2)].toFixed(0)} ms)`);
console.log(`RSS ${mib(process.memoryUsage().rss)}, peak ${mib(peakRss())}; logits finite: ${logits.every(Number.isFinite)}`);
await engine.close();
