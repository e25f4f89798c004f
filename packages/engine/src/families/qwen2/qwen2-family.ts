import type { FamilyEntry } from '../family-entry.js';
import { QWEN2_BASES } from './qwen2-bases.js';
import { HfConfigReader } from '../hf-config-reader.js';
import { requireSilu } from '../llama/llama-family.js';
import { readRotarySizes, readSlidingWindow, rotaryDescription } from '../rotary-config.js';

/**
 * Qwen2 (4.47.1 `Qwen2Config`): always q/k/v biases (never o or MLP), no `head_dim` key, tied by default, and a
 * sliding window only with `use_sliding_window` on all layers.
 */
export const qwen2Family: FamilyEntry = {
  modelType: 'qwen2',
  describe(json, source) {
    const r = new HfConfigReader(json, source);
    const s = readRotarySizes(r, { headDimKey: false, epsDefault: 1e-6 });
    requireSilu(r);
    const tied = r.bool('tie_word_embeddings', true);
    let window: number | undefined;
    if (r.bool('use_sliding_window', false)) {
      window = readSlidingWindow(r);
      if (window !== undefined && r.c.max_window_layers !== undefined && r.c.max_window_layers !== s.layers) {
        throw r.fail('use_sliding_window with max_window_layers below num_hidden_layers (a window on some layers only) is not implemented');
      }
    }
    return rotaryDescription(r, s, {
      family: 'qwen2',
      norm: { kind: 'rmsnorm', placement: 'pre', eps: s.eps, final: true },
      attention: { bias: true, ...(window !== undefined ? { slidingWindow: window } : {}) },
      mlp: { kind: 'swiglu', bias: false },
      tied,
      layout: { qkvBias: true, norms: { inNormW: 'input_layernorm.weight', postNormW: 'post_attention_layernorm.weight' } },
      tokens: { bos: r.tokenId('bos_token_id', s.vocab), eos: r.tokenId('eos_token_id', s.vocab), pad: r.tokenId('pad_token_id', s.vocab) },
    });
  },
  // Qwen2's tokenizer adds no BOS.
  tokens: { prependBos: false, promptBos: 'tokenizer', window: 'model-folder' },
  // ChatML.
  chat: { endOfTurn: ['<|im_end|>'] },
  // NeoX rotary (no permutation), no window in llama.cpp's graph.
  gguf: { architecture: 'qwen2', imports: true, rmsNormEps: 1e-6, headDimKey: false, permutedRotary: false, normPlusOne: false, llamaExtras: false, longropeFactors: false, slidingWindow: false },
  make: {
    architecture: 'Qwen2ForCausalLM',
    bases: QWEN2_BASES,
    // A window on all layers or none (see describe): fewer layers keep max_window_layers equal to them.
    derive(hf, overrides) {
      if (overrides.num_hidden_layers !== undefined && overrides.max_window_layers === undefined) hf.max_window_layers = hf.num_hidden_layers;
    },
  },
};
