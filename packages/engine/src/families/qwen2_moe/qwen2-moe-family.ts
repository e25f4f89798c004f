import { QWEN2_MOE_BASES } from './qwen2-moe-bases.js';
import type { MoeSpec } from '@flexhelm/contract';
import type { FamilyEntry } from '../family-entry.js';
import { HfConfigReader } from '../hf-config-reader.js';
import { llamaStyleTensors } from '../llama-style-tensors.js';
import { ModelFileError } from '../../model-file-error.js';
import { requireSilu } from '../llama/llama-family.js';
import { MAX_EXPERTS, moeLayerTensors, readExpertSizes } from '../moe-layer-tensors.js';
import { readRotarySizes, rotaryDescription } from '../rotary-config.js';

/**
 * Qwen2-MoE (4.47.1 `Qwen2MoeConfig`, `modeling_qwen2_moe.py`): Qwen2's attention (q/k/v biases, untied by default)
 * and on layer l a sparse MLP iff `l ∉ mlp_only_layers`, `num_experts > 0` and `(l + 1) % decoder_sparse_step == 0`;
 * the other layers have a dense SwiGLU of `intermediate_size`. The sparse MLP: `num_experts` SwiGLU experts of
 * `moe_intermediate_size`, top `num_experts_per_tok` router probabilities (renormalised only with `norm_topk_prob`),
 * plus the shared expert (`shared_expert_intermediate_size`) times `sigmoid(shared_expert_gate(x))`.
 */
