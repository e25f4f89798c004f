import type { KvBuffer, LayerPart, LinearOptions, NativeBinding, NativeLayer } from './native-addon.js';
import type { DecoderLayerPart, NativeDecoderBinding, NativeDecoderLayer, NativeDecoderShape } from './native-decoder-layer.js';

/** An OPT layer's sizes (`createOptLayer`'s shape). */
export interface OptLayerShape {
  hidden: number;
  heads: number;
  ffn: number;
  preLayerNorm: boolean;
  eps: number;
}

/**
 * OPT's tensor keys (its description's `layerTensors`) as the shared decoder layer names them: the attention's
 * LayerNorm is the input norm, the MLP's the post norm, fc1 the ungated `up`, fc2 `down`. q/k/v/o keep their names.
 */
export const OPT_TENSOR_KEYS: Readonly<Record<string, string>> = {
  ln1W: 'inNormW', ln1B: 'inNormB', ln2W: 'postNormW', ln2B: 'postNormB', fc1W: 'upW', fc1B: 'upB', fc2W: 'downW', fc2B: 'downB',
};

/** OPT's part names (`createOptLayer`'s `options.parts`) as the shared layer's. */
const OPT_PARTS: Record<LayerPart, DecoderLayerPart> = { qkv: 'qkv', out: 'out', fc1: 'gateUp', fc2: 'down', ln: 'norm' };

/** The shared layer's shape for an OPT layer: LayerNorm with biases (pre, or post for OPT-350m), no RoPE, ReLU MLP. */
function optLayerShape(s: OptLayerShape): NativeDecoderShape {
  if (!Number.isInteger(s.hidden / s.heads)) throw new RangeError(`hidden (${s.hidden}) must be divisible by heads (${s.heads})`);
  return {
    hidden: s.hidden, heads: s.heads, kvHeads: s.heads, headDim: s.hidden / s.heads, ffn: s.ffn, eps: s.eps,
    placement: s.preLayerNorm ? 'pre' : 'post', norm: 'layernorm', rope: false, activation: 'relu',
  };
}

/** `[out, in]` (PyTorch's layout) → `[in, out]`, the only one the shared layer packs. */
function transpose(w: Float32Array, key: string, outFeatures: number): Float32Array {
  const inFeatures = w.length / outFeatures;
  if (!Number.isInteger(inFeatures)) throw new RangeError(`weights.${key} has ${w.length} elements, not a multiple of its ${outFeatures} outputs`);
  const t = new Float32Array(w.length);
  for (let o = 0; o < outFeatures; o++) for (let i = 0; i < inFeatures; i++) t[i * outFeatures + o] = w[o * inFeatures + i]!;
  return t;
}

/** The layer a `createOptLayer` caller holds: OPT's run signatures (no positions: they were added at embedding). */
class OptShapedLayer implements NativeLayer {
  constructor(readonly inner: NativeDecoderLayer) {}
  run(x: Float32Array, pastK: Float32Array, pastV: Float32Array, maskBias: Float32Array, batch: number, seq: number, pastLen: number, y: Float32Array, presentK: Float32Array, presentV: Float32Array): Promise<void> {
    return this.inner.run(x, pastK, pastV, maskBias, null, null, batch, seq, pastLen, y, presentK, presentV);
  }
  runCached(x: Float32Array, maskBias: Float32Array, batch: number, seq: number, pastLen: number, y: Float32Array, cacheK: KvBuffer, cacheV: KvBuffer, capacity: number): Promise<void> {
    return this.inner.runCached(x, maskBias, null, null, batch, seq, pastLen, y, cacheK, cacheV, capacity);
  }
  release(): void {
    this.inner.release();
  }
  get packedBytes(): number {
    return this.inner.packedBytes;
  }
  get lazyPackMs(): number {
    return this.inner.lazyPackMs;
  }
}

/**
 * An OPT layer by OPT's keys and sizes (benchmarks and tests): the shared decoder layer (`createDecoderLayer`) with OPT's
 * shape, keys and parts (`qkv`, `out`, `fc1`, `fc2`, `ln`). `options.parts` (default all) names the parts packed from
 * `weights` (only their tensors are needed); with `base` the other parts are shared with that layer (same shape and
 * dtype). Weights may be `[out, in]` without `options.transposed` (copied transposed here; f16 (Uint16Array) and
 * lazily packed weights must be `[in, out]`).
 */
export function createOptLayer(
  binding: NativeBinding, shape: OptLayerShape, weights: Record<string, Float32Array | Uint16Array>, options: LinearOptions & { parts?: LayerPart[] }, base?: NativeLayer,
): Promise<NativeLayer> {
  const parts = options.parts?.map((p) => {
    const part = OPT_PARTS[p];
    if (!part) throw new TypeError(`options.parts: unknown part '${String(p)}' (use ${Object.keys(OPT_PARTS).map((n) => `'${n}'`).join(', ')})`);
    return part;
  });
  if (base !== undefined && !(base instanceof OptShapedLayer)) throw new TypeError('createOptLayer: base must be a layer createOptLayer made');
  if (!options.transposed && options.packAtRows) throw new TypeError('createOptLayer: options.packAtRows needs transposed ([in, out]) weights');
  const outputs: Record<string, number> = { qW: shape.hidden, kW: shape.hidden, vW: shape.hidden, oW: shape.hidden, fc1W: shape.ffn, fc2W: shape.hidden };
  const given: Record<string, Float32Array | Uint16Array> = {};
  for (const [key, w] of Object.entries(weights)) {
    let value = w;
    if (!options.transposed && outputs[key] !== undefined) {
      if (!(w instanceof Float32Array)) throw new TypeError(`weights.${key}: f16 (Uint16Array) weights must be given in the [in, out] layout (transposed)`);
      value = transpose(w, key, outputs[key]);
    }
    given[OPT_TENSOR_KEYS[key] ?? key] = value;
  }
  const { parts: _, ...rest } = options;
  const layerOptions = { ...rest, transposed: true, ...(parts ? { parts } : {}) };
  const native = binding as NativeBinding & NativeDecoderBinding;
  return native.createDecoderLayer(optLayerShape(shape), given, layerOptions, base?.inner).then((layer) => new OptShapedLayer(layer));
}
