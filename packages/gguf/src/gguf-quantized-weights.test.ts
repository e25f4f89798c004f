import { mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ggufQuantizedWeights } from './gguf-quantized-weights.js';
import { GgufTensorSource } from './gguf-tensor-source.js';
import { importGguf } from './import-gguf.js';
import { readGguf } from './read-gguf.js';
import { randomCheckpoint, TINY_CONFIGS, writeFamilyGguf } from './test-family-models.js';
import type { TestType } from './test-quantizers.js';

const root = mkdtempSync(join(tmpdir(), 'gguf-quantized-weights-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('ggufQuantizedWeights: what a backend holds as the file stores it', () => {
  // qwen2 ties its head to the token table; llama has its own output.weight.
  it.each([
    ['qwen2', 'Q4_0'],
    ['qwen2', 'Q8_0'],
    ['qwen2', 'F16'],
    ['qwen2', 'Q4_1'],
    ['llama', 'Q6_K'],
    ['llama', 'F32'],
  ] as [string, TestType][])('%s %s: token rows read from the file equal the full read; keys and head from the header', (arch, type) => {
    const config = { ...TINY_CONFIGS[arch]!, ...(type === 'Q6_K' ? { hidden_size: 256, head_dim: 64, intermediate_size: 256 } : {}) };
    const gguf = join(root, `${arch}-${type}.gguf`);
    writeFamilyGguf(gguf, config, randomCheckpoint(config, 11), type);
    const { description } = importGguf(gguf, join(root, `data-${arch}-${type}`));
    const q = ggufQuantizedWeights(gguf, description);
    const dim = description.embedding.dim;
    const table = new GgufTensorSource(gguf).read('model.embed_tokens.weight');
    const ids = Int32Array.from([0, 7, description.vocabSize - 1, 7, 42]);
    const out = new Float32Array(ids.length * dim).fill(Number.NaN);
    const rows = q.tokenRows();
    rows.gather(ids, out);
    for (const [t, id] of ids.entries()) expect(out.subarray(t * dim, (t + 1) * dim)).toEqual(table.subarray(id * dim, (id + 1) * dim));
    expect(() => rows.gather(Int32Array.from([description.vocabSize]), new Float32Array(dim))).toThrow(`token id ${description.vocabSize} is outside`);
    // Nothing of the table is held: a row's scratch only.
    expect(rows.bytes).toBeLessThanOrEqual(dim * 4);
    rows.close();
    expect(() => rows.gather(Int32Array.from([0]), new Float32Array(dim))).toThrow(/the token table was closed/);
    // Kept types only: layers' matrices by key, the head's blocks when its type is one.
    const kept = ['Q8_0', 'Q4_0', 'Q6_K'].includes(type);
    for (const i of [0, 1]) expect(q.layerKeys(i).sort()).toEqual(Object.keys(q.layer(i)).sort());
    expect(q.layerKeys(0).length).toBe(kept ? 7 : 0);
    expect(q.headKept).toBe(kept);
    expect(q.head() !== undefined).toBe(kept);
  });

  it('refuses a row the file no longer holds (it shrank after opening), naming the file and the row', () => {
    const config = TINY_CONFIGS.qwen2!;
    const file = join(root, 'shrinking.gguf');
    writeFamilyGguf(file, config, randomCheckpoint(config, 13), 'Q8_0');
    const { description } = importGguf(file, join(root, 'data-shrinking'));
    const t = readGguf(file).tensors.find((x) => x.name === 'token_embd.weight')!;
    const rows = ggufQuantizedWeights(file, description).tokenRows();
    const dim = description.embedding.dim;
    const rowBytes = (dim / 32) * 34;
    truncateSync(file, t.position + 3 * rowBytes);
    rows.gather(Int32Array.from([0, 2]), new Float32Array(2 * dim));
    expect(() => rows.gather(Int32Array.from([5]), new Float32Array(dim))).toThrow(/shrinking\.gguf: token_embd\.weight row 5 lies past the file's end/);
    rows.close();
  });

  it('refuses a gathered token row holding a NaN / ±Inf, naming the file and the row (a damaged table)', () => {
    const config = TINY_CONFIGS.qwen2!;
    const file = join(root, 'damaged-table.gguf');
    writeFamilyGguf(file, config, randomCheckpoint(config, 12), 'F16');
    const t = readGguf(file).tensors.find((x) => x.name === 'token_embd.weight')!;
    const bytes = readFileSync(file);
    // Row 9's third value set to +Inf (f16 0x7c00).
    bytes.writeUInt16LE(0x7c00, t.position + (9 * t.dims[0]! + 2) * 2);
    writeFileSync(file, bytes);
    const { description } = importGguf(file, join(root, 'data-damaged-table'));
    const rows = ggufQuantizedWeights(file, description).tokenRows();
    const dim = description.embedding.dim;
    rows.gather(Int32Array.from([8]), new Float32Array(dim));
    expect(() => rows.gather(Int32Array.from([8, 9]), new Float32Array(2 * dim))).toThrow(/damaged-table\.gguf: tensor token_embd\.weight \(F16\) has a non-finite value \(Infinity\) in row 9; the file is damaged/);
  });
});
