import type { FamilyBase } from '../family-entry.js';

/** Fields google/gemma-2-2b and gemma-2-9b share (their config.json as transformers 4.47.1 writes it). */
const GEMMA2_COMMON = {
  model_type: 'gemma2',
  attention_bias: false,
  attention_dropout: 0.0,
  attn_logit_softcapping: 50.0,
  bos_token_id: 2,
  cache_implementation: 'hybrid',
  eos_token_id: 1,
  final_logit_softcapping: 30.0,
  head_dim: 256,
  hidden_act: 'gelu_pytorch_tanh',
  hidden_activation: 'gelu_pytorch_tanh',
  initializer_range: 0.02,
  max_position_embeddings: 8192,
  pad_token_id: 0,
  query_pre_attn_scalar: 256,
  rms_norm_eps: 1e-6,
  rope_theta: 10000.0,
  sliding_window: 4096,
  use_cache: true,
  vocab_size: 256000,
};

/** Gemma 2 2B and 9B at their published shapes. */
export const GEMMA2_BASES: Readonly<Record<string, FamilyBase>> = {
  'gemma-2-2b': {
    repo: 'google/gemma-2-2b',
    tokenizer: 'gemma',
    config: { ...GEMMA2_COMMON, hidden_size: 2304, intermediate_size: 9216, num_attention_heads: 8, num_hidden_layers: 26, num_key_value_heads: 4 },
  },
  'gemma-2-9b': {
    repo: 'google/gemma-2-9b',
    tokenizer: 'gemma',
    config: { ...GEMMA2_COMMON, hidden_size: 3584, intermediate_size: 14336, num_attention_heads: 16, num_hidden_layers: 42, num_key_value_heads: 8 },
  },
};
