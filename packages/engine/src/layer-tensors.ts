import { allLayerTensorSpecs, layerTensorsOf, type LayerTensors, type ModelDescription } from '@flexhelm/contract';
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
  // Sparse and dense layers of a mixture of experts have different keys: each key names one shape.
  for (const { key, shape } of allLayerTensorSpecs(d)) {
    const a = w[key];
    if (a && shape.length === 2) out[key] = f(a, shape[0]!, shape[1]!);
  }
  return out;
}

/**
 * The checkpoint tensors of layer `index` (`layerTensorsOf`) by suffix with their `[out, in]` shapes: a fused tensor
 * (specs with `checkpointRows`) once, with all its rows. Throws when a fused tensor's specs do not tile its rows exactly.
 */
export function checkpointLayerShapes(d: ModelDescription, index: number): Map<string, number[]> {
  const shapes = new Map<string, number[]>();
  const fused = new Map<string, [number, number][]>();
  for (const t of layerTensorsOf(d, index)) {
    const shape = [...t.shape].reverse();
    if (!t.checkpointRows) {
      shapes.set(t.checkpointSuffix, shape);
      continue;
    }
    const [start, end] = t.checkpointRows;
    if (shape.length !== 2 || end - start !== shape[0]) throw new Error(`${d.name}: ${t.key} takes rows ${start}..${end} of ${t.checkpointSuffix}, its shape says ${shape[0]} rows`);
    const prior = shapes.get(t.checkpointSuffix);
    if (prior && prior[1] !== shape[1]) throw new Error(`${d.name}: the parts of ${t.checkpointSuffix} disagree on its width`);
    shapes.set(t.checkpointSuffix, [Math.max(end, prior?.[0] ?? 0), shape[1]!]);
    fused.set(t.checkpointSuffix, [...(fused.get(t.checkpointSuffix) ?? []), [start, end]]);
  }
  for (const [suffix, parts] of fused) {
    parts.sort((a, b) => a[0] - b[0]);
    let next = 0;
    for (const [start, end] of parts) {
      if (start !== next) throw new Error(`${d.name}: the parts of ${suffix} leave rows ${next}..${start} unused or overlap`);
      next = end;
    }
  }
  return shapes;
}

/**
 * Layer `index`'s tensors by key from its checkpoint tensors (`read(suffix)`, `[out, in]`, each read once): a fused
 * tensor is split into its row blocks (Phi-3: q/k/v from `qkv_proj`, gate then up from `gate_up_proj`). Still `[out, in]`.
 * Keys in `skip` are left out, and a checkpoint tensor none of whose keys is wanted is not read.
 */
export function splitCheckpointLayer(d: ModelDescription, read: (suffix: string) => Float32Array, index: number, skip?: ReadonlySet<string>): LayerTensors {
  const cache = new Map<string, Float32Array>();
  const w: LayerTensors = {};
  for (const t of layerTensorsOf(d, index)) {
    if (skip?.has(t.key)) continue;
    let data = cache.get(t.checkpointSuffix);
    if (!data) {
      data = read(t.checkpointSuffix);
      cache.set(t.checkpointSuffix, data);
    }
    if (t.checkpointRows) {
      // [out, in] rows are contiguous: rows start..end of the fused matrix are one slice (copied so the parts own their memory).
      const width = t.shape[0]!;
      w[t.key] = data.slice(t.checkpointRows[0] * width, t.checkpointRows[1] * width);
    } else w[t.key] = data;
  }
  return w;
}
