import { FAMILY_REGISTRY } from '@flexhelm/engine';
import { LLAMA3_SPLIT, QWEN2_SPLIT } from '@flexhelm/tokenizer';
import { describe, expect, it } from 'vitest';
import { familyGguf, GGUF_ARCHITECTURES, ggufTensorName, ggufTensorNameIn, importedFamily } from './gguf-model.js';
import { ggmlPreName } from './gguf-tokenizer.js';

describe('GGUF forms from the family registry', () => {
  it('reads the architectures whose family entry imports them, each as its model_type', () => {
    expect(GGUF_ARCHITECTURES).toEqual({ llama: 'llama', qwen2: 'qwen2', gemma2: 'gemma2', phi3: 'phi3', olmo2: 'olmo2', qwen2moe: 'qwen2_moe' });
    // A llama file with experts is Mixtral's; qwen2moe files always have experts.
    expect([importedFamily('llama', true)?.modelType, importedFamily('llama', false)?.modelType]).toEqual(['mixtral', 'llama']);
    expect([importedFamily('qwen2moe', true)?.modelType, importedFamily('qwen2moe', false)]).toEqual(['qwen2_moe', undefined]);
  });

  it('writes Mistral as llama (which reads back as Llama), Mixtral as llama with experts, and has no form for OPT', () => {
    expect(familyGguf('mistral')).toMatchObject({ architecture: 'llama', imports: false, permutedRotary: true, slidingWindow: false });
    expect(familyGguf('mixtral')).toMatchObject({ architecture: 'llama', imports: true, experts: true, permutedRotary: true, slidingWindow: false });
    expect(familyGguf('qwen2_moe')).toMatchObject({ architecture: 'qwen2moe', imports: true, experts: true, permutedRotary: false });
    for (const modelType of ['opt', 'nonexistent']) expect(familyGguf(modelType), modelType).toBeUndefined();
    // Every entry with a form names an architecture some entry imports, so an export always reads back.
    for (const f of FAMILY_REGISTRY.values()) if (f.gguf) expect(Object.keys(GGUF_ARCHITECTURES)).toContain(f.gguf.architecture);
  });

  it('names tensors by the family entry\'s own layer names first, then Llama\'s', () => {
    expect(ggufTensorName('model.layers.3.post_attention_layernorm.weight', 'llama')).toBe('blk.3.ffn_norm.weight');
    expect(ggufTensorName('model.layers.3.post_attention_layernorm.weight', 'gemma2')).toBe('blk.3.post_attention_norm.weight');
    expect(ggufTensorName('model.layers.3.pre_feedforward_layernorm.weight', 'gemma2')).toBe('blk.3.ffn_norm.weight');
    expect(ggufTensorName('model.layers.0.self_attn.qkv_proj.weight', 'phi3')).toBe('blk.0.attn_qkv.weight');
    expect(ggufTensorName('model.layers.0.self_attn.k_norm.weight', 'olmo2')).toBe('blk.0.attn_k_norm.weight');
    expect(ggufTensorName('model.embed_tokens.weight', 'qwen2')).toBe('token_embd.weight');
    expect(ggufTensorName('model.layers.0.self_attn.qkv_proj.weight', 'llama')).toBeUndefined();
    expect(ggufTensorNameIn('model.layers.1.mlp.down_proj.weight', {})).toBe('blk.1.ffn_down.weight');
  });

  it('names pre-tokenizers as llama.cpp does, the first of its names for each split', () => {
    expect(ggmlPreName(LLAMA3_SPLIT)).toBe('llama-bpe');
    expect(ggmlPreName(QWEN2_SPLIT)).toBe('qwen2');
    expect(ggmlPreName(null)).toBe('gpt-2');
  });
});
