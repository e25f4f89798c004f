#!/usr/bin/env node
// Generation's per-row logits arithmetic: contract's JavaScript (`jsLogitsMath`) against the oneDNN backend's native
// `logitsMath` on the same row (a vocabulary of --vocab values spread like a model's logits), each operation timed in
// turns within every round so host noise hits both sides. Reports the median ms per row and the ratio.
//   node bench/logits-math.mjs [--vocab 128256] [--rounds 7] [--repeats 40] [--json FILE]
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { jsLogitsMath } from '@flexhelm/engine';
import { benchHost, finishHost, hostLine } from '../../../tooling/scripts/bench-host.mjs';
import { OneDnnBackend } from '../dist/index.js';

const { values: o } = parseArgs({ options: { vocab: { type: 'string', default: '128256' }, rounds: { type: 'string', default: '7' }, repeats: { type: 'string', default: '40' }, json: { type: 'string' } } });
const host = benchHost();
console.error(`host: ${hostLine(host)}`);
const V = Number(o.vocab);
const rounds = Number(o.rounds);
const repeats = Number(o.repeats);
let seed = 3;
// Uniform over [−8, 4) with a few high logits: the shape of a trained model's row (most values far below the max).
const row = Float32Array.from({ length: V }, () => {
  seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
  return (seed / 2 ** 32) * 12 - 8;
});
for (let i = 0; i < 20; i++) row[(i * 7919) % V] = 9 + i / 10;
const sides = { js: jsLogitsMath, native: new OneDnnBackend().logitsMath };
const operations = {
  argmax: (m) => m.argmax(row),
  logSumExp: (m) => m.logSumExp(row),
  top1: (m) => m.topK(row, 1),
  top20: (m) => m.topK(row, 20),
  allFinite: (m) => m.allFinite(row),
};
const times = Object.fromEntries(Object.keys(operations).map((op) => [op, { js: [], native: [] }]));
for (let r = 0; r < rounds; r++) {
  for (const [op, f] of Object.entries(operations)) {
    for (const [side, math] of Object.entries(sides)) {
      const t0 = performance.now();
      for (let k = 0; k < repeats; k++) f(math);
      times[op][side].push((performance.now() - t0) / repeats);
    }
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const summary = Object.entries(times).map(([op, t]) => ({ op, js_ms: median(t.js), native_ms: median(t.native), speedup: median(t.js) / median(t.native) }));
for (const s of summary) console.log(`${s.op.padEnd(10)} js ${s.js_ms.toFixed(3)} ms  native ${s.native_ms.toFixed(3)} ms  ×${s.speedup.toFixed(1)}`);
if (o.json) writeFileSync(o.json, `${JSON.stringify({ kind: 'logits-math', host: finishHost(host), vocab: V, rounds, repeats, summary, times }, null, 2)}\n`);
