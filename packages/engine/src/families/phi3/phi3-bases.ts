import type { FamilyBase } from '../family-entry.js';

/** Fields microsoft/Phi-3-mini-4k-instruct, Phi-3-mini-128k-instruct and Phi-3.5-mini-instruct share. */
const PHI3_COMMON = {
  model_type: 'phi3',
  attention_bias: false,
  attention_dropout: 0.0,
  bos_token_id: 1,
  embd_pdrop: 0.0,
  eos_token_id: 32000,
  hidden_act: 'silu',
  hidden_size: 3072,
  initializer_range: 0.02,
  intermediate_size: 8192,
  num_attention_heads: 32,
  num_hidden_layers: 32,
  num_key_value_heads: 32,
  original_max_position_embeddings: 4096,
  pad_token_id: 32000,
  resid_pdrop: 0.0,
  rms_norm_eps: 1e-5,
  rope_theta: 10000.0,
  tie_word_embeddings: false,
  use_cache: true,
  vocab_size: 32064,
};

/**
 * Longrope factor lists of `pairs` entries (head_dim / 2). The published lists are measured per model; these have
 * their size and shape (short factors from 1 to about 2.9, long ones from about 1.1 growing to about 64, both rising
 * with the dimension pair), not their exact values: a random checkpoint exercises the same rotary path either way.
 */
function longropeFactors(pairs: number, longEnd = 64): { short_factor: number[]; long_factor: number[] } {
  const at = (i: number) => (pairs === 1 ? 1 : i / (pairs - 1));
  const round = (x: number) => Math.round(x * 1e4) / 1e4;
  return {
    short_factor: Array.from({ length: pairs }, (_, i) => round(1 + 1.9 * at(i) ** 2)),
    long_factor: Array.from({ length: pairs }, (_, i) => round(1.1 * (longEnd / 1.1) ** (at(i) ** 1.5))),
  };
}

const LONGROPE = (longEnd: number) => ({ ...longropeFactors(48, longEnd), type: 'longrope' });

/** Phi-3-mini 4k / 128k and Phi-3.5-mini at their published shapes (128k contexts: longrope with 48 factors a list). */
export const PHI3_BASES: Readonly<Record<string, FamilyBase>> = {
  'phi-3-mini-4k': {
    repo: 'microsoft/Phi-3-mini-4k-instruct',
    tokenizer: 'phi3-mini',
    config: { ...PHI3_COMMON, max_position_embeddings: 4096, rope_scaling: null, sliding_window: 2047 },
  },
  'phi-3-mini-128k': {
    repo: 'microsoft/Phi-3-mini-128k-instruct',
    tokenizer: 'phi3-mini',
    config: { ...PHI3_COMMON, max_position_embeddings: 131072, rope_scaling: LONGROPE(64), sliding_window: 262144 },
  },
  'phi-3.5-mini': {
    repo: 'microsoft/Phi-3.5-mini-instruct',
    tokenizer: 'phi3-mini',
    config: { ...PHI3_COMMON, max_position_embeddings: 131072, rope_scaling: LONGROPE(48), sliding_window: 262144 },
  },
};

/**
 * Phi-3 configs carry no head_dim; a changed hidden size or head count changes hidden / heads, so longrope's factor
 * lists (one entry per dimension pair) are redrawn at the new length unless the user gave `rope_scaling`.
 */
export function derivePhi3(hf: Record<string, unknown>, overrides: Record<string, unknown>): void {
  const rs = hf.rope_scaling as Record<string, unknown> | null | undefined;
  if (overrides.rope_scaling !== undefined || !rs || typeof rs !== 'object') return;
  const pairs = Math.floor(Number(hf.hidden_size) / Number(hf.num_attention_heads) / 2);
  if (Array.isArray(rs.short_factor) && rs.short_factor.length !== pairs && pairs >= 1) {
    const longEnd = Array.isArray(rs.long_factor) ? Number(rs.long_factor[rs.long_factor.length - 1]) : 64;
    hf.rope_scaling = { ...rs, ...longropeFactors(pairs, longEnd) };
  }
}
