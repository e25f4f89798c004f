// A/B of the tiled Q8_0 / Q4_0 GEMM (native/gemm/quant-gemm.cc) between another revision and the working tree, in one
// binary: both builds run on the same weights and activations, alternated round by round, so host drift hits both
// (quant-gemm-ab.cc). Reports each side's best time, the speedup and whether the outputs are the same bits. Both
// sides compile against the working tree's headers, so the base revision must share quant-gemm.h's API.
//   node bench/quant-gemm-ab.mjs [--base HEAD] [--rounds 5] [--types Q4_0,Q8_0]
//                                [--shapes 512x2048x8192,512x8192x2048,4096x2048x8192,4096x8192x2048] [--json FILE]
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { benchHost, finishHost, hostLine } from '../../../tooling/scripts/bench-host.mjs';

const { values } = parseArgs({
  options: {
    base: { type: 'string', default: 'HEAD' },
    rounds: { type: 'string', default: '5' },
    types: { type: 'string', default: 'Q4_0,Q8_0' },
    shapes: { type: 'string', default: '512x2048x8192,512x8192x2048,4096x2048x8192,4096x8192x2048' },
    json: { type: 'string' },
  },
});
if (!/^[1-9]\d*$/.test(values.rounds)) throw new Error(`--rounds must be a positive integer, got '${values.rounds}'`);
if (!/^(Q4_0|Q8_0)(,(Q4_0|Q8_0))*$/.test(values.types)) throw new Error(`--types must be Q4_0 and/or Q8_0, comma-separated, got '${values.types}'`);
if (!/^\d+x\d+x\d+(,\d+x\d+x\d+)*$/.test(values.shapes)) throw new Error(`--shapes must be MxKxN[,MxKxN…], got '${values.shapes}'`);
for (const shape of values.shapes.split(',')) {
  if (Number(shape.split('x')[1]) % 32 !== 0) throw new Error(`--shapes ${shape}: K must be a multiple of 32 (one ggml block)`);
}

const src = (p) => fileURLToPath(new URL(p, import.meta.url));
const gemmFile = 'packages/onednn-backend/native/gemm/quant-gemm.cc';
const repoRoot = src('../../..');
let baseSource;
try {
  baseSource = execFileSync('git', ['show', `${values.base}:${gemmFile}`], { cwd: repoRoot, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
} catch (e) {
  throw new Error(`--base ${values.base}: git cannot show ${gemmFile} at that revision (${String(e.stderr ?? e.message).trim()})`);
}
const baseRevision = execFileSync('git', ['rev-parse', '--short', values.base], { cwd: repoRoot, encoding: 'utf8' }).trim();

const host = benchHost();
console.error(`host: ${hostLine(host)}; base ${values.base} (${baseRevision}) against the working tree`);
const dir = mkdtempSync(join(tmpdir(), 'flexhelm-quant-gemm-ab-'));
let lines;
try {
  // The base's relative includes ("quant-gemm.h", "../bf16-bits.h") resolve through -iquote to the working tree's.
  mkdirSync(join(dir, 'gemm'));
  writeFileSync(join(dir, 'gemm', 'base.cc'), baseSource);
  const flags = ['-O3', '-std=c++17', '-fopenmp', '-fno-fast-math', '-Wno-maybe-uninitialized'];
  execFileSync('c++', [...flags, `-iquote${src('../native/gemm')}`, '-Dflexhelm=flexhelm_base', '-c', join(dir, 'gemm', 'base.cc'), '-o', join(dir, 'base.o')], { stdio: 'inherit' });
  execFileSync('c++', [...flags, '-c', src('../native/gemm/quant-gemm.cc'), '-o', join(dir, 'candidate.o')], { stdio: 'inherit' });
  const exe = join(dir, 'quant-gemm-ab');
  execFileSync('c++', [...flags, `-I${src('../native')}`, '-o', exe, src('./quant-gemm-ab.cc'), join(dir, 'base.o'), join(dir, 'candidate.o')], { stdio: 'inherit' });
  const out = execFileSync(exe, [values.rounds, values.types, values.shapes], { encoding: 'utf8' });
  lines = out.trim().split('\n').map((l) => JSON.parse(l));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
if (lines[0]?.error) {
  console.log(lines[0].error);
  process.exit(0);
}
for (const r of lines) {
  console.log(`${r.type} ${r.M} × ${r.K} × ${r.N}: base ${r.base_ms} ms (${r.base_gops} GOP/s), working tree ${r.candidate_ms} ms (${r.candidate_gops} GOP/s): ×${r.speedup}${r.outputs_differ ? `, ${r.outputs_differ} outputs differ` : ', the same bits'}`);
}
const report = { kind: 'quant-gemm-ab', host: finishHost(host), base: values.base, base_revision: baseRevision, rounds: Number(values.rounds), results: lines };
if (values.json) writeFileSync(values.json, `${JSON.stringify(report, null, 2)}\n`);
