import { MIXTRAL_BASES } from './mixtral-bases.js';
import { deriveHeadDim } from '../llama/llama-bases.js';
import type { FamilyEntry } from '../family-entry.js';
import { HfConfigReader } from '../hf-config-reader.js';
import { LLAMA_GGUF, requireSilu } from '../llama/llama-family.js';
import { ModelFileError } from '../../model-file-error.js';
import { MAX_EXPERTS, moeLayerTensors, readExpertSizes } from '../moe-layer-tensors.js';
import { readRotarySizes, readSlidingWindow, rotaryDescription } from '../rotary-config.js';

/**
 * Mixtral (4.47.1 `MixtralConfig`): Mistral's attention (no biases, optional `sliding_window`, theta 1e6 by default)
 * with a sparse MLP on every layer: `num_local_experts` SwiGLU experts of `intermediate_size` (`w1` gate, `w3` up,
 * `w2` down), the top `num_experts_per_tok` by router softmax, always renormalised. `router_jitter_noise` only acts
 * in training.
 */
export const mixtralFamily: FamilyEntry = {
  modelType: 'mixtral',
  describe(json, source) {
    const r = new HfConfigReader(json, source);
    const s = readRotarySizes(r, { headDimKey: true, epsDefault: 1e-5, thetaDefault: 1e6 });
    requireSilu(r);
    const window = readSlidingWindow(r);
    const tied = r.bool('tie_word_embeddings', false);
    const experts = r.int('num_local_experts', MAX_EXPERTS, 8);
    const { topK } = readExpertSizes(r, experts, 2, 'intermediate_size', s.hidden);
    const layout = { hidden: s.hidden, heads: s.heads, kvHeads: s.kvHeads, headDim: s.headDim, intermediate: s.intermediate, norms: { inNormW: 'input_layernorm.weight', postNormW: 'post_attention_layernorm.weight' } } as const;
    const d = rotaryDescription(r, s, {
      family: 'mixtral',
      norm: { kind: 'rmsnorm', placement: 'pre', eps: s.eps, final: true },
      attention: { bias: false, ...(window !== undefined ? { slidingWindow: window } : {}) },
      // The experts' activation and size (Mixtral has no dense MLP).
      mlp: { kind: 'swiglu', bias: false },
      tied,
      layout: { norms: layout.norms },
      tokens: { bos: r.tokenId('bos_token_id', s.vocab), eos: r.tokenId('eos_token_id', s.vocab), pad: r.tokenId('pad_token_id', s.vocab) },
    });
    const moe = { experts, topK, renormalize: true, expertIntermediateSize: s.intermediate, sparseLayers: Array.from({ length: s.layers }, (_, i) => i) };
    const p = 'block_sparse_moe';
    const layerTensors = moeLayerTensors(layout, moe, {
      router: `${p}.gate.weight`,
      expert: (e) => ({ gate: `${p}.experts.${e}.w1.weight`, up: `${p}.experts.${e}.w3.weight`, down: `${p}.experts.${e}.w2.weight` }),
    });
    return { ...d, layerTensors, moe };
  },
  tokens: { prependBos: true, promptBos: 'tokenizer', window: 'model-folder' },
  chat: { endOfTurn: [] },
  // llama.cpp writes Mixtral as a llama file with experts (its llama graph renormalises the top-k weights, as Mixtral
  // does); Mistral's window has no place there either. Llama 3.1 rope factors and biases are never Mixtral's.
  gguf: {
    ...LLAMA_GGUF,
    llamaExtras: false,
    experts: true,
    readConfig: (m) => ({ num_local_experts: m.count('expert_count'), num_experts_per_tok: m.count('expert_used_count') }),
    writeKeys(d) {
      if (!d.moe) throw new ModelFileError('a Mixtral model without experts has no llama.cpp form');
      return [
        { key: 'expert_count', type: 'u32', value: d.moe.experts },
        { key: 'expert_used_count', type: 'u32', value: d.moe.topK },
      ];
    },
  },
  make: { architecture: 'MixtralForCausalLM', bases: MIXTRAL_BASES, derive: deriveHeadDim },
};
