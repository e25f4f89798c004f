import {
  DescriptionTensorSource,
  DummyTensorSource,
  expertOfTensor,
  LlamaCheckpoint,
  OptWeights,
  isOptShaped,
  transposeLayerWeights,
  type LayerTensors,
  type ModelDescription,
} from '@flexhelm/engine';
import { modelShapeOfDescription } from '@flexhelm/offload';
import { shapeKeyOf, type ShapeKey } from '@flexhelm/cost-model';

/** The profile cache key of a model (any family's description): its widths, and a non-OPT family's layer structure. */
export function toShapeKey(d: ModelDescription): ShapeKey {
  return shapeKeyOf(modelShapeOfDescription(d));
}

/** Largest fp32 token table the profile allocates (the input embedding; an untied head as much again). */
export const PROFILE_TABLE_BYTES = 256 * 1024 ** 2;

/**
 * The vocabulary the profile's dummy models get: the model's own, or fewer rows where its table is over
 * `PROFILE_TABLE_BYTES` (Llama-3.1-8B's is 2.1 GB). The layers, KV cache and embedding gather timed do not depend on
 * the table's length; the head's and the logits' costs do, linearly, and are scaled back (`BackendProfile.profileVocab`).
 */
export function profileVocab(d: ModelDescription): number {
  return Math.min(d.vocabSize, Math.max(1024, Math.floor(PROFILE_TABLE_BYTES / (4 * d.embedding.dim))));
}

/**
 * Experts a profiled mixture-of-experts layer keeps: at least 8 and twice the top-k, at most the model's own. A token's
 * compute is its top-k experts whatever their number, while the model's own count can make one fp32 layer too large
 * to time at all (Qwen1.5-MoE-A2.7B's 60 experts are 2.3 GB a layer: past onnxruntime's 2 GB model limit, and two of
 * them past an 8 GiB budget). What the cut changes: at batch > 1, rows meet on fewer experts than they would.
 */
export function profileExperts(moe: NonNullable<ModelDescription['moe']>): number {
  return Math.min(moe.experts, Math.max(8, 2 * moe.topK));
}

/**
 * The dummy model a profile times: `layers` decoder layers of the model's own family, its table cut to `profileVocab`,
 * a mixture of experts' layers cut to `profileExperts`.
 */
export function profileDescription(d: ModelDescription, layers: number, vocab = profileVocab(d)): ModelDescription {
  const id = (t: number | undefined) => (t !== undefined && t < vocab ? t : undefined);
  const cut = { ...d, name: `${d.name}-profile`, layers, vocabSize: vocab, bosTokenId: id(d.bosTokenId), eosTokenId: id(d.eosTokenId), padTokenId: id(d.padTokenId) };
  if (!d.moe || profileExperts(d.moe) === d.moe.experts) return cut;
  const experts = profileExperts(d.moe);
  const layerTensors = d.layerTensors
    .filter((t) => (expertOfTensor(t.key) ?? -1) < experts)
    .map((t) => (t.key === 'routerW' ? { ...t, shape: [d.hiddenSize, experts] } : t));
  return { ...cut, moe: { ...d.moe, experts }, layerTensors };
}

/** Layer `index` of a dummy model of `d` (random weights), in the backends' `[in, out]` layout. */
export function dummyLayerTensors(d: ModelDescription, index: number, seed = 4): LayerTensors {
  if (isOptShaped(d)) {
    const weights = new OptWeights(d, new DummyTensorSource(d, seed));
    try {
      return transposeLayerWeights(weights.description, weights.layer(index)) as unknown as LayerTensors;
    } finally {
      weights.close();
    }
  }
  return new LlamaCheckpoint(d, new DescriptionTensorSource(d, seed)).layer(index);
}
