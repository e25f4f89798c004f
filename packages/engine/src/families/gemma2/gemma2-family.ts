import type { FamilyEntry } from '../family-entry.js';
import { ModelFileError } from '../../model-file-error.js';
import { GEMMA2_BASES } from './gemma2-bases.js';
import { deriveHeadDim } from '../llama/llama-bases.js';
import { HF_LIMITS, HfConfigReader } from '../hf-config-reader.js';
import { readRotarySizes, readSlidingWindow, rotaryDescription } from '../rotary-config.js';

/**
 * Gemma 2 (4.47.1 `Gemma2Config` / modeling_gemma2.py): RMSNorm with (1 + w) in float32, four norms a layer (sandwich:
 * `input_layernorm` and `pre_feedforward_layernorm` before the branches, `post_attention_layernorm` and
 * `post_feedforward_layernorm` on their outputs), embeddings × sqrt(hidden), scores × `query_pre_attn_scalar`^−½
 * soft-capped by `attn_logit_softcapping` before the mask, `sliding_window` on even layers only, logits soft-capped by
 * `final_logit_softcapping`, GeGLU with tanh GELU, `head_dim` independent of hidden, tied head by default. A null
 * soft-cap or window turns it off, as in transformers.
 */
export const gemma2Family: FamilyEntry = {
  modelType: 'gemma2',
  describe(json, source) {
    const r = new HfConfigReader(json, source);
    const s = readRotarySizes(r, { headDimKey: true, headDimDefault: 256, epsDefault: 1e-6 });
    r.oneOf('hidden_activation', ['gelu_pytorch_tanh'], 'gelu_pytorch_tanh', 'only "gelu_pytorch_tanh" (GeGLU with tanh GELU, what Gemma 2 uses) is implemented');
    const bias = r.bool('attention_bias', false);
    const tied = r.bool('tie_word_embeddings', true);
    const queryScalar = r.positive('query_pre_attn_scalar', 256, HF_LIMITS.hidden_size);
    const window = readSlidingWindow(r, 4096);
    const attnCap = r.optionalPositive('attn_logit_softcapping', 50);
    const finalCap = r.optionalPositive('final_logit_softcapping', 30);
    return rotaryDescription(r, s, {
      family: 'gemma2',
      norm: { kind: 'rmsnorm-plus-one', placement: 'pre-and-post-branch', eps: s.eps, final: true },
      attention: {
        bias,
        scale: queryScalar ** -0.5,
        ...(attnCap !== undefined ? { logitSoftcap: attnCap } : {}),
        ...(window !== undefined ? { slidingWindow: window, slidingWindowLayers: 'even' as const } : {}),
      },
      mlp: { kind: 'geglu-tanh', bias: false },
      tied,
      layout: {
        qkvBias: bias,
        outBias: bias,
        norms: { inNormW: 'input_layernorm.weight', attnOutNormW: 'post_attention_layernorm.weight', postNormW: 'pre_feedforward_layernorm.weight', mlpOutNormW: 'post_feedforward_layernorm.weight' },
      },
      // Gemma's normalizer is sqrt(hidden) in the compute dtype (the backend rounds it there).
      embeddingScale: Math.sqrt(s.hidden),
      ...(finalCap !== undefined ? { finalLogitSoftcap: finalCap } : {}),
      tokens: { bos: r.tokenId('bos_token_id', s.vocab, 2), eos: r.tokenId('eos_token_id', s.vocab, 1), pad: r.tokenId('pad_token_id', s.vocab, 0) },
    });
  },
  tokens: { prependBos: true, promptBos: 'tokenizer', window: 'model-folder' },
  // Gemma's template: <start_of_turn>role\n…<end_of_turn>\n.
  chat: { endOfTurn: ['<end_of_turn>'] },
  gguf: {
    architecture: 'gemma2',
    imports: true,
    rmsNormEps: 1e-6,
    headDimKey: true,
    // Gemma 2's sandwich norms: llama.cpp's ffn_norm is the pre-feed-forward norm there.
    layerNames: { ffn_norm: 'pre_feedforward_layernorm', post_attention_norm: 'post_attention_layernorm', post_ffw_norm: 'post_feedforward_layernorm' },
    permutedRotary: false,
    normPlusOne: true,
    llamaExtras: false,
    longropeFactors: false,
    slidingWindow: true,
    readConfig: (m, s) => ({
      hidden_activation: 'gelu_pytorch_tanh',
      query_pre_attn_scalar: llamaCppQueryScalar(s.layers, s.hidden, s.heads, s.headDim),
      attn_logit_softcapping: m.number('attn_logit_softcapping') ?? null,
      final_logit_softcapping: m.number('final_logit_softcapping') ?? null,
    }),
    writeKeys(d, config) {
      const want = llamaCppQueryScalar(d.layers, d.hiddenSize, d.attention.heads, d.attention.headDim);
      if (Math.abs((d.attention.scale ?? 0) - want ** -0.5) > 1e-9) throw new ModelFileError(`query_pre_attn_scalar ${config.query_pre_attn_scalar} is not the ${want} llama.cpp assumes for this Gemma 2`);
      return [
        ...(d.attention.logitSoftcap !== undefined ? [{ key: 'attn_logit_softcapping', type: 'f32' as const, value: d.attention.logitSoftcap }] : []),
        ...(d.finalLogitSoftcap !== undefined ? [{ key: 'final_logit_softcapping', type: 'f32' as const, value: d.finalLogitSoftcap }] : []),
      ];
    },
  },
  make: { architecture: 'Gemma2ForCausalLM', bases: GEMMA2_BASES, derive: deriveHeadDim },
};

/** llama.cpp scales Gemma 2's queries by 1/sqrt(head_dim), except the 46-layer 27B's by 1/sqrt(hidden / heads). */
function llamaCppQueryScalar(layers: number, hidden: number, heads: number, headDim: number): number {
  return layers === 46 ? hidden / heads : headDim;
}
