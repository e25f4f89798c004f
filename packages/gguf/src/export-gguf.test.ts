import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HuggingFaceTokenizer, writeFamilyTokenizerFolder } from '@flexhelm/tokenizer';
import { afterAll, describe, expect, it } from 'vitest';
import { dequantize } from './dequantize.js';
import { exportGguf, permuteRotary } from './export-gguf.js';
import { unpermuteRotary } from './gguf-model.js';
import { importGguf, type ImportedGguf } from './import-gguf.js';
import { quantize } from './quantize.js';
import { readGguf } from './read-gguf.js';
import { randomCheckpoint, TINY_CONFIGS, writeFolder, referenceLogits } from './test-family-models.js';

const root = mkdtempSync(join(tmpdir(), 'export-gguf-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const IDS = [[5, 17, 42, 99, 3, 250, 7, 64, 511, 12]];
const STYLE = { llama: 'llama3', qwen2: 'qwen', gemma2: 'sentencepiece', phi3: 'sentencepiece', olmo2: 'llama3', mixtral: 'sentencepiece', qwen2_moe: 'qwen' } as const;

const logits = (model: string | ImportedGguf) => referenceLogits(model, IDS);
const maxDiff = (a: Float32Array, b: Float32Array) => a.reduce((w, x, i) => Math.max(w, Math.abs(x - b[i]!)), 0);

function folderWithTokenizer(arch: keyof typeof STYLE, name: string, seed: number, values?: (v: Float32Array, shape: number[], name: string) => Float32Array, sizes: Record<string, unknown> = {}) {
  const config = { ...TINY_CONFIGS[arch]!, vocab_size: 600, ...sizes };
  const ckpt = randomCheckpoint(config, seed);
  if (values) for (const [n, t] of ckpt) t.values = values(t.values, t.shape, n);
  const dir = join(root, name);
  writeFolder(dir, config, ckpt);
  const files = writeFamilyTokenizerFolder(dir, STYLE[arch], { vocabSize: 600, chat: true });
  return { dir, files };
}

describe('exportGguf', () => {
  it('permuteRotary and unpermuteRotary are inverse', () => {
    const v = Float32Array.from({ length: 4 * 8 * 3 }, (_, i) => i);
    const p = permuteRotary(v, 4, 3);
    expect(p).not.toEqual(v);
    // Head 0, row 1 (pair 0, second half... ) comes from row hd/2 = 4.
    expect([...p.subarray(3, 6)]).toEqual([12, 13, 14]);
    expect(unpermuteRotary(p, 4, 3)).toEqual(v);
  });

  it.each(Object.keys(STYLE) as (keyof typeof STYLE)[])('%s: an F32 export reads back to the same model and tokenizer', async (arch) => {
    const { dir, files } = folderWithTokenizer(arch, `${arch}-f32`, 11);
    const out = join(root, `${arch}-f32.gguf`);
    const r = exportGguf({ folder: dir, out, type: 'F32' });
    expect(r.warnings).toEqual([]);
    const back = importGguf(out, join(root, `data-${arch}`));
    expect(maxDiff(await logits(back), await logits(dir))).toBeLessThan(arch === 'gemma2' ? 1e-4 : 1e-6);
    const tok = (d: string) => new HuggingFaceTokenizer(d, JSON.parse(readFileSync(join(d, 'tokenizer.json'), 'utf8')), JSON.parse(readFileSync(join(d, 'tokenizer_config.json'), 'utf8')));
    const [a, b] = [tok(dir), tok(back.folder)];
    expect(b.bosTokenId).toBe(a.bosTokenId);
    expect(b.eosTokenId).toBe(a.eosTokenId);
    if (STYLE[arch] !== 'sentencepiece') for (const text of ['Hello world, 123 times!', ' naïve\n\tcafé']) expect(b.encode(text)).toEqual(a.encode(text));
    expect(JSON.parse(readFileSync(join(back.folder, 'tokenizer_config.json'), 'utf8')).chat_template).toBe(files.config.chat_template);
  });

  it.each(['F16', 'BF16', 'Q8_0', 'Q4_0'] as const)('llama %s: matrices stored in the type, logits equal those of the dequantised weights', async (type) => {
    const { dir } = folderWithTokenizer('llama', `llama-${type}`, 13);
    const out = join(root, `llama-${type}.gguf`);
    exportGguf({ folder: dir, out, type });
    const f = readGguf(out);
    expect(f.tensors.find((t) => t.name === 'blk.0.attn_q.weight')!.type).toBe(type);
    expect(f.tensors.find((t) => t.name === 'blk.0.attn_norm.weight')!.type).toBe('F32');
    // The same weights quantised and dequantised row-major in a folder of their own.
    const { dir: want } = folderWithTokenizer('llama', `llama-${type}-want`, 13, (v, shape) => (shape.length === 2 ? dequantize(type, quantize(type, v), v.length) : v));
    expect(maxDiff(await logits(importGguf(out, join(root, `data-${type}`))), await logits(want))).toBeLessThan(1e-5);
  });

  it("llama Q4_K_M: llama.cpp's mix (Q6_K head, and v_proj / down_proj of the layers it gives more bits), logits equal those of the dequantised weights", async () => {
    // Rows of whole 256-value super-blocks; 2 layers: llama.cpp's rule gives layer 1 (the last eighth) more bits.
    const sizes = { hidden_size: 256, intermediate_size: 512, head_dim: 64 };
    const { dir } = folderWithTokenizer('llama', 'llama-q4km', 13, undefined, sizes);
    const out = join(root, 'llama-q4km.gguf');
    exportGguf({ folder: dir, out, type: 'Q4_K_M' });
    const f = readGguf(out);
    const typeOf = (n: string) => f.tensors.find((t) => t.name === n)!.type;
    expect(f.metadata.get('general.file_type')).toBe(15);
    expect(['blk.0.attn_q.weight', 'blk.0.attn_v.weight', 'blk.0.ffn_down.weight', 'blk.1.attn_k.weight', 'blk.1.ffn_gate.weight', 'token_embd.weight'].map(typeOf)).toEqual(Array(6).fill('Q4_K'));
    expect(['blk.1.attn_v.weight', 'blk.1.ffn_down.weight', 'output.weight'].map(typeOf)).toEqual(['Q6_K', 'Q6_K', 'Q6_K']);
    const wider = (n: string) => /layers\.1\.(self_attn\.v_proj|mlp\.down_proj)|lm_head/.test(n);
    const { dir: want } = folderWithTokenizer(
      'llama',
      'llama-q4km-want',
      13,
      (v, shape, n) => {
        if (shape.length !== 2) return v;
        const type = wider(n) ? 'Q6_K' : 'Q4_K';
        return dequantize(type, quantize(type, v), v.length);
      },
      sizes,
    );
    expect(maxDiff(await logits(importGguf(out, join(root, 'data-q4km'))), await logits(want))).toBeLessThan(1e-5);
  });

  it("mixtral Q4_K_M with 8 experts: one 3-D tensor per projection, llama.cpp's mix, logits equal those of the dequantised weights", async () => {
    const sizes = { hidden_size: 256, intermediate_size: 256, head_dim: 64, num_local_experts: 8 };
    const { dir } = folderWithTokenizer('mixtral', 'mixtral-q4km', 17, undefined, sizes);
    const out = join(root, 'mixtral-q4km.gguf');
    exportGguf({ folder: dir, out, type: 'Q4_K_M' });
    const f = readGguf(out);
    const t = (n: string) => f.tensors.find((x) => x.name === n)!;
    expect(f.metadata.get('general.architecture')).toBe('llama');
    expect([f.metadata.get('llama.expert_count'), f.metadata.get('llama.expert_used_count')]).toEqual([8, 2]);
    expect(t('blk.0.ffn_gate_exps.weight').dims).toEqual([256, 256, 8]);
    expect(t('blk.1.ffn_down_exps.weight').dims).toEqual([256, 256, 8]);
    expect(t('blk.0.ffn_gate_inp.weight')).toMatchObject({ dims: [256, 8], type: 'F32' });
    // 8 experts: attn_k and attn_v Q8_0; the last layer's experts' down projections Q6_K (more bits), the rest Q4_K.
    expect(['blk.0.attn_k.weight', 'blk.0.attn_v.weight', 'blk.1.ffn_down_exps.weight', 'blk.0.ffn_down_exps.weight', 'blk.0.ffn_up_exps.weight', 'blk.0.attn_q.weight'].map((n) => t(n).type)).toEqual(['Q8_0', 'Q8_0', 'Q6_K', 'Q4_K', 'Q4_K', 'Q4_K']);
    const typeOfHf = (n: string) =>
      /self_attn\.[kv]_proj/.test(n) ? 'Q8_0' : /layers\.1\.block_sparse_moe\.experts\.\d+\.w2|lm_head/.test(n) ? 'Q6_K' : /block_sparse_moe\.gate\./.test(n) ? undefined : 'Q4_K';
    const { dir: want } = folderWithTokenizer(
      'mixtral',
      'mixtral-q4km-want',
      17,
      (v, shape, n) => {
        const type = shape.length === 2 ? typeOfHf(n) : undefined;
        return type ? dequantize(type, quantize(type, v), v.length) : v;
      },
      sizes,
    );
    expect(maxDiff(await logits(importGguf(out, join(root, 'data-mixtral-q4km'))), await logits(want))).toBeLessThan(1e-5);
  });

  it("qwen2_moe Q8_0: the shared expert's tensors, its gate 1-D F32", () => {
    const { dir } = folderWithTokenizer('qwen2_moe', 'qwen2moe-q8', 19);
    const out = join(root, 'qwen2moe-q8.gguf');
    exportGguf({ folder: dir, out, type: 'Q8_0' });
    const f = readGguf(out);
    const t = (n: string) => f.tensors.find((x) => x.name === n)!;
    expect(f.metadata.get('general.architecture')).toBe('qwen2moe');
    expect(['expert_count', 'expert_used_count', 'expert_feed_forward_length', 'expert_shared_feed_forward_length'].map((k) => f.metadata.get(`qwen2moe.${k}`))).toEqual([4, 2, 32, 64]);
    expect(t('blk.0.ffn_gate_inp_shexp.weight')).toMatchObject({ dims: [64], type: 'F32' });
    expect(t('blk.0.ffn_down_shexp.weight')).toMatchObject({ dims: [64, 64], type: 'Q8_0' });
    expect(t('blk.0.ffn_down_exps.weight')).toMatchObject({ dims: [32, 64, 4], type: 'Q8_0' });
  });

  it("refuses a Qwen2-MoE that llama.cpp's graph computes differently", () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ norm_topk_prob: true }, /norm_topk_prob true: llama\.cpp's qwen2moe never renormalises/],
      [{ mlp_only_layers: [0] }, /llama\.cpp's qwen2moe has experts on every layer; this model has them on 1 of 2 \(decoder_sparse_step 1, mlp_only_layers \[0\]\)/],
    ];
    for (const [i, [sizes, message]] of cases.entries()) {
      const { dir } = folderWithTokenizer('qwen2_moe', `qwen2moe-bad-${i}`, 1, undefined, sizes);
      expect(() => exportGguf({ folder: dir, out: join(root, 'x.gguf'), type: 'F32' })).toThrow(message);
    }
  });

  it('refuses what llama.cpp cannot hold, naming it', () => {
    const { dir } = folderWithTokenizer('llama', 'llama-bad', 1);
    expect(() => exportGguf({ folder: dir, out: join(root, 'x.gguf'), type: 'Q5_K' as never })).toThrow(/type "Q5_K" is not written; one of F32, F16, BF16, Q8_0, Q4_0, Q4_K_M, Q5_K_M/);
    rmSync(join(dir, 'tokenizer.json'));
    expect(() => exportGguf({ folder: dir, out: join(root, 'x.gguf'), type: 'F16' })).toThrow(/has no tokenizer.json/);
  });
});
