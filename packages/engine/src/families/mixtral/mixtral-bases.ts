import type { FamilyBase } from '../family-entry.js';
import { MISTRAL_COMMON } from '../mistral/mistral-bases.js';

/** Mixtral 8x7B v0.1 at its published shape (8 experts of 14336, top 2, renormalised). */
export const MIXTRAL_BASES: Readonly<Record<string, FamilyBase>> = {
  'mixtral-8x7b': {
    repo: 'mistralai/Mixtral-8x7B-v0.1',
    tokenizer: 'sentencepiece',
    config: {
      ...MISTRAL_COMMON,
      model_type: 'mixtral',
      num_experts_per_tok: 2,
      num_local_experts: 8,
      output_router_logits: false,
      rope_theta: 1000000.0,
      router_aux_loss_coef: 0.02,
      router_jitter_noise: 0.0,
      sliding_window: null,
      vocab_size: 32000,
    },
  },
};
