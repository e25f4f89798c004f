import type { FamilyEntry } from '../family-entry.js';
import { MISTRAL_BASES } from './mistral-bases.js';
import { deriveHeadDim } from '../llama/llama-bases.js';
import { HfConfigReader } from '../hf-config-reader.js';
import { LLAMA_GGUF, requireSilu } from '../llama/llama-family.js';
import { readRotarySizes, readSlidingWindow, rotaryDescription } from '../rotary-config.js';

/** Mistral (4.47.1 `MistralConfig`): Llama without biases, plus `sliding_window` on every layer (null: none). */
export const mistralFamily: FamilyEntry = {
  modelType: 'mistral',
  describe(json, source) {
    const r = new HfConfigReader(json, source);
    const s = readRotarySizes(r, { headDimKey: true, epsDefault: 1e-6 });
    requireSilu(r);
    const window = readSlidingWindow(r);
    const tied = r.bool('tie_word_embeddings', false);
    return rotaryDescription(r, s, {
      family: 'mistral',
      norm: { kind: 'rmsnorm', placement: 'pre', eps: s.eps, final: true },
      attention: { bias: false, ...(window !== undefined ? { slidingWindow: window } : {}) },
      mlp: { kind: 'swiglu', bias: false },
      tied,
      layout: { norms: { inNormW: 'input_layernorm.weight', postNormW: 'post_attention_layernorm.weight' } },
      tokens: { bos: r.tokenId('bos_token_id', s.vocab), eos: r.tokenId('eos_token_id', s.vocab), pad: r.tokenId('pad_token_id', s.vocab) },
    });
  },
  tokens: { prependBos: true, promptBos: 'tokenizer', window: 'model-folder' },
  // Mistral-Instruct's [INST] template ends an assistant turn with the EOS itself.
  chat: { endOfTurn: [] },
  // llama.cpp has no Mistral architecture: its files are Llama's (without the window), and import back as Llama.
  gguf: { ...LLAMA_GGUF, imports: false },
  make: { architecture: 'MistralForCausalLM', bases: MISTRAL_BASES, derive: deriveHeadDim },
};
