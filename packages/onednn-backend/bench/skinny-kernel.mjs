// Kernel-only micro-bench of the streamed layers' decode GEMMs on f16 [K, N] weights: skinnyGemmF16 (fp32 sums: fp32
// layers, and bf16 layers at 1 row) against skinnyGemmBf16 (vdpbf16ps: bf16 layers), in GB/s of f16 weights read on
// every core, beside the stream read rate measured call by call in the same loop (skinny-kernel.cc). Compiles the
// harness with native/kernels.cc using the system C++ compiler into a temporary folder.
//   node bench/skinny-kernel.mjs [--rounds 3] [--repeats 5] [--shapes 2048x8192,8192x2048] [--rows 1,2,4,8,16] [--json FILE]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { benchHost, finishHost, hostLine } from '../../../tooling/scripts/bench-host.mjs';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    repeats: { type: 'string', default: '5' },
    shapes: { type: 'string', default: '2048x8192,8192x2048' },
    rows: { type: 'string', default: '1,2,4,8,16' },
    json: { type: 'string' },
  },
});
for (const [name, v] of [['rounds', values.rounds], ['repeats', values.repeats]]) {
  if (!/^[1-9]\d*$/.test(v)) throw new Error(`--${name} must be a positive integer, got '${v}'`);
}
if (!/^\d+x\d+(,\d+x\d+)*$/.test(values.shapes)) throw new Error(`--shapes must be KxN[,KxN…], got '${values.shapes}'`);
if (!/^\d+(,\d+)*$/.test(values.rows)) throw new Error(`--rows must be a comma-separated list of row counts, got '${values.rows}'`);

const host = benchHost();
console.error(`host: ${hostLine(host)}`);
const dir = mkdtempSync(join(tmpdir(), 'flexhelm-skinny-kernel-'));
let lines;
try {
  const exe = join(dir, 'skinny-kernel');
  const src = (p) => fileURLToPath(new URL(p, import.meta.url));
  execFileSync('c++', ['-O3', '-std=c++17', '-fopenmp', `-I${src('../native')}`, '-o', exe, src('./skinny-kernel.cc'), src('../native/kernels.cc')], { stdio: 'inherit' });
  const out = execFileSync(exe, [values.rounds, values.repeats, values.shapes, values.rows], { encoding: 'utf8' });
  lines = out.trim().split('\n').map((l) => JSON.parse(l));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const summary = [];
for (const key of new Set(lines.map((l) => `${l.K}x${l.N}/${l.M}`))) {
  const rs = lines.filter((l) => `${l.K}x${l.N}/${l.M}` === key);
  const s = { K: rs[0].K, N: rs[0].N, M: rs[0].M };
  for (const f of ['streamGBs', 'fp32SumsGBs', 'bf16DotGBs', 'streamBestGBs', 'fp32SumsBestGBs', 'bf16DotBestGBs']) s[f] = median(rs.map((r) => r[f]));
  s.bf16OverStream = +(s.bf16DotGBs / s.streamGBs).toFixed(2);
  s.fp32OverStream = +(s.fp32SumsGBs / s.streamGBs).toFixed(2);
  s.bf16Exact = rs[0].bf16Exact;
  summary.push(s);
  console.log(`K ${s.K} × N ${s.N}, M ${s.M}: stream ${s.streamGBs} GB/s, fp32 sums ${s.fp32SumsGBs} (${s.fp32OverStream}), bf16 products ${s.bf16DotGBs} (${s.bf16OverStream}); best calls ${s.streamBestGBs} / ${s.fp32SumsBestGBs} / ${s.bf16DotBestGBs}`);
}
const report = { kind: 'skinny-kernel', host: finishHost(host), rounds: Number(values.rounds), repeats: Number(values.repeats), lines, summary };
if (values.json) writeFileSync(values.json, `${JSON.stringify(report, null, 2)}\n`);
