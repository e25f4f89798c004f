#!/usr/bin/env node
// Throughput of the addon against the pure-JS fallback, printed as JSON (not part of the tests; run after `pnpm build`):
//   pnpm --filter @flexhelm/pinned-memory bench            (BENCH_MB=512 sets the copy/file size)
// Medians of several repetitions after a warm-up. The machine is noisy (shared vCPUs): compare ratios, not digits.
import { mkdir, rm } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import * as pinned from '../dist/index.js';
import { jsBackend } from '../dist/js-backend.js';
import { createPinnedMemory } from '../dist/pinned-memory.js';

const js = createPinnedMemory(jsBackend, { ioUring: false });
const megabytes = Number(process.env.BENCH_MB ?? 512);
const bytes = megabytes << 20;
const here = dirname(fileURLToPath(import.meta.url));

async function median(repetitions, run) {
  await run(); // warm-up
  const times = [];
  for (let i = 0; i < repetitions; i++) {
    const start = process.hrtime.bigint();
    await run();
    times.push(Number(process.hrtime.bigint() - start) / 1e9);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}

const round = (value) => Math.round(value * 100) / 100;
const rate = (amount, seconds) => round(amount / seconds / 1e9);

async function benchCopy() {
  const src = new Uint8Array(await pinned.allocPinned(bytes)).fill(3);
  const dst = new Uint8Array(await pinned.allocPinned(bytes));
  const result = { bytes, 'Buffer.copy GB/s': rate(bytes, await median(5, () => Buffer.from(src.buffer).copy(dst))) };
  if (pinned.isNative) {
    for (const threads of [1, 2, 4]) result[`native ${threads} thread(s) GB/s`] = rate(bytes, await median(5, () => pinned.copy(dst, src, { threads })));
  }
  return result;
}

async function benchRead() {
  const folder = join(here, '..', '.bench-tmp');
  await mkdir(folder, { recursive: true });
  const path = join(folder, 'read.bin');
  try {
    const data = new Uint8Array(await pinned.allocPinned(bytes));
    for (let i = 0; i < data.length; i += 4096) data[i] = i & 255;
    await pinned.writeFile(path, data, { direct: true });
    const result = { bytes, 'JS fs FileHandle.read, page cache warm GB/s': rate(bytes, await median(3, () => js.readFile(path, data, { queueDepth: 4 }))) };
    if (pinned.isNative) {
      const engines = pinned.nativeFeatures?.ioUring ? ['io_uring', 'pread'] : ['pread'];
      for (const engine of engines) {
        for (const queueDepth of [1, 4]) {
          result[`native O_DIRECT ${engine} QD${queueDepth} GB/s`] = rate(bytes, await median(3, () => pinned.readFile(path, data, { direct: true, engine, queueDepth })));
        }
      }
      result['native buffered pread QD4, page cache warm GB/s'] = rate(bytes, await median(3, () => pinned.readFile(path, data, { engine: 'pread' })));
    }
    return result;
  } finally {
    await rm(folder, { recursive: true, force: true });
  }
}

async function benchConvert() {
  const n = 32 << 20;
  const src = new Uint16Array(n).map((_, i) => (i * 40503) & 0x7bff);
  const dst = new Float32Array(n);
  const result = { elements: n, 'JS table f16ToF32 Gelem/s': rate(n, await median(3, () => js.f16ToF32(src, dst))) };
  if (pinned.isNative) {
    for (const threads of [1, 2]) result[`native f16ToF32 ${threads} thread(s) Gelem/s`] = rate(n, await median(5, () => pinned.f16ToF32(src, dst, { threads })));
    result['native bf16ToF32 2 threads Gelem/s'] = rate(n, await median(5, () => pinned.bf16ToF32(src, dst, { threads: 2 })));
    result['native f32ToF16 2 threads Gelem/s'] = rate(n, await median(5, () => pinned.f32ToF16(dst, src, { threads: 2 })));
  }
  return result;
}

async function benchQuantize() {
  const shape = [4096, 4096];
  const n = shape[0] * shape[1];
  const weights = new Uint16Array(n).map((_, i) => 0x2000 + ((i * 2654435761) % 0x1800));
  const result = { shape, 'JS quantize4 Melem/s': round(n / (await median(1, () => js.quantize4(weights, { shape }))) / 1e6) };
  const q = await js.quantize4(weights, { shape });
  const dst = new Float32Array(n); // reused: allocating 64 MiB per call would dominate the timing
  result['JS dequantize4 Melem/s'] = round(n / (await median(1, () => js.dequantize4(q, { dst }))) / 1e6);
  if (pinned.isNative) {
    for (const threads of [1, 2]) {
      result[`native quantize4 ${threads} thread(s) Melem/s`] = round(n / (await median(3, () => pinned.quantize4(weights, { shape, threads }))) / 1e6);
      result[`native dequantize4 ${threads} thread(s) Melem/s`] = round(n / (await median(3, () => pinned.dequantize4(q, { threads, dst }))) / 1e6);
    }
  }
  return result;
}

const report = {
  loadAverageAtStart: loadavg()[0],
  isNative: pinned.isNative,
  features: pinned.nativeFeatures ?? null,
  copy: await benchCopy(),
  read: await benchRead(),
  convert: await benchConvert(),
  quantize: await benchQuantize(),
};
report.loadAverageAtEnd = loadavg()[0]; // above ~2 the numbers mostly measure other processes
console.log(JSON.stringify(report, null, 2));
