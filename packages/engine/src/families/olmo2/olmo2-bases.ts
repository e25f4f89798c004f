import type { FamilyBase } from '../family-entry.js';

/** OLMo 2 7B (allenai/OLMo-2-1124-7B) at its published shape: no BOS id, `<|endoftext|>` EOS, `<|pad|>` pad. */
export const OLMO2_BASES: Readonly<Record<string, FamilyBase>> = {
  'olmo-2-7b': {
    repo: 'allenai/OLMo-2-1124-7B',
    tokenizer: 'dolma2',
    config: {
      model_type: 'olmo2',
      attention_bias: false,
      attention_dropout: 0.0,
      bos_token_id: null,
      eos_token_id: 100257,
      hidden_act: 'silu',
      hidden_size: 4096,
      initializer_range: 0.02,
      intermediate_size: 11008,
      max_position_embeddings: 4096,
      num_attention_heads: 32,
      num_hidden_layers: 32,
      num_key_value_heads: 32,
      pad_token_id: 100277,
      rms_norm_eps: 1e-6,
      rope_scaling: null,
      rope_theta: 500000,
      tie_word_embeddings: false,
      use_cache: true,
      vocab_size: 100352,
    },
  },
};
