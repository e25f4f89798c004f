#!/usr/bin/env node
// Quantized linears (QuantLinear on ggml Q8_0 / Q4_0 blocks and the K-quants Q4_K / Q5_K / Q6_K, each kernel this CPU has) against the bf16 packed linear
// the backend runs today (oneDNN packing; packedGemvBf16 for decode rows), on Llama-3.2-1B's layer shapes (fused
// q/k/v 2048→3072, o 2048→2048, fused gate/up 2048→16384, down 8192→2048), calls interleaved, best of rounds.
// Decode rows (1, 8) are about reading the weights: figures are ms per layer's four GEMMs and the weight bytes read
// per second; prefill rows (512) about arithmetic: GFLOP/s. This is what picks the kernel per row count and host.
// Sides per type: amx-bf16 on AMX hosts (the tile GEMM on blocks widened in cache), vnni-gemm (the register-tiled GEMM: Q8_0/Q4_0 on the column-interleaved blocks QuantLinear keeps with VNNI,
// K-quants on panels decoded per call from GGUF's rows),
// and on layers built with FLEXHELM_QUANT_GEMM=0 (GGUF's row order) the row kernels this CPU
// has and bf16 (the blocks widened per call for oneDNN's bf16 matmul).
//   node bench/quant-linear.mjs [--rows 1,8,64,512] [--types Q8_0,Q4_0] [--rounds 3] [--json FILE]
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { quantize } from '@flexhelm/gguf';
import { benchHost, finishHost, hostLine } from '../../../tooling/scripts/bench-host.mjs';
import { requireBinding } from '../dist/index.js';

const { values: o } = parseArgs({ options: { rows: { type: 'string', default: '1,8,64,512' }, types: { type: 'string', default: 'Q8_0,Q4_0' }, rounds: { type: 'string', default: '3' }, json: { type: 'string' } } });
const types = o.types.split(',').filter(Boolean);
// The K-quants have no AVX2 kernel.
const kernelsOf = (type) => (/_K$/.test(type) ? kernels.filter((k) => k !== 'avx2') : kernels);
const host = benchHost();
const b = requireBinding();
const best = b.features().quantKernel;
const kernels = best === 'avx512vnni' ? ['avx512vnni', 'avx2'] : best === 'avx2' ? ['avx2'] : ['scalar'];
process.stderr.write(`host: ${hostLine(host)}; quantized kernel ${best}\n`);
const shapes = [[2048, 3072], [2048, 2048], [2048, 16384], [8192, 2048]];
const layers = [];
delete process.env.FLEXHELM_QUANT_GEMM;
for (const [K, N] of shapes) {
  const w = new Float32Array(K * N);
  let s = K + N;
  for (let i = 0; i < w.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    w[i] = ((s / 2 ** 32) * 2 - 1) * 0.05;
  }
  layers.push({
    K,
    N,
    bf16: await b.createLinear(w, null, K, N, { dtype: 'bf16' }),
    ...Object.fromEntries(await Promise.all(types.map(async (t) => [t, await b.createQuantLinear(t, quantize(t, w), K, N)]))),
  });
  // The addon reads the variable per layer built: Q8_0 / Q4_0 / Q4_K / Q6_K above interleaved (with VNNI), these in
  // GGUF's row order.
  process.env.FLEXHELM_QUANT_GEMM = '0';
  for (const t of types) layers.at(-1)[`${t}rows`] = await b.createQuantLinear(t, quantize(t, w), K, N);
  delete process.env.FLEXHELM_QUANT_GEMM;
}
const sides = [{ name: 'bf16', bytes: (l) => l.K * l.N * 2, run: (l, x, M, y) => l.bf16.run(x, M, y) }];
for (const type of types) {
  const rowLayer = (l) => l[`${type}rows`] ?? l[type];
  if (best === 'avx512vnni') sides.push({ name: `${type}-vnni-gemm`, bytes: (l) => l[type].bytes, run: (l, x, M, y) => l[type].run(x, M, y, false, 'vnni-gemm') });
  // Q4_K / Q6_K decode rows on the interleaved layout (kquant-interleave.h); the row kernel below runs GGUF's rows.
  if (best === 'avx512vnni' && (type === 'Q4_K' || type === 'Q6_K')) sides.push({ name: `${type}-interleaved`, bytes: (l) => l[type].bytes, run: (l, x, M, y) => l[type].run(x, M, y, false, 'avx512vnni') });
  if (best === 'avx512vnni' && !/_K$/.test(type)) {
    // Prompt rows of an interleaved layer: the blocks widened to bf16 from that layout.
    sides.push({ name: `${type}-bf16-interleaved`, bytes: (l) => l[type].bytes, run: (l, x, M, y) => l[type].run(x, M, y, false, 'bf16') });
  }
  // AMX hosts: the blocks widened a panel at a time inside the tile GEMM (from either layout).
  if (b.features().amxBf16) sides.push({ name: `${type}-amx-bf16`, bytes: (l) => l[type].bytes, run: (l, x, M, y) => l[type].run(x, M, y, false, 'amx-bf16') });
  for (const k of [...kernelsOf(type), 'bf16']) sides.push({ name: `${type}-${k}`, bytes: (l) => rowLayer(l).bytes, run: (l, x, M, y) => rowLayer(l).run(x, M, y, false, k) });
}
const results = [];
for (const M of o.rows.split(',').map(Number)) {
  const x = b.allocFloat32(M * 8192).fill(0.5);
  for (let i = 0; i < x.length; i++) x[i] = Math.sin(i * 0.11);
  const y = b.allocFloat32(M * 16384);
  const ms = Object.fromEntries(sides.map((s) => [s.name, []]));
  for (let round = 0; round < Number(o.rounds) + 1; round++) {
    for (const side of sides) {
      const t0 = performance.now();
      for (const l of layers) await side.run(l, x.subarray(0, M * l.K), M, y.subarray(0, M * l.N));
      // Round 0 warms up (scratch growth, page faults).
      if (round > 0) ms[side.name].push(performance.now() - t0);
    }
  }
  const flops = layers.reduce((a, l) => a + 2 * M * l.K * l.N, 0);
  for (const side of sides) {
    const t = Math.min(...ms[side.name]);
    const bytes = layers.reduce((a, l) => a + side.bytes(l), 0);
    const r = { rows: M, side: side.name, ms: +t.toFixed(2), weight_gb_per_s: +(bytes / t / 1e6).toFixed(1), gflops: +(flops / t / 1e6).toFixed(1) };
    results.push(r);
    process.stderr.write(`rows ${M} ${side.name}: ${r.ms} ms (${r.weight_gb_per_s} GB/s of weights, ${r.gflops} GFLOP/s)\n`);
  }
}
const report = [{ kind: 'host', ...finishHost(host), quant_kernel: best }, ...results];
if (o.json) writeFileSync(o.json, `${JSON.stringify(report, null, 2)}\n`);
else process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
