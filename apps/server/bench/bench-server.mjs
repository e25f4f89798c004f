// pnpm bench:server — loopback load test of POST /v1/completions with autocannon at 1, 8 and 64 concurrent clients,
// then a mixed load (bench/mixed-load.mjs: small requests and /healthz timed while long prompts, many-run jobs and
// disconnecting clients press on the server binary). Serves the embedded flexhelm/opt-tiny-random model (made in a
// temporary folder), prints tables and writes a JSON report to bench-results/server.json. Fails (exit 1) when any
// request of the throughput phase or any small request of the mixed phase errors.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import autocannon from 'autocannon';
import { Engine, readFolderModel } from '@flexhelm/engine';
import { OrtBackend } from '@flexhelm/ort-backend';
import { DEFAULT_MODEL, modelFingerprint, resolveModel } from '@flexhelm/runner';
import { registerLocalModel } from '@flexhelm/run-spec';
import { localOptWindowService, loadTokenizerFolder } from '@flexhelm/tokenizer';
import { startServer } from '../dist/index.js';
import { benchHost, finishHost, hostLine } from '../../../tooling/scripts/bench-host.mjs';
import { mixedLoad } from './mixed-load.mjs';

const durationSeconds = Number(process.env.BENCH_SECONDS ?? 10);
const maxBatchSize = Number(process.env.BENCH_MAX_BATCH ?? 16);
const levels = (process.env.BENCH_LEVELS ?? '1,8,64').split(',').filter(Boolean).map(Number);
const mixedSeconds = Number(process.env.BENCH_MIXED_SECONDS ?? 30);
const body = JSON.stringify({ prompt: 'The quick brown fox jumps over the lazy dog. Once upon a time', max_tokens: 8, temperature: 0 });

const host = benchHost();
console.log(`host: ${hostLine(host)}`);
const root = mkdtempSync(join(tmpdir(), 'flexhelm-bench-server-'));
let server;
let engine;
try {
  const resolved = await resolveModel({ model: DEFAULT_MODEL, dataDir: root, offline: true, log: () => {} });
  const config = readFolderModel(resolved.folder);
  const tokenizer = loadTokenizerFolder(resolved.folder, DEFAULT_MODEL);
  engine = await Engine.load(resolved.folder, { backend: new OrtBackend() });
  registerLocalModel(DEFAULT_MODEL);
  server = await startServer({
    engine,
    tokenizer,
    windowService: localOptWindowService(tokenizer, config.maxPositions),
    modelName: DEFAULT_MODEL,
    modelId: `${DEFAULT_MODEL}@${modelFingerprint(resolved.folder)}`,
    outputPath: join(root, 'out'),
    maxBatchSize,
    batchWindowMs: 10,
  });
  // Greedy decoding: every request of the load gets this very completion, so its token count is exact for all.
  const probe = await fetch(`${server.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const tokensPerRequest = (await probe.json()).usage.completion_tokens;
  const results = [];
  for (const connections of levels) {
    const before = { ...server.batcher.stats };
    const r = await autocannon({
      url: `${server.url}/v1/completions`,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
      connections,
      duration: durationSeconds,
    });
    const batches = server.batcher.stats.batches - before.batches;
    const requests = server.batcher.stats.requests - before.requests;
    results.push({
      connections,
      requests: r.requests.total,
      throughputRps: Number(r.requests.average.toFixed(2)),
      tokensPerSecond: Number(((r.requests.total * tokensPerRequest) / r.duration).toFixed(1)),
      latencyMs: { p50: r.latency.p50, p90: r.latency.p90, p99: r.latency.p99, max: r.latency.max },
      errors: r.errors + r.timeouts + r.non2xx,
      meanBatch: Number((requests / Math.max(1, batches)).toFixed(2)),
    });
  }
  const mixed = mixedSeconds > 0 ? await mixedLoad({ root, seconds: mixedSeconds, model: DEFAULT_MODEL }) : undefined;
  const report = {
    host: finishHost(host),
    model: DEFAULT_MODEL,
    config: { hiddenSize: config.hiddenSize, layers: config.numHiddenLayers },
    request: JSON.parse(body),
    completionTokensPerRequest: tokensPerRequest,
    maxBatchSize,
    batchWindowMs: 10,
    durationSeconds,
    results,
    mixed,
  };
  const outDir = resolve(process.env.INIT_CWD ?? process.cwd(), 'bench-results');
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, 'server.json'), `${JSON.stringify(report, null, 2)}\n`);
  console.log('clients  requests  req/s    tok/s   p50 ms  p90 ms  p99 ms  mean batch  errors');
  for (const x of results) {
    console.log(
      [String(x.connections).padStart(7), String(x.requests).padStart(9), String(x.throughputRps).padStart(7), String(x.tokensPerSecond).padStart(8),
        String(x.latencyMs.p50).padStart(7), String(x.latencyMs.p90).padStart(7), String(x.latencyMs.p99).padStart(7), String(x.meanBatch).padStart(11), String(x.errors).padStart(7)].join(' '),
    );
  }
  if (mixed) {
    const m = mixed;
    const mib = (b) => (b == null ? '?' : `${(b / 2 ** 20).toFixed(0)} MiB`);
    console.log(`mixed load ${m.seconds} s: small completions p50 ${m.smallCompletions.p50} ms p99 ${m.smallCompletions.p99} ms (${m.smallCompletions.count}, ${JSON.stringify(m.smallCompletions.status)}); ` +
      `/healthz p50 ${m.healthz.p50} ms p99 ${m.healthz.p99} ms max ${m.healthz.max} ms (goal p99 ≤ 100 ms: ${m.healthz.p99 <= 100 ? 'met' : 'missed'})`);
    console.log(`pressure: ${JSON.stringify(m.pressure)}; job submissions (200 runs) p50 ${m.jobSubmit.p50} ms max ${m.jobSubmit.max} ms; errors ${JSON.stringify(m.errors)}`);
    console.log(`server RSS: idle ${mib(m.serverRss.idleBytes)}, peak ${mib(m.serverRss.peakBytes)}; memory plan ${mib(m.serverRss.plannedRamBytes)}`);
  }
  console.log(`report: ${join(outDir, 'server.json')}`);
  if (results.some((x) => x.errors > 0) || (mixed && Object.keys(mixed.smallCompletions.status).some((s) => s !== '200'))) {
    console.error('some requests failed');
    process.exitCode = 1;
  }
} finally {
  await server?.close();
  await engine?.close();
  rmSync(root, { recursive: true, force: true });
}
