import type { FamilyBase } from '../family-entry.js';

export const QWEN2_COMMON = {
  model_type: 'qwen2',
  attention_dropout: 0.0,
  bos_token_id: 151643,
  eos_token_id: 151643,
  hidden_act: 'silu',
  initializer_range: 0.02,
  max_position_embeddings: 131072,
  rms_norm_eps: 1e-6,
  rope_scaling: null,
  rope_theta: 1000000.0,
  // transformers 4.47.1 stores sliding_window as null when use_sliding_window is false.
  sliding_window: null,
  use_cache: true,
  use_sliding_window: false,
};

/** Qwen2 0.5B, 1.5B and 7B at their published shapes. */
export const QWEN2_BASES: Readonly<Record<string, FamilyBase>> = {
  'qwen2-0.5b': {
    repo: 'Qwen/Qwen2-0.5B',
    tokenizer: 'qwen',
    config: { ...QWEN2_COMMON, hidden_size: 896, intermediate_size: 4864, max_window_layers: 24, num_attention_heads: 14, num_hidden_layers: 24, num_key_value_heads: 2, tie_word_embeddings: true, vocab_size: 151936 },
  },
  'qwen2-1.5b': {
    repo: 'Qwen/Qwen2-1.5B',
    tokenizer: 'qwen',
    config: { ...QWEN2_COMMON, hidden_size: 1536, intermediate_size: 8960, max_window_layers: 28, num_attention_heads: 12, num_hidden_layers: 28, num_key_value_heads: 2, tie_word_embeddings: true, vocab_size: 151936 },
  },
  'qwen2-7b': {
    repo: 'Qwen/Qwen2-7B',
    tokenizer: 'qwen',
    config: { ...QWEN2_COMMON, hidden_size: 3584, intermediate_size: 18944, max_window_layers: 28, num_attention_heads: 28, num_hidden_layers: 28, num_key_value_heads: 4, tie_word_embeddings: false, vocab_size: 152064 },
  },
};
