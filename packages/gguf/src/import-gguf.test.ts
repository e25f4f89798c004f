import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine, ReferenceBackend } from '@flexhelm/engine';
import { afterAll, describe, expect, it } from 'vitest';
import { dequantize } from './dequantize.js';
import { importGguf } from './import-gguf.js';
import { type TestType, testQuantize } from './test-quantizers.js';
import { randomCheckpoint, TINY_CONFIGS, writeFamilyGguf, writeFolder } from './test-family-models.js';

const root = mkdtempSync(join(tmpdir(), 'import-gguf-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const IDS = [
  [5, 17, 42, 99, 3, 250, 7, 64],
  [1, 2, 3, 4, 5, 6, 7, 8],
];
const MASK = IDS.map((r) => r.map(() => 1));

async function logits(folder: string): Promise<Float32Array> {
  const engine = await Engine.load(folder, { backend: new ReferenceBackend() });
  try {
    return await engine.forwardLogits(IDS, MASK);
  } finally {
    await engine.close();
  }
}

const maxDiff = (a: Float32Array, b: Float32Array) => a.reduce((w, x, i) => Math.max(w, Math.abs(x - b[i]!)), 0);

describe('importGguf refusals', () => {
  it('names the key or tensor that stops a file from being a model', () => {
    const config = TINY_CONFIGS.llama!;
    const path = join(root, 'refuse.gguf');
    const base = randomCheckpoint(config, 2);
    writeFamilyGguf(path, config, base);
    // The same file with one metadata key changed: rewritten through the test writer's metadata list.
    const variants: [string, RegExp][] = [
      ['llama.rope.dimension_count', /llama.rope.dimension_count is 8; only rotary over the whole head \(16\) is computed/],
      ['general.architecture', /architecture "bert" is not read; supported: llama, qwen2, gemma2, phi3, olmo2/],
    ];
    for (const [key, message] of variants) {
      const p = join(root, `refuse-${key}.gguf`);
      writeFamilyGguf(p, config, base, 'F32', key === 'general.architecture' ? { [key]: { type: 'string', value: 'bert' } } : { [key]: { type: 'u32', value: 8 } });
      expect(() => importGguf(p, join(root, 'data-refuse'))).toThrow(message);
    }
    expect(() => importGguf(join(root, 'missing.gguf'), join(root, 'data-refuse'))).toThrow(/missing\.gguf: no such GGUF file/);
  });
});

describe('importGguf: a GGUF file laid out as llama.cpp writes it gives the same model as its folder', () => {
  it.each(Object.keys(TINY_CONFIGS))('%s (F32): same description, logits equal', async (arch) => {
    const config = TINY_CONFIGS[arch]!;
    const ckpt = randomCheckpoint(config, 3);
    writeFolder(join(root, `${arch}-hf`), config, ckpt);
    const gguf = join(root, `${arch}.gguf`);
    writeFamilyGguf(gguf, config, ckpt);
    const data = join(root, `data-${arch}`);
    const imported = importGguf(gguf, data);
    expect(imported.converted).toBe(true);
    const want = await logits(join(root, `${arch}-hf`));
    const got = await logits(imported.folder);
    // Exact but for Gemma's norms, stored as 1 + w and read back as (1 + w) − 1 in float32.
    expect(maxDiff(got, want)).toBeLessThan(arch === 'gemma2' ? 1e-4 : 1e-6);
    const { name: _n, bosTokenId, eosTokenId, padTokenId: _p, ...desc } = imported.description;
    expect([bosTokenId, eosTokenId]).toEqual([0, 1]);
    const { name: _m, bosTokenId: _b, eosTokenId: _e, padTokenId: _q, ...wantDesc } = (await Engine.load(join(root, `${arch}-hf`), { backend: new ReferenceBackend() }).then(async (e) => {
      const d = e.description;
      await e.close();
      return d;
    }));
    expect(desc).toEqual(wantDesc);
    const tok = JSON.parse(readFileSync(join(imported.folder, 'tokenizer_config.json'), 'utf8'));
    expect(tok.chat_template).toBe('{% for m in messages %}{{ m.content }}{% endfor %}');
    expect([tok.bos_token, tok.eos_token]).toEqual(['<|begin|>', '<|end|>']);
    // The same file again: the earlier conversion is reused.
    expect(importGguf(gguf, data).converted).toBe(false);
  });

  it.each(['Q8_0', 'Q4_0'] as const)('llama with %s matrices: logits equal those of the dequantised weights', async (type) => {
    const config = TINY_CONFIGS.llama!;
    const ckpt = randomCheckpoint(config, 5);
    const gguf = join(root, `llama-${type}.gguf`);
    writeFamilyGguf(gguf, config, ckpt, type);
    // The folder holds what the quantised matrices stand for (quantise then dequantise each row-major matrix).
    const deq = new Map([...ckpt].map(([n, t]) => [n, { shape: t.shape, values: t.shape.length === 2 ? dequantize(type, testQuantize(type, t.values), t.values.length) : t.values }]));
    writeFolder(join(root, `llama-${type}-hf`), config, deq);
    const got = await logits(importGguf(gguf, join(root, `data-${type}`)).folder);
    const want = await logits(join(root, `llama-${type}-hf`));
    expect(maxDiff(got, want)).toBeLessThan(1e-5);
    // And they differ from the unquantised model by the quantisation error only.
    writeFolder(join(root, `llama-${type}-exact`), config, ckpt);
    expect(maxDiff(got, await logits(join(root, `llama-${type}-exact`)))).toBeGreaterThan(0);
  });

  // Rows of 256 values for the K-quants' super-blocks.
  const wide = { ...TINY_CONFIGS.qwen2!, hidden_size: 256, intermediate_size: 512, num_hidden_layers: 1 };
  it.each(['F16', 'BF16', 'Q4_1', 'Q4_K', 'Q5_K', 'Q6_K'] as TestType[])('qwen2 with %s matrices: logits equal those of the dequantised weights', async (type) => {
    const ckpt = randomCheckpoint(wide, 9);
    const gguf = join(root, `qwen2-${type}.gguf`);
    writeFamilyGguf(gguf, wide, ckpt, type);
    const deq = new Map([...ckpt].map(([n, t]) => [n, { shape: t.shape, values: t.shape.length === 2 ? dequantize(type, testQuantize(type, t.values), t.values.length) : t.values }]));
    writeFolder(join(root, `qwen2-${type}-hf`), wide, deq);
    const got = await logits(importGguf(gguf, join(root, `data-qwen2-${type}`)).folder);
    expect(maxDiff(got, await logits(join(root, `qwen2-${type}-hf`)))).toBeLessThan(1e-5);
  });
});
