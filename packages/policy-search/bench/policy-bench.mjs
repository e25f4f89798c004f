#!/usr/bin/env node
// pnpm bench:policy [--json FILE] [--prompt-len 128] [--gen-len 16] [--offload-dir DIR] [--data-dir DIR] [--part validation|search]
//                   [--fresh-profile] [--repeats 3]
// (a) Validation: predicted vs measured step times and peak RSS for 13 policies on opt-125m and opt-350m shapes
//     (dummy weights, each run in its own process). The profile's cost model is fitted to its own calibration runs
//     (CALIBRATION_POLICIES at CALIBRATION_WORKLOAD, 12 layers at most): none of them is a validated policy/workload.
// (b) Search: `auto` (searchPolicy) vs a grid of policies measured one by one and FlexLLMGen's reference policies
//     scaled to this machine, on opt-125m, each measured --repeats times; auto's median must reach ≥ 90% of the best
//     measured median throughput.
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { descriptionByName } from '@flexhelm/engine';
import { modelShapeOfDescription } from '@flexhelm/offload';
import { benchHost, finishHost, hostLine } from '../../../tooling/scripts/bench-host.mjs';
import { parsePolicy } from '@flexhelm/offload';
import { ensureProfile, predictCost, searchPolicy, effectiveBudget, runPolicy, CALIBRATION_POLICIES, CALIBRATION_WORKLOAD, calibrationLayers } from '@flexhelm/policy-search';

const { values: args } = parseArgs({
  options: {
    json: { type: 'string' },
    // Long enough that a run lasts seconds (a 7-step decode of prompt 32 was within this VM's noise).
    'prompt-len': { type: 'string', default: '128' },
    'gen-len': { type: 'string', default: '16' },
    'offload-dir': { type: 'string', default: join(tmpdir(), 'flexhelm-policy-bench') },
    'data-dir': { type: 'string', default: join(tmpdir(), 'flexhelm-policy-bench-data') },
    part: { type: 'string', default: 'all' },
    // Re-profile (quick, with its calibration runs) right before each model's validation runs and before the search,
    // so prediction and measurement see the same machine and load.
    'fresh-profile': { type: 'boolean', default: false },
    // Search: each policy measured this many times, compared by the median (one run's noise must not decide).
    repeats: { type: 'string', default: '3' },
  },
});
const promptLen = Number(args['prompt-len']);
const genLen = Number(args['gen-len']);
const repeats = Number(args.repeats);
for (const [flag, n] of [['prompt-len', promptLen], ['gen-len', genLen], ['repeats', repeats]]) if (!Number.isInteger(n) || n < 1) throw new Error(`--${flag} must be a positive integer`);
const offloadDir = args['offload-dir'];
mkdirSync(offloadDir, { recursive: true });
// The one shape of a model: its description's (what `flexhelm run` plans and searches with).
const shapeOf = (d) => modelShapeOfDescription(d);
const policyOf = ([wg, wc, gbs, ngb, compress = false]) =>
  parsePolicy({ gpuBatchSize: gbs, numGpuBatches: ngb, wGpuPercent: wg, wCpuPercent: wc, cacheGpuPercent: 100, cacheCpuPercent: 0, actGpuPercent: 100, actCpuPercent: 0, compressWeight: compress });
const label = (p) => `${p.wGpuPercent} ${p.wCpuPercent} · ${p.gpuBatchSize}×${p.numGpuBatches}${p.compressWeight ? ' · 4-bit' : ''}`;
const loads = [];

function measure(model, policy) {
  loads.push(loadavg()[0]);
  const m = runPolicy({ model, policy, promptLen, genLen, offloadDir });
  loads.push(loadavg()[0]);
  return m;
}

const profiles = {};
const log = (l) => process.stderr.write(`${l}\n`);
/** The profile for `model`: with --fresh-profile a quick one (with its calibration) taken now, once per model and part. */
async function profileFor(model, part) {
  const key = `${model}/${part}`;
  if (!profiles[key]) {
    process.stderr.write(`profiling ${model}'s shapes…\n`);
    const t0 = Date.now();
    const load0 = loadavg()[0];
    const options = args['fresh-profile'] ? { quick: true, refresh: true } : {};
    // A fresh profile per model and part in its own folder, so each stays on disk for a look afterwards.
    const dataDir = args['fresh-profile'] ? join(args['data-dir'], `${model}-${part}`) : args['data-dir'];
    profiles[key] = (await ensureProfile(descriptionByName(model), { dataDir, offloadDir, onednn: false, log, ...options })).profile;
    const fit = Object.values(profiles[key].shapes).find((s) => s.shape.hiddenSize === descriptionByName(model).hiddenSize)?.backends['onnxruntime-fp32']?.fit;
    report.profiles.push({ model, part, at: new Date(t0).toISOString(), tookMs: Date.now() - t0, loads: [load0, loadavg()[0]], fit });
  }
  return profiles[key];
}

