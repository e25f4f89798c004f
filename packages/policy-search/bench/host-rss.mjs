// Measured against predicted peak RSS of `flexhelm run` with weights on the host tier (issue #19: the host-tier terms
// were about 1.7x pessimistic). Each case is one `flexhelm run` under /usr/bin/time -v with --pad-to-seq-len, so the
// batch it runs is the workload the plan is made for; the predictions are the run's own "planned RAM" line and the cost
// model's peak without a profile (default floor, unit scales), as `--max-ram` checks it.
// usage: node packages/policy-search/bench/host-rss.mjs --models DIR[,DIR…] [--policies "0 100 100 0 100 0;30 70 100 0 100 0"]
//   [--compute-dtype fp32|bf16] [--prompt-len 256] [--json FILE]
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { readFolderModel } from '@flexhelm/engine';
import { modelShapeOfDescription, parsePolicy, percentsFromArgs, planMemory } from '@flexhelm/offload';
import { DEFAULT_BASE_RSS, predictPeakRss } from '@flexhelm/cost-model';

const { values } = parseArgs({ options: { models: { type: 'string' }, policies: { type: 'string' }, json: { type: 'string' }, 'prompt-len': { type: 'string' }, 'compute-dtype': { type: 'string' } } });
const computeDtype = values['compute-dtype'] ?? 'fp32';
const models = (values.models ?? '').split(',').filter(Boolean).map((m) => resolve(m));
const policies = (values.policies ?? '0 100 100 0 100 0;30 70 100 0 100 0').split(';');
const promptLen = Number(values['prompt-len'] ?? 256);
// synthetic_reasoning's pattern_match: max_tokens 50.
const workload = { promptLen, genLen: 50 };
const cli = resolve(import.meta.dirname, '../../../apps/cli/dist/main.js');
const gib = (b) => b / 1024 ** 3;
const rows = [];
for (const folder of models) {
  const description = readFolderModel(folder);
  const shape = modelShapeOfDescription(description);
  for (const percents of policies) {
    const p = percentsFromArgs(percents.trim().split(/\s+/));
    const policy = parsePolicy({ ...p, gpuBatchSize: 1, numGpuBatches: 1 });
    const plan = planMemory(shape, policy, workload);
    const costModel = predictPeakRss(shape, policy, plan, DEFAULT_BASE_RSS, undefined, workload);
    const work = mkdtempSync(join(tmpdir(), 'host-rss-'));
    const t0 = performance.now();
    const r = spawnSync('/usr/bin/time', ['-v', process.execPath, cli, 'run', '-d', 'synthetic_reasoning:mode=pattern_match', '-m', '1', '-t', '1', '--model', folder,
      '--percent', ...percents.trim().split(/\s+/), '--gpu-batch-size', '1', '--num-gpu-batches', '1', '--pad-to-seq-len', String(promptLen), '--max-ram', '16',
      '--compute-dtype', computeDtype, '--data-dir', join(work, 'data'), '-o', join(work, 'out'), '--offline'], { encoding: 'utf8', maxBuffer: 1 << 26 });
    const wall = (performance.now() - t0) / 1000;
    const kb = /Maximum resident set size \(kbytes\): (\d+)/.exec(r.stderr)?.[1];
    const planned = /planned RAM ([\d.]+) GiB/.exec(r.stderr)?.[1];
    rmSync(work, { recursive: true, force: true });
    if (r.status !== 0 || !kb) {
      console.error(`${basename(folder)} ${percents}: failed (exit ${r.status})\n${r.stderr.split('\n').slice(-8).join('\n')}`);
      continue;
    }
    const row = { model: basename(folder), percents, computeDtype, wallS: wall, peakGiB: gib(Number(kb) * 1024), plannedGiB: Number(planned), planGiB: gib(plan.ramBytes), costModelGiB: gib(costModel) };
    rows.push(row);
    console.log(`${row.model} ${percents}: peak ${row.peakGiB.toFixed(2)} GiB; planned ${row.planGiB.toFixed(2)} (${(row.planGiB / row.peakGiB).toFixed(2)}x); cost model ${row.costModelGiB.toFixed(2)} (${(row.costModelGiB / row.peakGiB).toFixed(2)}x); ${wall.toFixed(0)} s`);
  }
}
if (values.json) writeFileSync(values.json, `${JSON.stringify({ date: new Date().toISOString(), workload, rows }, null, 2)}\n`);
