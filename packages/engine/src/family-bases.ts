/**
 * The published shapes `make-model` builds on, as the `config.json` fields of the models on the Hub (from the
 * published files, written from memory of them: Llama 3.2 1B/3B, Llama 3.1 8B, Llama 2 7B, Mistral 7B v0.1/v0.3,
 * Qwen2 0.5B/1.5B/7B, Mixtral 8x7B v0.1, Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B). Token ids here are the published ones; `makeHubModel` replaces them with the ids of the
 * tokenizer it writes when the vocabulary is resized.
 */
export type FamilyTokenizerStyle = 'llama3' | 'qwen2' | 'sentencepiece';

export interface FamilyBase {
  /** The Hub repository the shape is taken from. */
  repo: string;
  tokenizer: FamilyTokenizerStyle;
  /** config.json fields except `architectures`, `torch_dtype` and `transformers_version`. */
  config: Record<string, unknown>;
}

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

const MISTRAL_COMMON = {
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

const QWEN2_COMMON = {
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

export const FAMILY_BASES: Readonly<Record<string, FamilyBase>> = {
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
  'mistral-7b-v0.1': { repo: 'mistralai/Mistral-7B-v0.1', tokenizer: 'sentencepiece', config: { ...MISTRAL_COMMON, rope_theta: 10000.0, sliding_window: 4096, vocab_size: 32000 } },
  'mistral-7b-v0.3': { repo: 'mistralai/Mistral-7B-v0.3', tokenizer: 'sentencepiece', config: { ...MISTRAL_COMMON, rope_theta: 1000000.0, sliding_window: null, vocab_size: 32768 } },
  'qwen2-0.5b': {
    repo: 'Qwen/Qwen2-0.5B',
    tokenizer: 'qwen2',
    config: { ...QWEN2_COMMON, hidden_size: 896, intermediate_size: 4864, max_window_layers: 24, num_attention_heads: 14, num_hidden_layers: 24, num_key_value_heads: 2, tie_word_embeddings: true, vocab_size: 151936 },
  },
  'qwen2-1.5b': {
    repo: 'Qwen/Qwen2-1.5B',
    tokenizer: 'qwen2',
    config: { ...QWEN2_COMMON, hidden_size: 1536, intermediate_size: 8960, max_window_layers: 28, num_attention_heads: 12, num_hidden_layers: 28, num_key_value_heads: 2, tie_word_embeddings: true, vocab_size: 151936 },
  },
  'qwen2-7b': {
    repo: 'Qwen/Qwen2-7B',
    tokenizer: 'qwen2',
    config: { ...QWEN2_COMMON, hidden_size: 3584, intermediate_size: 18944, max_window_layers: 28, num_attention_heads: 28, num_hidden_layers: 28, num_key_value_heads: 4, tie_word_embeddings: false, vocab_size: 152064 },
  },
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
  // 14.3 B parameters, 2.7 B active: 60 experts of 1408 (top 4, not renormalised) and a shared expert of 5632.
  'qwen1.5-moe-a2.7b': {
    repo: 'Qwen/Qwen1.5-MoE-A2.7B',
    tokenizer: 'qwen2',
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
  // 57 B parameters, 14 B active: 64 experts of 2560 (top 8) and a shared expert of 20480.
  'qwen2-57b-a14b': {
    repo: 'Qwen/Qwen2-57B-A14B',
    tokenizer: 'qwen2',
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

/** The `architectures` entry transformers writes for each family. */
export const FAMILY_ARCHITECTURES: Readonly<Record<string, string>> = {
  llama: 'LlamaForCausalLM',
  mistral: 'MistralForCausalLM',
  qwen2: 'Qwen2ForCausalLM',
  mixtral: 'MixtralForCausalLM',
  qwen2_moe: 'Qwen2MoeForCausalLM',
};
