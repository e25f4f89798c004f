// The measurements of `pnpm bench:backend`, as functions other benchmarks can call (bench-engine can add the backend
// and dtype as dimensions with them). Each returns plain numbers; medians over interleaved rounds are the caller's.
import { Engine, generate, descriptionByName, SeededUniform, transposeLayerWeights } from '@flexhelm/engine';
import { OrtBackend, measureMatMulGflops } from '@flexhelm/ort-backend';
import { createOptLayer, OneDnnBackend, oneDnnStatus } from '../dist/index.js';

export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** The native binding, or an Error saying why oneDNN is unavailable. */
export function nativeBinding() {
  const status = oneDnnStatus();
  if (!status.available) throw new Error(`oneDNN backend unavailable: ${status.reason}`);
  return status.binding;
}

/** Deterministic weights of a linear layer `[n, k]` (values do not change GEMM speed). */
export function syntheticWeights(length) {
  const w = new Float32Array(length);
  for (let j = 0; j < w.length; j++) w[j] = ((j * 7919) % 1000) / 20000 - 0.025;
  return w;
}

/** A decoder layer's four GEMMs (q/k/v fused) for an OPT config name. */
export function layerGemmShapes(model = 'opt-1.3b') {
  const c = descriptionByName(model);
  const E = c.hiddenSize;
  const F = c.mlp.intermediateSize;
  return [
    { name: 'qkv', k: E, n: 3 * E },
    { name: 'out_proj', k: E, n: E },
    { name: 'fc1', k: E, n: F },
    { name: 'fc2', k: F, n: E },
  ];
}

/** Median seconds per call of a oneDNN linear over `repeats` calls after a warm-up. */
export async function timeLinear(native, linear, m, k, n, repeats) {
  const x = native.allocFloat32(m * k).fill(0.25);
  const y = native.allocFloat32(m * n);
  await linear.run(x, m, y);
  const times = [];
  for (let r = 0; r < repeats; r++) {
    const t0 = performance.now();
    await linear.run(x, m, y);
    times.push((performance.now() - t0) / 1000);
  }
  return median(times);
}

/** Packed linears of every shape, per dtype: `{ linears: {dtype: Linear[]}, packedBytes: {dtype: bytes} }`. */
export async function packLayerGemms(native, shapes, dtypes) {
  const linears = {};
  const packedBytes = {};
  for (const dtype of dtypes) {
    linears[dtype] = [];
    for (const s of shapes) linears[dtype].push(await native.createLinear(syntheticWeights(s.k * s.n), new Float32Array(s.n), s.k, s.n, { dtype }));
    packedBytes[dtype] = linears[dtype].reduce((a, l) => a + l.packedBytes, 0);
  }
  return { linears, packedBytes };
}

/** One round: prefill GFLOP/s of the layer's GEMMs at M rows, for one dtype's packed linears. */
export async function prefillGflops(native, linears, shapes, M, repeats = 2) {
  const flops = shapes.reduce((a, s) => a + 2 * M * s.k * s.n, 0);
  let seconds = 0;
  for (const [i, s] of shapes.entries()) seconds += await timeLinear(native, linears[i], M, s.k, s.n, repeats);
  return flops / seconds / 1e9;
}

/** One round: GB/s of packed weights streamed per call at M rows (M = 1: decode, bandwidth-bound). */
export async function weightStreamingGbps(native, linears, shapes, packedBytes, M, repeats = 20) {
  let seconds = 0;
  for (const [i, s] of shapes.entries()) seconds += await timeLinear(native, linears[i], M, s.k, s.n, repeats);
  return packedBytes / seconds / 1e9;
}

/** onnxruntime fp32 MatMul GFLOP/s over the same shapes at M rows (weights as initializers, as the engine holds them). */
export function onnxruntimeGflops(shapes, M, repeats = 2) {
  return measureMatMulGflops(shapes.map((s) => ({ m: M, k: s.k, n: s.n })), { repeats });
}

/**
 * Packing a streamed (offloaded) decoder layer: `createOptLayer` from fp32 `[in, out]` tensors (what the host and disk
 * tiers hand over after their f16 conversion), per dtype. Returns median ms per layer and the packed MiB.
 */
