import { isSparseLayer, type LayerTensors, type ModelDescription } from '@flexhelm/contract';
import { layerHasWindow, positionTable, stepInvFreq, type EmbeddingWeights, type HeadWeights } from '@flexhelm/engine';
import { LLAMA_TABLE_INPUT, layerTensorName, llamaEmbeddingGraph, llamaHeadGraph, llamaHeadInputs, llamaLayerStageGraphs, llamaStreamedHeadGraph, llamaStreamedLayerGraph, POSITIONS_INPUT } from './llama-graphs.js';
import { layerDims } from './ort-decoder-layer.js';
import type { WireTensor } from './ort-protocol.js';
import { ropeCosSin } from './rope-cos-sin.js';

/**
 * The graphs `OrtBackend` builds for a model (llama-graphs.ts over the one layer of ort-decoder-layer.ts, chosen by the
 * description's kinds), behind one shape, so the backend, its worker-held cache and the streamed weights never branch
 * on the family. The session layout: an embedding, per resident layer a `qkv` and a `rest` stage around the worker's
 * cache, one streamed layer graph with the weights as inputs, and a resident or streamed head.
 */
export interface OrtGraphs {
  /**
   * A tied head's token table is kept once in the worker, as shared tensor `TOKEN_TABLE` that the embedding and the
   * head sessions both read (`embedding` and `head` then take it as an input), instead of one copy in each session.
   */
  readonly sharedTable: boolean;
  /** With `sharedTable`: the head reads `TOKEN_TABLE` itself (a tied head); otherwise its projection is a worker tensor of its own. */
  readonly tiedTable: boolean;
  embedding(w: EmbeddingWeights): Uint8Array;
  /** The embedding session's feeds from ids and model positions (int64 `[batch, seq]`). */
  embedFeeds(ids: BigInt64Array, positions: BigInt64Array, dims: number[]): Record<string, WireTensor>;
  /** Resident layer `index`'s two stages from its tensors (`[in, out]` layout, keyed by the description). */
  layerStages(w: LayerTensors, index: number): { qkv: Uint8Array; rest: Uint8Array };
  /**
   * The worker session that computes streamed layer `index`: one per set of layer tensors (`streamed`; a mixture of
   * experts with dense layers also `streamed.dense`), each serving every streamed layer of its kind.
   */
  streamedLayerKey(index: number): string;
  /** The streamed layer graph of session `streamedLayerKey(index)`. */
  streamedLayer(index: number): Uint8Array;
  /** The streamed layer graph's input name of tensor `key`. */
  layerInput(key: string): string;
  /** The resident head; with `sharedTable` its weights are inputs (`headInputs`): the caller feeds them. */
  head(w: HeadWeights): Uint8Array;
  streamedHead(): Uint8Array;
  /** The streamed head graph's weight inputs. */
  headInputs(): { key: keyof HeadWeights; input: string; dims: number[] }[];
  /**
   * Rotary families: the step's cos/sin tables `[batch * seq, headDim]` for every layer's q/k stage, from the model
   * positions of its tokens and the step's key count `keys` (cached + new tokens, padding included: longrope picks
   * its factors from it). Undefined for learned positions (OPT adds them in the embedding).
   */
  rope?(positions: Int32Array, keys: number): { cos: Float32Array; sin: Float32Array };
  /**
   * Set when the sliding window is on some layers only (Gemma 2's even layers), which the engine's mask then leaves
   * out: the window, and whether layer `index` attends through it (its mask is then `windowMask`'s).
   */
  window?: { size: number; layer(index: number): boolean };
}

/** Worker name of the shared token table (`OrtGraphs.sharedTable`): the embedding graph's input of that name. */
export const TOKEN_TABLE = LLAMA_TABLE_INPUT;

/**
 * The largest fp32 table kept as a graph initializer: onnxruntime refuses a model over 2 GB ("Model data size exceeds
 * maximum supported size"), so a larger token table or head (Llama-3.1-8B's and Qwen2-7B's are 2.1–2.2 GB) is fed as
 * a worker tensor instead. Below it tables stay initializers (one fewer input per call).
 */
const MAX_TABLE_INITIALIZER_BYTES = 1024 ** 3;

/** Phi-3's longrope multiplies cos and sin by `cosSinScale`; 1 for every other position scheme. */
function longropeCosSinScale(d: ModelDescription): number {
  return d.positions.kind === 'rope' && d.positions.scaling?.kind === 'longrope' ? d.positions.scaling.cosSinScale : 1;
}

/** The graphs of `model`; a description whose kinds none of them computes is an error naming them. */
export function ortGraphs(model: ModelDescription, maxTableInitializerBytes = MAX_TABLE_INITIALIZER_BYTES): OrtGraphs {
  // Checked here so a description these graphs cannot compute fails at init, before any weights load.
  const { H } = layerDims(model);
  const learned = model.positions.kind === 'learned';
  // Learned-position models (OPT) keep the token table an initializer of both the embedding and the head sessions,
  // the layout their speed figures were measured with; the rotary families share one copy when tied or too large.
  const tiedTable = model.embedding.tiedHead && !learned;
  const sharedTable = tiedTable || (!learned && 4 * model.vocabSize * H > maxTableInitializerBytes);
  return {
    sharedTable,
    tiedTable,
    embedding: (w) => llamaEmbeddingGraph(model, sharedTable ? undefined : w.tokens, learned ? { positions: positionTable(w), projectIn: w.projectIn } : undefined),
    embedFeeds: (ids, positions, dims) => ({
      ids: { type: 'int64', data: ids, dims },
      ...(learned ? { [POSITIONS_INPUT]: { type: 'int64', data: positions, dims } } : {}),
    }),
    layerStages: (w, index) => llamaLayerStageGraphs(model, w, index),
    // A mixture's dense layers have other tensors than its sparse ones (`layerTensorsOf`): a session of their own.
    streamedLayerKey: (index) => (model.moe && !isSparseLayer(model, index) ? 'streamed.dense' : 'streamed'),
    streamedLayer: (index) => llamaStreamedLayerGraph(model, index),
    layerInput: (key) => layerTensorName(key),
    head: (w) => (sharedTable ? llamaStreamedHeadGraph(model) : llamaHeadGraph(model, { finalNorm: w.finalLnW, finalNormB: w.finalLnB, projectOut: w.projectOut, head: w.lmHead })),
    streamedHead: () => llamaStreamedHeadGraph(model),
    headInputs: () => llamaHeadInputs(model),
    // Per step: `dynamic` RoPE scaling depends on the longest sequence the step sees, longrope on its key count.
    rope: model.positions.kind === 'rope' ? (positions, keys) => ropeCosSin(positions, stepInvFreq(model, positions, keys), longropeCosSinScale(model)) : undefined,
    window:
      model.attention.slidingWindow !== undefined && model.attention.slidingWindowLayers === 'even'
        ? { size: model.attention.slidingWindow, layer: (index) => layerHasWindow(model, index) }
        : undefined,
  };
}
