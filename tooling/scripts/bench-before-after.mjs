#!/usr/bin/env node
// node tooling/scripts/bench-before-after.mjs --before DIR --after DIR [--rounds 2] [--out DIR] -- SCRIPT [ARGS…]
// One benchmark script run from two checkouts of this repository (each built), interleaved so a busy moment on a
// shared host hits both sides: each round runs before, after, after, before (ABBA), every run in its own process with
// `--json` pointing into --out. Then, per case, each side's best figure of every throughput field (higher is better:
// a load only ever slows a run down) and the ratio after ÷ before. Reads bench:engine's JSON (an array of `kind:
// 'case'` rows) and bench:offload's (`{ results: [...] }`); SCRIPT is a path relative to each checkout's root.
// Not a test: figures depend on the machine and its load. Run it under the bench lock.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const { values: o, positionals } = parseArgs({
  options: {
    before: { type: 'string' },
    after: { type: 'string' },
    rounds: { type: 'string', default: '2' },
    out: { type: 'string', default: 'bench-before-after' },
  },
  allowPositionals: true,
});
const fail = (message) => {
  process.stderr.write(`bench-before-after: ${message}\n`);
  process.exit(2);
};
if (!o.before || !o.after) fail('give --before DIR and --after DIR (two built checkouts)');
const rounds = Number(o.rounds);
if (!Number.isInteger(rounds) || rounds < 1) fail(`--rounds ${o.rounds}: a whole number ≥ 1`);
const [script, ...scriptArgs] = positionals;
if (!script) fail('give the benchmark script after `--`, e.g. -- packages/engine/bench/bench-engine.mjs --no-peer');
const sides = { before: resolve(o.before), after: resolve(o.after) };
for (const [side, dir] of Object.entries(sides)) if (!existsSync(join(dir, script))) fail(`--${side} ${dir} has no ${script}`);
const out = resolve(o.out);
mkdirSync(out, { recursive: true });

/** Throughput fields of one result row, by name (a name that ends like a rate). */
const RATE = /(tokens_per_s|TokS|throughput|gflops)$/i;
const KEY_FIELDS = ['model', 'label', 'backend', 'compute_dtype', 'batch', 'gbs', 'ngb'];
const rowsOf = (json) => (Array.isArray(json) ? json.filter((r) => r.kind === 'case') : (json.results ?? []).filter((r) => !r.refused));
const keyOf = (row) => KEY_FIELDS.filter((k) => row[k] !== undefined).map((k) => `${k}=${row[k]}`).join(' ');

const runs = [];
for (let round = 1; round <= rounds; round++) {
  for (const side of ['before', 'after', 'after', 'before']) {
    const n = runs.filter((r) => r.side === side).length + 1;
    const json = join(out, `${side}-${n}.json`);
    const load = loadavg()[0];
    const started = new Date().toISOString();
    process.stderr.write(`${started} ${side} ${n} (load ${load.toFixed(2)})\n`);
    const r = spawnSync(process.execPath, [join(sides[side], script), ...scriptArgs, '--json', json], { cwd: sides[side], stdio: ['ignore', 'ignore', 'inherit'] });
    if (r.status !== 0 || !existsSync(json)) fail(`${side} run ${n} failed (exit ${r.status ?? r.signal}); its output is above`);
    runs.push({ side, n, json, started, loadBefore: load, loadAfter: loadavg()[0] });
  }
}

const best = { before: new Map(), after: new Map() };
for (const run of runs) {
  for (const row of rowsOf(JSON.parse(readFileSync(run.json, 'utf8')))) {
    const k = keyOf(row);
    const m = best[run.side].get(k) ?? {};
    for (const [field, value] of Object.entries(row)) if (RATE.test(field) && typeof value === 'number' && !(value <= (m[field] ?? -Infinity))) m[field] = value;
    best[run.side].set(k, m);
  }
}
const table = [];
for (const [k, b] of best.before) {
  const a = best.after.get(k);
  if (!a) continue;
  for (const field of Object.keys(b)) if (a[field] !== undefined && b[field] > 0) table.push({ case: k, field, before: b[field], after: a[field], ratio: a[field] / b[field] });
}
const lines = ['| case | figure | before (best) | after (best) | after ÷ before |', '| --- | --- | --- | --- | --- |'];
for (const t of table) lines.push(`| ${t.case} | ${t.field} | ${+t.before.toPrecision(4)} | ${+t.after.toPrecision(4)} | ${t.ratio.toFixed(3)} |`);
writeFileSync(join(out, 'summary.json'), `${JSON.stringify({ script, args: scriptArgs, sides, runs, table }, null, 2)}\n`);
process.stdout.write(`${lines.join('\n')}\n`);
