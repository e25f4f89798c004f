import { checkpointLayerShapes } from './layer-tensors.js';
import { f16ToF32, f32ToF16Bits } from '@flexhelm/python-compat';
import { hashName, SeededUniform, type ModelDescription } from '@flexhelm/contract';
import { canonicalTensorName, expectedOptTensors } from './families/opt/opt-weights.js';
import { elementCount, type TensorInfo, type TensorSource } from './tensor-source.js';


/**
 * How a random tensor is drawn: uniform with the given centre and half-width. Linear weights get variance 1/fan_in
 * (so activations keep their scale through the layers and outputs are not dominated by the token embedding, see the
 * conformance check.md), biases ±0.1, LayerNorm weights 1 ± 0.25, embeddings scaled so tied logits have std ≈ 2.
 */
export function initRange(canonical: string, shape: number[], d: ModelDescription): { centre: number; halfWidth: number } {
  const sqrt3 = Math.sqrt(3);
  if (canonical.endsWith('layer_norm.weight')) return { centre: 1, halfWidth: 0.25 };
  if (canonical.endsWith('.bias')) return { centre: 0, halfWidth: 0.1 };
  if (canonical === 'decoder.embed_tokens.weight') return { centre: 0, halfWidth: (2 / Math.sqrt(d.embedding.dim)) * sqrt3 };
  if (canonical === 'decoder.embed_positions.weight') return { centre: 0, halfWidth: (2 / Math.sqrt(d.hiddenSize)) * sqrt3 };
  const fanIn = shape[shape.length - 1]!;
  return { centre: 0, halfWidth: sqrt3 / Math.sqrt(fanIn) };
}

/** Fills a random tensor; with `f16Exact` every value is rounded to the nearest float16 (so F16 and F32 files agree). */
export function randomTensor(canonical: string, shape: number[], d: ModelDescription, seed: number, f16Exact: boolean): Float32Array {
  const { centre, halfWidth } = initRange(canonical, shape, d);
  const rng = new SeededUniform(hashName(canonical, seed));
  const out = new Float32Array(elementCount(shape));
  for (let i = 0; i < out.length; i++) out[i] = centre + (2 * rng.next() - 1) * halfWidth;
  if (f16Exact) {
    const bits = new Uint16Array(out.length);
    for (let i = 0; i < out.length; i++) bits[i] = f32ToF16Bits(out[i]!);
    f16ToF32(bits, out);
  }
  return out;
}

/**
 * Random weights of any OPT description, under OPT's checkpoint names, generated on demand (for benchmarks and tests;
 * nothing is read from disk). Other families' random weights are `DescriptionTensorSource`'s.
 */
export class DummyTensorSource implements TensorSource {
  readonly tensors = new Map<string, TensorInfo>();
  constructor(
    private readonly description: ModelDescription,
    private readonly seed = 0,
  ) {
    for (const [name, shape] of expectedOptTensors(description)) this.tensors.set(name, { name, dtype: 'F32', shape, file: `<dummy ${description.name}>` });
  }
  read(name: string): Float32Array {
    const info = this.tensors.get(name);
    if (!info) throw new Error(`tensor ${name} is not in the dummy ${this.description.name} model`);
    return randomTensor(canonicalTensorName(name), info.shape, this.description, this.seed, false);
  }
  close(): void {}
}

/**
 * Random weights for any description with checkpoint names (the Llama family), under those names and in the
 * checkpoint layout (`[out, in]`): norm weights 1 ± 0.25, biases ±0.1, Linear weights variance 1/fan_in, the token
 * table scaled so tied logits have std ≈ 2 (as `initRange` does for OPT).
 */
export class DescriptionTensorSource implements TensorSource {
  readonly tensors = new Map<string, TensorInfo>();
  constructor(
    private readonly description: ModelDescription,
    private readonly seed = 0,
  ) {
    const d = description;
    const names = d.checkpointNames;
    if (!names) throw new Error(`${d.name}: random weights need the description's checkpointNames`);
    const file = `<dummy ${d.name}>`;
    const add = (name: string, shape: number[]) => this.tensors.set(name, { name, dtype: 'F32', shape, file });
    add(names.embedding, [d.vocabSize, d.embedding.dim]);
    for (let i = 0; i < d.layers; i++) for (const [suffix, shape] of checkpointLayerShapes(d, i)) add(`${names.layerPrefix}${i}.${suffix}`, shape);
    add(names.finalNorm, [d.hiddenSize]);
    if (names.head) add(names.head, [d.vocabSize, d.hiddenSize]);
  }
  read(name: string): Float32Array {
    const info = this.tensors.get(name);
    if (!info) throw new Error(`tensor ${name} is not in the dummy ${this.description.name} model`);
    const sqrt3 = Math.sqrt(3);
    let range = { centre: 0, halfWidth: sqrt3 / Math.sqrt(info.shape[info.shape.length - 1]!) };
    if (info.shape.length === 1) range = name.endsWith('.bias') ? { centre: 0, halfWidth: 0.1 } : { centre: 1, halfWidth: 0.25 };
    else if (name === this.description.checkpointNames!.embedding) range = { centre: 0, halfWidth: (2 / Math.sqrt(this.description.embedding.dim)) * sqrt3 };
    const rng = new SeededUniform(hashName(name, this.seed));
    const out = new Float32Array(elementCount(info.shape));
    for (let i = 0; i < out.length; i++) out[i] = range.centre + (2 * rng.next() - 1) * range.halfWidth;
    return out;
  }
  close(): void {}
}
