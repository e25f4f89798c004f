import type { ModelDescription } from '@flexhelm/engine';
import { ggufQuantizedWeights } from '@flexhelm/gguf';
import { modelShapeOfDescription, type ModelShape } from '@flexhelm/offload';
import { blockHeldKeys } from '@flexhelm/onednn-backend';
import { decideBackend, oneDnnUsability, type ComputeDtype } from './decide-backend.js';

/**
 * The model's shape for memory plans and the policy search. For a GGUF file that oneDNN will multiply as stored
 * (`openEngine`'s `quantized`: a dense, gated-MLP rotary model with kept block types), the bytes of what it holds so:
 * each matrix's blocks (on whatever tier the policy puts them: the tiers keep the blocks), the token table as stored,
 * the head's blocks — instead of float32 or f16 copies, which overstate a Q4_0 model's weights about 7× (3.5× on the
 * host and disk tiers), so that `--percent auto` would stream a model that fits, and a fixed policy would be refused.
 */
export function planShape(description: ModelDescription, gguf: string | undefined, computeDtype: ComputeDtype): ModelShape {
  const shape = modelShapeOfDescription(description);
  if (!gguf || !shape.family || description.positions.kind !== 'rope' || description.mlp.kind === 'relu') return shape;
  if (decideBackend(computeDtype, { allResident: true, onednn: oneDnnUsability() }).library !== 'onednn') return shape;
  const q = ggufQuantizedWeights(gguf, description);
  if (Object.keys(q.counts).length === 0) return shape;
  const suffix = new Map(description.layerTensors.map((t) => [t.key, t.checkpointSuffix]));
  // The token table's rows are read from the file as tokens need them (`tokenRows`): none of it is held.
  const held: Record<string, number> = { 'embed_tokens.weight': 0 };
  for (let i = 0; i < description.layers; i++) {
    const bytes = q.layerBytes(i);
    for (const key of blockHeldKeys(description, new Set(Object.keys(bytes)))) held[`layers.${i}.${suffix.get(key)}`] = bytes[key]!;
  }
  if (q.headKept) held['lm_head.weight'] = q.headBytes;
  return { ...shape, family: { ...shape.family, held } };
}
