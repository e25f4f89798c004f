import { isOptShaped, isSparseLayer, type LayerTensors, type ModelDescription, type TransposedLayerWeights } from '@flexhelm/contract';
import { layerHasWindow, optConfigOfDescription, stepInvFreq, type EmbeddingWeights, type HeadWeights, type LayerTensorKey } from '@flexhelm/engine';
import { LLAMA_HEAD_INPUT, LLAMA_TABLE_INPUT, layerTensorName, llamaEmbeddingGraph, llamaHeadGraph, llamaLayerStageGraphs, llamaStreamedHeadGraph, llamaStreamedLayerGraph } from './llama-graphs.js';
import { embeddingGraph, headGraph, layerStageGraphsInOut, STREAMED_HEAD_INPUT, streamedHeadGraph } from './opt-graphs.js';
import type { WireTensor } from './ort-protocol.js';
import { ropeCosSin } from './rope-cos-sin.js';
import { STREAMED_INPUT, streamedLayerGraph } from './streamed-layer-graph.js';

/**
 * The graphs `OrtBackend` builds for one model family — OPT's (opt-graphs.ts) or the rotary families' (llama-graphs.ts) —
 * behind one shape, so the backend, its worker-held cache and the streamed weights never branch on the family. Both
 * use the same session layout: an embedding, per resident layer a `qkv` and a `rest` stage around the worker's cache,
 * one streamed layer graph with the weights as inputs, and a resident or streamed head.
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

/** The graphs of `model`'s family; a family none of them computes is an error naming it. */
export function ortGraphs(model: ModelDescription, maxTableInitializerBytes = MAX_TABLE_INITIALIZER_BYTES): OrtGraphs {
  return isOptShaped(model) ? optGraphs(model) : llamaGraphs(model, maxTableInitializerBytes);
}

function optGraphs(model: ModelDescription): OrtGraphs {
  const c = optConfigOfDescription(model, 'the onnxruntime backend');
  return {
    // OPT's graphs are unchanged: the table stays an initializer of both sessions.
    sharedTable: false,
    tiedTable: false,
    embedding: (w) => embeddingGraph(c, w),
    embedFeeds: (ids, positions, dims) => ({ ids: { type: 'int64', data: ids, dims }, positions: { type: 'int64', data: positions, dims } }),
    // OPT's graph builders take the checkpoint's `[out, in]` layout.
    layerStages: (w) => layerStageGraphsInOut(c, w as unknown as TransposedLayerWeights),
    streamedLayerKey: () => 'streamed',
    streamedLayer: () => streamedLayerGraph(c),
    layerInput: (key) => STREAMED_INPUT[key as LayerTensorKey],
    head: (w) => headGraph(c, w),
    streamedHead: () => streamedHeadGraph(c),
    headInputs: () => [
      // The final LayerNorm only on pre-LN models.
      ...(c.doLayerNormBefore
        ? [
            { key: 'finalLnW' as const, input: STREAMED_HEAD_INPUT.finalLnW, dims: [c.hiddenSize] },
            { key: 'finalLnB' as const, input: STREAMED_HEAD_INPUT.finalLnB, dims: [c.hiddenSize] },
          ]
        : []),
      { key: 'lmHead' as const, input: STREAMED_HEAD_INPUT.lmHead, dims: [c.vocabSize, c.hiddenSize] },
    ],
  };
}

function llamaGraphs(model: ModelDescription, maxTableInitializerBytes: number): OrtGraphs {
  // Built once here so a description these graphs cannot compute fails at init, before any weights load.
  llamaStreamedHeadGraph(model);
  const H = model.hiddenSize;
  const tiedTable = model.embedding.tiedHead;
  const sharedTable = tiedTable || 4 * model.vocabSize * H > maxTableInitializerBytes;
  return {
    sharedTable,
    tiedTable,
    embedding: (w) => llamaEmbeddingGraph(model, sharedTable ? undefined : w.tokens),
    embedFeeds: (ids, _positions, dims) => ({ ids: { type: 'int64', data: ids, dims } }),
    layerStages: (w, index) => llamaLayerStageGraphs(model, w, index),
    // A mixture's dense layers have other tensors than its sparse ones (`layerTensorsOf`): a session of their own.
    streamedLayerKey: (index) => (model.moe && !isSparseLayer(model, index) ? 'streamed.dense' : 'streamed'),
    streamedLayer: (index) => llamaStreamedLayerGraph(model, index),
    layerInput: (key) => layerTensorName(key),
    head: (w) => {
      if (sharedTable) return llamaStreamedHeadGraph(model);
      if (!w.finalLnW) throw new Error(`${model.name}: the head needs the final norm's weight (${model.checkpointNames?.finalNorm ?? 'model.norm.weight'})`);
      return llamaHeadGraph(model, { finalNorm: w.finalLnW, head: w.lmHead });
    },
    streamedHead: () => llamaStreamedHeadGraph(model),
    headInputs: () => [
      { key: 'finalLnW', input: LLAMA_HEAD_INPUT.finalNorm, dims: [H] },
      { key: 'lmHead', input: LLAMA_HEAD_INPUT.head, dims: [model.vocabSize, H] },
    ],
    // Per step: `dynamic` RoPE scaling depends on the longest sequence the step sees, longrope on its key count.
    rope: (positions, keys) => ropeCosSin(positions, stepInvFreq(model, positions, keys), longropeCosSinScale(model)),
    window:
      model.attention.slidingWindow !== undefined && model.attention.slidingWindowLayers === 'even'
        ? { size: model.attention.slidingWindow, layer: (index) => layerHasWindow(model, index) }
        : undefined,
  };
}
