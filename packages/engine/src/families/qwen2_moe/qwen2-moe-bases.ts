import type { FamilyBase } from '../family-entry.js';
import { QWEN2_COMMON } from '../qwen2/qwen2-bases.js';

const QWEN2_MOE_COMMON = {
  ...QWEN2_COMMON,
  model_type: 'qwen2_moe',
  decoder_sparse_step: 1,
  mlp_only_layers: [],
  norm_topk_prob: false,
  output_router_logits: false,
  router_aux_loss_coef: 0.001,
  tie_word_embeddings: false,
  vocab_size: 151936,
};

/** Qwen1.5-MoE-A2.7B and Qwen2-57B-A14B at their published shapes. */
export const QWEN2_MOE_BASES: Readonly<Record<string, FamilyBase>> = {
  'qwen1.5-moe-a2.7b': {
    repo: 'Qwen/Qwen1.5-MoE-A2.7B',
    tokenizer: 'qwen',
    config: {
      ...QWEN2_MOE_COMMON,
      hidden_size: 2048,
      intermediate_size: 5632,
      max_position_embeddings: 8192,
      max_window_layers: 21,
      moe_intermediate_size: 1408,
      num_attention_heads: 16,
      num_experts: 60,
      num_experts_per_tok: 4,
      num_hidden_layers: 24,
      num_key_value_heads: 16,
      shared_expert_intermediate_size: 5632,
      sliding_window: 32768,
    },
  },
  'qwen2-57b-a14b': {
    repo: 'Qwen/Qwen2-57B-A14B',
    tokenizer: 'qwen',
    config: {
      ...QWEN2_MOE_COMMON,
      hidden_size: 3584,
      intermediate_size: 18944,
      max_position_embeddings: 131072,
      max_window_layers: 28,
      moe_intermediate_size: 2560,
      num_attention_heads: 28,
      num_experts: 64,
      num_experts_per_tok: 8,
      num_hidden_layers: 28,
      num_key_value_heads: 4,
      shared_expert_intermediate_size: 20480,
      sliding_window: 131072,
    },
  },
};
