import { transposeLayerTensors, untransposeLayerTensors } from './layer-tensors.js';
import type { LayerTensors, TransposedLayerWeights } from '@flexhelm/contract';
import { optDescription, type OptLayerTensorKey } from './opt-description.js';
import type { OptConfig } from './opt-config.js';
import type { LayerWeights } from './opt-weights.js';

export type LayerTensorKey = OptLayerTensorKey;

/** Every layer tensor in FlexLLMGen's order (attention object, then MLP object) with its transposed shape. */
export function layerTensorShapes(c: OptConfig): { key: LayerTensorKey; shape: number[] }[] {
  return optDescription(c).layerTensors.map(({ key, shape }) => ({ key, shape }));
}

/** PyTorch `[out, in]` layer weights → `[in, out]` (vectors are shared, not copied). */
export function transposeLayerWeights(c: OptConfig, w: LayerWeights): TransposedLayerWeights {
  return transposeLayerTensors(optDescription(c), w as unknown as LayerTensors) as unknown as TransposedLayerWeights;
}

/** The inverse of `transposeLayerWeights` (exact: a permutation of the values). */
export function untransposeLayerWeights(c: OptConfig, w: TransposedLayerWeights): LayerWeights {
  return untransposeLayerTensors(optDescription(c), w as unknown as LayerTensors) as unknown as LayerWeights;
}
