#!/usr/bin/env node
// One decode step's bf16 GEMVs on Llama-3.2-1B's shapes (16 layers of q/k/v 2048→3072, o 2048→2048, gate/up
// 2048→16384, down 8192→2048, and the head 2048→128256: 2.5 GB at 16 bits, each matrix its own memory), held at 16
// bits (packedGemvBf16) against 12 bits (compact-bf16.h), whole steps alternated in one process with the machine's
// read rate (streamRead) measured every round. Both sides get the same weights (a sine, the test's).
//   node bench/compact-gemv.mjs [--rows 1,8] [--rounds 8] [--layers 16] [--json FILE]
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { benchHost, finishHost, hostLine } from '../../../tooling/scripts/bench-host.mjs';
import { requireBinding } from '../dist/index.js';
import { median } from './measure-backend.mjs';
import { streamBandwidth } from './stream-bandwidth.mjs';

const { values: o } = parseArgs({ options: { rows: { type: 'string', default: '1,8' }, rounds: { type: 'string', default: '8' }, layers: { type: 'string', default: '16' }, json: { type: 'string' } } });
const host = benchHost();
const b = requireBinding();
const layerShapes = [[2048, 3072], [2048, 2048], [2048, 16384], [8192, 2048]];
const shapes = [...Array.from({ length: Number(o.layers) }, () => layerShapes).flat(), [2048, 128256]];
const sides = { plain: [], compact: [] };
let bytes = 0;
let compactBytes = 0;
for (const [K, N] of [...new Set(shapes.map((s) => s.join('x')))].map((s) => s.split('x').map(Number))) {
  // One float source per shape (freed after), packed once per use on each side.
  const w = b.allocFloat32(K * N);
  for (let i = 0; i < w.length; i++) w[i] = Math.sin(i * 0.37) * 0.05;
  for (const [k, n] of shapes.filter(([k, n]) => k === K && n === N)) {
    for (const compact of [false, true]) {
      const linear = await b.createLinear(w, null, k, n, { dtype: 'bf16', transposed: true, compact });
      sides[compact ? 'compact' : 'plain'].push({ K: k, N: n, linear });
      if (compact) compactBytes += linear.packedBytes;
      else bytes += linear.packedBytes;
    }
  }
}
console.error(`${shapes.length} matrices: ${(bytes / 1e9).toFixed(2)} GB at 16 bits, ${(compactBytes / 1e9).toFixed(2)} GB compact (${sides.compact.reduce((a, s) => a + s.linear.compactChunks, 0)} of ${sides.compact.reduce((a, s) => a + s.linear.chunks, 0)} blocks)`);
const readGbs = streamBandwidth(b);
const results = [];
for (const M of o.rows.split(',').map(Number)) {
  const x = b.allocFloat32(M * 8192).fill(0.5);
  const y = b.allocFloat32(M * 128256);
  const times = { plain: [], compact: [], read: [] };
  for (let round = 0; round < Number(o.rounds); round++) {
    times.read.push(await readGbs());
    for (const side of round % 2 ? ['compact', 'plain'] : ['plain', 'compact']) {
      const t0 = performance.now();
      for (const { K, N, linear } of sides[side]) await linear.run(x.subarray(0, M * K), M, y.subarray(0, M * N));
      times[side].push(performance.now() - t0);
    }
  }
  const ratios = times.plain.map((t, i) => t / times.compact[i]);
  const row = {
    rows: M,
    plain_ms: +median(times.plain).toFixed(2),
    compact_ms: +median(times.compact).toFixed(2),
    plain_gbs: +(bytes / median(times.plain) / 1e6).toFixed(1),
    compact_gbs_of_16bit: +(bytes / median(times.compact) / 1e6).toFixed(1),
    compact_gbs_read: +(compactBytes / median(times.compact) / 1e6).toFixed(1),
    read_gbs: +median(times.read).toFixed(1),
    speedup_median: +median(ratios).toFixed(3),
    speedup_min: +Math.min(...ratios).toFixed(3),
    speedup_max: +Math.max(...ratios).toFixed(3),
    rounds: times,
  };
  results.push(row);
  console.error(
    `rows ${M}: 16-bit ${row.plain_ms} ms (${row.plain_gbs} GB/s), compact ${row.compact_ms} ms (${row.compact_gbs_read} GB/s of its bytes), read ${row.read_gbs} GB/s; ×${row.speedup_median} (${row.speedup_min}–${row.speedup_max}) round by round`,
  );
}
const done = finishHost(host);
console.error(hostLine(done));
if (o.json) writeFileSync(o.json, `${JSON.stringify({ host: done, bytes, compactBytes, results }, null, 2)}\n`);
