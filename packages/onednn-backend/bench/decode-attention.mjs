#!/usr/bin/env node
// Decode attention alone, a git revision's attention.cc (`--base`, default main) against this checkout's, in one
// process (decode-attention.cc): per shape, `rounds` × `repeats` calls of each in turn over four bf16 caches used in
// turn, and the stream read of the same bytes (native, every core). Reports min and median per build and the stream
// equivalent, so the kernels compare under the same host noise. Compiles both builds with the system C++ compiler.
// Shapes: batch x past x heads x kvHeads x headDim (default opt-1.3b and Llama-3.2-1B at batch 8, past 512).
//   node bench/decode-attention.mjs [--base main] [--shapes 8x512x32x32x64,8x512x32x8x64] [--repeats 30] [--rounds 3] [--json FILE]
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { benchHost, finishHost, hostLine } from '../../../tooling/scripts/bench-host.mjs';

const { values: o } = parseArgs({
  options: {
    base: { type: 'string', default: 'main' },
    shapes: { type: 'string', default: '8x512x32x32x64,8x512x32x8x64' },
    repeats: { type: 'string', default: '30' },
    rounds: { type: 'string', default: '3' },
    json: { type: 'string' },
  },
});
const shapes = o.shapes.split(',').map((s) => {
  const dims = s.split('x').map(Number);
  if (dims.length !== 5 || dims.some((d) => !Number.isInteger(d) || d < 0)) throw new Error(`--shapes: '${s}' is not batch x past x heads x kvHeads x headDim (integers)`);
  const [, , heads, kvHeads] = dims;
  if (kvHeads <= 0 || heads % kvHeads !== 0) throw new Error(`--shapes: '${s}': heads must be a multiple of kvHeads`);
  return dims;
});
const host = benchHost();
console.error(`host: ${hostLine(host)}`);
const here = (f) => fileURLToPath(new URL(f, import.meta.url));
const native = here('../native');
// The attention kernel's translation units in a native/ folder: one attention.cc before the kernels were grouped by
// kind, attention/{attention,prefill,decode}.cc since.
const attentionUnits = (has) => (has('attention.cc') ? ['attention.cc'] : ['attention/attention.cc', 'attention/prefill.cc', 'attention/decode.cc']);
const dir = mkdtempSync(join(tmpdir(), 'flexhelm-decode-attention-'));
const results = [];
try {
  // The base revision's native sources, as git has them (every file: the attention units include their neighbours).
  const baseDir = join(dir, 'base');
  const baseFiles = execFileSync('git', ['ls-tree', '-r', '--full-tree', '--name-only', `${o.base}:packages/onednn-backend/native`], { cwd: native, encoding: 'utf8' }).split('\n').filter(Boolean);
  for (const f of baseFiles) {
    mkdirSync(dirname(join(baseDir, f)), { recursive: true });
    writeFileSync(join(baseDir, f), execFileSync('git', ['show', `${o.base}:packages/onednn-backend/native/${f}`], { cwd: native }));
  }
  const flags = ['-O3', '-std=c++17', '-fopenmp', '-fno-fast-math'];
  const objects = [];
  const compile = (src, include, out, extra = []) => {
    execFileSync('c++', [...flags, ...extra, `-I${include}`, '-c', src, '-o', join(dir, out)], { stdio: 'inherit' });
    objects.push(join(dir, out));
  };
  const objectName = (prefix, unit) => `${prefix}${unit.replaceAll('/', '-').replace(/\.cc$/, '.o')}`;
  // The base build in namespace flexbase, so that both link into one program.
  const base = ['-Dflexhelm=flexbase'];
  for (const unit of attentionUnits((f) => baseFiles.includes(f))) compile(join(baseDir, unit), baseDir, objectName('base-', unit), base);
  compile(join(baseDir, 'kernels.cc'), baseDir, 'base-kernels.o', base);
  compile(here('decode-attention-runner.cc'), baseDir, 'base-runner.o', base);
  for (const unit of attentionUnits((f) => existsSync(join(native, f)))) compile(join(native, unit), native, objectName('', unit));
  compile(join(native, 'kernels.cc'), native, 'kernels.o');
  compile(here('decode-attention-runner.cc'), native, 'runner.o');
  compile(here('decode-attention.cc'), native, 'main.o');
  const exe = join(dir, 'decode-attention');
  execFileSync('c++', ['-fopenmp', '-o', exe, ...objects], { stdio: 'inherit' });
  for (const s of shapes) {
    const r = JSON.parse(execFileSync(exe, [...s.map(String), o.repeats, o.rounds], { encoding: 'utf8' }));
    results.push(r);
    const gbs = (ms) => (r.bytes / ms / 1e6).toFixed(1);
    console.log(
      `B ${r.batch} past ${r.past} heads ${r.heads}/${r.kvHeads} of ${r.headDim} (${(r.bytes / 2 ** 20).toFixed(1)} MiB): ${o.base} min ${r.base_ms.min.toFixed(3)} / median ${r.base_ms.median.toFixed(3)} ms, ` +
        `this min ${r.cur_ms.min.toFixed(3)} / median ${r.cur_ms.median.toFixed(3)} ms (${gbs(r.cur_ms.min)} GB/s at min), stream read of the same bytes ${r.stream_equiv_ms.min.toFixed(3)} / ${r.stream_equiv_ms.median.toFixed(3)} ms; outputs differ by ≤ ${r.max_abs_diff} (max |out| ${r.max_abs})`,
    );
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
const report = { kind: 'decode-attention', host: finishHost(host), base: o.base, repeats: Number(o.repeats), rounds: Number(o.rounds), results };
if (o.json) writeFileSync(o.json, `${JSON.stringify(report, null, 2)}\n`);
