import type { FamilyBase } from '../family-entry.js';

export const MISTRAL_COMMON = {
  model_type: 'mistral',
  attention_dropout: 0.0,
  bos_token_id: 1,
  eos_token_id: 2,
  head_dim: 128,
  hidden_act: 'silu',
  hidden_size: 4096,
  initializer_range: 0.02,
  intermediate_size: 14336,
  max_position_embeddings: 32768,
  num_attention_heads: 32,
  num_hidden_layers: 32,
  num_key_value_heads: 8,
  rms_norm_eps: 1e-5,
  tie_word_embeddings: false,
  use_cache: true,
};

/** Mistral 7B v0.1 (4096-token sliding window) and v0.3 (no window, 32768 ids) at their published shapes. */
export const MISTRAL_BASES: Readonly<Record<string, FamilyBase>> = {
  'mistral-7b-v0.1': { repo: 'mistralai/Mistral-7B-v0.1', tokenizer: 'sentencepiece', config: { ...MISTRAL_COMMON, rope_theta: 10000.0, sliding_window: 4096, vocab_size: 32000 } },
  'mistral-7b-v0.3': { repo: 'mistralai/Mistral-7B-v0.3', tokenizer: 'sentencepiece', config: { ...MISTRAL_COMMON, rope_theta: 1000000.0, sliding_window: null, vocab_size: 32768 } },
};
