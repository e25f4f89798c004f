import type { FamilyEntry } from '../family-entry.js';
import { OLMO2_BASES } from './olmo2-bases.js';
import { HfConfigReader } from '../hf-config-reader.js';
import { requireSilu } from '../llama/llama-family.js';
import { readRotarySizes, rotaryDescription } from '../rotary-config.js';

/**
 * OLMo 2 (4.47.1 `Olmo2Config` / modeling_olmo2.py): no input norm; RMSNorm on each branch's output before the
 * residual add (`post_attention_layernorm`, `post_feedforward_layernorm`); q and k projections RMS-normed over all
 * heads together (`q_norm` [heads·head_dim], `k_norm` [kv_heads·head_dim]) before RoPE; SwiGLU; untied head.
 */
export const olmo2Family: FamilyEntry = {
  modelType: 'olmo2',
  describe(json, source) {
    const r = new HfConfigReader(json, source);
    const s = readRotarySizes(r, { headDimKey: false, epsDefault: 1e-5 });
    requireSilu(r);
    const bias = r.bool('attention_bias', false);
    const tied = r.bool('tie_word_embeddings', false);
    return rotaryDescription(r, s, {
      family: 'olmo2',
      norm: { kind: 'rmsnorm', placement: 'post-branch', eps: s.eps, final: true },
      attention: { bias, qkNorm: 'projection' },
      mlp: { kind: 'swiglu', bias: false },
      tied,
      layout: {
        qkvBias: bias,
        outBias: bias,
        norms: { qNormW: 'self_attn.q_norm.weight', kNormW: 'self_attn.k_norm.weight', attnOutNormW: 'post_attention_layernorm.weight', mlpOutNormW: 'post_feedforward_layernorm.weight' },
      },
      tokens: { bos: r.tokenId('bos_token_id', s.vocab), eos: r.tokenId('eos_token_id', s.vocab, 50279), pad: r.tokenId('pad_token_id', s.vocab, 1) },
    });
  },
  tokens: { prependBos: false, promptBos: 'tokenizer', window: 'model-folder' },
  // OLMo 2 Instruct ends an assistant turn with its EOS (<|endoftext|>), no separate marker.
  chat: { endOfTurn: [] },
  gguf: {
    architecture: 'olmo2',
    imports: true,
    rmsNormEps: 1e-5,
    headDimKey: false,
    layerNames: { post_attention_norm: 'post_attention_layernorm', post_ffw_norm: 'post_feedforward_layernorm', attn_q_norm: 'self_attn.q_norm', attn_k_norm: 'self_attn.k_norm' },
    permutedRotary: false,
    normPlusOne: false,
    llamaExtras: false,
    longropeFactors: false,
    slidingWindow: false,
  },
  make: { architecture: 'Olmo2ForCausalLM', bases: OLMO2_BASES },
};
