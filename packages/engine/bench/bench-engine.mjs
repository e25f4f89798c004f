#!/usr/bin/env node
// `pnpm bench:engine [--json FILE] [--models opt-125m,opt-1.3b] [--batches 1,8,16] [--prompt-len 512] [--gen-len 32] [--no-peer] [--peer-max-batch 8]`
// Generation speed of the engine (onnxruntime fp32 backend) on random OPT weights, the onnxruntime MatMul roofline at
// the same GEMM shapes, and @huggingface/transformers generating with the exported copy of the same weights.
// Not a test: numbers depend on the machine and its load. Needs a built @flexhelm/engine (dist/).
import { mkdtempSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import { tmpdir, cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { DummyTensorSource, OptEngine, exportOnnxFromSource, generate, measureMatMulGflops, optConfigByName } from '../dist/index.js';
import { benchPrompts } from './bench-prompts.mjs';

const { values } = parseArgs({
  options: {
    json: { type: 'string' },
    models: { type: 'string', default: 'opt-125m,opt-1.3b' },
    batches: { type: 'string' },
    'prompt-len': { type: 'string', default: '512' },
    'gen-len': { type: 'string', default: '32' },
    'no-peer': { type: 'boolean', default: false },
    // transformers.js keeps fp32 logits for every prompt position: opt-125m at batch 16 × 512 ran past 22 GB here.
    'peer-max-batch': { type: 'string', default: '8' },
  },
});
const promptLen = Number(values['prompt-len']);
const genLen = Number(values['gen-len']);
const defaultBatches = { 'opt-125m': [1, 8, 16], 'opt-1.3b': [1, 8] };
const log = (...a) => console.error(...a);

/** FLOPs of a prefill of `batch` prompts of length L: linear layers, causal attention, head at the last position. */
function prefillFlops(c, batch, L) {
  const E = c.hiddenSize;
  const linear = 2 * c.numHiddenLayers * (4 * E * E + 2 * E * c.ffnDim) * L;
  const attention = c.numHiddenLayers * 4 * E * ((L * (L + 1)) / 2);
  return batch * (linear + attention + 2 * c.vocabSize * c.wordEmbedProjDim);
}

/** @huggingface/transformers generating with the exported copy, in a child process (see peer-run.mjs). */
function peerRun(dir, batch) {
  const script = fileURLToPath(new URL('./peer-run.mjs', import.meta.url));
  const r = spawnSync(process.execPath, [script, dir, String(batch), String(promptLen), String(genLen), String(1 + batch)], { encoding: 'utf8', maxBuffer: 1 << 20 });
  if (r.status !== 0) {
    const why = r.signal ? `killed by ${r.signal} (out of memory?)` : (r.stderr.trim().split('\n').pop() ?? `exit ${r.status}`);
    log(`  batch ${batch}: peer failed: ${why}`);
    return { error: why };
  }
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

/** Our engine on one batch: timings from generate() itself. */
async function ourRun(engine, config, batch) {
  const timings = { prefillMs: 0, prefillTokens: 0, decodeMs: 0, decodeTokens: 0 };
  const requests = benchPrompts(batch, promptLen, config.vocabSize, 1 + batch).map((prompt) => ({ prompt, maxNewTokens: genLen, stopAtEos: false }));
  await generate(engine, requests, { maxBatchSize: batch, timings });
  const prefillS = timings.prefillMs / 1000;
  const decodeS = timings.decodeMs / 1000;
  return {
    prefill_s: +prefillS.toFixed(3),
    decode_s: +decodeS.toFixed(3),
    prefill_tokens_per_s: +(timings.prefillTokens / prefillS).toFixed(1),
    decode_tokens_per_s: +(timings.decodeTokens / decodeS).toFixed(2),
    generation_throughput: +((batch * genLen) / (prefillS + decodeS)).toFixed(2),
    achieved_gflops: +(prefillFlops(config, batch, promptLen) / prefillS / 1e9).toFixed(1),
  };
}

async function roofline(config, batch) {
  const E = config.hiddenSize;
  const F = config.ffnDim;
  const m = batch * promptLen;
  return +(await measureMatMulGflops([{ m, k: E, n: 3 * E }, { m, k: E, n: E }, { m, k: E, n: F }, { m, k: F, n: E }], { repeats: 3 })).toFixed(1);
}

const results = [];
const date = new Date().toISOString();
// The machine may be shared: for each batch size the roofline, our run and the peer's run follow each other closely.
for (const name of values.models.split(',')) {
  const config = optConfigByName(name);
  const batches = values.batches ? values.batches.split(',').map(Number) : defaultBatches[name] ?? [1, 8];
  const dir = mkdtempSync(join(tmpdir(), 'flexhelm-bench-'));
  try {
    if (!values['no-peer']) {
      const t0 = performance.now();
      exportOnnxFromSource(config, new DummyTensorSource(config, 1), join(dir, 'peer'));
      log(`${name}: exported the @huggingface/transformers copy in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    }
    log(`${name}: loading random weights`);
    const t0 = performance.now();
    const engine = await OptEngine.dummy(config, { seed: 1 });
    log(`  loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    await generate(engine, [{ prompt: [2, 5, 6, 7], maxNewTokens: 2 }]);
    for (const batch of batches) {
      const c = { model: name, batch, prompt_len: promptLen, gen_len: genLen };
      c.roofline_gflops = await roofline(config, batch);
      Object.assign(c, await ourRun(engine, config, batch));
      c.roofline_ratio = +(c.achieved_gflops / c.roofline_gflops).toFixed(3);
      log(`  batch ${batch}: prefill ${c.prefill_s} s (${c.prefill_tokens_per_s} tok/s, ${c.achieved_gflops} GFLOP/s vs MatMul ${c.roofline_gflops}), decode ${c.decode_s} s (${c.decode_tokens_per_s} tok/s), ${c.generation_throughput} generated tok/s`);
      if (!values['no-peer'] && batch > Number(values['peer-max-batch'])) {
        c.peer_generation_throughput = null;
        c.peer_error = `skipped above --peer-max-batch ${values['peer-max-batch']} (transformers.js memory)`;
      } else if (!values['no-peer']) {
        const peer = peerRun(dir, batch);
        if (peer.error) {
          c.peer_generation_throughput = null;
          c.peer_error = peer.error;
        } else {
          c.peer_generation_throughput = +peer.tokens_per_s.toFixed(2);
          c.peer_ratio = +(c.generation_throughput / peer.tokens_per_s).toFixed(2);
          log(`  batch ${batch}: peer ${c.peer_generation_throughput} generated tok/s`);
        }
      }
      results.push({ ...c, date, cpus: cpus().length, cpu_model: cpus()[0]?.model, load_average_1m: +loadavg()[0].toFixed(1) });
    }
    await engine.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
const text = `${JSON.stringify(results, null, 2)}\n`;
if (values.json) {
  writeFileSync(`${values.json}.tmp`, text);
  renameSync(`${values.json}.tmp`, values.json);
  log(`wrote ${values.json}`);
} else process.stdout.write(text);
