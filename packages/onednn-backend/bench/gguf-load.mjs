#!/usr/bin/env node
// What `flexhelm run --model x.gguf` costs before its first token on oneDNN, the two ways side by side in one process,
// rounds interleaved:
//   widened  — what versions before 2026-12-06 did: the whole model dequantized to a float32 model.safetensors in the
//              data dir on first use (timed as `convert`), then every load read it back (`load`), the matrices kept
//              as blocks thrown away after reading;
//   in place — importGguf writes config and tokenizer only; the engine reads the file through GgufTensorSource and
//              skips what the backend holds as blocks (ownLayerWeights / ownEndWeights).
// Reports seconds, the data dir's bytes and the resident memory after the load (each load in its own child process,
// so one does not inherit the other's heap or page cache state beyond the file's).
//   node bench/gguf-load.mjs --gguf FILE [--rounds 3] [--json FILE]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { benchHost, finishHost, hostLine } from '../../../tooling/scripts/bench-host.mjs';

const { values: o } = parseArgs({ options: { gguf: { type: 'string' }, rounds: { type: 'string', default: '3' }, json: { type: 'string' }, child: { type: 'string' }, data: { type: 'string' } } });

if (o.child) {
  // One load in this process: print {convertS, loadS, rssGiB} as JSON.
  const { Engine, writeSafetensors } = await import('@flexhelm/engine');
  const { GgufTensorSource, ggufModel, ggufQuantizedWeights, importGguf, readGguf } = await import('@flexhelm/gguf');
  const { OneDnnBackend } = await import('../dist/index.js');
  let t0 = performance.now();
  const { folder, description } = importGguf(o.gguf, o.data);
  let convertS = (performance.now() - t0) / 1000;
  const quantized = ggufQuantizedWeights(o.gguf, description);
  const backend = new OneDnnBackend({ dtype: 'fp32', quantized });
  let engine;
  if (o.child === 'widened') {
    t0 = performance.now();
    writeSafetensors(join(folder, 'model.safetensors'), ggufModel(readGguf(o.gguf)).tensors);
    convertS += (performance.now() - t0) / 1000;
    t0 = performance.now();
    // The folder as earlier versions left it: Engine.load reads model.safetensors (the source record is set aside),
    // every tensor of it, as it did before backends could name what they hold (the float32 token table kept too).
    rmSync(join(folder, 'gguf-source.json'));
    Object.assign(backend, { ownLayerWeights: undefined, ownEndWeights: undefined });
    engine = await Engine.load(folder, { backend });
  } else {
    t0 = performance.now();
    engine = await Engine.fromSource(description, new GgufTensorSource(o.gguf), { backend });
  }
  const loadS = (performance.now() - t0) / 1000;
  const run = engine.startBatch(1);
  await run.step([[1, 2, 3]], [[1, 1, 1]]);
  await run.close();
  process.stdout.write(JSON.stringify({ convertS, loadS, rssGiB: process.memoryUsage().rss / 2 ** 30 }));
  await engine.close();
  process.exit(0);
}

if (!o.gguf) throw new Error('give --gguf FILE');
const host = benchHost();
console.error(`host: ${hostLine(host)}`);
const rounds = Number(o.rounds);
const results = { widened: [], 'in place': [] };
const dirBytes = (dir) => readdirSync(dir, { recursive: true }).reduce((s, f) => s + (statSync(join(dir, f)).isFile() ? statSync(join(dir, f)).size : 0), 0);
for (let r = 0; r < rounds; r++) {
  for (const way of r % 2 ? ['in place', 'widened'] : ['widened', 'in place']) {
    const data = mkdtempSync(join(tmpdir(), 'flexhelm-gguf-load-'));
    try {
      const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url), '--child', way === 'widened' ? 'widened' : 'in-place', '--gguf', o.gguf, '--data', data], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
      const m = { ...JSON.parse(out), dataBytes: dirBytes(data) };
      results[way].push(m);
      console.error(`round ${r + 1} ${way}: convert ${m.convertS.toFixed(2)} s, load ${m.loadS.toFixed(2)} s, data dir ${(m.dataBytes / 2 ** 20).toFixed(1)} MiB, resident ${m.rssGiB.toFixed(2)} GiB`);
    } finally {
      rmSync(data, { recursive: true, force: true });
    }
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const summary = Object.fromEntries(Object.entries(results).map(([k, v]) => [k, { convertS: median(v.map((m) => m.convertS)), loadS: median(v.map((m) => m.loadS)), dataBytes: median(v.map((m) => m.dataBytes)), rssGiB: median(v.map((m) => m.rssGiB)) }]));
const w = summary.widened;
const p = summary['in place'];
console.error(`median: first use ${(w.convertS + w.loadS).toFixed(2)} → ${(p.convertS + p.loadS).toFixed(2)} s (×${((w.convertS + w.loadS) / (p.convertS + p.loadS)).toFixed(1)}), later loads ${w.loadS.toFixed(2)} → ${p.loadS.toFixed(2)} s (×${(w.loadS / p.loadS).toFixed(1)}), data dir ${(w.dataBytes / 2 ** 30).toFixed(2)} GiB → ${(p.dataBytes / 2 ** 20).toFixed(1)} MiB, resident ${w.rssGiB.toFixed(2)} → ${p.rssGiB.toFixed(2)} GiB`);
if (o.json) writeFileSync(o.json, `${JSON.stringify([{ kind: 'host', ...finishHost(host), gguf: o.gguf, fileBytes: statSync(o.gguf).size, rounds }, { kind: 'summary', ...summary }, { kind: 'rounds', ...results }], null, 2)}\n`);