const pct = (pred, meas) => (100 * (pred - meas)) / meas;
const f = (x, d = 1) => (x === undefined || x === null ? '–' : x.toFixed(d));
const host = benchHost();
console.error(`host: ${hostLine(host)}`);
const report = {
  host, date: new Date().toISOString(), promptLen, genLen, freshProfile: args['fresh-profile'],
  calibration: { policies: CALIBRATION_POLICIES, workload: CALIBRATION_WORKLOAD },
  profiles: [], validation: [], search: undefined,
};
const calibrated = (model, p) =>
  calibrationLayers(shapeOf(descriptionByName(model))) === descriptionByName(model).layers &&
  CALIBRATION_POLICIES.some((c) => promptLen === (c.promptLen ?? CALIBRATION_WORKLOAD.promptLen) && genLen === CALIBRATION_WORKLOAD.genLen &&
    c.wg === p.wGpuPercent && c.wc === p.wCpuPercent && c.gbs === p.gpuBatchSize && c.ngb === p.numGpuBatches && c.compress === p.compressWeight);

if (args.part === 'all' || args.part === 'validation') {
  const cases = [
    ['opt-125m', [100, 0, 4, 1]], ['opt-125m', [100, 0, 16, 1]], ['opt-125m', [0, 100, 4, 1]], ['opt-125m', [0, 100, 4, 4]],
    ['opt-125m', [0, 50, 8, 2]], ['opt-125m', [0, 0, 4, 2]], ['opt-125m', [0, 100, 8, 1, true]],
    ['opt-350m', [100, 0, 4, 1]], ['opt-350m', [0, 100, 2, 4]], ['opt-350m', [0, 0, 8, 1]], ['opt-350m', [30, 70, 8, 1]],
    ['opt-350m', [0, 100, 16, 1]], ['opt-350m', [0, 50, 4, 2, true]],
  ];
  for (const [model, p] of cases) {
    const profile = await profileFor(model, 'validation');
    const policy = policyOf(p);
    // The validation must not be the calibration: a validated policy at the calibration workload on the calibrated depth is refused.
    if (calibrated(model, policy)) throw new Error(`${model} ${label(policy)} at prompt ${promptLen}, gen ${genLen} is a calibration run; validate another policy or workload`);
    const pred = predictCost(shapeOf(descriptionByName(model)), policy, { promptLen, genLen }, profile);
    process.stderr.write(`${model} ${label(policy)}… `);
    const m = measure(model, policy);
    const row = {
      model, policy: label(policy),
      predicted: { prefillMs: pred.prefill.ms, decodeStepMs: pred.decode.ms, totalMs: pred.totalMs, peakRssBytes: pred.peakRssBytes },
      measured: { prefillMs: m.prefillMs, decodeStepMs: m.decodeStepMs, totalMs: m.totalMs, peakRssBytes: m.peakRssBytes },
      timeErrorPct: pct(pred.totalMs, m.totalMs),
      memoryErrorPct: pct(pred.peakRssBytes, m.peakRssBytes),
      load: loads[loads.length - 1],
    };
    process.stderr.write(`time ${f(row.timeErrorPct)}%, memory ${f(row.memoryErrorPct)}%\n`);
    report.validation.push(row);
    save();
  }
}

