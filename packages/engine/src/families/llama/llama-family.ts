import type { FamilyEntry, FamilyGguf } from '../family-entry.js';
import { deriveHeadDim, LLAMA_BASES } from './llama-bases.js';
import { HfConfigReader } from '../hf-config-reader.js';
import { readRotarySizes, rotaryDescription } from '../rotary-config.js';

/** The SwiGLU activation Llama-style configs must name (`hidden_act`). */
export function requireSilu(r: HfConfigReader): void {
  const act = r.c.hidden_act ?? 'silu';
  if (act !== 'silu') throw r.fail(`hidden_act is ${JSON.stringify(act)}; only "silu" (SwiGLU) is implemented`);
}

/**
 * Llama 2/3 (4.47.1 `LlamaConfig`): pre-norm RMSNorm, RoPE with optional scaling, GQA, SwiGLU; `attention_bias` puts
 * biases on q/k/v and o, `mlp_bias` on the MLP; untied by default.
 */
/** Llama in GGUF (also how Mistral is written): q/k rows permuted, Llama 3.1 `rope_freqs`, biases by tensor presence, no window. */
export const LLAMA_GGUF: FamilyGguf = {
  architecture: 'llama',
  imports: true,
  rmsNormEps: 1e-5,
  headDimKey: true,
  permutedRotary: true,
  normPlusOne: false,
  llamaExtras: true,
  longropeFactors: false,
  slidingWindow: false,
};

export const llamaFamily: FamilyEntry = {
  modelType: 'llama',
  describe(json, source) {
    const r = new HfConfigReader(json, source);
    const s = readRotarySizes(r, { headDimKey: true, epsDefault: 1e-6 });
    requireSilu(r);
    const attnBias = r.bool('attention_bias', false);
    const mlpBias = r.bool('mlp_bias', false);
    const tied = r.bool('tie_word_embeddings', false);
    return rotaryDescription(r, s, {
      family: 'llama',
      norm: { kind: 'rmsnorm', placement: 'pre', eps: s.eps, final: true },
      attention: { bias: attnBias },
      mlp: { kind: 'swiglu', bias: mlpBias },
      tied,
      layout: { qkvBias: attnBias, outBias: attnBias, mlpBias, norms: { inNormW: 'input_layernorm.weight', postNormW: 'post_attention_layernorm.weight' } },
      tokens: { bos: r.tokenId('bos_token_id', s.vocab), eos: r.tokenId('eos_token_id', s.vocab), pad: r.tokenId('pad_token_id', s.vocab) },
    });
  },
  tokens: { prependBos: true, promptBos: 'tokenizer', window: 'model-folder' },
  // Llama 3 Instruct ends a turn with <|eot_id|> (Llama 2 chat with its EOS).
  chat: { endOfTurn: ['<|eot_id|>'] },
  gguf: LLAMA_GGUF,
  make: { architecture: 'LlamaForCausalLM', bases: LLAMA_BASES, derive: deriveHeadDim },
};
