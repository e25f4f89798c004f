// The arithmetic ceiling of each dtype on this CPU: fp32 FMA against AVX-512 bf16 dot products, on 1 thread and on
// every core, interleaved. Their ratio bounds what bf16 prefill can gain over an fp32 backend that already runs near
// the fp32 peak (issue #20's "bf16 ÷ fp32 prefill" row): on a CPU without AMX it cannot exceed the bf16/fp32 ratio here.
// Compiles isa-peak.cc with the system C++ compiler into a temporary folder.
//   node bench/isa-peak.mjs [--rounds 5] [--threads N] [--json FILE]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { benchHost, finishHost, hostLine } from '../../../tooling/scripts/bench-host.mjs';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '5' }, threads: { type: 'string', default: String(cpus().length) }, json: { type: 'string' } } });
const host = benchHost();
console.error(`host: ${hostLine(host)}`);
const dir = mkdtempSync(join(tmpdir(), 'flexhelm-isa-peak-'));
let rounds;
try {
  const exe = join(dir, 'isa-peak');
  execFileSync('c++', ['-O2', '-std=c++17', '-pthread', '-o', exe, fileURLToPath(new URL('./isa-peak.cc', import.meta.url))], { stdio: 'inherit' });
  const out = execFileSync(exe, [values.threads, values.rounds], { encoding: 'utf8' });
  rounds = out.trim().split('\n').map((l) => JSON.parse(l));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
if (rounds[0]?.error) {
  console.log(rounds[0].error);
  process.exit(0);
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const summary = {};
for (const k of ['fp32_1t', 'bf16_1t', 'fp32_nt', 'bf16_nt', 'int8_1t', 'int8_nt', 'amx_bf16_nt', 'amx_int8_k64_nt', 'amx_int8_k32_nt']) summary[k] = median(rounds.map((r) => r[k]));
summary.bf16_over_fp32_1t = +(summary.bf16_1t / summary.fp32_1t).toFixed(2);
summary.bf16_over_fp32_nt = +(summary.bf16_nt / summary.fp32_nt).toFixed(2);
console.log(`peak GFLOP/s (median of ${rounds.length} rounds): 1 thread fp32 ${summary.fp32_1t}, bf16 ${summary.bf16_1t} (${summary.bf16_over_fp32_1t}×); ${values.threads} threads fp32 ${summary.fp32_nt}, bf16 ${summary.bf16_nt} (${summary.bf16_over_fp32_nt}×)`);
if (summary.int8_nt > 0) console.log(`peak int8 GOP/s (vpdpbusd): 1 thread ${summary.int8_1t}, ${values.threads} threads ${summary.int8_nt}`);
if (summary.amx_bf16_nt > 0) console.log(`AMX tile rate, ${values.threads} threads, GOP/s: tdpbf16ps ${summary.amx_bf16_nt}, tdpbssd k 64 ${summary.amx_int8_k64_nt}, tdpbssd k 32 (one ggml block) ${summary.amx_int8_k32_nt}`);
const report = { kind: 'isa-peak', host: finishHost(host), threads: Number(values.threads), rounds, summary };
if (values.json) writeFileSync(values.json, `${JSON.stringify(report, null, 2)}\n`);