export async function streamedLayerPacking(native, model = 'opt-1.3b', dtypes = ['bf16', 'fp32'], repeats = 3) {
  const c = descriptionByName(model);
  const E = c.hiddenSize;
  const F = c.mlp.intermediateSize;
  const w = { qW: syntheticWeights(E * E), kW: syntheticWeights(E * E), vW: syntheticWeights(E * E), oW: syntheticWeights(E * E), fc1W: syntheticWeights(F * E), fc2W: syntheticWeights(E * F) };
  for (const key of ['qB', 'kB', 'vB', 'oB', 'fc2B', 'ln1B', 'ln2B']) w[key] = new Float32Array(E);
  for (const key of ['ln1W', 'ln2W']) w[key] = new Float32Array(E).fill(1);
  w.fc1B = new Float32Array(F);
  const transposed = transposeLayerWeights(c, w);
  const shape = { hidden: E, heads: c.attention.heads, ffn: F, preLayerNorm: c.norm.placement === 'pre', eps: c.norm.eps };
  const out = {};
  for (const dtype of dtypes) {
    const times = [];
    let packed = 0;
    for (let r = 0; r < repeats; r++) {
      const t0 = performance.now();
      // recycle: as the backend packs streamed layers (packed blocks reused; the first repeat touches fresh memory).
      const layer = await createOptLayer(native, shape, transposed, { dtype, transposed: true, recycle: true });
      times.push(performance.now() - t0);
      packed = layer.packedBytes;
      layer.release();
    }
    const fp32Bytes = 4 * (4 * E * E + 2 * E * F);
    out[dtype] = { ms_per_layer: +median(times).toFixed(1), packed_mib: +(packed / 2 ** 20).toFixed(1), input_gb_per_s: +(fp32Bytes / (median(times) / 1000) / 1e9).toFixed(2) };
  }
  return out;
}

/** The end-to-end backends compared by default. */
export const E2E_BACKENDS = {
  onnxruntime_fp32: () => new OrtBackend(),
  onednn_bf16: () => new OneDnnBackend({ dtype: 'bf16' }),
  onednn_int8: () => new OneDnnBackend({ dtype: 'int8', experimental: true }),
};

/**
 * Greedy generation on random weights of an OPT shape (`Engine.dummy`): `batch` prompts of `promptLen` tokens,
 * `genLen` new tokens each, per backend. Returns load, prefill and decode times and throughputs.
 */
export async function endToEnd(model, { batch, promptLen, genLen, backends = E2E_BACKENDS, log = () => {} }) {
  const config = descriptionByName(model);
  const rng = new SeededUniform(7);
  const requests = Array.from({ length: batch }, () => ({
    prompt: [2, ...Array.from({ length: promptLen - 1 }, () => 4 + Math.floor(rng.next() * (config.vocabSize - 4)))],
    maxNewTokens: genLen,
    stopAtEos: false,
  }));
  const runs = {};
  for (const [name, make] of Object.entries(backends)) {
    const t0 = performance.now();
    const engine = await Engine.dummy(config, { backend: make() });
    const loadS = (performance.now() - t0) / 1000;
    const timings = { prefillMs: 0, prefillTokens: 0, decodeMs: 0, decodeTokens: 0 };
    await generate(engine, requests, { maxBatchSize: batch, timings });
    await engine.close();
    const seconds = (timings.prefillMs + timings.decodeMs) / 1000;
    runs[name] = {
      load_s: +loadS.toFixed(1),
      prefill_s: +(timings.prefillMs / 1000).toFixed(2),
      decode_s: +(timings.decodeMs / 1000).toFixed(2),
      prefill_tokens_per_s: +(timings.prefillTokens / (timings.prefillMs / 1000)).toFixed(1),
      decode_tokens_per_s: +(timings.decodeTokens / (timings.decodeMs / 1000)).toFixed(1),
      generation_throughput: +((batch * genLen) / seconds).toFixed(2),
    };
    log(`  ${model} ${name}: ${JSON.stringify(runs[name])}`);
  }
  return { model, batch, prompt_len: promptLen, gen_len: genLen, runs };
}
