import type { FamilyBase } from '../family-entry.js';

/** Fields every Llama config.json of these repositories shares. */
const LLAMA_COMMON = {
  model_type: 'llama',
  attention_bias: false,
  attention_dropout: 0.0,
  hidden_act: 'silu',
  initializer_range: 0.02,
  mlp_bias: false,
  pretraining_tp: 1,
  use_cache: true,
};

const LLAMA3_ROPE = (factor: number) => ({ factor, high_freq_factor: 4.0, low_freq_factor: 1.0, original_max_position_embeddings: 8192, rope_type: 'llama3' });

const LLAMA3 = { ...LLAMA_COMMON, bos_token_id: 128000, eos_token_id: 128001, max_position_embeddings: 131072, rms_norm_eps: 1e-5, rope_theta: 500000.0, vocab_size: 128256 };

/** Llama 3.2 1B/3B, Llama 3.1 8B and Llama 2 7B at their published shapes (config.json fields). */
export const LLAMA_BASES: Readonly<Record<string, FamilyBase>> = {
  'llama-3.2-1b': {
    repo: 'meta-llama/Llama-3.2-1B',
    tokenizer: 'llama3',
    config: { ...LLAMA3, head_dim: 64, hidden_size: 2048, intermediate_size: 8192, num_attention_heads: 32, num_hidden_layers: 16, num_key_value_heads: 8, rope_scaling: LLAMA3_ROPE(32.0), tie_word_embeddings: true },
  },
  'llama-3.2-3b': {
    repo: 'meta-llama/Llama-3.2-3B',
    tokenizer: 'llama3',
    config: { ...LLAMA3, head_dim: 128, hidden_size: 3072, intermediate_size: 8192, num_attention_heads: 24, num_hidden_layers: 28, num_key_value_heads: 8, rope_scaling: LLAMA3_ROPE(32.0), tie_word_embeddings: true },
  },
  'llama-3.1-8b': {
    repo: 'meta-llama/Llama-3.1-8B',
    tokenizer: 'llama3',
    config: { ...LLAMA3, head_dim: 128, hidden_size: 4096, intermediate_size: 14336, num_attention_heads: 32, num_hidden_layers: 32, num_key_value_heads: 8, rope_scaling: LLAMA3_ROPE(8.0), tie_word_embeddings: false },
  },
  'llama-2-7b': {
    repo: 'meta-llama/Llama-2-7b-hf',
    tokenizer: 'sentencepiece',
    config: {
      ...LLAMA_COMMON,
      bos_token_id: 1,
      eos_token_id: 2,
      head_dim: 128,
      hidden_size: 4096,
      intermediate_size: 11008,
      max_position_embeddings: 4096,
      num_attention_heads: 32,
      num_hidden_layers: 32,
      num_key_value_heads: 32,
      rms_norm_eps: 1e-5,
      rope_scaling: null,
      rope_theta: 10000.0,
      tie_word_embeddings: false,
      vocab_size: 32000,
    },
  },
};

/**
 * transformers' own default when `head_dim` is absent (hidden / heads): a changed hidden size or head count without a
 * `head_dim` override recomputes it, for the families whose config.json carries the key.
 */
export function deriveHeadDim(hf: Record<string, unknown>, overrides: Record<string, unknown>): void {
  if (overrides.head_dim === undefined && (overrides.hidden_size !== undefined || overrides.num_attention_heads !== undefined)) {
    hf.head_dim = Math.floor(Number(hf.hidden_size) / Number(hf.num_attention_heads));
  }
}
