#!/usr/bin/env node
// `pnpm bench:backend [--json FILE] [--batch 8] [--prompt-len 512] [--rounds 3] [--models opt-125m,opt-1.3b]
//                     [--e2e-prompt-len 128] [--gen-len 32] [--e2e-backends onnxruntime_fp32,onednn_bf16,onednn_int8]
//                     [--skip-e2e] [--skip-gemm]`
// Side by side in one run (the measurements live in measure-backend.mjs, for other benchmarks to reuse):
//  1. prefill GEMM FLOP/s on the opt-1.3b layer shapes (M = batch × prompt): oneDNN bf16 / int8 / fp32 against
//     onnxruntime fp32 (weights prepacked as initializers, as the engine's layers hold them);
//  2. decode weight streaming (M = 1 and M = batch over the same shapes): GB/s of packed weights read per call;
//  3. packing a streamed (offloaded) opt-1.3b layer on load, per dtype;
//  4. end-to-end generation on random opt-125m / opt-1.3b weights (`Engine.dummy`): onnxruntime vs oneDNN.
// Medians over interleaved rounds (this kind of VM has bursts of host interference). Not a test.
import { renameSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { oneDnnStatus } from '../dist/index.js';
import { benchHost, finishHost, hostLine } from '../../../tooling/scripts/bench-host.mjs';
import {
  E2E_BACKENDS, endToEnd, layerGemmShapes, median, nativeBinding, onnxruntimeGflops, packLayerGemms, prefillGflops, streamedLayerPacking, weightStreamingGbps,
} from './measure-backend.mjs';

const { values } = parseArgs({
  options: {
    json: { type: 'string' },
    batch: { type: 'string', default: '8' },
    'prompt-len': { type: 'string', default: '512' },
    rounds: { type: 'string', default: '3' },
    models: { type: 'string', default: 'opt-125m,opt-1.3b' },
    'e2e-prompt-len': { type: 'string', default: '128' },
    'gen-len': { type: 'string', default: '32' },
    'e2e-backends': { type: 'string', default: Object.keys(E2E_BACKENDS).join(',') },
    'skip-e2e': { type: 'boolean', default: false },
    'skip-gemm': { type: 'boolean', default: false },
  },
});
const batch = Number(values.batch);
const promptLen = Number(values['prompt-len']);
const rounds = Number(values.rounds);
const log = (...a) => console.error(...a);
const host = benchHost();
console.error(`host: ${hostLine(host)}`);

let native;
try {
  native = nativeBinding();
} catch (err) {
  log(err.message);
  process.exit(1);
}
const features = oneDnnStatus().features;
log(`oneDNN ${features.version}, isa ${features.isa}, bf16 ${features.bf16Impl}, int8 ${features.int8Impl}, ${features.threads} threads`);

// ---- 1-3: GEMMs and packing ----------------------------------------------------------------------------------------
/** 1 + 2 (GEMM prefill and decode streaming) and 3 (packing a streamed layer). */
async function gemmSection() {
  const shapes = layerGemmShapes('opt-1.3b');
  const M = batch * promptLen;
  const dtypes = ['bf16', 'int8', 'fp32'];
  const prefill = Object.fromEntries([...dtypes, 'onnxruntime_fp32'].map((d) => [d, []]));
  const decode = Object.fromEntries(dtypes.map((d) => [d, { m1: [], mBatch: [] }]));
  const { linears, packedBytes } = await packLayerGemms(native, shapes, dtypes);
  log(`prefill GEMMs: opt-1.3b layer shapes at M = ${batch} × ${promptLen} = ${M} (${(shapes.reduce((a, s) => a + 2 * M * s.k * s.n, 0) / 1e9).toFixed(0)} GFLOP per layer), ${rounds} rounds`);
  for (let round = 0; round < rounds; round++) {
    for (const dtype of dtypes) {
      prefill[dtype].push(await prefillGflops(native, linears[dtype], shapes, M));
      decode[dtype].m1.push(await weightStreamingGbps(native, linears[dtype], shapes, packedBytes[dtype], 1));
      decode[dtype].mBatch.push(await weightStreamingGbps(native, linears[dtype], shapes, packedBytes[dtype], batch));
    }
    prefill.onnxruntime_fp32.push(await onnxruntimeGflops(shapes, M));
    log(`  round ${round + 1}: ${Object.entries(prefill).map(([d, xs]) => `${d} ${xs.at(-1).toFixed(0)}`).join(', ')} GFLOP/s`);
  }
  const ortDecodeGflops = await onnxruntimeGflops(shapes, 1, 20);
  const fp32Bytes = shapes.reduce((a, s) => a + 4 * s.k * s.n, 0);
  const flopsM1 = shapes.reduce((a, s) => a + 2 * s.k * s.n, 0);
  const gemm = {
    shapes: shapes.map((s) => `${M}x${s.k}·${s.k}x${s.n}`),
    prefill_gflops: Object.fromEntries(Object.entries(prefill).map(([d, xs]) => [d, +median(xs).toFixed(1)])),
    prefill_gflops_rounds: Object.fromEntries(Object.entries(prefill).map(([d, xs]) => [d, xs.map((x) => +x.toFixed(1))])),
    decode_weight_gbps_m1: { ...Object.fromEntries(dtypes.map((d) => [d, +median(decode[d].m1).toFixed(1)])), onnxruntime_fp32: +((ortDecodeGflops * 1e9 * fp32Bytes) / flopsM1 / 1e9).toFixed(1) },
    decode_weight_gbps_m_batch: Object.fromEntries(dtypes.map((d) => [d, +median(decode[d].mBatch).toFixed(1)])),
    packed_mib_per_layer: Object.fromEntries(dtypes.map((d) => [d, +(packedBytes[d] / 2 ** 20).toFixed(1)])),
  };
  gemm.bf16_speedup_vs_onnxruntime = +(gemm.prefill_gflops.bf16 / gemm.prefill_gflops.onnxruntime_fp32).toFixed(2);
  gemm.int8_speedup_vs_onnxruntime = +(gemm.prefill_gflops.int8 / gemm.prefill_gflops.onnxruntime_fp32).toFixed(2);
  log(`prefill: bf16 ${gemm.prefill_gflops.bf16} vs onnxruntime ${gemm.prefill_gflops.onnxruntime_fp32} GFLOP/s = ${gemm.bf16_speedup_vs_onnxruntime}×`);
  log(`decode weight streaming (M=1): ${JSON.stringify(gemm.decode_weight_gbps_m1)} GB/s`);
  for (const d of dtypes) linears[d] = undefined;

  // 3: packing streamed layers
  const packing = await streamedLayerPacking(native, 'opt-1.3b', ['bf16', 'fp32', 'int8']);
  log(`packing one streamed opt-1.3b layer: ${JSON.stringify(packing)}`);
  return { gemm, packing };
}
const { gemm, packing } = values['skip-gemm'] ? {} : await gemmSection();

// ---- 4: end to end -----------------------------------------------------------------------------------------------
const e2e = [];
if (!values['skip-e2e']) {
  const backends = Object.fromEntries(values['e2e-backends'].split(',').map((name) => {
    if (!E2E_BACKENDS[name]) throw new Error(`--e2e-backends: unknown '${name}' (known: ${Object.keys(E2E_BACKENDS).join(', ')})`);
    return [name, E2E_BACKENDS[name]];
  }));
  for (const model of values.models.split(',')) {
    e2e.push(await endToEnd(model, { batch, promptLen: Number(values['e2e-prompt-len']), genLen: Number(values['gen-len']), backends, log }));
  }
}

const report = {
  host: finishHost(host),
  onednn: features,
  gemm,
  streamed_layer_packing_opt_1_3b: packing,
  end_to_end: e2e,
};
const text = `${JSON.stringify(report, null, 2)}\n`;
if (values.json) {
  const tmp = `${values.json}.tmp-${process.pid}`;
  writeFileSync(tmp, text);
  renameSync(tmp, values.json);
  log(`report written to ${values.json}`);
} else process.stdout.write(text);
