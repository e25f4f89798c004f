import { layerTensorsOf, type ModelDescription } from '@flexhelm/contract';

/** Parameters of a model: all of them, and those one token computes with (a mixture of experts' top-k, not all E). */
export interface ParameterCounts {
  total: number;
  active: number;
}

const numel = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

/**
 * Counts the tensors the description names: the token table, the untied head, the final norm and every layer's
 * tensors (`layerTensorsOf`, so a mixture's dense layers count as dense). `active` counts a sparse layer's experts
 * `topK` times out of `experts` (the router and a shared expert always). OPT's learned position table and its
 * project_in/out are not described here and not counted. Mixtral-8x7B: 46.7 B total, 12.9 B active.
 */
export function parameterCounts(d: ModelDescription): ParameterCounts {
  let total = d.vocabSize * d.embedding.dim + (d.embedding.tiedHead ? 0 : d.vocabSize * d.hiddenSize) + (d.norm.final ? d.hiddenSize : 0);
  let active = total;
  for (let i = 0; i < d.layers; i++) {
    for (const t of layerTensorsOf(d, i)) {
      const n = numel(t.shape);
      total += n;
      // Expert tensors are `expert.<e>.…`: a token reads topK of the E experts.
      active += d.moe && t.key.startsWith('expert.') ? (n * d.moe.topK) / d.moe.experts : n;
    }
  }
  return { total, active };
}
