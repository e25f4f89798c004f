import type { ModelDescription } from '@flexhelm/engine';
import type { QuantWeight } from './native-addon.js';
import { isMlpKey, MoeMlp } from './moe-mlp.js';
import { partTensorsOf } from './native-decoder.js';

/**
 * Where a model's ggml-quantized weight matrices come from (`@flexhelm/gguf`'s `ggufQuantizedWeights` for a GGUF
 * file): Q8_0 / Q4_0 / K-quant blocks by the description's layer keys, and the LM head's. Matrices it does not list (other types)
 * are computed from the checkpoint's widened weights as usual.
 */
export interface QuantizedSource {
  layer(index: number): Partial<Record<string, QuantWeight>>;
  /** The keys `layer(index)` gives, without reading the blocks (lets the engine skip their widened copies). */
  layerKeys?(index: number): readonly string[];
  head(): QuantWeight | undefined;
  /** Whether `head()` gives blocks, known without reading them (lets the engine skip the widened head). */
  readonly headKept?: boolean;
  /**
   * The token table as stored, its rows widened on use (`gather(ids, out)`: row `ids[t]` at `out[t·dim …]`, the
   * values a full read gives); lets the engine skip the widened table. `close` (when given) is called on dispose.
   */
  tokenRows?(): { gather(ids: Int32Array, out: Float32Array): void; readonly bytes: number; close?(): void };
}

/**
 * The quantized matrices a layer multiplies as blocks: per fused GEMM of `partTable` (q/k/v, gate/up, o, down), all its
 * matrices when every one is blocks (of one type, or of several: the layer then runs one QuantLinear per matrix, as
 * for Q4_K_M's Q6_K v_proj beside Q4_K q/k); otherwise none of them (that GEMM widens, as before), since one GEMM runs
 * on one kind of weight. `given`: the keys the source has as blocks.
 */
function quantizedPartKeys(partTable: Record<string, readonly string[]>, given: ReadonlySet<string>): Set<string> {
  const out = new Set<string>();
  for (const keys of Object.values(partTable)) {
    const matrices = keys.filter((k) => /W$/.test(k) && !/Norm/.test(k));
    if (matrices.length === 0 || !matrices.every((k) => given.has(k))) continue;
    for (const k of matrices) out.add(k);
  }
  return out;
}

/** `quantizedPartKeys`' matrices with their blocks. */
export function quantizedParts(partTable: Record<string, readonly string[]>, given: Partial<Record<string, QuantWeight>>): Record<string, QuantWeight> {
  const present = new Set(Object.keys(given).filter((k) => given[k] !== undefined));
  return Object.fromEntries([...quantizedPartKeys(partTable, present)].map((k) => [k, given[k]!]));
}

/**
 * The matrices of one of `model`'s layers (a gated-MLP rotary model: what the backend's `quantized` option applies to)
 * the backend holds as blocks, given the keys the source has as blocks: those of whole fused GEMMs of the native layer
 * (`quantizedPartKeys`), and for a mixture of experts every MLP matrix (`MoeMlp` runs each expert's, the shared
 * expert's and a dense layer's matrices as GEMMs of their own). Also for memory plans made before any backend exists.
 */
export function blockHeldKeys(model: ModelDescription, given: ReadonlySet<string>): Set<string> {
  if (!model.moe) return quantizedPartKeys(partTensorsOf(model), given);
  const held = quantizedPartKeys(partTensorsOf(MoeMlp.attentionView(model)), given);
  for (const key of given) if (isMlpKey(key)) held.add(key);
  return held;
}
