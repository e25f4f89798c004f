#!/usr/bin/env node
// `pnpm bench:llamacpp [--config llama-3.2-1b | --config '{"base":"llama-3.2-1b","num_hidden_layers":4}'] [--types F16,BF16,Q8_0,Q4_0,Q4_K_M]
//   [--batches 1,8] [--prompt 512] [--gen 32] [--threads 2] [--rounds 2] [--check-type F32] [--widen] [--json FILE]`
// flexhelm (OneDnnBackend, bf16) beside llama.cpp (node-llama-cpp's npm-published prebuilt CPU binary) on the same
// random Llama-shaped model: make-model writes a bf16 Hub folder, export-gguf writes one GGUF file per type, and both
// engines load each file (flexhelm through --model FILE.gguf's import). First a greedy check on --check-type's file
// (both must produce the same tokens: they run the same weights), then, per type and batch, interleaved rounds of
// `prompt` tokens prefilled and `gen` tokens decoded per sequence; the best round of each side is kept (a shared
// machine's load only ever slows a run down). Ratios are flexhelm ÷ llama.cpp throughput: above 1, flexhelm is faster.
// Each round also reads 1 GiB on every core (`streamRead`, past the last-level cache): a decode step reads every weight
// once, so `decode_gbps` (the weights' bytes × steps a second) against that `read_gbps` says how near each side is to
// the memory's rate, and `read_gbps ÷ llama.cpp's decode_gbps` bounds what any engine reading the same bytes could
// reach over llama.cpp in that round (`read_bound_ratio`).
// Not a test: figures depend on the machine and its load. Needs `pnpm build` (the CLI and this package).
import { spawn } from 'node:child_process';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { Engine, generate } from '@flexhelm/engine';
import { GgufTensorSource, ggufQuantizedWeights, importGguf, readGguf } from '@flexhelm/gguf';
import { getLlama, LlamaLogLevel } from 'node-llama-cpp';
import { OneDnnBackend, requireBinding } from '../dist/index.js';
import { streamBandwidth } from './stream-bandwidth.mjs';
import { benchHost, finishHost, hostLine } from '../../../tooling/scripts/bench-host.mjs';

