#!/usr/bin/env node
// pnpm bench:offload [--json FILE] [--models opt-1.3b,opt-6.7b] [--prompt-len 512] [--gen-len 32] [--cut-gen-len N]
//                    [--gpu-batch-size 1] [--num-gpu-batches 2] [--max-ram GiB] [--big-max-ram GiB] [--offload-dir DIR]
//                    [--cases w0,w0c,w50,w50c,w100,w100c,kvdisk,kv4bit,bighost,big] [--until HH:MM (UTC)]
//                    [--model-dir DIR] [--backend onnxruntime|onednn-bf16]
// FlexLLMGen-style throughput of the offloaded engine on dummy weights. For the first model: weights 0%, 50%, 100% on
// disk, each with and without 4-bit compression, the KV cache on the host tier (f16); then the KV cache on disk and
// the 4-bit KV cache. Each further (larger) model runs once with every weight on disk under --big-max-ram, a budget
// below its f16 weights. Every case is checked against its budget before it starts (free disk too) and runs in its
// own process (clean peak RSS). Any built-in shape goes in --models (OPT sizes, and the Llama-family bases of make-model:
// llama-3.2-1b, qwen2-0.5b, llama-3.1-8b, … with random weights made in memory); --model-dir instead loads a model
// folder of any family (e.g. `flexhelm make-model --config llama-3.1-8b`: 16 GB of bf16 weights read from disk) as the
// larger model of the `bighost`/`big` cases.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, statfsSync, writeFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { benchHost, finishHost, hostLine } from '../../../tooling/scripts/bench-host.mjs';