export const qwen2MoeFamily: FamilyEntry = {
  modelType: 'qwen2_moe',
  describe(json, source) {
    const r = new HfConfigReader(json, source);
    const s = readRotarySizes(r, { headDimKey: false, epsDefault: 1e-6 });
    requireSilu(r);
    const tied = r.bool('tie_word_embeddings', false);
    // Every Qwen MoE checkpoint has it off; transformers 4.47.1's windowed Qwen2-MoE attention is not reproduced here.
    if (r.bool('use_sliding_window', false)) throw r.fail('use_sliding_window true is not implemented for qwen2_moe (published Qwen2-MoE checkpoints have it false)');
    const sparseLayers = readSparseLayers(r, s.layers);
    const norms = { inNormW: 'input_layernorm.weight', postNormW: 'post_attention_layernorm.weight' } as const;
    const layout = { hidden: s.hidden, heads: s.heads, kvHeads: s.kvHeads, headDim: s.headDim, intermediate: s.intermediate, qkvBias: true, norms };
    const d = rotaryDescription(r, s, {
      family: 'qwen2_moe',
      norm: { kind: 'rmsnorm', placement: 'pre', eps: s.eps, final: true },
      attention: { bias: true },
      // The dense layers' MLP; the experts use the same activation.
      mlp: { kind: 'swiglu', bias: false },
      tied,
      layout: { qkvBias: true, norms },
      tokens: { bos: r.tokenId('bos_token_id', s.vocab), eos: r.tokenId('eos_token_id', s.vocab), pad: r.tokenId('pad_token_id', s.vocab) },
    });
    // No sparse layer (num_experts 0, or a step / list that leaves none): a dense Qwen2-style model.
    if (sparseLayers.length === 0) return d;
    const experts = r.int('num_experts', MAX_EXPERTS, 60);
    const { topK, expertIntermediateSize } = readExpertSizes(r, experts, 4, 'moe_intermediate_size', s.hidden);
    const shared = r.int('shared_expert_intermediate_size', 262_144, 5632);
    r.tensorSizes([['shared_expert gate_proj (shared_expert_intermediate_size × hidden_size)', shared * s.hidden]]);
    const moe: MoeSpec = { experts, topK, renormalize: r.bool('norm_topk_prob', false), expertIntermediateSize, sharedExpertIntermediateSize: shared, sparseLayers };
    if (sparseLayers.length < s.layers) moe.denseLayerTensors = llamaStyleTensors(layout);
    const layerTensors = moeLayerTensors(layout, moe, {
      router: 'mlp.gate.weight',
      expert: (e) => ({ gate: `mlp.experts.${e}.gate_proj.weight`, up: `mlp.experts.${e}.up_proj.weight`, down: `mlp.experts.${e}.down_proj.weight` }),
      shared: { gate: 'mlp.shared_expert.gate_proj.weight', up: 'mlp.shared_expert.up_proj.weight', down: 'mlp.shared_expert.down_proj.weight', expertGate: 'mlp.shared_expert_gate.weight' },
    });
    return { ...d, layerTensors, moe };
  },
  // Qwen's tokenizer adds no BOS.
  tokens: { prependBos: false, promptBos: 'tokenizer', window: 'model-folder' },
  // ChatML.
  chat: { endOfTurn: ['<|im_end|>'] },
  // llama.cpp's qwen2moe graph: Qwen2's attention (NeoX rotary, no window), experts on every layer, the top-k weights
  // never renormalised, and always a shared expert with its sigmoid gate. Other Qwen2-MoE configs have no form there.
  gguf: {
    architecture: 'qwen2moe',
    imports: true,
    experts: true,
    rmsNormEps: 1e-6,
    headDimKey: false,
    permutedRotary: false,
    normPlusOne: false,
    llamaExtras: false,
    longropeFactors: false,
    slidingWindow: false,
    // Without the expert sizes (early files), llama.cpp takes feed_forward_length / top-k and feed_forward_length.
    readConfig: (m) => ({
      num_experts: m.count('expert_count'),
      num_experts_per_tok: m.count('expert_used_count'),
      moe_intermediate_size: m.count('expert_feed_forward_length') ?? Math.floor((m.count('feed_forward_length') ?? 0) / (m.count('expert_used_count') ?? 1)),
      shared_expert_intermediate_size: m.count('expert_shared_feed_forward_length') ?? m.count('feed_forward_length'),
      norm_topk_prob: false,
      decoder_sparse_step: 1,
      mlp_only_layers: [],
    }),
    writeKeys(d, config) {
      const moe = d.moe;
      if (!moe || moe.sparseLayers.length !== d.layers) {
        throw new ModelFileError(`llama.cpp's qwen2moe has experts on every layer; this model has them on ${moe?.sparseLayers.length ?? 0} of ${d.layers} (decoder_sparse_step ${JSON.stringify(config.decoder_sparse_step ?? 1)}, mlp_only_layers ${JSON.stringify(config.mlp_only_layers ?? [])})`);
      }
      if (moe.renormalize) throw new ModelFileError("norm_topk_prob true: llama.cpp's qwen2moe never renormalises the top-k router weights");
      if (moe.sharedExpertIntermediateSize === undefined) throw new ModelFileError("llama.cpp's qwen2moe needs the shared expert");
      return [
        { key: 'expert_count', type: 'u32', value: moe.experts },
        { key: 'expert_used_count', type: 'u32', value: moe.topK },
        { key: 'expert_feed_forward_length', type: 'u32', value: moe.expertIntermediateSize },
        { key: 'expert_shared_feed_forward_length', type: 'u32', value: moe.sharedExpertIntermediateSize },
      ];
    },
  },
  make: { architecture: 'Qwen2MoeForCausalLM', bases: QWEN2_MOE_BASES },
};

/** The sparse layers by transformers' rule; `num_experts` 0 (allowed there: a dense model) gives none. */
function readSparseLayers(r: HfConfigReader, layers: number): number[] {
  const experts = r.c.num_experts ?? 60;
  if (experts === 0) return [];
  if (typeof experts !== 'number' || !Number.isInteger(experts) || experts < 0 || experts > MAX_EXPERTS) throw r.fail(`num_experts is ${JSON.stringify(r.c.num_experts)}; it must be an integer from 0 to ${MAX_EXPERTS}`);
  const step = r.int('decoder_sparse_step', 1_000_000, 1);
  const raw = r.c.mlp_only_layers ?? [];
  if (!Array.isArray(raw) || raw.some((l) => typeof l !== 'number' || !Number.isInteger(l) || l < 0 || l >= layers)) {
    throw r.fail(`mlp_only_layers is ${JSON.stringify(r.c.mlp_only_layers)}; it must be a list of layer indices from 0 to ${layers - 1}`);
  }
  const dense = new Set(raw as number[]);
  return Array.from({ length: layers }, (_, l) => l).filter((l) => !dense.has(l) && (l + 1) % step === 0);
}