const { values: o } = parseArgs({
  options: {
    config: { type: 'string', default: 'llama-3.2-1b' },
    types: { type: 'string', default: 'F16,BF16,Q8_0,Q4_0' },
    batches: { type: 'string', default: '1,8' },
    prompt: { type: 'string', default: '512' },
    gen: { type: 'string', default: '32' },
    threads: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '2' },
    // llama.cpp's ggml threads spin at a barrier after each op: on a loaded host a descheduled one stalls the rest
    // (2 threads measured 17× slower per decode token than 1 at load 16 on 2 cores), so each of these counts is
    // run and llama.cpp's faster one kept: the comparison is against its best configuration, not a strawman.
    'llamacpp-threads': { type: 'string', default: '1,2' },
    'check-type': { type: 'string', default: 'F32' },
    'check-prompts': { type: 'string', default: '3' },
    'check-tokens': { type: 'string', default: '8' },
    dtype: { type: 'string', default: 'bf16' },
    // Compute quantized files from their widened weights (the figures before the quantized path).
    widen: { type: 'boolean', default: false },
    json: { type: 'string' },
  },
});
const positive = (name) => {
  const n = Number(o[name]);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} ${o[name]}: give a whole number ≥ 1`);
  return n;
};
const P = positive('prompt');
const G = positive('gen');
const threads = positive('threads');
const rounds = positive('rounds');
const batches = o.batches.split(',').map(Number);
if (batches.some((b) => !Number.isInteger(b) || b < 1)) throw new Error(`--batches ${o.batches}: whole numbers ≥ 1, comma-separated`);
const llamaThreads = o['llamacpp-threads'].split(',').map(Number);
if (llamaThreads.some((t) => !Number.isInteger(t) || t < 1)) throw new Error(`--llamacpp-threads ${o['llamacpp-threads']}: whole numbers ≥ 1, comma-separated`);
const types = o.types.split(',').filter(Boolean).map((t) => t.toUpperCase());
// Both sides get the same thread count: oneDNN's OpenMP team through OMP_NUM_THREADS (read when the addon loads).
process.env.OMP_NUM_THREADS = String(threads);

const log = (line) => process.stderr.write(`${line}\n`);
const cli = fileURLToPath(new URL('../../../apps/cli/dist/main.js', import.meta.url));
// The CLI runs as a child awaited, not spawned synchronously, so that a bench stopped by a signal can take its child
// down with it: a blocked spawnSync left an `export-gguf` running on the cores after the bench had gone.
const children = new Set();
const killChildren = () => {
  for (const child of children) child.kill('SIGKILL');
};
process.on('exit', killChildren);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    killChildren();
    process.exit(128 + (signal === 'SIGINT' ? 2 : 15));
  });
}
function flexhelm(...args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', reject);
    child.on('close', (code) => {
      children.delete(child);
      if (code === 0) resolve();
      else reject(new Error(`flexhelm ${args[0]} failed (${code}): ${output}`));
    });
  });
}

/** Prompts of token ids the tokenizer defines (4 … 4 + range), the same for both engines. */
function prompts(batch, length, seed, range) {
  let s = seed >>> 0;
  const next = () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
  return Array.from({ length: batch }, () => Array.from({ length }, () => 4 + Math.floor(next() * range)));
}

const host = benchHost();
log(`host: ${hostLine(host)}`);
const dir = mkdtempSync(join(tmpdir(), 'flexhelm-llamacpp-'));
const results = [];
// flexhelm reads a GGUF in place as `flexhelm run` does (importGguf for config and tokenizer, GgufTensorSource for the
// weights); Q8_0/Q4_0/Q4_K/Q5_K/Q6_K matrices are multiplied as blocks (ggufQuantizedWeights, the backend's `quantized`
// option, unless --widen), the other types computed in --dtype from their widened values.
const report = () => [{ kind: 'host', ...finishHost(host), flexhelm_dtype: o.dtype, flexhelm_gguf_weights: o.widen ? 'widened as read' : 'Q8_0/Q4_0/Q4_K/Q5_K/Q6_K kept as blocks (QuantLinear)', threads, llamacpp_threads: llamaThreads, prompt: P, gen: G, rounds, config: o.config }, ...results];
function save() {
  if (!o.json) return;
  writeFileSync(`${o.json}.tmp`, `${JSON.stringify(report(), null, 2)}\n`);
  renameSync(`${o.json}.tmp`, o.json);
}

const readRate = streamBandwidth(requireBinding());

/**
 * Bytes of weights a decode step reads from `file`: every tensor but a separate output's token table (a step reads
 * one row of it; a tied head reads all of it as the output). The KV cache comes on top (a few % at 512 tokens).
 */
function stepWeightBytes(file) {
  const { tensors } = readGguf(file);
  const untied = tensors.some((t) => t.name === 'output.weight');
  return tensors.reduce((sum, t) => sum + (untied && t.name === 'token_embd.weight' ? 0 : t.byteLength), 0);
}

const llama = await getLlama({ gpu: false, build: 'never', usePrebuiltBinaries: true, progressLogs: false, logLevel: LlamaLogLevel.error });
log(`llama.cpp: node-llama-cpp prebuilt ${llama.buildType}, release ${llama.llamaCppRelease.release}, cpu math cores ${llama.cpuMathCores}`);

/** flexhelm on one GGUF file: the engine (loaded once) and a runner of one timed generation. */
async function ours(file, dtype = o.dtype) {
  const t0 = performance.now();
  const { description } = importGguf(file, join(dir, 'data'));
  const quantized = o.widen ? undefined : ggufQuantizedWeights(file, description);
  const engine = await Engine.fromSource(description, new GgufTensorSource(file), { backend: new OneDnnBackend({ dtype, ...(quantized && Object.keys(quantized.counts).length ? { quantized } : {}) }) });
  const loadS = (performance.now() - t0) / 1000;
  const vocab = engine.description.vocabSize;
  return {
    loadS,
    vocab,
    async greedy(prompt, n) {
      const [r] = await generate(engine, [{ prompt, maxNewTokens: n, stopAtEos: false }]);
      return r.completions[0].tokens.map((t) => t.id);
    },
    async run(batch, seed, length = P, gen = G) {
      const timings = { prefillMs: 0, prefillTokens: 0, decodeMs: 0, decodeTokens: 0 };
      const requests = prompts(batch, length, seed, vocab - 8).map((prompt) => ({ prompt, maxNewTokens: gen, stopAtEos: false }));
      await generate(engine, requests, { maxBatchSize: batch, timings });
      return { prefill_s: timings.prefillMs / 1000, decode_s: timings.decodeMs / 1000 };
    },
    async close() {
      await engine.close?.();
    },
  };
}

/** llama.cpp on one GGUF file: `batch` sequences of one context evaluated together (node-llama-cpp batches them). */
async function theirs(file, maxBatch) {
  const t0 = performance.now();
  const model = await llama.loadModel({ modelPath: file, gpuLayers: 0, useMmap: true });
  const loadS = (performance.now() - t0) / 1000;
  const contexts = new Map();
  const context = async (batch, n) => {
    const key = `${batch}x${n}`;
    if (!contexts.has(key)) contexts.set(key, await model.createContext({ sequences: batch, contextSize: P + G + 16, batchSize: 512, threads: n }));
    return contexts.get(key);
  };
  /** Greedy tokens of each prompt on its own sequence, all started together; the first token ends the prefill. */
  async function evaluate(batch, ps, n, nThreads) {
    const ctx = await context(batch, nThreads);
    const seqs = Array.from({ length: batch }, () => ctx.getSequence());
    try {
      const t0 = performance.now();
      let prefilled = 0;
      let prefillEnd = t0;
      const outs = await Promise.all(
        seqs.map(async (seq, i) => {
          const out = [];
          for await (const token of seq.evaluate(ps[i], { temperature: 0 })) {
            if (out.length === 0 && ++prefilled === batch) prefillEnd = performance.now();
            out.push(token);
            if (out.length === n) break;
          }
          return out;
        }),
      );
      const end = performance.now();
      return { outs, prefill_s: (prefillEnd - t0) / 1000, decode_s: (end - prefillEnd) / 1000 };
    } finally {
      for (const s of seqs) s.dispose();
    }
  }
  return {
    loadS,
    maxBatch,
    greedy: async (prompt, n) => (await evaluate(1, [prompt], n, llamaThreads[0])).outs[0],
    /** Each thread count in turn; the faster prefill and the faster decode are kept, with their thread counts. */
    async run(batch, seed, length = P, gen = G) {
      let best;
      for (const t of llamaThreads) {
        const r = await evaluate(batch, prompts(batch, length, seed, vocab - 8), gen, t);
        if (!best) best = { prefill_s: r.prefill_s, decode_s: r.decode_s, prefill_threads: t, decode_threads: t };
        if (r.prefill_s < best.prefill_s) Object.assign(best, { prefill_s: r.prefill_s, prefill_threads: t });
        if (r.decode_s < best.decode_s) Object.assign(best, { decode_s: r.decode_s, decode_threads: t });
      }
      return best;
    },
    async close() {
      for (const c of contexts.values()) await c.dispose();
      await model.dispose();
    },
  };
}

let vocab = 0;
try {
  await flexhelm('make-model', '--config', o.config, '--out', join(dir, 'model'), '--dtype', 'bf16');
  log(`made ${o.config}: ${dir}/model`);
  const file = async (type) => {
    const path = join(dir, `model-${type}.gguf`);
    await flexhelm('export-gguf', '--model', join(dir, 'model'), '--out', path, '--type', type);
    return path;
  };

  // Same weights, same tokens: greedy continuations on the check file must agree (a last near-tie aside).
  {
    const path = await file(o['check-type']);
    // fp32 compute on our side: the check is about loading the same weights, not about bf16 rounding near a tie.
    const a = await ours(path, 'fp32');
    vocab = a.vocab;
    const b = await theirs(path, 1);
    const checks = [];
    for (const [i, prompt] of prompts(positive('check-prompts'), 16, 7, vocab - 8).entries()) {
      const x = await a.greedy(prompt, positive('check-tokens'));
      const y = await b.greedy(prompt, positive('check-tokens'));
      let same = 0;
      while (same < x.length && x[same] === y[same]) same++;
      checks.push({ prompt: i, flexhelm: x, llamacpp: y, equal_prefix: same });
      log(`check ${o['check-type']} prompt ${i}: ${same}/${x.length} greedy tokens equal`);
    }
    results.push({ kind: 'check', type: o['check-type'], flexhelm_dtype: 'fp32', checks, all_equal: checks.every((c) => c.equal_prefix === c.flexhelm.length) });
    await a.close();
    await b.close();
    rmSync(path);
    save();
  }

  for (const type of types) {
    const path = await file(type);
    const a = await ours(path);
    const b = await theirs(path, Math.max(...batches));
    const stepBytes = stepWeightBytes(path);
    log(`${type}: loaded flexhelm in ${a.loadS.toFixed(1)} s, llama.cpp in ${b.loadS.toFixed(1)} s`);
    // Warm-up: both sides once at each batch, at the full prompt length (allocations, contexts, page faults of the
    // mapped file, and flexhelm's scratch and oneDNN primitives, which grow to the largest shape run so far: a short
    // warm-up left their first-touch costs in round 1, 60–120 ms of a 140 ms batch-1 Q4_0 prefill).
    for (const batch of batches) {
      await a.run(batch, 1, P, 2);
      await b.run(batch, 1, P, 2);
    }
    for (const batch of batches) {
      const ra = [];
      const rb = [];
      const reads = [];
      for (let round = 0; round < rounds; round++) {
        ra.push(await a.run(batch, 100 + round));
        rb.push(await b.run(batch, 100 + round));
        reads.push(await readRate());
        log(`  ${type} batch ${batch} round ${round + 1}: flexhelm prefill ${ra.at(-1).prefill_s.toFixed(2)} s decode ${ra.at(-1).decode_s.toFixed(2)} s | llama.cpp prefill ${rb.at(-1).prefill_s.toFixed(2)} s decode ${rb.at(-1).decode_s.toFixed(2)} s | read ${reads.at(-1).toFixed(1)} GB/s`);
      }
      const best = (rs, k) => Math.min(...rs.map((r) => r[k]));
      const rate = (tokens, s) => +(tokens / s).toFixed(2);
      // The first generated token comes out of the prefill, so decode produced G − 1 tokens per sequence.
      // A decode step of the batch reads the weights once: G − 1 steps in decode_s.
      const gbps = (r) => +((stepBytes * (G - 1)) / r.decode_s / 1e9).toFixed(1);
      const side = (rs) => ({
        prefill_tokens_per_s: rate(batch * P, best(rs, 'prefill_s')),
        decode_tokens_per_s: rate(batch * (G - 1), best(rs, 'decode_s')),
        rounds: rs.map((r) => ({ ...r, prefill_s: +r.prefill_s.toFixed(3), decode_s: +r.decode_s.toFixed(3), decode_gbps: gbps(r) })),
      });
      const f = side(ra);
      const l = side(rb);
      // Each round's two runs sit side by side in time, so a minute of slow memory or a busy neighbour hits both:
      // the median of the per-round ratios is steadier than best against best when the host's speed drifts.
      const spread = (values) => {
        const sorted = [...values].sort((x, y) => x - y);
        const mid = sorted.length / 2;
        const median = sorted.length % 2 ? sorted[Math.floor(mid)] : (sorted[mid - 1] + sorted[mid]) / 2;
        return { median: +median.toFixed(2), min: +sorted[0].toFixed(2), max: +sorted.at(-1).toFixed(2) };
      };
      const paired = (k) => spread(ra.map((r, i) => rb[i][k] / r[k]));
      results.push({
        kind: 'case',
        type,
        batch,
        flexhelm: f,
        llamacpp: l,
        prefill_ratio: +(f.prefill_tokens_per_s / l.prefill_tokens_per_s).toFixed(2),
        decode_ratio: +(f.decode_tokens_per_s / l.decode_tokens_per_s).toFixed(2),
        prefill_ratio_per_round: paired('prefill_s'),
        decode_ratio_per_round: paired('decode_s'),
        step_weight_bytes: stepBytes,
        read_gbps_per_round: reads.map((g) => +g.toFixed(1)),
        read_bound_ratio_per_round: spread(rb.map((r, i) => reads[i] / gbps(r))),
        load_average_1m: +loadavg()[0].toFixed(1),
      });
      log(`${type} batch ${batch}: prefill ${f.prefill_tokens_per_s} vs ${l.prefill_tokens_per_s} tok/s (×${results.at(-1).prefill_ratio}), decode ${f.decode_tokens_per_s} vs ${l.decode_tokens_per_s} tok/s (×${results.at(-1).decode_ratio}); round by round, median (min–max): prefill ×${results.at(-1).prefill_ratio_per_round.median} (${results.at(-1).prefill_ratio_per_round.min}–${results.at(-1).prefill_ratio_per_round.max}), decode ×${results.at(-1).decode_ratio_per_round.median} (${results.at(-1).decode_ratio_per_round.min}–${results.at(-1).decode_ratio_per_round.max}); decode at ${f.rounds.map((r) => r.decode_gbps).join(', ')} vs ${l.rounds.map((r) => r.decode_gbps).join(', ')} GB/s of weights against a ${results.at(-1).read_gbps_per_round.join(', ')} GB/s read (an engine at the read rate: ×${results.at(-1).read_bound_ratio_per_round.median} of llama.cpp)`);
      save();
    }
    await a.close();
    await b.close();
    rmSync(path);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
  await llama.dispose();
}
save();
if (!o.json) process.stdout.write(`${JSON.stringify(report(), null, 2)}\n`);
