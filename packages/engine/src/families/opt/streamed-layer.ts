import { transposeLayerTensors, untransposeLayerTensors } from '../../layer-tensors.js';
import type { LayerTensors, ModelDescription, TransposedLayerWeights } from '@flexhelm/contract';
import type { OptLayerTensorKey } from './opt-description.js';
import type { LayerWeights } from './opt-weights.js';

export type LayerTensorKey = OptLayerTensorKey;

/** Every layer tensor in FlexLLMGen's order (attention object, then MLP object) with its transposed shape. */
export function layerTensorShapes(d: ModelDescription): { key: LayerTensorKey; shape: number[] }[] {
  return d.layerTensors.map(({ key, shape }) => ({ key: key as LayerTensorKey, shape }));
}

/** PyTorch `[out, in]` layer weights → `[in, out]` (vectors are shared, not copied). */
export function transposeLayerWeights(d: ModelDescription, w: LayerWeights): TransposedLayerWeights {
  return transposeLayerTensors(d, w as unknown as LayerTensors) as unknown as TransposedLayerWeights;
}

/** The inverse of `transposeLayerWeights` (exact: a permutation of the values). */
export function untransposeLayerWeights(d: ModelDescription, w: TransposedLayerWeights): LayerWeights {
  return untransposeLayerTensors(d, w as unknown as LayerTensors) as unknown as LayerWeights;
}
