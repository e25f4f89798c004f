#!/usr/bin/env node
// pnpm bench:offload:moe-helm [--base qwen1.5-moe-a2.7b] [--config JSON] [--instances 10] [--max-ram 8]
//                             [--work-dir DIR] [--keep] [--json FILE]
// Issue 29 point 3's last sentence: a HELM run of a mixture of experts that does not fit in RAM completes with
// `--percent auto`. Makes the model once (`flexhelm make-model`, random bf16 weights of the base's shape), writes an
// `mmlu`-format data.tar of made-up questions (5 dev for the in-context examples, `--instances` test questions),
// serves it from a loopback HTTP server as HELM's mirror layout, and runs
//   flexhelm run -d mmlu:subject=anatomy,model=text -m N -t 1 --model DIR --max-ram GIB --percent auto --data-mirror URL
// under /usr/bin/time -v. Checks the five files of the run exist and that the peak RSS stayed under the budget; writes
// a JSON report (host, plan lines flexhelm printed, wall, peak RSS). Not a test: run it alone, under
// /tmp/flexhelm-bench.lock. Needs `pnpm build`; the model takes ~29 GB of disk and the disk tier as much again.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { benchHost, finishHost, hostLine } from '../../../tooling/scripts/bench-host.mjs';

const { values: args } = parseArgs({
  options: {
    base: { type: 'string', default: 'qwen1.5-moe-a2.7b' },
    // config.json fields over the base's (a smaller shape for a quick look), as JSON.
    config: { type: 'string' },
    instances: { type: 'string', default: '10' },
    'max-ram': { type: 'string', default: '8' },
    'work-dir': { type: 'string', default: join(tmpdir(), 'flexhelm-moe-helm') },
    keep: { type: 'boolean', default: false },
    json: { type: 'string' },
  },
});
const instances = Number(args.instances);
if (!Number.isInteger(instances) || instances < 1) throw new Error(`--instances must be a positive whole number, got ${args.instances}`);
const maxRamGiB = Number(args['max-ram']);
if (!(maxRamGiB > 0)) throw new Error(`--max-ram must be a positive number of GiB, got ${args['max-ram']}`);
const log = (...a) => console.error(...a);
const cli = new URL('../../../apps/cli/dist/main.js', import.meta.url).pathname;
const { LoopbackFileServer, tarArchive } = await import(new URL('../../downloads/dist/testing/index.js', import.meta.url).href);

const host = benchHost();
log(`bench:offload:moe-helm — ${hostLine(host)}`);
const work = args['work-dir'];
const modelDir = join(work, 'model');
const outDir = join(work, 'out');
mkdirSync(work, { recursive: true });

/** Runs `cmd args` with stderr shown and kept; resolves with its exit status, output and wall seconds. */
function runLogged(cmd, argv) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (b) => {
      out += b;
    });
    child.stderr.on('data', (b) => {
      err += b;
      process.stderr.write(b);
    });
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout: out, stderr: err, wallS: (performance.now() - started) / 1000 }));
  });
}

// 1. The model, made once (kept between runs unless the shape changes: the folder is named after it).
const config = args.config ? { base: args.base, ...JSON.parse(args.config) } : { base: args.base };
const made = join(modelDir, 'config.json');
let makeS;
if (!existsSync(made)) {
  rmSync(modelDir, { recursive: true, force: true });
  log(`making ${JSON.stringify(config)} → ${modelDir}`);
  const r = await runLogged(process.execPath, [cli, 'make-model', '--config', JSON.stringify(config), '--out', modelDir, '--shard-size', '4GB']);
  if (r.status !== 0) throw new Error(`make-model failed (${r.status})`);
  makeS = r.wallS;
}

// 2. mmlu's data.tar layout with made-up questions: dev (the in-context examples), val, test.
const question = (split, i) => `${split} question ${i}: which of these is the answer?,first ${i},second ${i},third ${i},fourth ${i},${'ABCD'[i % 4]}\n`;
const csv = (split, n) => Array.from({ length: n }, (_, i) => question(split, i)).join('');
const server = await LoopbackFileServer.start();
let report;
try {
  server.set(
    '/people.eecs.berkeley.edu/~hendrycks/data.tar',
    tarArchive({ 'data/dev/anatomy_dev.csv': csv('dev', 5), 'data/val/anatomy_val.csv': csv('val', 2), 'data/test/anatomy_test.csv': csv('test', instances) }),
  );
  rmSync(outDir, { recursive: true, force: true });
  // The data is fetched anew from the mirror each time; the profile `--percent auto` made stays (data/profiles), as
  // for a user's second run of the model: pass a fresh --work-dir to time the profile again.
  rmSync(join(work, 'data', 'scenarios'), { recursive: true, force: true });
  rmSync(join(work, 'offload'), { recursive: true, force: true });
  // 3. The HELM run under the budget, the policy searched.
  const runArgs = [
    cli, 'run', '-d', 'mmlu:subject=anatomy,model=text', '-m', String(instances), '-t', '1', '--model', modelDir,
    '--max-ram', String(maxRamGiB), '--percent', 'auto', '--data-mirror', server.baseUrl,
    '--output-path', outDir, '--data-dir', join(work, 'data'), '--offload-dir', join(work, 'offload'),
  ];
  log(`flexhelm ${runArgs.slice(1).join(' ')}`);
  const r = await runLogged('/usr/bin/time', ['-v', process.execPath, ...runArgs]);
  const peakKiB = Number(/Maximum resident set size \(kbytes\): (\d+)/.exec(r.stderr)?.[1]);
  const runsDir = join(outDir, 'runs', 'v1');
  const runNames = existsSync(runsDir) ? readdirSync(runsDir).filter((n) => !n.startsWith('.')) : [];
  const files = runNames.length === 1 ? readdirSync(join(runsDir, runNames[0])).sort() : [];
  const five = ['run_spec.json', 'scenario.json', 'scenario_state.json', 'stats.json', 'per_instance_stats.json'];
  report = {
    bench: 'offload:moe-helm',
    host: finishHost(host),
    model: config,
    instances,
    maxRamGiB,
    makeModelS: makeS,
    status: r.status,
    wallS: Number(r.wallS.toFixed(1)),
    peakRssGiB: Number((peakKiB / 1024 ** 2).toFixed(2)),
    underBudget: peakKiB * 1024 <= maxRamGiB * 1024 ** 3,
    runs: runNames,
    files,
    fiveFiles: five.every((f) => files.includes(f)),
    // What flexhelm said of its plan and policy (its progress lines), for the record.
    planLines: r.stderr.split('\n').filter((l) => /plan|policy|percent|RAM|backend|bf16|batch/i.test(l) && !/^\s+(Maximum|Average|Exit)/.test(l)).slice(0, 20),
  };
} finally {
  await server.close();
}
const json = JSON.stringify(report, null, 2);
console.log(json);
if (args.json) writeFileSync(args.json, `${json}\n`);
if (!args.keep) rmSync(join(work, 'offload'), { recursive: true, force: true });
if (report.status !== 0 || !report.fiveFiles) process.exitCode = 1;
