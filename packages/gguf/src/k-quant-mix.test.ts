import { describe, expect, it } from 'vitest';
import { kQuantMixType, usesMoreBits } from './k-quant-mix.js';

describe("llama.cpp's K-quant mixes", () => {
  it('usesMoreBits: the first and last eighth of the layers and every third between', () => {
    const layers = (n: number) => Array.from({ length: n }, (_, i) => i).filter((i) => usesMoreBits(i, n));
    expect(layers(16)).toEqual([0, 1, 4, 7, 10, 13, 14, 15]);
    expect(layers(2)).toEqual([1]);
    expect(layers(32)).toEqual([0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]);
  });

  it('picks per matrix as llama-quantize does for Q4_K_M and Q5_K_M', () => {
    const d = [2048, 2048];
    const q4 = (name: string, dims = d, hasOutput = true) => kQuantMixType('Q4_K_M', name, dims, 16, hasOutput);
    expect(q4('output.weight')).toBe('Q6_K');
    expect(q4('token_embd.weight')).toBe('Q4_K');
    expect(q4('token_embd.weight', d, false)).toBe('Q6_K'); // tied: the head's type
    expect(q4('blk.0.attn_v.weight')).toBe('Q6_K');
    expect(q4('blk.2.attn_v.weight')).toBe('Q4_K');
    expect(q4('blk.4.ffn_down.weight')).toBe('Q6_K');
    expect(q4('blk.5.ffn_down.weight')).toBe('Q4_K');
    expect(q4('blk.5.attn_q.weight')).toBe('Q4_K');
    expect(q4('blk.5.attn_qkv.weight')).toBe('Q5_K');
    expect(kQuantMixType('Q5_K_M', 'blk.5.ffn_up.weight', d, 16, true)).toBe('Q5_K');
    expect(kQuantMixType('Q5_K_M', 'blk.15.ffn_down.weight', d, 16, true)).toBe('Q6_K');
    // Rows not of whole super-blocks: the nearest 32-value type.
    expect(q4('blk.5.attn_q.weight', [96, 64])).toBe('Q4_0');
    expect(q4('output.weight', [96, 300])).toBe('Q8_0');
  });

  it('mixtures of experts: every ffn_down kind by the layer rule, attn_k and attn_v Q8_0 at exactly 8 experts', () => {
    const d = [4096, 14336, 8];
    const q4 = (name: string, experts: number) => kQuantMixType('Q4_K_M', name, d, 32, true, experts);
    expect(q4('blk.0.ffn_down_exps.weight', 8)).toBe('Q6_K');
    expect(q4('blk.4.ffn_down_exps.weight', 8)).toBe('Q4_K');
    expect(q4('blk.0.ffn_down_shexp.weight', 60)).toBe('Q6_K');
    expect(q4('blk.4.ffn_gate_exps.weight', 8)).toBe('Q4_K');
    expect([q4('blk.4.attn_k.weight', 8), q4('blk.4.attn_v.weight', 8), q4('blk.0.attn_v.weight', 8)]).toEqual(['Q8_0', 'Q8_0', 'Q8_0']);
    expect([q4('blk.4.attn_k.weight', 60), q4('blk.4.attn_v.weight', 60), q4('blk.0.attn_v.weight', 60)]).toEqual(['Q4_K', 'Q4_K', 'Q6_K']);
  });
});
