import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FAMILY_BASES } from './families/registry.js';
import { describeHfConfig, readModelDescription } from './llama-description.js';
import { makeHubModel, resolveHubConfig } from './make-hub-model.js';
import { SafetensorsSource } from './safetensors.js';

const root = mkdtempSync(join(tmpdir(), 'make-hub-model-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

// Every base shrunk to a tiny size (the family's structure kept: GQA ratio, tying, rope scaling, window).
const tiny = (base: string) => {
  const c = FAMILY_BASES[base]!.config;
  const heads = 4;
  const kv = Math.max(1, Math.round(heads * (Number(c.num_key_value_heads) / Number(c.num_attention_heads))));
  return { base, hidden_size: 64, num_attention_heads: heads, num_key_value_heads: kv, num_hidden_layers: 2, intermediate_size: 96, vocab_size: 600 };
};

describe('makeHubModel', () => {
  it.each(Object.keys(FAMILY_BASES))('writes %s in the Hub layout and its description reads back', (base) => {
    const out = join(root, base);
    const made = makeHubModel({ config: tiny(base), outDir: out, seed: 3, dtype: 'bf16' });
    const config = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8'));
    expect(config.model_type).toBe(FAMILY_BASES[base]!.config.model_type);
    expect(config.torch_dtype).toBe('bfloat16');
    expect(config.transformers_version).toBe('4.47.1');
    expect(Object.keys(config)).toEqual(Object.keys(config).sort());
    const d = readModelDescription(out);
    expect(d).toEqual(made.description);
    expect(d.attention.headDim).toBe(16);
    // Gemma 2's config.json leaves tie_word_embeddings at its default (true).
    expect(d.embedding.tiedHead).toBe(FAMILY_BASES[base]!.config.tie_word_embeddings ?? true);
    const src = new SafetensorsSource(join(out, 'model.safetensors'));
    try {
      const names = [...src.tensors.keys()];
      expect(names.includes('lm_head.weight')).toBe(!d.embedding.tiedHead);
      expect(src.tensors.get('model.embed_tokens.weight')!.dtype).toBe('BF16');
      const kv = d.attention.kvHeads * 16;
      if (d.family === 'phi3') {
        // Fused as Phi-3 publishes them: q, k, v rows in one tensor; gate, up rows in another.
        expect(src.tensors.get('model.layers.1.self_attn.qkv_proj.weight')!.shape).toEqual([64 + 2 * kv, 64]);
        expect(src.tensors.get('model.layers.1.mlp.gate_up_proj.weight')!.shape).toEqual([2 * 96, 64]);
      } else {
        expect(src.tensors.get('model.layers.0.self_attn.k_proj.weight')!.shape).toEqual([kv, 64]);
      }
      // Per layer: the family's norms, projections and biases; plus embedding, final norm, head.
      // (A mixture of experts' layers hold a router and every expert: counted by the MoE tests.)
      const perLayer = ({ opt: 0, llama: 9, mistral: 9, qwen2: 12, gemma2: 11, phi3: 6, olmo2: 11 } as Record<string, number>)[d.family];
      if (d.moe === undefined) expect(names.length).toBe(2 * perLayer! + 2 + (d.embedding.tiedHead ? 0 : 1));
      if (d.norm.kind === 'rmsnorm-plus-one') {
        // Stored w of (1 + w): centred on 0 so the scale is 1 ± 0.25.
        const w = Array.from(src.read('model.norm.weight'));
        expect(Math.max(...w.map(Math.abs))).toBeLessThanOrEqual(0.25);
      }
    } finally {
      src.close();
    }
    const generation = JSON.parse(readFileSync(join(out, 'generation_config.json'), 'utf8'));
    expect(generation.transformers_version).toBe('4.47.1');
  });

  it('describes every full-size base with its published shape', () => {
    const shape = (base: string) => {
      const d = describeHfConfig(resolveHubConfig(base).hf);
      return [d.layers, d.hiddenSize, d.attention.heads, d.attention.kvHeads, d.attention.headDim, d.mlp.intermediateSize, d.vocabSize, d.embedding.tiedHead, d.attention.slidingWindow];
    };
    expect(shape('llama-3.2-1b')).toEqual([16, 2048, 32, 8, 64, 8192, 128256, true, undefined]);
    expect(shape('llama-3.2-3b')).toEqual([28, 3072, 24, 8, 128, 8192, 128256, true, undefined]);
    expect(shape('llama-3.1-8b')).toEqual([32, 4096, 32, 8, 128, 14336, 128256, false, undefined]);
    expect(shape('llama-2-7b')).toEqual([32, 4096, 32, 32, 128, 11008, 32000, false, undefined]);
    expect(shape('mistral-7b-v0.1')).toEqual([32, 4096, 32, 8, 128, 14336, 32000, false, 4096]);
    expect(shape('mistral-7b-v0.3')).toEqual([32, 4096, 32, 8, 128, 14336, 32768, false, undefined]);
    expect(shape('qwen2-0.5b')).toEqual([24, 896, 14, 2, 64, 4864, 151936, true, undefined]);
    expect(shape('qwen2-1.5b')).toEqual([28, 1536, 12, 2, 128, 8960, 151936, true, undefined]);
    expect(shape('qwen2-7b')).toEqual([28, 3584, 28, 4, 128, 18944, 152064, false, undefined]);
    expect(shape('gemma-2-2b')).toEqual([26, 2304, 8, 4, 256, 9216, 256000, true, 4096]);
    expect(shape('gemma-2-9b')).toEqual([42, 3584, 16, 8, 256, 14336, 256000, true, 4096]);
    expect(shape('phi-3-mini-4k')).toEqual([32, 3072, 32, 32, 96, 8192, 32064, false, 2047]);
    expect(shape('phi-3-mini-128k')).toEqual([32, 3072, 32, 32, 96, 8192, 32064, false, 262144]);
    expect(shape('phi-3.5-mini')).toEqual([32, 3072, 32, 32, 96, 8192, 32064, false, 262144]);
    expect(shape('olmo-2-7b')).toEqual([32, 4096, 32, 32, 128, 11008, 100352, false, undefined]);
    const gemma = describeHfConfig(resolveHubConfig('gemma-2-9b').hf);
    expect([gemma.attention.logitSoftcap, gemma.finalLogitSoftcap, gemma.attention.scale, gemma.attention.slidingWindowLayers, gemma.embedding.scale]).toEqual([50, 30, 1 / 16, 'even', Math.sqrt(3584)]);
    const phi = describeHfConfig(resolveHubConfig('phi-3-mini-128k').hf).positions;
    expect(phi.kind === 'rope' && phi.scaling?.kind === 'longrope' && [phi.scaling.shortFactor.length, phi.scaling.longFactor.length, phi.scaling.originalMaxPositions]).toEqual([48, 48, 4096]);
    expect(describeHfConfig(resolveHubConfig('olmo-2-7b').hf).bosTokenId).toBeUndefined();
    expect(describeHfConfig(resolveHubConfig('llama-3.1-8b').hf).positions).toEqual({ kind: 'rope', theta: 500000, scaling: { kind: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 8192 } });
  });

  it('writes the same values in f32, f16 and bf16 (every value exact in all three), deterministic by seed', () => {
    const read = (dtype: 'f32' | 'f16' | 'bf16', seed: number) => {
      const out = join(root, `dtypes-${dtype}-${seed}`);
      makeHubModel({ config: tiny('llama-3.1-8b'), outDir: out, seed, dtype });
      const src = new SafetensorsSource(join(out, 'model.safetensors'));
      try {
        return [...src.tensors.keys()].map((n) => [n, Array.from(src.read(n))] as const);
      } finally {
        src.close();
      }
    };
    const bf16 = read('bf16', 1);
    expect(read('f32', 1)).toEqual(bf16);
    expect(read('f16', 1)).toEqual(bf16);
    expect(read('bf16', 2)).not.toEqual(bf16);
    const norm = bf16.find(([n]) => n === 'model.norm.weight')![1];
    expect(Math.min(...norm)).toBeGreaterThanOrEqual(0.75);
    expect(Math.max(...norm)).toBeLessThanOrEqual(1.25);
  });

  it('shards past --shard-size like save_pretrained, with an index the loader reads', () => {
    const out = join(root, 'sharded');
    const whole = join(root, 'unsharded');
    makeHubModel({ config: tiny('mistral-7b-v0.1'), outDir: whole, seed: 5 });
    const made = makeHubModel({ config: tiny('mistral-7b-v0.1'), outDir: out, seed: 5, shardSize: 60_000 });
    const shards = readdirSync(out).filter((f) => f.startsWith('model-'));
    expect(shards.length).toBeGreaterThan(2);
    expect(shards[0]).toBe(`model-00001-of-${String(shards.length).padStart(5, '0')}.safetensors`);
    expect(made.files).toContain('model.safetensors.index.json');
    const index = JSON.parse(readFileSync(join(out, 'model.safetensors.index.json'), 'utf8'));
    const a = new SafetensorsSource(join(out, 'model.safetensors.index.json'));
    const b = new SafetensorsSource(join(whole, 'model.safetensors'));
    try {
      expect(index.metadata.total_size).toBe([...b.tensors.values()].reduce((s, t) => s + t.shape.reduce((x, y) => x * y, 1) * 2, 0));
      expect(index.weight_map['model.embed_tokens.weight']).toBe(shards[0]);
      for (const name of b.tensors.keys()) expect(Array.from(a.read(name))).toEqual(Array.from(b.read(name)));
    } finally {
      a.close();
      b.close();
    }
  });

  it('applies overrides, recomputing head_dim, and refuses bad ones with the field named', () => {
    expect(resolveHubConfig({ base: 'llama-3.2-1b', hidden_size: 256, num_attention_heads: 8 }).hf.head_dim).toBe(32);
    // Phi-3 has no head_dim key: a new hidden / heads redraws longrope's factor lists at head_dim / 2 entries.
    const phi = resolveHubConfig({ base: 'phi-3-mini-128k', hidden_size: 64, num_attention_heads: 4 }).hf.rope_scaling as { short_factor: number[]; long_factor: number[] };
    expect([phi.short_factor.length, phi.long_factor.length, phi.short_factor[0], phi.long_factor[7]]).toEqual([8, 8, 1, 64]);
    expect(resolveHubConfig('llama-3.2-1b').hf.rope_scaling).toEqual({ factor: 32, high_freq_factor: 4, low_freq_factor: 1, original_max_position_embeddings: 8192, rope_type: 'llama3' });
    expect(() => resolveHubConfig({ base: 'llama-9' })).toThrow(/unknown base "llama-9"; one of llama-3.2-1b/);
    expect(() => resolveHubConfig({ base: 'qwen2-0.5b', model_type: 'llama' })).toThrow(/"model_type" follows from the base/);
    expect(() => makeHubModel({ config: { ...tiny('qwen2-0.5b'), num_key_value_heads: 3 }, outDir: join(root, 'bad') })).toThrow(/num_attention_heads 4 is not a multiple of num_key_value_heads 3/);
    expect(() => makeHubModel({ config: tiny('qwen2-0.5b'), outDir: join(root, 'bad2'), shardSize: -1 })).toThrow(/shard size -1/);
    expect(readdirSync(root).filter((f) => f.startsWith('bad'))).toEqual([]);
  });

  it("writes config.json and generation_config.json as transformers 4.47.1 does (Python's float repr, sorted keys)", () => {
    const out = join(root, 'float-repr');
    makeHubModel({ config: tiny('llama-3.2-1b'), outDir: out, dtype: 'f32' });
    const text = readFileSync(join(out, 'config.json'), 'utf8');
    expect(text).toContain('  "rms_norm_eps": 1e-05,\n');
    expect(text).toContain('  "rope_theta": 500000.0,\n');
    expect(text).toContain('  "attention_dropout": 0.0,\n');
    expect(text).toContain('    "factor": 32.0,\n    "high_freq_factor": 4.0,\n    "low_freq_factor": 1.0,\n    "original_max_position_embeddings": 8192,\n');
    // The published ids are past the tiny vocabulary, so dropped.
    expect(readFileSync(join(out, 'generation_config.json'), 'utf8')).toBe('{\n  "_from_model_config": true,\n  "transformers_version": "4.47.1"\n}\n');
    const opt = join(root, 'float-repr-opt');
    makeHubModel({ config: 'opt-125m', outDir: opt, dtype: 'f32' });
    const optText = readFileSync(join(opt, 'config.json'), 'utf8');
    for (const line of ['"activation_dropout": 0.0', '"dropout": 0.1', '"init_std": 0.02', '"layerdrop": 0.0']) expect(optText).toContain(line);
  });

  it('writes Qwen2 bases with the published bos_token_id (<|endoftext|>) in config.json and generation_config.json', () => {
    const out = join(root, 'qwen2-bos');
    makeHubModel({ config: tiny('qwen2-0.5b'), outDir: out, tokenizer: () => ({ bosTokenId: 597, eosTokenIds: [597], padTokenId: 597 }) });
    const config = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8'));
    const generation = JSON.parse(readFileSync(join(out, 'generation_config.json'), 'utf8'));
    expect([config.bos_token_id, config.eos_token_id, generation.bos_token_id, generation.eos_token_id]).toEqual([597, 597, 597, 597]);
    expect(readModelDescription(out).bosTokenId).toBe(597);
  });

  it('keeps the published token ids when no tokenizer hook replaces them, and the hook ids otherwise', () => {
    const full = resolveHubConfig('qwen2-0.5b').hf;
    expect([full.bos_token_id, full.eos_token_id, full.vocab_size]).toEqual([151643, 151643, 151936]);
    const out = join(root, 'ids');
    makeHubModel({ config: tiny('llama-3.2-1b'), outDir: out, tokenizer: () => ({ bosTokenId: 344, eosTokenIds: [345, 353], padTokenId: undefined }) });
    const config = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8'));
    expect([config.bos_token_id, config.eos_token_id]).toEqual([344, [345, 353]]);
    const plain = join(root, 'no-ids');
    makeHubModel({ config: tiny('llama-3.2-1b'), outDir: plain });
    const c2 = JSON.parse(readFileSync(join(plain, 'config.json'), 'utf8'));
    expect('eos_token_id' in c2).toBe(false);
  });

  it.runIf(process.getuid?.() === 0)('fails with the OS error on a read-only mount and leaves nothing behind', () => {
    const ro = join(root, 'ro');
    mkdirSync(ro);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'ro', 'tmpfs', ro]);
    try {
      expect(() => makeHubModel({ config: tiny('llama-3.2-1b'), outDir: join(ro, 'm') })).toThrow(/cannot create .*ro\/m .*choose a folder on a writable file system/);
      expect(readdirSync(ro)).toEqual([]);
    } finally {
      execFileSync('umount', [ro]);
    }
  });

  it('writes a half-written folder never: a failing tokenizer hook removes the temporary folder', () => {
    const out = join(root, 'hook-fails');
    expect(() => makeHubModel({ config: tiny('qwen2-0.5b'), outDir: out, tokenizer: () => { throw new Error('tokenizer broke'); } })).toThrow('tokenizer broke');
    expect(readdirSync(root).filter((f) => f.startsWith('hook-fails'))).toEqual([]);
  });
});
