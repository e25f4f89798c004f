#!/usr/bin/env node
// `pnpm bench:engine [--json FILE] [--models opt-125m,opt-1.3b] [--batches 1,8,16] [--prompt-len 512] [--gen-len 32] [--no-peer]`
// Generation speed of the engine (onnxruntime fp32 backend) on random OPT weights, the onnxruntime MatMul roofline at
// the same GEMM shapes, and @huggingface/transformers generating with the exported copy of the same weights.
// Not a test: numbers depend on the machine and its load. Needs a built @flexhelm/engine (dist/).
import { mkdtempSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import { tmpdir, cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { DummyTensorSource, OptEngine, exportOnnxFromSource, generate, measureMatMulGflops, optConfigByName, SeededUniform } from '../dist/index.js';

const { values } = parseArgs({
  options: {
    json: { type: 'string' },
    models: { type: 'string', default: 'opt-125m,opt-1.3b' },
    batches: { type: 'string' },
    'prompt-len': { type: 'string', default: '512' },
    'gen-len': { type: 'string', default: '32' },
    'no-peer': { type: 'boolean', default: false },
  },
});
const promptLen = Number(values['prompt-len']);
const genLen = Number(values['gen-len']);
const defaultBatches = { 'opt-125m': [1, 8, 16], 'opt-1.3b': [1, 8] };
const log = (...a) => console.error(...a);

function prompts(batch, vocab, seed) {
  const rng = new SeededUniform(seed);
  return Array.from({ length: batch }, () => [2, ...Array.from({ length: promptLen - 1 }, () => 4 + Math.floor(rng.next() * (vocab - 4)))]);
}

/** FLOPs of a prefill of `batch` prompts of length L: linear layers, causal attention, head at the last position. */
function prefillFlops(c, batch, L) {
  const E = c.hiddenSize;
  const linear = 2 * c.numHiddenLayers * (4 * E * E + 2 * E * c.ffnDim) * L;
  const attention = c.numHiddenLayers * 4 * E * ((L * (L + 1)) / 2);
  return batch * (linear + attention + 2 * c.vocabSize * c.wordEmbedProjDim);
}

/** @huggingface/transformers generating with the exported copy; `run(batch)` returns generated tokens/s. */
async function loadPeer(dir) {
  const { AutoModelForCausalLM, env, Tensor } = await import('@huggingface/transformers');
  env.allowRemoteModels = false;
  env.localModelPath = `${dir}/`;
  const model = await AutoModelForCausalLM.from_pretrained('peer', { dtype: 'fp32', device: 'cpu' });
  const vocab = model.config.vocab_size;
  const generateOnce = async (batch, L, gen) => {
    const ids = prompts(batch, vocab, 1 + batch).map((p) => p.slice(0, L));
    const t0 = performance.now();
    await model.generate({
      input_ids: new Tensor('int64', BigInt64Array.from(ids.flat().map(BigInt)), [batch, L]),
      attention_mask: new Tensor('int64', new BigInt64Array(batch * L).fill(1n), [batch, L]),
      max_new_tokens: gen,
      min_new_tokens: gen,
      do_sample: false,
    });
    return (performance.now() - t0) / 1000;
  };
  await generateOnce(1, 16, 2);
  return {
    run: async (batch) => (batch * genLen) / (await generateOnce(batch, promptLen, genLen)),
    close: () => model.dispose(),
  };
}

/** Our engine on one batch: timings from generate() itself. */
async function ourRun(engine, config, batch) {
  const timings = { prefillMs: 0, prefillTokens: 0, decodeMs: 0, decodeTokens: 0 };
  const requests = prompts(batch, config.vocabSize, 1 + batch).map((prompt) => ({ prompt, maxNewTokens: genLen, stopAtEos: false }));
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
// The machine may be shared: for each batch size the roofline, our run and the peer's run follow each other closely
// (both models stay loaded when they fit comfortably; bigger ones run ours for all batches, then the peer's).
for (const name of values.models.split(',')) {
  const config = optConfigByName(name);
  const batches = values.batches ? values.batches.split(',').map(Number) : defaultBatches[name] ?? [1, 8];
  const together = config.hiddenSize <= 1024;
  const dir = mkdtempSync(join(tmpdir(), 'flexhelm-bench-'));
  try {
    let peer;
    const openPeer = async () => {
      if (values['no-peer']) return undefined;
      const t0 = performance.now();
      exportOnnxFromSource(config, new DummyTensorSource(config, 1), join(dir, 'peer'));
      const p = await loadPeer(dir);
      log(`  @huggingface/transformers copy exported and loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
      return p;
    };
    log(`${name}: loading random weights`);
    const t0 = performance.now();
    const engine = await OptEngine.dummy(config, { seed: 1 });
    log(`  loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    await generate(engine, [{ prompt: [2, 5, 6, 7], maxNewTokens: 2 }]);
    if (together) peer = await openPeer();
    const cases = [];
    for (const batch of batches) {
      const c = { model: name, batch, prompt_len: promptLen, gen_len: genLen };
      c.roofline_gflops = await roofline(config, batch);
      Object.assign(c, await ourRun(engine, config, batch));
      c.roofline_ratio = +(c.achieved_gflops / c.roofline_gflops).toFixed(3);
      log(`  batch ${batch}: prefill ${c.prefill_s} s (${c.prefill_tokens_per_s} tok/s, ${c.achieved_gflops} GFLOP/s vs MatMul ${c.roofline_gflops}), decode ${c.decode_s} s (${c.decode_tokens_per_s} tok/s), ${c.generation_throughput} generated tok/s`);
      if (peer) {
        c.peer_generation_throughput = +(await peer.run(batch)).toFixed(2);
        log(`  batch ${batch}: peer ${c.peer_generation_throughput} generated tok/s`);
      }
      cases.push(c);
    }
    await engine.close();
    if (!together) {
      peer = await openPeer();
      if (peer) for (const c of cases) c.peer_generation_throughput = +(await peer.run(c.batch)).toFixed(2);
    }
    await peer?.close();
    for (const c of cases) {
      if (c.peer_generation_throughput) c.peer_ratio = +(c.generation_throughput / c.peer_generation_throughput).toFixed(2);
      results.push({ ...c, date, cpus: cpus().length, cpu_model: cpus()[0]?.model, load_average_1m: +loadavg()[0].toFixed(1) });
    }
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
