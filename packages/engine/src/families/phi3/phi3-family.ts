import type { FamilyEntry } from '../family-entry.js';
import { derivePhi3, PHI3_BASES } from './phi3-bases.js';
import { HfConfigReader } from '../hf-config-reader.js';
import { requireSilu } from '../llama/llama-family.js';
import { readRotarySizes, readSlidingWindow, rotaryDescription } from '../rotary-config.js';

/**
 * Phi-3 / Phi-3.5 (4.47.1 `Phi3Config` / modeling_phi3.py): a Llama pre-norm layer whose checkpoint fuses q/k/v into
 * `qkv_proj` (rows q, then k, then v) and gate/up into `gate_up_proj` (rows: gate, then up); `rope_scaling` null or
 * longrope (short/long factors, `original_max_position_embeddings`), `sliding_window` on every layer, no biases,
 * no head_dim key, untied head.
 */
export const phi3Family: FamilyEntry = {
  modelType: 'phi3',
  describe(json, source) {
    const r = new HfConfigReader(json, source);
    const rs = r.c.rope_scaling;
    if (rs !== undefined && rs !== null) {
      const kind = typeof rs === 'object' && !Array.isArray(rs) ? ((rs as Record<string, unknown>).type ?? (rs as Record<string, unknown>).rope_type) : undefined;
      // 4.47.1's Phi3Config._rope_scaling_validation accepts longrope only.
      if (kind !== 'longrope') throw r.fail(`rope_scaling is ${JSON.stringify(rs)}; Phi-3 takes null or {"type": "longrope", "short_factor": [...], "long_factor": [...]}`);
    }
    const s = readRotarySizes(r, { headDimKey: false, epsDefault: 1e-5, allowLongrope: true });
    requireSilu(r);
    const window = readSlidingWindow(r);
    const tied = r.bool('tie_word_embeddings', false);
    return rotaryDescription(r, s, {
      family: 'phi3',
      norm: { kind: 'rmsnorm', placement: 'pre', eps: s.eps, final: true },
      attention: { bias: false, ...(window !== undefined ? { slidingWindow: window } : {}) },
      mlp: { kind: 'swiglu', bias: false },
      tied,
      layout: { fused: true, norms: { inNormW: 'input_layernorm.weight', postNormW: 'post_attention_layernorm.weight' } },
      tokens: { bos: r.tokenId('bos_token_id', s.vocab, 1), eos: r.tokenId('eos_token_id', s.vocab, 32000), pad: r.tokenId('pad_token_id', s.vocab, 32000) },
    });
  },
  tokens: { prependBos: false, promptBos: 'tokenizer', window: 'model-folder' },
  // <|user|>\n…<|end|>\n<|assistant|>\n…<|end|>.
  chat: { endOfTurn: ['<|end|>'] },
  gguf: {
    architecture: 'phi3',
    imports: true,
    rmsNormEps: 1e-5,
    headDimKey: false,
    // Phi-3 keeps its fused projections: attn_qkv is qkv_proj (q, k, v rows) and ffn_up is gate_up_proj (gate, up rows).
    layerNames: { attn_qkv: 'self_attn.qkv_proj', ffn_up: 'mlp.gate_up_proj' },
    permutedRotary: false,
    normPlusOne: false,
    llamaExtras: false,
    longropeFactors: true,
    slidingWindow: true,
  },
  make: { architecture: 'Phi3ForCausalLM', bases: PHI3_BASES, derive: derivePhi3 },
};
