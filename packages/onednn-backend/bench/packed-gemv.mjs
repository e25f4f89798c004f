#!/usr/bin/env node
// Decode GEMMs on packed bf16 weights: packedGemvBf16 (one sequential pass down each packed panel) against oneDNN's
// matmul on the same packed weights, calls interleaved in one process, with the machine's stream read measured
// between them; opt-1.3b layer shapes (q/k/v 2048→6144, out 2048→2048, fc1 2048→8192, fc2 8192→2048).
//   node bench/packed-gemv.mjs [--rows 1,8] [--rounds 5] [--repeats 20] [--json FILE]
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { benchHost, finishHost, hostLine } from '../../../tooling/scripts/bench-host.mjs';
import { requireBinding } from '../dist/index.js';
import { median } from './measure-backend.mjs';
import { streamBandwidth } from './stream-bandwidth.mjs';

const { values: o } = parseArgs({ options: { rows: { type: 'string', default: '1,8' }, rounds: { type: 'string', default: '5' }, repeats: { type: 'string', default: '20' }, json: { type: 'string' } } });
const host = benchHost();
const b = requireBinding();
const shapes = [[2048, 6144], [2048, 2048], [2048, 8192], [8192, 2048]];
const layers = [];
for (const [K, N] of shapes) {
  const w = b.allocFloat32(K * N);
  for (let i = 0; i < w.length; i++) w[i] = Math.sin(i * 0.37) * 0.05;
  const make = (packedGemv) => b.createLinear(w, null, K, N, { dtype: 'bf16', transposed: true, packedGemv });
  layers.push({ K, N, ours: await make(true), onednn: await make(false), bytes: K * N * 2 });
}
const streamGbs = streamBandwidth(b);
const results = [];
for (const M of o.rows.split(',').map(Number)) {
  const x = b.allocFloat32(M * 8192).fill(0.5);
  const y = b.allocFloat32(M * 8192);
  const times = { ours: [], onednn: [], stream: [] };
  for (let round = 0; round < Number(o.rounds); round++) {
    times.stream.push(await streamGbs());
    for (const kind of round % 2 ? ['onednn', 'ours'] : ['ours', 'onednn']) {
      const t0 = performance.now();
      for (let r = 0; r < Number(o.repeats); r++) for (const l of layers) await l[kind].run(x.subarray(0, M * l.K), M, y.subarray(0, M * l.N));
      times[kind].push((performance.now() - t0) / Number(o.repeats));
    }
  }
  const bytes = layers.reduce((a, l) => a + l.bytes, 0);
  const gbs = (ms) => +(bytes / (ms / 1000) / 1e9).toFixed(1);
  const row = { rows: M, bytes, ours_ms: +median(times.ours).toFixed(3), onednn_ms: +median(times.onednn).toFixed(3), ours_gbs: gbs(median(times.ours)), onednn_gbs: gbs(median(times.onednn)), stream_gbs: +median(times.stream).toFixed(1), rounds: times };
  row.ours_over_stream = +(row.ours_gbs / row.stream_gbs).toFixed(2);
  row.onednn_over_stream = +(row.onednn_gbs / row.stream_gbs).toFixed(2);
  results.push(row);
  console.error(`rows ${M}: packed gemv ${row.ours_ms} ms (${row.ours_gbs} GB/s, ${row.ours_over_stream} of stream), oneDNN ${row.onednn_ms} ms (${row.onednn_gbs} GB/s, ${row.onednn_over_stream}), stream ${row.stream_gbs} GB/s`);
}
const done = finishHost(host);
console.error(hostLine(done));
if (o.json) writeFileSync(o.json, `${JSON.stringify({ host: done, results }, null, 2)}\n`);
