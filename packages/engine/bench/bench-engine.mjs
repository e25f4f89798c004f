#!/usr/bin/env node
// `pnpm bench:engine [--json FILE] [--models opt-125m,opt-1.3b | --model llama-3.2-1b] [--batches 1,8,16] [--backends onnxruntime,onednn-bf16] [--peer-batches 1,2,4,8] [--prompt-len 512] [--gen-len 32] [--no-peer] [--peer-max-batch 8] [--no-warmup] [--peer-after] [--rounds 1]`
// Generation speed of the engine on random weights of any built-in shape (OPT sizes and the Llama-family bases of
// make-model: llama-3.2-1b, qwen2-0.5b, …) for each compute backend (onnxruntime fp32; oneDNN bf16 / int8 /
// fp32 where the library is present), the onnxruntime MatMul roofline at the same GEMM shapes, and
// @huggingface/transformers generating with the exported copy of the same weights.
// Not a test: numbers depend on the machine and its load. Needs a built @flexhelm/engine (dist/).
import { mkdtempSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import { tmpdir, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { DummyTensorSource, Engine, generate } from '../dist/index.js';
// The onnxruntime backend is a package that depends on this one (as the oneDNN one is below), so it is loaded by path.
import { exportOnnxFromSource, measureMatMulGflops, ortChunkRows, OrtBackend } from '../../ort-backend/dist/index.js';
import { benchShape, shapeFlops } from './bench-shape.mjs';
import { benchPrompts } from './bench-prompts.mjs';
import { benchHost, finishHost, hostLine } from '../../../tooling/scripts/bench-host.mjs';

const { values } = parseArgs({
  options: {
    json: { type: 'string' },
    models: { type: 'string', default: 'opt-125m,opt-1.3b' },
    // One shape (the same as --models with one name; --shape is another name for it).
    model: { type: 'string' },
    shape: { type: 'string' },
    batches: { type: 'string' },
    'peer-batches': { type: 'string', default: '1,2,4,8' },
    'prompt-len': { type: 'string', default: '512' },
    'gen-len': { type: 'string', default: '32' },
    'no-peer': { type: 'boolean', default: false },
    // transformers.js keeps fp32 logits for every prompt position: opt-125m at batch 16 × 512 ran past 22 GB here.
    'peer-max-batch': { type: 'string', default: '8' },
    'no-warmup': { type: 'boolean', default: false },
    // The peer after our engines are closed (not interleaved per batch): a Llama-3.2-1B-sized pair of our engines plus
    // transformers.js at batch 8 (its fp32 logits for every prompt position) ran past this host's 24 GB.
    'peer-after': { type: 'boolean', default: false },
    // Compute backends side by side: onnxruntime (fp32) and onednn-<dtype> (default: both where oneDNN is usable).
    backends: { type: 'string' },
    // Interleaved rounds per batch size: roofline, each backend, the peer, again and again; each side keeps its best
    // round (the fastest prefill, the highest generation throughput), so a busy moment on a shared host costs no
    // side its figure. Every round's figures are kept in the JSON.
    rounds: { type: 'string', default: '1' },
  },
});
const rounds = Number(values.rounds);
if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`--rounds takes a whole number ≥ 1, got '${values.rounds}'`);
const promptLen = Number(values['prompt-len']);
const genLen = Number(values['gen-len']);
const warmup = !values['no-warmup'];
const defaultBatches = { 'opt-125m': [1, 8, 16], 'opt-1.3b': [1, 8], 'qwen2-0.5b': [1, 8, 16], 'llama-3.2-1b': [1, 8] };
const log = (...a) => console.error(...a);
const list = (text) => text.split(',').filter(Boolean).map(Number);

/** @huggingface/transformers generating with the exported copy, in a child process (see peer-run.mjs). */
function peerRun(dir, batch) {
  const script = fileURLToPath(new URL('./peer-run.mjs', import.meta.url));
  const r = spawnSync(process.execPath, [script, dir, String(batch), String(promptLen), String(genLen), String(1 + batch), warmup ? '1' : '0'], { encoding: 'utf8', maxBuffer: 1 << 20 });
  if (r.status !== 0) {
    const why = r.signal ? `killed by ${r.signal} (out of memory?)` : (r.stderr.trim().split('\n').pop() ?? `exit ${r.status}`);
    log(`  batch ${batch}: peer failed: ${why}`);
    return { error: why };
  }
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

/** Our engine on one batch: timings from generate() itself. */
async function ourRun(engine, shape, batch) {
  const requests = () => benchPrompts(batch, promptLen, shape.vocabSize, 1 + batch).map((prompt) => ({ prompt, maxNewTokens: genLen, stopAtEos: false }));
  // The same shapes once untimed, as for the peer: onnxruntime grows its arenas on the first run of a shape.
  if (warmup) await generate(engine, requests().map((r) => ({ ...r, maxNewTokens: 2 })), { maxBatchSize: batch });
  const timings = { prefillMs: 0, prefillTokens: 0, decodeMs: 0, decodeTokens: 0 };
  await generate(engine, requests(), { maxBatchSize: batch, timings });
  const prefillS = timings.prefillMs / 1000;
  const decodeS = timings.decodeMs / 1000;
  return {
    prefill_s: +prefillS.toFixed(3),
    decode_s: +decodeS.toFixed(3),
    prefill_tokens_per_s: +(timings.prefillTokens / prefillS).toFixed(1),
    decode_tokens_per_s: +(timings.decodeTokens / decodeS).toFixed(2),
    // One decode step of the whole batch (what batch-1 latency is about).
    decode_ms_per_step: +(timings.decodeMs / Math.max(1, timings.decodeTokens / batch)).toFixed(1),
    generation_throughput: +((batch * genLen) / (prefillS + decodeS)).toFixed(2),
    achieved_gflops: +(shapeFlops(shape, batch, promptLen) / prefillS / 1e9).toFixed(1),
  };
}

/**
 * onnxruntime's MatMul rate at this batch's layer GEMM shapes ([M, E]·[E, 3E], ·[E, E], ·[E, F], [M, F]·[F, E]), for
 * M = batch × prompt and for M = the rows the worker runs at once (it splits large prefills into row chunks): the
 * higher of the two is the roofline, so running smaller GEMMs cannot make the ratio look better.
 */
async function roofline(shape, batch) {
  const rate = async (m) => +(await measureMatMulGflops(shape.gemms.map((g) => ({ m, ...g })), { repeats: 3 })).toFixed(1);
  const full = await rate(batch * promptLen);
  const chunkRows = Math.min(batch, ortChunkRows(promptLen));
  const chunk = chunkRows < batch ? await rate(chunkRows * promptLen) : full;
  return { roofline_gflops: Math.max(full, chunk), roofline_gflops_m_full: full, roofline_gflops_m_chunk: chunk, chunk_rows: chunkRows };
}

// The oneDNN backend lives in a package that depends on this one, so the benchmark loads its build by path.
const oneDnnUrl = new URL('../../onednn-backend/dist/index.js', import.meta.url);
async function oneDnnModule() {
  try {
    return await import(oneDnnUrl.href);
  } catch (err) {
    return { error: `@flexhelm/onednn-backend is not built (${err.message}); run \`pnpm build\`` };
  }
}

/** The backends to compare: `onnxruntime`, `onednn-bf16`, `onednn-int8`, `onednn-fp32`. */
async function backendSpecs() {
  const onednn = await oneDnnModule();
  const usable = !onednn.error && onednn.oneDnnStatus().available;
  const asked = values.backends ? values.backends.split(',').filter(Boolean) : usable ? ['onnxruntime', 'onednn-bf16'] : ['onnxruntime'];
  if (!values.backends && !usable) log(`oneDNN not measured: ${onednn.error ?? onednn.oneDnnStatus().reason}`);
  return asked.map((spec) => {
    if (spec === 'onnxruntime') return { spec, dtype: 'fp32', make: () => new OrtBackend() };
    const m = /^onednn-(bf16|int8|fp32)$/.exec(spec);
    if (!m) throw new Error(`--backends takes onnxruntime, onednn-bf16, onednn-int8, onednn-fp32; got '${spec}'`);
    if (!usable) throw new Error(`--backends ${spec}: oneDNN is unavailable here (${onednn.error ?? onednn.oneDnnStatus().reason})`);
    return { spec, dtype: m[1], make: () => new onednn.OneDnnBackend({ dtype: m[1], experimental: m[1] === 'int8' }) };
  });
}
const backends = await backendSpecs();

/** The peer at `batch`, recorded on our first backend's case at that batch (or a peer-only case). */
function peerCase(cases, name, batch, dir, runs = [peerRun(dir, batch)]) {
  let c = cases.find((x) => x.batch === batch && x.backend === backends[0].spec);
  if (!c) {
    c = { kind: 'case', model: name, family: shapeOf[name].family, batch, prompt_len: promptLen, gen_len: genLen, peer_only: true, ...machine() };
    cases.push(c);
  }
  const ok = runs.filter((r) => !r.error);
  const peer = ok.reduce((a, r) => (!a || r.tokens_per_s > a.tokens_per_s ? r : a), undefined) ?? runs[0];
  if (runs.length > 1) c.peer_rounds_tokens_per_s = runs.map((r) => (r.error ? null : +r.tokens_per_s.toFixed(2)));
  if (peer.error) c.peer_error = peer.error;
  else {
    c.peer_generation_throughput = +peer.tokens_per_s.toFixed(2);
    if (c.generation_throughput) c.peer_ratio = +(c.generation_throughput / peer.tokens_per_s).toFixed(2);
    log(`  batch ${batch}: peer ${c.peer_generation_throughput} generated tok/s`);
  }
}

const host = benchHost();
log(`host: ${hostLine(host)}`);
const results = [];
/** Writes the JSON so far (after each model too: a run killed later keeps the models it finished). */
function save() {
  if (!values.json) return;
  writeFileSync(`${values.json}.tmp`, `${JSON.stringify([{ kind: 'host', ...finishHost(host) }, ...results], null, 2)}\n`);
  renameSync(`${values.json}.tmp`, values.json);
}
const machine = () => ({ date: new Date().toISOString(), host_type: host.host_type, onednn_isa: host.onednn.available ? host.onednn.bf16Impl : null, cpus: host.cores, load_average_1m: +loadavg()[0].toFixed(1) });
const shapeOf = {};
for (const name of (values.model ?? values.shape ?? values.models).split(',').filter(Boolean)) {
  const shape = benchShape(name);
  shapeOf[name] = shape;
  const batches = values.batches ? list(values.batches) : defaultBatches[name] ?? [1, 8];
  const peerBatches = values['no-peer'] ? [] : list(values['peer-batches']).filter((b) => b <= Number(values['peer-max-batch']));
  const dir = mkdtempSync(join(tmpdir(), 'flexhelm-bench-'));
  const cases = [];
  try {
    // The Llama family's random weights are written as a Hub folder first: our engine loads it, and the peer's copy
    // is exported from it, so both run the same weights.
    if (shape.family !== 'opt') {
      const t0 = performance.now();
      shape.writeFolder(join(dir, 'model'));
      log(`${name}: wrote the random ${shape.family} checkpoint in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    }
    if (peerBatches.length) {
      const t0 = performance.now();
      if (shape.family === 'opt') exportOnnxFromSource(shape.description, new DummyTensorSource(shape.description, 1), join(dir, 'peer'));
      else shape.exportPeer(join(dir, 'model'), join(dir, 'peer'));
      log(`${name}: exported the @huggingface/transformers copy in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    }
    // All backends loaded first, so that for each batch size the roofline, each backend and the peer run one right
    // after the other: load drift on a shared machine then hits every side of a comparison alike.
    const engines = [];
    try {
      for (const b of backends) {
        log(`${name} on ${b.spec}: loading random weights`);
        const t0 = performance.now();
        const backend = b.make();
        const options = { seed: 1, backend };
        const engine = shape.family === 'opt' ? await Engine.dummy(shape.description, options) : await Engine.load(join(dir, 'model'), options);
        engines.push({ b, engine });
        log(`  loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
        await generate(engine, [{ prompt: [2, 5, 6, 7], maxNewTokens: 2 }]);
      }
      for (const batch of batches) {
        const peerHere = peerBatches.includes(batch) && !values['peer-after'];
        const lines = [];
        const runs = engines.map(() => []);
        const peerRuns = [];
        for (let round = 0; round < rounds; round++) {
          lines.push(await roofline(shape, batch));
          for (const [i, { b, engine }] of engines.entries()) {
            const r = await ourRun(engine, shape, batch);
            runs[i].push(r);
            log(`  ${b.spec} batch ${batch}${rounds > 1 ? ` round ${round + 1}` : ''}: prefill ${r.prefill_s} s (${r.prefill_tokens_per_s} tok/s, ${r.achieved_gflops} GFLOP/s vs MatMul ${lines.at(-1).roofline_gflops}), decode ${r.decode_s} s (${r.decode_tokens_per_s} tok/s), ${r.generation_throughput} generated tok/s`);
          }
          if (peerHere) {
            const p = peerRun(dir, batch);
            peerRuns.push(p);
            if (!p.error) log(`  batch ${batch}${rounds > 1 ? ` round ${round + 1}` : ''}: peer ${p.tokens_per_s.toFixed(2)} generated tok/s`);
          }
        }
        // The roofline again after the runs: on a shared machine one measurement can land in a quiet or a busy moment
        // (2× apart here), so the highest of all is the roofline — the ratio errs low, never high.
        lines.push(await roofline(shape, batch));
        const line = lines.reduce((a, l) => (l.roofline_gflops > a.roofline_gflops ? l : a));
        for (const [i, { b }] of engines.entries()) {
          const c = { kind: 'case', model: name, family: shape.family, backend: b.spec, compute_dtype: b.dtype, batch, prompt_len: promptLen, gen_len: genLen, ...line };
          // The generation figures from the round with the highest throughput, the prefill figures from the fastest
          // prefill (the same round when one round was run).
          const bestGen = runs[i].reduce((a, r) => (r.generation_throughput > a.generation_throughput ? r : a));
          const bestPrefill = runs[i].reduce((a, r) => (r.prefill_s < a.prefill_s ? r : a));
          Object.assign(c, bestGen, { prefill_s: bestPrefill.prefill_s, prefill_tokens_per_s: bestPrefill.prefill_tokens_per_s, achieved_gflops: bestPrefill.achieved_gflops });
          if (rounds > 1) c.rounds = runs[i];
          c.roofline_gflops_measured = lines.map((l) => l.roofline_gflops);
          c.roofline_ratio = +(c.achieved_gflops / c.roofline_gflops).toFixed(3);
          // Side by side with onnxruntime fp32 at the same batch (measured in the same rounds).
          const base = cases.find((x) => x.backend === 'onnxruntime' && x.batch === batch && !x.peer_only);
          if (base && b.spec !== 'onnxruntime') {
            c.prefill_ratio_vs_onnxruntime = +(c.achieved_gflops / base.achieved_gflops).toFixed(2);
            c.generation_ratio_vs_onnxruntime = +(c.generation_throughput / base.generation_throughput).toFixed(2);
          }
          log(`  ${b.spec} batch ${batch}${rounds > 1 ? ` (best of ${rounds})` : ''}: prefill ${c.achieved_gflops} GFLOP/s ÷ MatMul ${c.roofline_gflops} = ${c.roofline_ratio}, ${c.generation_throughput} generated tok/s`);
          c.peer_generation_throughput = null;
          if (!values['no-peer'] && !peerBatches.includes(batch)) c.peer_error = `not run at this batch (--peer-batches ${values['peer-batches']}, --peer-max-batch ${values['peer-max-batch']}: transformers.js memory)`;
          Object.assign(c, machine());
          cases.push(c);
        }
        if (peerHere) peerCase(cases, name, batch, dir, peerRuns);
      }
    } finally {
      for (const { engine } of engines) await engine.close();
    }
    // The peer at its other batch sizes, for the best-vs-best comparison.
    for (const batch of peerBatches) {
      if (values['peer-after'] || !batches.includes(batch)) peerCase(cases, name, batch, dir, Array.from({ length: rounds }, () => peerRun(dir, batch)));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  cases.sort((a, b) => a.batch - b.batch);
  results.push(...cases);
  const best = (key, pool = cases) => pool.filter((c) => c[key]).reduce((a, c) => (!a || c[key] > a[key] ? c : a), undefined);
  const peer = best('peer_generation_throughput');
  for (const b of backends) {
    const ours = best('generation_throughput', cases.filter((c) => c.backend === b.spec));
    if (!ours || !peer) continue;
    const summary = {
      kind: 'best',
      model: name,
      family: shape.family,
      backend: b.spec,
      batch: ours.batch,
      generation_throughput: ours.generation_throughput,
      peer_batch: peer.batch,
      peer_generation_throughput: peer.peer_generation_throughput,
      peer_ratio: +(ours.generation_throughput / peer.peer_generation_throughput).toFixed(2),
    };
    log(`${name} on ${b.spec}: best ${summary.generation_throughput} tok/s (batch ${summary.batch}) vs peer best ${summary.peer_generation_throughput} (batch ${summary.peer_batch}): ${summary.peer_ratio}×`);
    results.push(summary);
  }
  save();
}
// The host block first: where and when this ran (load average before and after).
const text = `${JSON.stringify([{ kind: 'host', ...finishHost(host) }, ...results], null, 2)}\n`;
if (values.json) {
  save();
  log(`wrote ${values.json}`);
} else process.stdout.write(text);