if (args.part === 'all' || args.part === 'search') {
  const model = 'opt-125m';
  // --fresh-profile: the quick profile `flexhelm run` takes on first use, measured right before the search.
  const profile = await profileFor(model, 'search');
  const shape = shapeOf(descriptionByName(model));
  const numSequences = 16;
  const budget = effectiveBudget(24 * 1024 ** 3 * 0.8, offloadDir);
  const auto = searchPolicy(shape, { promptLen, genLen, numSequences }, profile, budget, { fixed: { compressWeight: false } });
  const grid = [];
  for (const [wg, wc] of [[100, 0], [0, 100], [0, 50], [0, 0]]) for (const [g, k] of [[1, 1], [4, 1], [16, 1], [4, 4]]) grid.push({ kind: 'grid', p: [wg, wc, g, k] });
  // FlexLLMGen's bench_suite policies (§7), batch sizes scaled to 16 sequences: 6.7B fp16 all resident gbs 4; 30B
  // "20 80" 48×3 → 4×3; 175B "0 50" (weights half on disk) 64×8 → 4×4; DeepSpeed's "0 0" gbs 2.
  const refs = [
    { kind: 'reference', name: '6.7B fp16 (100 0, gbs 4)', p: [100, 0, 4, 1] },
    { kind: 'reference', name: '30B fp16 (20 80, 48×3 → 4×3)', p: [20, 80, 4, 3] },
    { kind: 'reference', name: '175B fp16 (0 50, 64×8 → 4×4)', p: [0, 50, 4, 4] },
    { kind: 'reference', name: 'DeepSpeed policy (0 0, gbs 2)', p: [0, 0, 2, 1] },
  ];
  const bp = auto.best.policy;
  const rows = [{ kind: 'auto', p: [bp.wGpuPercent, bp.wCpuPercent, bp.gpuBatchSize, bp.numGpuBatches, bp.compressWeight] }, ...grid, ...refs];
  const results = [];
  for (const r of rows) {
    const policy = policyOf(r.p);
    process.stderr.write(`${r.kind} ${label(policy)}… `);
    const runs = Array.from({ length: repeats }, () => measure(model, policy));
    const tokS = runs.map((m) => m.throughput).sort((a, b) => a - b);
    const mid = tokS.length >> 1;
    const medianTokS = tokS.length % 2 ? tokS[mid] : (tokS[mid - 1] + tokS[mid]) / 2;
    const pred = predictCost(shape, policy, { promptLen, genLen }, profile);
    results.push({
      kind: r.kind, name: r.name, policy: label(policy), measuredTokS: medianTokS, runsTokS: runs.map((m) => m.throughput),
      spreadPct: (100 * (tokS[tokS.length - 1] - tokS[0])) / medianTokS, predictedTokS: pred.throughput,
      peakRssBytes: Math.max(...runs.map((m) => m.peakRssBytes)), load: loads[loads.length - 1],
    });
    process.stderr.write(`${f(medianTokS, 2)} tok/s median of ${repeats} (${tokS.map((x) => f(x, 2)).join(', ')}; predicted ${f(pred.throughput, 2)})\n`);
    report.search = { model, numSequences, repeats, auto: { policy: label(bp), predictedTokS: auto.best.throughput, evaluated: auto.evaluated, feasible: auto.feasible, searchMs: auto.searchMs }, results };
    save();
  }
  const others = results.filter((r) => r.kind !== 'auto');
  const bestRow = others.reduce((a, b) => (b.measuredTokS > a.measuredTokS ? b : a));
  report.search.bestMeasuredTokS = bestRow.measuredTokS;
  report.search.bestPolicy = `${bestRow.kind}${bestRow.name ? `: ${bestRow.name}` : ''} ${bestRow.policy}`;
  report.search.bestSpreadPct = bestRow.spreadPct;
  report.search.autoRatio = results[0].measuredTokS / bestRow.measuredTokS;
  save();
}

function save() {
  if (!args.json) return;
  const tmp = `${args.json}.tmp-${process.pid}`;
  writeFileSync(tmp, `${JSON.stringify({ ...report, host: finishHost(host), loadAverages: loads }, null, 2)}\n`);
  renameSync(tmp, args.json);
}

const lines = [`prompt ${promptLen}, gen ${genLen}, dummy weights, onnxruntime fp32${args['fresh-profile'] ? ', quick profile taken right before each validation run' : ''}; load average during runs ${f(Math.min(...loads), 1)}–${f(Math.max(...loads), 1)} on ${2} vCPUs`];
if (report.validation.length) {
  lines.push('', '| model | policy (wg wc · gbs×ngb) | prefill ms pred / meas | decode ms/step pred / meas | total time error | peak RSS MiB pred / meas | memory error |', '|---|---|---|---|---|---|---|');
  for (const r of report.validation) {
    lines.push(`| ${r.model} | ${r.policy} | ${f(r.predicted.prefillMs, 0)} / ${f(r.measured.prefillMs, 0)} | ${f(r.predicted.decodeStepMs, 0)} / ${f(r.measured.decodeStepMs, 0)} | ${f(r.timeErrorPct)}% | ${f(r.predicted.peakRssBytes / 2 ** 20, 0)} / ${f(r.measured.peakRssBytes / 2 ** 20, 0)} | ${f(r.memoryErrorPct)}% |`);
  }
  const within = (xs, lim) => xs.filter((x) => Math.abs(x) <= lim).length;
  lines.push('', `time within 25%: ${within(report.validation.map((r) => r.timeErrorPct), 25)}/${report.validation.length}; memory within 10%: ${within(report.validation.map((r) => r.memoryErrorPct), 10)}/${report.validation.length}`);
}
if (report.search) {
  const s = report.search;
  lines.push('', `search on ${s.model}, ${s.numSequences} sequences: auto = ${s.auto.policy} (${s.auto.evaluated} policies evaluated, ${s.auto.feasible} fit, ${f(s.auto.searchMs, 0)} ms); each policy measured ${s.repeats} times`, '', '| kind | policy | measured tok/s (median) | runs | spread | predicted tok/s |', '|---|---|---|---|---|---|');
  for (const r of s.results) lines.push(`| ${r.kind}${r.name ? `: ${r.name}` : ''} | ${r.policy} | ${f(r.measuredTokS, 2)} | ${r.runsTokS.map((x) => f(x, 2)).join(', ')} | ${f(r.spreadPct, 0)}% | ${f(r.predictedTokS, 2)} |`);
  if (s.autoRatio !== undefined) lines.push('', `auto reaches ${f(100 * s.autoRatio)}% of the best measured median throughput (${s.bestPolicy}: ${f(s.bestMeasuredTokS, 2)} tok/s, spread ${f(s.bestSpreadPct, 0)}%; auto's spread ${f(s.results[0].spreadPct, 0)}%)`);
}
process.stdout.write(`${lines.join('\n')}\n`);
