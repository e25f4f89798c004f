import type { QuantizeType } from './quantize.js';

/** llama.cpp's K-quant file types that mix tensor types: Q4_K_M and Q5_K_M. */
export type KQuantMix = 'Q4_K_M' | 'Q5_K_M';

/** llama.cpp's `use_more_bits`: the first and last eighth of the layers, and every third layer between, get more bits. */
export function usesMoreBits(layer: number, layers: number): boolean {
  const eighth = Math.trunc(layers / 8);
  return layer < eighth || layer >= Math.trunc((7 * layers) / 8) || (layer - eighth) % 3 === 2;
}

/**
 * The tensor type `llama-quantize` gives a matrix of a dense model in a Q4_K_M / Q5_K_M file (its `llama_tensor_get_type`
 * rules for these two types, written from their behaviour): the LM head (`output.weight`, or `token_embd.weight` when
 * tied) Q6_K; `attn_v` and `ffn_down` Q6_K in the layers `usesMoreBits` picks; a fused `attn_qkv` Q5_K (Q4_K_M) / Q6_K
 * (Q5_K_M); every other matrix the mix's base type (Q4_K / Q5_K). A row length (`dims[0]`) that is not whole 256-value
 * super-blocks takes the nearest 32-value type flexhelm writes (llama.cpp takes IQ4_NL / Q5_1, which it does not):
 * Q4_K → Q4_0, Q5_K and Q6_K → Q8_0. Mixtures of experts (`experts` > 0): every `ffn_down` kind (the experts' 3-D
 * `ffn_down_exps`, the shared expert's `ffn_down_shexp`) follows `ffn_down`'s rule, and a model of exactly 8 experts
 * (Mixtral 8x7B's shape) gets Q8_0 for `attn_v` and `attn_k`, as llama.cpp does.
 */
export function kQuantMixType(mix: KQuantMix, name: string, dims: readonly number[], layers: number, hasOutput: boolean, experts = 0): QuantizeType {
  const base = mix === 'Q4_K_M' ? 'Q4_K' : 'Q5_K';
  const layer = Number(/^blk\.(\d+)\./.exec(name)?.[1] ?? -1);
  let type: QuantizeType = base;
  if (name === 'output.weight' || (!hasOutput && name === 'token_embd.weight')) type = 'Q6_K';
  else if (experts === 8 && /\.attn_[kv]\.weight$/.test(name)) type = 'Q8_0';
  else if (/\.attn_v\.weight$/.test(name) || /\.ffn_down(_exps|_shexp)?\.weight$/.test(name)) type = layer >= 0 && usesMoreBits(layer, layers) ? 'Q6_K' : base;
  else if (/\.attn_qkv\.weight$/.test(name)) type = mix === 'Q4_K_M' ? 'Q5_K' : 'Q6_K';
  if (dims[0]! % 256 !== 0) return type === 'Q4_K' ? 'Q4_0' : 'Q8_0';
  return type;
}
