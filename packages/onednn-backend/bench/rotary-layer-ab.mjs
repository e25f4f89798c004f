#!/usr/bin/env node
// A Llama-3.2-1B-shaped rotary decoder layer (hidden 2048, 32/8 heads of 64, intermediate 8192, llama3 RoPE; random
// weights) on a git revision's addon (`--base`, default main, built into a temporary folder) and on this checkout's,
// in one process: prefill (batch × prompt rows) and one decode step after it, through the in-place KV cache
// (runCached, the backend's path). Rounds alternate which side runs first, so the shared host's load drifts over both;
// each side's median is reported, and the two sides' outputs are compared (the same kernels must give the same bits).
//   node bench/rotary-layer-ab.mjs [--base main] [--batch 4] [--prompt 256] [--dtype bf16] [--rounds 5] [--json FILE]
import { execFileSync, execSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ropeInvFreq } from '@flexhelm/engine';
import { benchHost, finishHost, hostLine } from '../../../tooling/scripts/bench-host.mjs';
import { median, nativeBinding, syntheticWeights } from './measure-backend.mjs';

const { values: o } = parseArgs({
  options: {
    base: { type: 'string', default: 'main' },
    batch: { type: 'string', default: '4' },
    prompt: { type: 'string', default: '256' },
    dtype: { type: 'string', default: 'bf16' },
    rounds: { type: 'string', default: '5' },
    json: { type: 'string' },
  },
});
const B = Number(o.batch);
const P = Number(o.prompt);
const rounds = Number(o.rounds);
const host = benchHost();
console.error(`host: ${hostLine(host)}`);

const packageDir = fileURLToPath(new URL('..', import.meta.url));
const requireHere = createRequire(join(packageDir, 'package.json'));

/** The base revision's addon, built from its native/ and binding.gyp in a temporary folder. */
function buildBase(dir) {
  // git archive takes paths from the repository root.
  const root = execFileSync('git', ['rev-parse', '--show-toplevel'], { cwd: packageDir, encoding: 'utf8' }).trim();
  execSync(`git archive ${o.base} packages/onednn-backend/native packages/onednn-backend/binding.gyp | tar -x -C ${dir}`, { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
  const cwd = join(dir, 'packages/onednn-backend');
  const nodeDir = resolve(dirname(process.execPath), '..');
  // binding.gyp asks node for node-addon-api's include folder: resolved from this package's node_modules.
  const env = { ...process.env, NODE_PATH: join(packageDir, 'node_modules') };
  // The compiler's output only when the build fails (execFileSync's error carries it).
  execFileSync(process.execPath, [requireHere.resolve('node-gyp/bin/node-gyp.js'), 'rebuild', `--nodedir=${nodeDir}`, '--jobs=max'], { cwd, env, stdio: 'pipe', maxBuffer: 64 << 20 });
  return createRequire(join(cwd, 'package.json'))(join(cwd, 'build/Release/onednn_backend.node'));
}

const dir = mkdtempSync(join(tmpdir(), 'flexhelm-rotary-ab-'));
try {
  console.error(`building ${o.base}'s addon …`);
  const sides = { [o.base]: buildBase(dir), this: nativeBinding() };
  const H = 2048;
  const heads = 32;
  const kvHeads = 8;
  const D = 64;
  const I = 8192;
  const Q = heads * D;
  const KV = kvHeads * D;
  const weights = {
    inNormW: new Float32Array(H).fill(1), postNormW: new Float32Array(H).fill(1),
    qW: syntheticWeights(H * Q), kW: syntheticWeights(H * KV), vW: syntheticWeights(H * KV), oW: syntheticWeights(Q * H),
    gateW: syntheticWeights(H * I), upW: syntheticWeights(H * I), downW: syntheticWeights(I * H),
  };
  const invFreq = ropeInvFreq(D, 500000, { kind: 'llama3', factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 8192 });
  const capacity = P + 8;
  const mask = (S, past) => {
    const T = past + S;
    const m = new Float32Array(B * S * T);
    for (let b = 0; b < B; b++) for (let s = 0; s < S; s++) for (let t = 0; t < T; t++) m[(b * S + s) * T + t] = t <= past + s ? 0 : -1e30;
    return m;
  };
  /** A side's prefill and decode runs over its own cache and outputs (each returns its milliseconds). */
  const runs = {};
  for (const [name, native] of Object.entries(sides)) {
    const layer = await native.createDecoderLayer({ hidden: H, heads, kvHeads, headDim: D, ffn: I, eps: 1e-5 }, weights, { dtype: o.dtype });
    const alloc = (n) => native.allocFloat32(n).fill(0);
    const k = alloc(B * capacity * KV);
    const v = alloc(B * capacity * KV);
    const step = (S, past) => {
      const x = alloc(B * S * H).map((_, i) => Math.sin(i) * 0.5);
      const m = mask(S, past);
      const positions = Int32Array.from({ length: B * S }, (_, i) => past + (i % S));
      const y = alloc(B * S * H);
      const run = async () => {
        const t0 = performance.now();
        await layer.runCached(x, m, positions, invFreq, B, S, past, y, k, v, capacity);
        return performance.now() - t0;
      };
      return { run, y };
    };
    runs[name] = { prefill: step(P, 0), decode: step(1, P) };
  }
  const names = Object.keys(runs);
  const samples = Object.fromEntries(names.map((n) => [n, { prefill: [], decode: [] }]));
  for (const n of names) for (const kind of ['prefill', 'decode']) await runs[n][kind].run();
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? names : [...names].reverse();
    for (const kind of ['prefill', 'decode']) for (const n of order) samples[n][kind].push(await runs[n][kind].run());
  }
  let maxDiff = 0;
  for (const kind of ['prefill', 'decode']) {
    const [a, b] = names.map((n) => runs[n][kind].y);
    for (let i = 0; i < a.length; i++) maxDiff = Math.max(maxDiff, Math.abs(a[i] - b[i]));
  }
  const result = Object.fromEntries(names.map((n) => [n, { prefillMs: median(samples[n].prefill), decodeMs: median(samples[n].decode), samples: samples[n] }]));
  for (const n of names) console.log(`${n}: ${o.dtype} Llama-3.2-1B layer, batch ${B}: prefill ${P} tokens ${result[n].prefillMs.toFixed(1)} ms, decode step ${result[n].decodeMs.toFixed(2)} ms (medians of ${rounds})`);
  console.log(`outputs differ by ≤ ${maxDiff}`);
  const report = { kind: 'rotary-layer-ab', host: finishHost(host), base: o.base, batch: B, prompt: P, dtype: o.dtype, rounds, result, maxAbsDiff: maxDiff };
  if (o.json) writeFileSync(o.json, `${JSON.stringify(report, null, 2)}\n`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
