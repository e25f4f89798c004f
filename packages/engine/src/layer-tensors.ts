import type { LayerTensors, ModelDescription } from './model-description.js';
import { transposed } from './transposed.js';

/**
 * A layer's tensors as checkpoints hold them (Linear weights `[out, in]`) → the backends' `[in, out]` layout, by the
 * description's 2-D shapes; vectors are shared, not copied. Keys the description does not name are refused.
 */
export function transposeLayerTensors(d: ModelDescription, w: LayerTensors): LayerTensors {
  return mapMatrices(d, w, (a, inDim, outDim) => transposed(a, outDim, inDim));
}

/** The inverse of `transposeLayerTensors` (exact: a permutation of the values): `[in, out]` → `[out, in]`. */
export function untransposeLayerTensors(d: ModelDescription, w: LayerTensors): LayerTensors {
  return mapMatrices(d, w, (a, inDim, outDim) => transposed(a, inDim, outDim));
}

function mapMatrices(d: ModelDescription, w: LayerTensors, f: (a: Float32Array, inDim: number, outDim: number) => Float32Array): LayerTensors {
  const out: LayerTensors = { ...w };
  for (const { key, shape } of d.layerTensors) {
    const a = w[key];
    if (a && shape.length === 2) out[key] = f(a, shape[0]!, shape[1]!);
  }
  return out;
}
