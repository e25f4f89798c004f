#!/usr/bin/env node
// pnpm bench:offload:moe [--base qwen1.5-moe-a2.7b] [--config JSON] [--prompt-len 512] [--gen-len 32] [--cut-gen-len 8]
//                        [--batches 1,8] [--rounds 1] [--max-ram 8] [--offload-dir DIR] [--json FILE]
// A mixture of experts offloaded with every weight on disk, the expert as the unit (issue 29 point 3): random weights
// of a make-model base's shape (default Qwen1.5-MoE-A2.7B, made in memory and written once to the disk tier as f16),
// oneDNN bf16 computing, each batch size run twice on the same loaded model, interleaved round by round: `experts`
// (a decode step reads each sparse layer without its experts, then only the experts its router chose) and
// `whole-layers` (every expert read with its layer: layer-by-layer offloading). Prompt `--prompt-len`, then
// `--cut-gen-len` − 1 decode steps measured (FlexLLMGen's cut_gen_len). Per decode step of the `experts` runs:
//   (a) disk bytes read ÷ the bytes needed: each sparse layer's dense part, the experts its router chose in that
//       step (observed through the backend's routes), the head and the embedding rows — goal ≤ 1.05;
//   (b) wall ÷ max(I/O busy, compute) — compute is the time in layer and head calls less the time they waited for
//       experts being read — goal ≤ 1.10;
//   (c) decode tokens/s against `whole-layers` (same run).
// Not a test: run it alone, under /tmp/flexhelm-bench.lock. Needs `pnpm build`.
import { mkdirSync, renameSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { benchHost, finishHost, hostLine } from '../../../tooling/scripts/bench-host.mjs';

const { values: args } = parseArgs({
  options: {
    base: { type: 'string', default: 'qwen1.5-moe-a2.7b' },
    // config.json fields over the base's (a smaller shape for a quick look), as JSON.
    config: { type: 'string' },
    'prompt-len': { type: 'string', default: '512' },
    'gen-len': { type: 'string', default: '32' },
    'cut-gen-len': { type: 'string', default: '8' },
    batches: { type: 'string', default: '1,8' },
    rounds: { type: 'string', default: '1' },
    'max-ram': { type: 'string', default: '8' },
    'offload-dir': { type: 'string', default: join(tmpdir(), 'flexhelm-moe-bench') },
    json: { type: 'string' },
  },
});
const int = (name) => {
  const n = Number(args[name]);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive whole number, got ${args[name]}`);
  return n;
};
const promptLen = int('prompt-len');
const genLen = int('gen-len');
const cutGenLen = Math.min(int('cut-gen-len'), genLen);
const rounds = int('rounds');
const batches = args.batches.split(',').map(Number);
if (batches.some((b) => !Number.isInteger(b) || b < 1)) throw new Error(`--batches takes whole numbers ≥ 1, got ${args.batches}`);
const GiB = 1024 ** 3;
const maxRam = Number(args['max-ram']) * GiB;
const log = (...a) => console.error(...a);

const engineModule = await import('@flexhelm/engine');
const { describeHfConfig, Engine, resolveHubConfig } = engineModule;
const offload = await import('@flexhelm/offload');
const { checkBudget, OffloadingBackend, parsePolicy, percentsFromArgs } = offload;
const onednn = await import(new URL('../../onednn-backend/dist/index.js', import.meta.url).href);
const status = onednn.oneDnnStatus();
if (!status.available) throw new Error(`oneDNN is unavailable here (${status.reason})`);

const hf = resolveHubConfig(args.config ? { base: args.base, ...JSON.parse(args.config) } : args.base).hf;
const d = describeHfConfig(hf, args.base);
if (!d.moe) throw new Error(`${args.base} is not a mixture of experts`);
const host = benchHost();
log(`bench:offload:moe — ${hostLine(host)}`);

// Bytes each part takes on the disk tier: f16, each tensor at a 4 KiB boundary (WeightTierStore's layout).
const aligned = (values) => Math.ceil((values * 2) / 4096) * 4096;
const numel = (shape) => shape.reduce((a, b) => a * b, 1);
const expertOf = (key) => /^expert\.(\d+)\./.exec(key)?.[1];
const expertBytes = d.layerTensors.filter((t) => expertOf(t.key) === '0').reduce((a, t) => a + aligned(numel(t.shape)), 0);
const denseLayerBytes = (index) => engineModule.layerTensorsOf(d, index).filter((t) => expertOf(t.key) === undefined).reduce((a, t) => a + aligned(numel(t.shape)), 0);
const headBytes = aligned(d.vocabSize * d.hiddenSize) + (d.norm.final ? aligned(d.hiddenSize) : 0);

// Every weight on disk, the KV cache on the host tier (f16), activations on the compute tier.
const policy = parsePolicy({ gpuBatchSize: Math.max(...batches), numGpuBatches: 1, ...percentsFromArgs([0, 0, 0, 100, 100, 0]) });
mkdirSync(args['offload-dir'], { recursive: true });
const fs = statfsSync(args['offload-dir']);
const plan = checkBudget(offload.modelShapeOfDescription(d), policy, { promptLen, genLen }, { maxRam, freeDisk: fs.bavail * fs.bsize }, { handOver: 'f16' });
log(`plan: RAM ${(plan.ramBytes / GiB).toFixed(2)} GiB of ${args['max-ram']}, disk ${(plan.diskBytes / GiB).toFixed(1)} GiB; ${d.layers} layers, ${d.moe.experts} experts of ${(expertBytes / 2 ** 20).toFixed(1)} MiB, top ${d.moe.topK}`);

// Routes of the current step, per sparse layer: the distinct experts chosen (the union over micro-batches).
let stepRoutes = new Map();
const inner = new onednn.OneDnnBackend({
  dtype: 'bf16',
  onRoutes: (layer, routes) => {
    const set = stepRoutes.get(layer) ?? new Set();
    for (const e of routes.experts) set.add(e);
    stepRoutes.set(layer, set);
  },
});
const options = { offloadDir: args['offload-dir'], experts: 'auto' };
const backend = new OffloadingBackend(inner, policy, options);
const l0 = performance.now();
const engine = await Engine.fromWeights(d, tiledWeights(d, 1), { backend });
const loadS = (performance.now() - l0) / 1000;
const headStreamed = backend.summary().headStreamed;
log(`loaded in ${loadS.toFixed(0)} s: ${JSON.stringify(backend.summary().bytes)}, head ${headStreamed ? 'streamed' : 'resident'}`);

/**
 * Random weights that are cheap to make, already in the backends' `[in, out]` layout: one seeded block of 64K values
 * tiled over each tensor from a per-tensor offset (as bench:offload's OPT weights), scaled like a fan-in uniform init;
 * norms near 1. Generating 14 B independent values in JS would take longer than the measurement, and meaning is not
 * needed: the router's picks spread over the experts as with trained weights' (routing is measured, not assumed).
 */
function tiledWeights(d, seed) {
  const BLOCK = 1 << 16;
  let s = seed;
  const unit = Float32Array.from({ length: BLOCK + 4096 }, () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return (2 * s) / 2 ** 31 - 1;
  });
  let salt = 0;
  const tensor = (shape, norm = false) => {
    const out = new Float32Array(numel(shape));
    const half = norm ? 0.25 : Math.sqrt(3) / Math.sqrt(shape[0]);
    const centre = norm ? 1 : 0;
    const shift = (salt++ * 97) % 4096;
    const first = Math.min(out.length, BLOCK);
    for (let i = 0; i < first; i++) out[i] = centre + unit[i + shift] * half;
    for (let n = first; n < out.length; n *= 2) out.copyWithin(n, 0, Math.min(n, out.length - n));
    return out;
  };
  const made = new Map();
  const shared = (key, shape) => {
    if (!made.has(key)) made.set(key, tensor(shape, shape.length === 1));
    return made.get(key);
  };
  const H = d.hiddenSize;
  return {
    embedding: () => ({ tokens: tensor([H, d.vocabSize]) }),
    // [in, out] tensors: the fan-in is the first dimension; vectors are norms. Every layer gets the same arrays (the
    // tiers copy them to f16 as they place a layer, nothing keeps them), so loading touches no fresh memory per layer.
    layer: (i) => Object.fromEntries(engineModule.layerTensorsOf(d, i).map((t) => [t.key, shared(t.key, t.shape)])),
    head: (tokens) => ({ finalLnW: tensor([H], true), lmHead: d.embedding.tiedHead && tokens ? tokens : tensor([H, d.vocabSize]) }),
    close: () => undefined,
  };
}

async function runOnce(mode, B) {
  options.experts = mode;
  const ids = Array.from({ length: B }, (_, b) => Array.from({ length: promptLen }, (_, s) => 100 + ((b * 131 + s * 17) % Math.min(50000, d.vocabSize - 100))));
  const run = engine.startBatch(B);
  const greedy = async (hidden, seq) => {
    const logits = await run.logits(hidden, seq, ids.map((_, row) => ({ row, pos: seq - 1 })));
    const V = d.vocabSize;
    return ids.map((_, b) => {
      let best = 0;
      for (let v = 1; v < V; v++) if (logits[b * V + v] > logits[b * V + best]) best = v;
      return best;
    });
  };
  const p0 = performance.now();
  let next = await greedy(await run.step(ids, ids.map((r) => r.map(() => 1))), promptLen);
  const prefillS = (performance.now() - p0) / 1000;
  const steps = [];
  for (let t = 1; t < cutGenLen; t++) {
    const before = { ...backend.stats, wait: inner.moeStats?.expertWaitMs ?? 0 };
    stepRoutes = new Map();
    const w0 = performance.now();
    next = await greedy(await run.step(next.map((x) => [x]), next.map(() => [1])), 1);
    const wallMs = performance.now() - w0;
    const delta = (k) => backend.stats[k] - before[k];
    const waitMs = (inner.moeStats?.expertWaitMs ?? 0) - before.wait;
    // What the step needed from disk: dense parts of every layer, the routed experts, a streamed head, the embedding rows.
    let needed = (headStreamed ? headBytes : 0) + delta('embeddingDiskBytes');
    for (let i = 0; i < d.layers; i++) needed += denseLayerBytes(i) + (stepRoutes.get(i)?.size ?? 0) * expertBytes;
    const computeMs = delta('computeMs') - waitMs;
    steps.push({
      wallMs,
      diskBytes: delta('diskBytesRead'),
      neededBytes: needed,
      bytesRatio: delta('diskBytesRead') / needed,
      ioBusyMs: delta('ioBusyMs'),
      computeMs,
      expertWaitMs: waitMs,
      wallOverMax: wallMs / Math.max(delta('ioBusyMs'), computeMs),
      expertLoads: delta('expertLoads'),
      routedExperts: [...stepRoutes.values()].reduce((a, s) => a + s.size, 0),
    });
  }
  await run.close();
  const decodeS = steps.reduce((a, s) => a + s.wallMs, 0) / 1000;
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  return {
    mode,
    batch: B,
    prefillS,
    prefillTokS: (B * promptLen) / prefillS,
    decodeTokS: (B * steps.length) / decodeS,
    diskGBPerStep: median(steps.map((s) => s.diskBytes)) / 1e9,
    bytesRatio: median(steps.map((s) => s.bytesRatio)),
    wallOverMax: median(steps.map((s) => s.wallOverMax)),
    steps,
  };
}

const results = [];
for (let r = 0; r < rounds; r++) {
  for (const B of batches) {
    for (const mode of r % 2 === 0 ? ['experts', 'whole-layers'] : ['whole-layers', 'experts']) {
      const out = await runOnce(mode === 'experts' ? 'auto' : 'whole-layers', B);
      out.mode = mode;
      out.round = r;
      results.push(out);
      log(`round ${r} batch ${B} ${mode}: prefill ${out.prefillTokS.toFixed(1)} tok/s, decode ${out.decodeTokS.toFixed(2)} tok/s, ${out.diskGBPerStep.toFixed(2)} GB read a step, bytes ÷ needed ${out.bytesRatio.toFixed(3)}, wall ÷ max(io, compute) ${out.wallOverMax.toFixed(3)}`);
    }
  }
}
await engine.close();
rmSync(args['offload-dir'], { recursive: true, force: true });

const summary = batches.map((B) => {
  const of = (mode) => results.filter((x) => x.batch === B && x.mode === mode);
  const mean = (xs, k) => xs.reduce((a, x) => a + x[k], 0) / xs.length;
  const experts = of('experts');
  const whole = of('whole-layers');
  return {
    batch: B,
    bytesRatio: mean(experts, 'bytesRatio'),
    bytesRatioGoal: 1.05,
    wallOverMax: mean(experts, 'wallOverMax'),
    wallOverMaxGoal: 1.1,
    decodeTokS: { experts: mean(experts, 'decodeTokS'), wholeLayers: mean(whole, 'decodeTokS') },
    decodeSpeedup: mean(experts, 'decodeTokS') / mean(whole, 'decodeTokS'),
    diskGBPerStep: { experts: mean(experts, 'diskGBPerStep'), wholeLayers: mean(whole, 'diskGBPerStep') },
  };
});
for (const s of summary) {
  log(`batch ${s.batch}: (a) bytes ÷ needed ${s.bytesRatio.toFixed(3)} (goal ≤ 1.05), (b) wall ÷ max(io, compute) ${s.wallOverMax.toFixed(3)} (goal ≤ 1.10), (c) decode ${s.decodeTokS.experts.toFixed(2)} vs ${s.decodeTokS.wholeLayers.toFixed(2)} tok/s whole layers (${s.decodeSpeedup.toFixed(2)}×)`);
}
if (args.json) {
  const tmp = `${args.json}.tmp-${process.pid}`;
  writeFileSync(tmp, `${JSON.stringify({ host: finishHost(host), base: args.base, config: hf, promptLen, genLen, cutGenLen, maxRamGiB: Number(args['max-ram']), plan: { ramBytes: plan.ramBytes, diskBytes: plan.diskBytes }, loadS, summary, results }, null, 2)}\n`);
  renameSync(tmp, args.json);
}
