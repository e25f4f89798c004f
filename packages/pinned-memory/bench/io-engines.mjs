#!/usr/bin/env node
// io_uring against pread threads for O_DIRECT reads, interleaved (each round reads the same file once per engine, the
// order alternating), printed as JSON with the ratio io_uring / pread per queue depth. The evidence behind 'auto'
// reading with pread threads (README). Run after `pnpm build`, under the machine-wide lock:
//   flock /tmp/flexhelm-bench.lock timeout 300 node packages/pinned-memory/bench/io-engines.mjs
// BENCH_MB (default 512) sets the file size, BENCH_ROUNDS (default 7) the rounds; BENCH_DIR the folder (default the
// package's .bench-tmp: a real disk, where O_DIRECT applies; tmpfs would measure buffered copies).
import { mkdir, rm } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import * as pinned from '../dist/index.js';

const megabytes = Number(process.env.BENCH_MB ?? 512);
const rounds = Number(process.env.BENCH_ROUNDS ?? 7);
const bytes = megabytes << 20;
const folder = process.env.BENCH_DIR ?? join(dirname(fileURLToPath(import.meta.url)), '..', '.bench-tmp');

if (!pinned.isNative || !pinned.nativeFeatures?.ioUring) {
  console.log(JSON.stringify({ skipped: pinned.isNative ? 'the addon was built without liburing (install liburing-dev and rebuild)' : 'the native addon is not loaded' }));
  process.exit(0);
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const round2 = (x) => Math.round(x * 100) / 100;

await mkdir(folder, { recursive: true });
const path = join(folder, 'io-engines.bin');
try {
  const data = new Uint8Array(await pinned.allocPinned(bytes));
  for (let i = 0; i < data.length; i += 4096) data[i] = i & 255;
  await pinned.writeFile(path, data, { direct: true });
  const report = { bytes, rounds, loadAverageAtStart: loadavg()[0], depths: {} };
  for (const queueDepth of [1, 4, 8]) {
    const seconds = { io_uring: [], pread: [] };
    let direct = true;
    for (let r = -1; r < rounds; r++) {
      // Round -1 warms both engines up and is not counted; the order alternates so neither always goes first.
      const order = r % 2 === 0 ? ['io_uring', 'pread'] : ['pread', 'io_uring'];
      for (const engine of order) {
        const start = process.hrtime.bigint();
        const result = await pinned.readFile(path, data, { direct: true, engine, queueDepth });
        const s = Number(process.hrtime.bigint() - start) / 1e9;
        direct &&= result.direct;
        if (r >= 0) seconds[engine].push(s);
      }
    }
    const gbps = (engine) => round2(bytes / median(seconds[engine]) / 1e9);
    report.depths[`QD${queueDepth}`] = {
      'io_uring GB/s': gbps('io_uring'),
      'pread GB/s': gbps('pread'),
      'io_uring / pread': round2(median(seconds.pread) / median(seconds.io_uring)),
      direct,
    };
  }
  report.loadAverageAtEnd = loadavg()[0];
  console.log(JSON.stringify(report, null, 2));
} finally {
  await rm(folder, { recursive: true, force: true });
}
