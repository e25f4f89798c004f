import {
  DescriptionTensorSource,
  DummyTensorSource,
  LlamaCheckpoint,
  OptWeights,
  isOptShaped,
  optConfigOfDescription,
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

/** The dummy model a profile times: `layers` decoder layers of the model's own family, its table cut to `profileVocab`. */
export function profileDescription(d: ModelDescription, layers: number, vocab = profileVocab(d)): ModelDescription {
  const id = (t: number | undefined) => (t !== undefined && t < vocab ? t : undefined);
  return { ...d, name: `${d.name}-profile`, layers, vocabSize: vocab, bosTokenId: id(d.bosTokenId), eosTokenId: id(d.eosTokenId), padTokenId: id(d.padTokenId) };
}

/** Layer `index` of a dummy model of `d` (random weights), in the backends' `[in, out]` layout. */
export function dummyLayerTensors(d: ModelDescription, index: number, seed = 4): LayerTensors {
  if (isOptShaped(d)) {
    const c = optConfigOfDescription(d);
    const weights = new OptWeights(c, new DummyTensorSource(c, seed));
    try {
      return transposeLayerWeights(c, weights.layer(index)) as unknown as LayerTensors;
    } finally {
      weights.close();
    }
  }
  return new LlamaCheckpoint(d, new DescriptionTensorSource(d, seed)).layer(index);
}
