// Dequantisation throughput per type and the end-to-end cost of `export-gguf`, `importGguf` and reading every tensor widened on one model:
// `node bench/bench-gguf.mjs` (after `pnpm build`). Prints one line per figure; record them in README.md with the host.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeHubModel } from '@flexhelm/engine';
import { writeFamilyTokenizerFolder } from '@flexhelm/tokenizer';
import { dequantize, exportGguf, GGML_TYPES, GgufTensorSource, importGguf } from '../dist/index.js';

const N = 1 << 22;
for (const [type, t] of Object.entries(GGML_TYPES)) {
  const bytes = new Uint8Array((N / t.blockValues) * t.blockBytes);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 2654435761) >>> 24;
  // Finite scales: every f16 field made 0x3c00 (1.0) is enough for a throughput figure; values are not checked here.
  const out = new Float32Array(N);
  dequantize(type, bytes, N, out);
  const t0 = performance.now();
  for (let r = 0; r < 3; r++) dequantize(type, bytes, N, out);
  const ms = (performance.now() - t0) / 3;
  console.log(`dequantize ${type.padEnd(5)} ${((N / ms) * 1e3 / 1e6).toFixed(0).padStart(5)} M values/s`);
}

const dir = mkdtempSync(join(tmpdir(), 'bench-gguf-'));
try {
  const folder = join(dir, 'model');
  makeHubModel({ config: { base: 'llama-3.2-1b', hidden_size: 512, num_attention_heads: 8, num_key_value_heads: 2, num_hidden_layers: 8, intermediate_size: 1408, vocab_size: 32000 }, outDir: folder, dtype: 'f32', tokenizer: (d, s, o) => writeFamilyTokenizerFolder(d, s, o) });
  for (const type of ['F16', 'Q8_0', 'Q4_0']) {
    const out = join(dir, `m-${type}.gguf`);
    let t0 = performance.now();
    exportGguf({ folder, out, type });
    const exportMs = performance.now() - t0;
    t0 = performance.now();
    const { gguf } = importGguf(out, join(dir, `data-${type}`));
    const importMs = performance.now() - t0;
    // Every tensor read widened, as a backend that multiplies no blocks (onnxruntime, the reference) loads it.
    t0 = performance.now();
    const source = new GgufTensorSource(gguf);
    for (const name of source.tensors.keys()) source.read(name);
    const readMs = performance.now() - t0;
    console.log(`${type}: ${(statSync(out).size / 2 ** 20).toFixed(0)} MiB file, export ${(exportMs / 1e3).toFixed(2)} s, import (config, tokenizer) ${(importMs / 1e3).toFixed(2)} s, every tensor read widened ${(readMs / 1e3).toFixed(2)} s`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