const { values: args } = parseArgs({
  options: {
    json: { type: 'string' },
    models: { type: 'string', default: 'opt-1.3b,opt-6.7b' },
    'prompt-len': { type: 'string', default: '512' },
    'gen-len': { type: 'string', default: '32' },
    'cut-gen-len': { type: 'string' },
    'gpu-batch-size': { type: 'string', default: '1' },
    'max-ram': { type: 'string', default: '8' },
    'big-max-ram': { type: 'string', default: '8' },
    'num-gpu-batches': { type: 'string', default: '2' },
    'offload-dir': { type: 'string', default: join(tmpdir(), 'flexhelm-offload-bench') },
    one: { type: 'string' },
    // A subset of the cases by label (w0, w0c, w50, w50c, w100, w100c, kvdisk, kv4bit, bighost, big), when time is short.
    cases: { type: 'string' },
    // Stop starting cases at this UTC time (HH:MM) and kill a running one then; what did not run is reported.
    until: { type: 'string' },
    // A model folder (config.json + safetensors of any family) for the bighost/big cases, after --models' first.
    'model-dir': { type: 'string' },
    // The compute backend under the offloading tiers: onnxruntime fp32 (default) or oneDNN bf16 (what `flexhelm run`
    // picks under offloading on a CPU with AVX-512 or AMX).
    backend: { type: 'string', default: 'onnxruntime' },
  },
});
const int = (name) => {
  const n = Number(args[name]);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer, got ${args[name]}`);
  return n;
};
const GB = 1e9;

/**
 * Dummy weights that are cheap to make: every tensor is one seeded random block of 64K values (scaled like the
 * engine's DummyTensorSource) tiled with a per-tensor offset. FlexLLMGen's dummy weights are not meaningful either;
 * generating 6.7B independent random values in JS would take longer than the measurement.
 */
function tiledDummySource(engine, d, seed) {
  const { expectedOptTensors, initRange, SeededUniform, canonicalTensorName } = engine;
  const BLOCK = 1 << 16;
  const rng = new SeededUniform(seed);
  const unit = Float32Array.from({ length: BLOCK + 4096 }, () => 2 * rng.next() - 1);
  const tensors = new Map([...expectedOptTensors(d)].map(([name, shape]) => [name, { name, dtype: 'F32', shape, file: `<tiled dummy ${d.name}>` }]));
  let salt = 0;
  return {
    tensors,
    read(name) {
      const { shape } = tensors.get(name);
      const { centre, halfWidth } = initRange(canonicalTensorName(name), shape, d);
      const out = new Float32Array(shape.reduce((a, b) => a * b, 1));
      const shift = (salt++ * 97) % 4096;
      const first = Math.min(out.length, BLOCK);
      for (let i = 0; i < first; i++) out[i] = centre + unit[i + shift] * halfWidth;
      for (let n = first; n < out.length; n *= 2) out.copyWithin(n, 0, Math.min(n, out.length - n));
      return out;
    },
    close() {},
  };
}

/**
 * The model a case runs: `spec.modelDir` (a folder of any family, its weights read from disk), an OPT size (tiled
 * dummy weights) or a Llama-family base of make-model (random weights made in memory). Gives the offloading shape (the
 * memory plan's, as `flexhelm run` plans with), the family, the layers' f16 bytes and how to open it.
 */
function modelOf(engine, offload, spec) {
  const { descriptionByName, Engine, isOptShaped, readModelDescription } = engine;
  const fromDescription = (d, open) => ({
    family: d.family,
    shape: offload.modelShapeOfDescription(d),
    layerWeightBytesF16: d.layers * d.layerTensors.reduce((a, t) => a + t.shape.reduce((x, y) => x * y, 1), 0) * 2,
    open,
  });
  if (spec.modelDir) {
    const d = readModelDescription(spec.modelDir);
    return fromDescription(d, (options) => Engine.load(spec.modelDir, options));
  }
  const d = descriptionByName(spec.model);
  if (!isOptShaped(d)) return fromDescription(d, (options) => Engine.dummy(d, { ...options, seed: 1 }));
  return {
    family: d.family,
    shape: offload.modelShapeOfDescription(d),
    layerWeightBytesF16: d.layers * (4 * d.hiddenSize ** 2 + 2 * d.hiddenSize * d.mlp.intermediateSize) * 2,
    open: (options) => Engine.fromSource(d, tiledDummySource(engine, d, 1), options),
  };
}

/** The compute backend under the tiers: `onnxruntime` (fp32) or `onednn-bf16` (loaded by path, as bench:engine does). */
async function computeBackend(name, OrtBackend) {
  if (name === 'onnxruntime') return new OrtBackend();
  if (name !== 'onednn-bf16') throw new Error(`--backend takes onnxruntime or onednn-bf16; got '${name}'`);
  const onednn = await import(new URL('../../onednn-backend/dist/index.js', import.meta.url).href);
  const status = onednn.oneDnnStatus();
  if (!status.available) throw new Error(`--backend onednn-bf16: oneDNN is unavailable here (${status.reason})`);
  return new onednn.OneDnnBackend({ dtype: 'bf16' });
}

async function one(spec) {
  const engineModule = await import('@flexhelm/engine');
  const { OrtBackend } = await import('@flexhelm/ort-backend');
  const offload = await import('@flexhelm/offload');
  const { BudgetError, checkBudget, OffloadingBackend, parsePolicy } = offload;
  const { allocPinned, readFile, writeFile } = await import('@flexhelm/pinned-memory');
  const model = modelOf(engineModule, offload, spec);
  const policy = parsePolicy({
    gpuBatchSize: spec.gbs,
    numGpuBatches: spec.ngb,
    wGpuPercent: 0,
    wCpuPercent: 100 - spec.diskPercent,
    cacheGpuPercent: 0,
    cacheCpuPercent: spec.cache === 'disk' ? 0 : 100,
    actGpuPercent: 0,
    actCpuPercent: 100,
    compressWeight: spec.compress,
    compressCache: spec.compressCache,
  });
  mkdirSync(spec.offloadDir, { recursive: true });
  const shape = model.shape;
  const fs = statfsSync(spec.offloadDir);
  let plan;
  try {
    // Refused before anything is loaded when the plan cannot fit the budget or the free disk.
    plan = checkBudget(shape, policy, { promptLen: spec.promptLen, genLen: spec.genLen }, { maxRam: spec.maxRam, freeDisk: fs.bavail * fs.bsize });
  } catch (err) {
    if (err instanceof BudgetError) return { ...spec, refused: err.message };
    throw err;
  }

  // O_DIRECT read bandwidth of the same folder, measured in this run (a file larger than one layer, read cold-ish).
  const probe = join(spec.offloadDir, `probe-${process.pid}.bin`);
  const probeBytes = 64 * 1024 * 1024;
  const buf = await allocPinned(probeBytes);
  new Uint8Array(buf).fill(7);
  await writeFile(probe, buf);
  const r0 = performance.now();
  await readFile(probe, buf, { direct: true });
  const directGBs = probeBytes / GB / ((performance.now() - r0) / 1000);
  rmSync(probe, { force: true });

  const backend = new OffloadingBackend(await computeBackend(spec.backend, OrtBackend), policy, { offloadDir: spec.offloadDir });
  const l0 = performance.now();
  const engine = await model.open({ backend });
  const loadS = (performance.now() - l0) / 1000;
  const B = spec.gbs * spec.ngb;
  const ids = Array.from({ length: B }, (_, b) => Array.from({ length: spec.promptLen }, (_, s) => 4 + ((b * 131 + s * 17) % 50000)));
  const mask = ids.map((r) => r.map(() => 1));
  const run = engine.startBatch(B);
  const greedy = async (hidden, seq) => {
    const logits = await run.logits(hidden, seq, ids.map((_, row) => ({ row, pos: seq - 1 })));
    const V = shape.vocabSize;
    return ids.map((_, b) => {
      let best = 0;
      for (let v = 1; v < V; v++) if (logits[b * V + v] > logits[b * V + best]) best = v;
      return best;
    });
  };
  const p0 = performance.now();
  let next = await greedy(await run.step(ids, mask), spec.promptLen);
  const prefillS = (performance.now() - p0) / 1000;
  const before = { ...backend.stats };
  const d0 = performance.now();
  for (let t = 1; t < spec.cutGenLen; t++) next = await greedy(await run.step(next.map((x) => [x]), next.map(() => [1])), 1);
  const decodeS = (performance.now() - d0) / 1000;
  const steps = spec.cutGenLen - 1;
  const delta = Object.fromEntries(Object.entries(backend.stats).map(([k, v]) => [k, v - before[k]]));
  const summary = backend.summary();
  await engine.close();
  // Decode time per token measured over cutGenLen-1 steps, projected to genLen (FlexLLMGen's cut_gen_len).
  const decodePerStep = steps > 0 ? decodeS / steps : 0;
  const projectedDecodeS = decodePerStep * (spec.genLen - 1);
  // I/O of the steps: wall time with any weight load (host conversion, disk read) or cache load/store running.
  const io = delta.ioBusyMs / 1000;
  const compute = delta.computeMs / 1000;
  return {
    ...spec,
    batch: B,
    loadS,
    prefillS,
    decodeS,
    prefillTokS: (B * spec.promptLen) / prefillS,
    decodeTokS: steps > 0 ? (B * steps) / decodeS : 0,
    totalTokS: (B * spec.genLen) / (prefillS + projectedDecodeS),
    diskBytesPerDecodeStep: steps > 0 ? delta.diskBytesRead / steps : 0,
    cacheDiskBytesPerDecodeStep: steps > 0 ? (delta.cacheDiskBytesRead + delta.cacheDiskBytesWritten) / steps : 0,
    decodeCacheLoadS: delta.cacheLoadMs / 1000,
    decodeCacheStoreS: delta.cacheStoreMs / 1000,
    decodeCacheStallS: delta.cacheStallMs / 1000,
    diskGBs: delta.diskReadMs > 0 ? delta.diskBytesRead / GB / (delta.diskReadMs / 1000) : 0,
    directReadGBs: directGBs,
    decodeIoS: io,
    decodeComputeS: compute,
    decodeStallS: delta.stallMs / 1000,
    decodeWallS: decodeS,
    overlapEfficiency: Math.min(io, compute) > 0 ? (io + compute - decodeS) / Math.min(io, compute) : null,
    wallOverMax: decodeS / Math.max(io, compute),
    peakRssBytes: process.resourceUsage().maxRSS * 1024,
    plannedRamBytes: plan.ramBytes,
    plan,
    weightBytesF16: model.layerWeightBytesF16,
    family: model.family,
    tiers: summary,
  };
}

if (args.one) {
  const result = await one(JSON.parse(args.one));
  process.stdout.write(`${JSON.stringify(result)}\n`);
} else {
  const offloadDir = args['offload-dir'];
  mkdirSync(offloadDir, { recursive: true });
  const free = statfsSync(offloadDir);
  const freeBytes = free.bavail * free.bsize;
  const GiB = 2 ** 30;
  const gib = (name) => {
    const n = Number(args[name]);
    if (!(n > 0)) throw new Error(`--${name} must be a positive number of GiB, got ${args[name]}`);
    return n * GiB;
  };
  const base = { promptLen: int('prompt-len'), genLen: int('gen-len'), gbs: int('gpu-batch-size'), ngb: int('num-gpu-batches'), offloadDir, backend: args.backend };
  base.cutGenLen = args['cut-gen-len'] ? Math.min(int('cut-gen-len'), base.genLen) : base.genLen;
  const engineModule = await import('@flexhelm/engine');
  const offloadModule = await import('@flexhelm/offload');
  const models = args.models.split(',').map((m) => m.trim()).filter(Boolean);
  const modelDir = args['model-dir'];
  if (modelDir !== undefined && !existsSync(join(modelDir, 'config.json'))) throw new Error(`--model-dir ${modelDir} does not exist; write one with \`flexhelm make-model --config llama-3.1-8b --out ${modelDir}\``);
  if (!['onnxruntime', 'onednn-bf16'].includes(args.backend)) throw new Error(`--backend takes onnxruntime or onednn-bf16; got '${args.backend}'`);
  // The folder is the larger model: after --models' first, in place of the others.
  const entries = modelDir === undefined ? models.map((model) => ({ model })) : [{ model: models[0] }, { model: basename(modelDir.replace(/[/\\]+$/, '')), modelDir }];
  const cases = [];
  const skipped = [];
  entries.forEach(({ model, modelDir: dir }, i) => {
    const m = modelOf(engineModule, offloadModule, { model, modelDir: dir });
    const layerF16 = m.layerWeightBytesF16;
    // Free disk first: the weights (f16) plus the embedding and a KV cache on disk must fit.
    if (freeBytes < layerF16 * 1.2 + 512e6) {
      skipped.push(`${model}: ${(layerF16 / GB).toFixed(1)} GB of f16 weights do not fit the ${(freeBytes / GB).toFixed(1)} GB free in ${offloadDir}`);
      return;
    }
    const common = { ...base, model, ...(dir ? { modelDir: dir } : {}), compressCache: false, cache: 'host' };
    if (i === 0) {
      for (const diskPercent of [0, 50, 100]) for (const compress of [false, true]) cases.push({ ...common, label: `w${diskPercent}${compress ? 'c' : ''}`, diskPercent, compress, maxRam: gib('max-ram') });
      cases.push({ ...common, label: 'kvdisk', diskPercent: 50, compress: false, cache: 'disk', maxRam: gib('max-ram') });
      cases.push({ ...common, label: 'kv4bit', diskPercent: 50, compress: false, compressCache: true, maxRam: gib('max-ram') });
    } else {
      // All weights on the host tier cannot fit that budget: refused before loading, with a policy that would fit.
      cases.push({ ...common, label: 'bighost', diskPercent: 0, compress: false, maxRam: gib('big-max-ram') });
      cases.push({ ...common, label: 'big', diskPercent: 100, compress: false, maxRam: gib('big-max-ram') });
    }
  });
  if (args.cases) {
    const wanted = new Set(args.cases.split(','));
    for (let i = cases.length - 1; i >= 0; i--) if (!wanted.has(cases[i].label)) skipped.push(`${cases[i].model} case ${cases.splice(i, 1)[0].label} (not in --cases)`);
  }
  // The largest model first: its case (weights above the RAM budget) matters most if the run is cut short.
  const order = entries.map((e) => e.model);
  cases.sort((a, b) => order.indexOf(b.model) - order.indexOf(a.model));
  const host = benchHost();
  process.stderr.write(`host: ${hostLine(host)}\n`);
  const save = (results) => {
    if (!args.json) return;
    const tmp = `${args.json}.tmp-${process.pid}`;
    writeFileSync(tmp, `${JSON.stringify({ host: finishHost(host), base, freeBytes, skipped, results }, null, 2)}\n`);
    renameSync(tmp, args.json);
  };
  for (const s of skipped) process.stderr.write(`skipped ${s}\n`);
  const results = [];
  let deadline = Infinity;
  if (args.until) {
    const [h, m] = args.until.split(':').map(Number);
    const d = new Date();
    d.setUTCHours(h, m, 0, 0);
    if (d.getTime() < Date.now()) d.setUTCDate(d.getUTCDate() + 1);
    deadline = d.getTime();
  }
  for (const spec of cases) {
    if (deadline - Date.now() < 60_000) {
      skipped.push(`${spec.model} case ${spec.label} (not started: --until ${args.until})`);
      process.stderr.write(`${spec.model} ${spec.label}: not started, --until ${args.until} reached\n`);
      save(results);
      continue;
    }
    process.stderr.write(`${spec.model}: weights ${spec.diskPercent}% on disk${spec.compress ? ', 4-bit' : ''}, cache on ${spec.cache}${spec.compressCache ? ' (4-bit)' : ''}, budget ${(spec.maxRam / GiB).toFixed(1)} GiB… `);
    const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--one', JSON.stringify(spec)], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
      ...(Number.isFinite(deadline) ? { timeout: deadline - Date.now(), killSignal: 'SIGKILL' } : {}),
    });
    // A killed case cannot clean up: remove its private offload folder (flexhelm-<pid>-…) here.
    if (r.status !== 0) for (const name of readdirSync(offloadDir)) if (name.startsWith(`flexhelm-${r.pid}-`)) rmSync(join(offloadDir, name), { recursive: true, force: true });
    // A failed case is reported (with its exit status or signal) and the others still run.
    const result = r.status === 0 ? JSON.parse(r.stdout.trim().split('\n').pop()) : { ...spec, refused: `failed: exit ${r.status ?? r.signal}` };
    process.stderr.write(result.refused ? `${result.refused.startsWith('failed') ? '' : 'refused before starting: '}${result.refused}\n` : `total ${result.totalTokS.toFixed(3)} tok/s, peak RSS ${(result.peakRssBytes / GiB).toFixed(2)} GiB\n`);
    results.push(result);
    save(results);
  }
  const f = (x, d = 2) => (x === null || x === undefined ? '–' : x.toFixed(d));
  const lines = [
    `batch ${base.gbs}×${base.ngb}, prompt ${base.promptLen}, gen ${base.genLen}${base.cutGenLen < base.genLen ? ` (decode measured over ${base.cutGenLen - 1} steps, projected: --cut-gen-len ${base.cutGenLen})` : ''}; free disk ${(freeBytes / GB).toFixed(1)} GB`,
    ...skipped.map((s) => `skipped ${s}`),
    '',
    '| model | weights on disk | 4-bit w | KV cache | prefill tok/s | decode tok/s | total tok/s | disk MB/decode step (weights / cache) | disk GB/s (O_DIRECT probe) | decode io s | decode compute s | decode wall s | wall / max(io, compute) | overlap eff. | peak RSS GiB (plan / budget) |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...results.map((r) =>
      r.refused
        ? `| ${r.model} | ${r.diskPercent}% | ${r.compress ? 'yes' : 'no'} | ${r.cache}${r.compressCache ? ' 4-bit' : ''} | ${r.refused.startsWith('failed') ? r.refused : `refused before starting: ${r.refused}`} |`
        : `| ${r.model} | ${r.diskPercent}% | ${r.compress ? 'yes' : 'no'} | ${r.cache}${r.compressCache ? ' 4-bit' : ' f16'} | ${f(r.prefillTokS)} | ${f(r.decodeTokS, 3)} | ${f(r.totalTokS, 3)} | ${f(r.diskBytesPerDecodeStep / 1e6, 0)} / ${f(r.cacheDiskBytesPerDecodeStep / 1e6, 0)} | ${f(r.diskGBs)} (${f(r.directReadGBs)}) | ${f(r.decodeIoS)} | ${f(r.decodeComputeS)} | ${f(r.decodeWallS)} | ${f(r.wallOverMax)} | ${f(r.overlapEfficiency)} | ${f(r.peakRssBytes / GiB)} (${f(r.plannedRamBytes / GiB)} / ${f(r.maxRam / GiB, 1)}) |`,
    ),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}
