import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeHfConfig, Engine, ReferenceBackend } from '@flexhelm/engine';
import { expertTensorParts } from './gguf-experts.js';
import { afterAll, describe, expect, it } from 'vitest';
import { dequantize } from './dequantize.js';
import { GGUF_SOURCE_FILE, importGguf, type ImportedGguf } from './import-gguf.js';
import { ggufQuantizedWeights } from './gguf-quantized-weights.js';
import { GgufTensorSource } from './gguf-tensor-source.js';
import { readGguf } from './read-gguf.js';
import { type TestType, testQuantize } from './test-quantizers.js';
import { randomCheckpoint, TINY_CONFIGS, writeFamilyGguf, writeFolder, referenceLogits } from './test-family-models.js';
import type { TestValue } from './test-gguf-writer.js';

const root = mkdtempSync(join(tmpdir(), 'import-gguf-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const IDS = [
  [5, 17, 42, 99, 3, 250, 7, 64],
  [1, 2, 3, 4, 5, 6, 7, 8],
];

const logits = (model: string | ImportedGguf) => referenceLogits(model, IDS);

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
      ['general.architecture', /architecture "bert" is not read; supported: llama, qwen2, gemma2, phi3, olmo2, qwen2moe/],
    ];
    for (const [key, message] of variants) {
      const p = join(root, `refuse-${key}.gguf`);
      writeFamilyGguf(p, config, base, 'F32', key === 'general.architecture' ? { [key]: { type: 'string', value: 'bert' } } : { [key]: { type: 'u32', value: 8 } });
      expect(() => importGguf(p, join(root, 'data-refuse'))).toThrow(message);
    }
    expect(() => importGguf(join(root, 'missing.gguf'), join(root, 'data-refuse'))).toThrow(/missing\.gguf: no such GGUF file/);
  });

  it('refuses mixture-of-experts files whose experts do not add up, naming the key or tensor', () => {
    const config = TINY_CONFIGS.mixtral!;
    const ckpt = randomCheckpoint(config, 2);
    const cases: [Record<string, TestValue>, RegExp][] = [
      // A router and 3-D expert tensors of 4 experts in a file that says 6: the first tensor read names it.
      [{ 'llama.expert_count': { type: 'u32', value: 6 } }, /blk\.0\.ffn_gate_inp\.weight is 64 × 4; routerW of layer 0 is 6 × 64/],
      [{ 'llama.expert_used_count': { type: 'u32', value: 0 } }, /metadata llama\.expert_used_count is 0; it must be a positive integer/],
    ];
    for (const [i, [override, message]] of cases.entries()) {
      const p = join(root, `refuse-moe-${i}.gguf`);
      writeFamilyGguf(p, config, ckpt, 'F32', override);
      expect(() => importGguf(p, join(root, 'data-refuse-moe'))).toThrow(message);
    }
    // The 3-D tensors alone: their outermost size must be the expert count.
    const d = describeHfConfig({ ...config, num_local_experts: 6 });
    expect(() => expertTensorParts('blk.1.ffn_up_exps.weight', [64, 64, 4], d, 'x.gguf')).toThrow(/x\.gguf: blk\.1\.ffn_up_exps\.weight is 64 × 64 × 4; a layer of 6 experts stores them as a 3-D tensor with 6 outermost/);
    expect(() => expertTensorParts('blk.1.ffn_up.7.weight', [64, 64], d, 'x.gguf')).toThrow(/names expert 7; the file has 6 experts/);
    expect(expertTensorParts('blk.1.ffn_up_exps.weight', [64, 64, 6], d, 'x.gguf')?.parts.map(([k, e]) => `${k}@${e}`)).toEqual([0, 1, 2, 3, 4, 5].map((e) => `expert.${e}.upW@${e}`));
    // A qwen2moe file that says it has no experts.
    const q = join(root, 'refuse-qwen2moe.gguf');
    writeFamilyGguf(q, TINY_CONFIGS.qwen2_moe!, randomCheckpoint(TINY_CONFIGS.qwen2_moe!, 2), 'F32', { 'qwen2moe.expert_count': { type: 'u32', value: 0 } });
    expect(() => importGguf(q, join(root, 'data-refuse-moe'))).toThrow(/qwen2moe files are read with experts; this one has none/);
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
    const got = await logits(imported);
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

  it('keeps the weights in the file: the folder holds config, tokenizer and the file\'s name; loading the folder alone says where they are', async () => {
    const config = TINY_CONFIGS.llama!;
    const ckpt = randomCheckpoint(config, 4);
    const gguf = join(root, 'in-place.gguf');
    writeFamilyGguf(gguf, config, ckpt, 'Q8_0');
    const imported = importGguf(gguf, join(root, 'data-in-place'));
    expect(readdirSync(imported.folder).sort()).toEqual(['config.json', 'generation_config.json', GGUF_SOURCE_FILE, 'tokenizer.json', 'tokenizer_config.json']);
    const record = JSON.parse(readFileSync(join(imported.folder, GGUF_SOURCE_FILE), 'utf8'));
    expect(record).toEqual({ gguf: realpathSync(gguf), size: statSync(gguf).size, mtimeMs: statSync(gguf).mtimeMs });
    expect(imported.gguf).toBe(realpathSync(gguf));
    await expect(Engine.load(imported.folder, { backend: new ReferenceBackend() })).rejects.toThrow(`holds no weights: they are read from the GGUF file ${realpathSync(gguf)}; pass that file as the model`);
  });

  it('a folder an earlier version converted (with a widened model.safetensors) loses the copy and reads the file', async () => {
    const config = TINY_CONFIGS.llama!;
    const ckpt = randomCheckpoint(config, 6);
    const gguf = join(root, 'old-layout.gguf');
    writeFamilyGguf(gguf, config, ckpt);
    const data = join(root, 'data-old-layout');
    const first = importGguf(gguf, data);
    // What earlier versions left: the widened weights beside config and tokenizer, and no source record.
    writeFolder(join(root, 'old-layout-hf'), config, ckpt);
    copyFileSync(join(root, 'old-layout-hf', 'model.safetensors'), join(first.folder, 'model.safetensors'));
    rmSync(join(first.folder, GGUF_SOURCE_FILE));
    const logged: string[] = [];
    const again = importGguf(gguf, data, (m) => logged.push(m));
    expect(again).toMatchObject({ folder: first.folder, converted: false });
    expect(existsSync(join(first.folder, 'model.safetensors'))).toBe(false);
    expect(existsSync(join(first.folder, GGUF_SOURCE_FILE))).toBe(true);
    expect(logged.join('\n')).toMatch(/removing .*model\.safetensors .*weights are now read from .*old-layout\.gguf itself/);
    expect(maxDiff(await logits(again), await logits(join(root, 'old-layout-hf')))).toBeLessThan(1e-6);
  });

  it('refuses a damaged tensor when the engine reads it, naming the file and tensor', async () => {
    const config = TINY_CONFIGS.llama!;
    const ckpt = randomCheckpoint(config, 7);
    const gguf = join(root, 'damaged.gguf');
    writeFamilyGguf(gguf, config, ckpt, 'Q8_0');
    const file = readGguf(gguf);
    const t = file.tensors.find((x) => x.name === 'blk.1.ffn_down.weight')!;
    // Block 3's f16 scale set to +Inf (0x7c00).
    const bytes = readFileSync(gguf);
    bytes.writeUInt16LE(0x7c00, t.position + 3 * 34);
    writeFileSync(gguf, bytes);
    const imported = importGguf(gguf, join(root, 'data-damaged'));
    await expect(logits(imported)).rejects.toThrow(/damaged\.gguf: tensor blk\.1\.ffn_down\.weight \(Q8_0\) has a non-finite value \(Infinity\) at index 96/);
    // Multiplied as stored (never widened), the blocks are checked where they are read.
    expect(() => ggufQuantizedWeights(gguf, imported.description).layer(1)).toThrow(/damaged\.gguf: tensor blk\.1\.ffn_down\.weight \(Q8_0\) has a non-finite scale in block 3; the file is damaged/);
    expect(() => new GgufTensorSource(gguf).read('model.layers.0.mlp.nonexistent.weight')).toThrow(/damaged\.gguf: no tensor model\.layers\.0\.mlp\.nonexistent\.weight/);
  });

  it.each(['Q8_0', 'Q4_0'] as const)('llama with %s matrices: logits equal those of the dequantised weights', async (type) => {
    const config = TINY_CONFIGS.llama!;
    const ckpt = randomCheckpoint(config, 5);
    const gguf = join(root, `llama-${type}.gguf`);
    writeFamilyGguf(gguf, config, ckpt, type);
    // The folder holds what the quantised matrices stand for (quantise then dequantise each row-major matrix).
    const deq = new Map([...ckpt].map(([n, t]) => [n, { shape: t.shape, values: t.shape.length === 2 ? dequantize(type, testQuantize(type, t.values), t.values.length) : t.values }]));
    writeFolder(join(root, `llama-${type}-hf`), config, deq);
    const got = await logits(importGguf(gguf, join(root, `data-${type}`)));
    const want = await logits(join(root, `llama-${type}-hf`));
    expect(maxDiff(got, want)).toBeLessThan(1e-5);
    // And they differ from the unquantised model by the quantisation error only.
    writeFolder(join(root, `llama-${type}-exact`), config, ckpt);
    expect(maxDiff(got, await logits(join(root, `llama-${type}-exact`)))).toBeGreaterThan(0);
  });

  it('mixtral with each expert as its own matrix (files from before llama.cpp merged them): the same model', async () => {
    const config = TINY_CONFIGS.mixtral!;
    const ckpt = randomCheckpoint(config, 4);
    writeFolder(join(root, 'mixtral-split-hf'), config, ckpt);
    const gguf = join(root, 'mixtral-split.gguf');
    writeFamilyGguf(gguf, config, ckpt, 'F32', {}, { splitExperts: true });
    expect(maxDiff(await logits(importGguf(gguf, join(root, 'data-split'))), await logits(join(root, 'mixtral-split-hf')))).toBeLessThan(1e-6);
  });

  it.each([
    ['mixtral', 'Q8_0'],
    ['qwen2_moe', 'Q4_0'],
  ] as const)('%s with %s expert tensors: logits equal those of the dequantised weights', async (family, type) => {
    const config = TINY_CONFIGS[family]!;
    const ckpt = randomCheckpoint(config, 6);
    const gguf = join(root, `${family}-${type}.gguf`);
    writeFamilyGguf(gguf, config, ckpt, type);
    // The router and the shared expert's gate stay F32 in the file.
    const keptF32 = (n: string) => /(\.gate|shared_expert_gate)\.weight$/.test(n);
    const deq = new Map([...ckpt].map(([n, t]) => [n, { shape: t.shape, values: t.shape.length === 2 && !keptF32(n) ? dequantize(type, testQuantize(type, t.values), t.values.length) : t.values }]));
    writeFolder(join(root, `${family}-${type}-hf`), config, deq);
    expect(maxDiff(await logits(importGguf(gguf, join(root, `data-${family}-${type}`))), await logits(join(root, `${family}-${type}-hf`)))).toBeLessThan(1e-5);
  });

  // Rows of 256 values for the K-quants' super-blocks.
  const wide = { ...TINY_CONFIGS.qwen2!, hidden_size: 256, intermediate_size: 512, num_hidden_layers: 1 };
  it.each(['F16', 'BF16', 'Q4_1', 'Q4_K', 'Q5_K', 'Q6_K'] as TestType[])('qwen2 with %s matrices: logits equal those of the dequantised weights', async (type) => {
    const ckpt = randomCheckpoint(wide, 9);
    const gguf = join(root, `qwen2-${type}.gguf`);
    writeFamilyGguf(gguf, wide, ckpt, type);
    const deq = new Map([...ckpt].map(([n, t]) => [n, { shape: t.shape, values: t.shape.length === 2 ? dequantize(type, testQuantize(type, t.values), t.values.length) : t.values }]));
    writeFolder(join(root, `qwen2-${type}-hf`), wide, deq);
    const got = await logits(importGguf(gguf, join(root, `data-qwen2-${type}`)));
    expect(maxDiff(got, await logits(join(root, `qwen2-${type}-hf`)))).toBeLessThan(1e-5);
  });
});
