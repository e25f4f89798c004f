/**
 * onnxruntime graphs of the rotary families (Llama 2/3, Mistral, Qwen2, Gemma 2, Phi-3, OLMo 2): the embedding (with
 * Gemma's scale), a resident layer's two stages around the worker's KV cache, one streamed layer graph with the
 * weights as inputs, and the head (with Gemma 2's soft-cap). The layer itself is `ort-decoder-layer.ts`'s, chosen by
 * kind; cos/sin and the layer's mask are inputs the host computes (`ropeCosSin`, the engine's mask and, for Gemma 2's
 * even layers, the windowed one). Plain ai.onnx ops (opset 17) only.
 *
 * Shapes: B batch rows, S new tokens per row, P cached tokens, T = P + S keys, N = B·S, H hidden, nh/nkv query/kv heads,
 * hd head_dim, Q = nh·hd, KV = nkv·hd, I intermediate, V vocab. Weights are in the description's `[in, out]` layout
 * (`layerTensors[].shape`); the head is `[V, H]` as checkpoints store it.
 */
import type { RotaryLayerTensorKey } from '@flexhelm/engine';
import { layerTensorsOf, type ModelDescription } from '@flexhelm/contract';
import { encodeModel, GraphBuilder, OnnxType, type OnnxValueInfo } from './onnx-writer.js';
import { OPSET } from './opt-graphs.js';
import { addAttention, addDecoderLayer, addEmbedding, addHead, addOutputAndMlp, addQkv, addShapeBS, type DecoderLayerIo, type LayerNames, layerDims, QKV_STAGE_KEYS } from './ort-decoder-layer.js';

/**
 * One decoder layer's tensors by description key, `[in, out]` layout; biases and norms only where the description has
 * them; a sparse layer's router and experts by their `MoeLayerTensorKey`.
 */
export type LlamaLayerTensors = Partial<Record<string, Float32Array>>;

/** The final norm and the output projection `[V, H]` (the token embedding itself when the head is tied). */
export interface LlamaHeadTensors {
  finalNorm: Float32Array;
  head: Float32Array;
}

/** Graph names of a layer's tensors: initializers of the resident graphs, inputs of the streamed one. */
export const LLAMA_TENSOR_NAME: Record<RotaryLayerTensorKey, string> = {
  inNormW: 'in_norm_w', qW: 'q_w', qB: 'q_b', kW: 'k_w', kB: 'k_b', vW: 'v_w', vB: 'v_b', oW: 'o_w', oB: 'o_b',
  qNormW: 'q_norm_w', kNormW: 'k_norm_w', attnOutNormW: 'attn_out_norm_w', postNormW: 'post_norm_w', mlpOutNormW: 'mlp_out_norm_w',
  gateW: 'gate_w', gateB: 'gate_b', upW: 'up_w', upB: 'up_b', downW: 'down_w', downB: 'down_b',
};

/**
 * Graph name of layer tensor `key`: `LLAMA_TENSOR_NAME`'s, or a mixture of experts' key in snake case
 * (`expert.3.gateW` → `expert_3_gate_w`, `sharedExpertGateW` → `shared_expert_gate_w`).
 */
export function layerTensorName(key: string): string {
  const known = LLAMA_TENSOR_NAME[key as RotaryLayerTensorKey];
  if (known) return known;
  if (!/^(routerW|expert\.\d+\.(gate|up|down)W|shared(Gate|Up|Down|ExpertGate)W)$/.test(key)) throw new Error(`the rotary layer graphs have no tensor ${key}`);
  return key.replace(/\./g, '_').replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** Graph input names of `llamaStreamedHeadGraph`. */
export const LLAMA_HEAD_INPUT = { finalNorm: 'final_norm_w', head: 'lm_head' } as const;

/** Tensor names of `llamaLayerGraph` and `llamaStreamedLayerGraph` (`addDecoderLayer`'s io). */
export const LLAMA_LAYER_IO: Required<DecoderLayerIo> = {
  x: 'x', mask: 'mask', cos: 'cos', sin: 'sin', pastK: 'past_k', pastV: 'past_v', y: 'y', presentK: 'present_k', presentV: 'present_v', newK: 'new_k', newV: 'new_v',
};

/** The description's sizes, after checking it is a model these graphs compute (`layerDims`). */
const dims = layerDims;

/**
 * Layer `index`'s tensors (`layerTensorsOf`; those of `keep`, default all) as initializers, each checked against the
 * description's shape.
 */
function residentLayer(g: GraphBuilder, d: ModelDescription, index: number, w: LlamaLayerTensors, keep: (key: RotaryLayerTensorKey) => boolean = () => true): LayerNames {
  const names: LayerNames = {};
  for (const spec of layerTensorsOf(d, index)) {
    const key = spec.key as RotaryLayerTensorKey;
    if (!keep(key)) continue;
    const data = w[key];
    const want = spec.shape.reduce((a, b) => a * b, 1);
    if (!data) throw new Error(`${d.name} layer weights: ${key} (${spec.checkpointSuffix}) is missing`);
    if (data.length !== want) throw new Error(`${d.name} layer weights: ${key} holds ${data.length} values, its shape [${spec.shape.join(', ')}] needs ${want}`);
    names[key] = g.floatTensor(layerTensorName(key), data, spec.shape);
  }
  return names;
}

/** Layer `index`'s tensors as graph inputs (streamed): their names and value infos. */
function streamedLayer(d: ModelDescription, index: number): { names: LayerNames; inputs: OnnxValueInfo[] } {
  const names: LayerNames = {};
  const inputs: OnnxValueInfo[] = [];
  for (const spec of layerTensorsOf(d, index)) {
    const key = spec.key as RotaryLayerTensorKey;
    names[key] = layerTensorName(key);
    inputs.push({ name: layerTensorName(key), type: OnnxType.FLOAT, dims: spec.shape });
  }
  return { names, inputs };
}

const float = (name: string, dimList: (number | string)[]): OnnxValueInfo => ({ name, type: OnnxType.FLOAT, dims: dimList });

/** Inputs and outputs of a layer with a past (`LLAMA_LAYER_IO`), without its weights. */
function layerIo(d: ModelDescription): { inputs: OnnxValueInfo[]; outputs: OnnxValueInfo[] } {
  const { H, nkv, hd } = dims(d);
  return {
    inputs: [float('x', ['B', 'S', H]), float('mask', ['B', 1, 'S', 'T']), float('past_k', ['B', nkv, 'P', hd]), float('past_v', ['B', nkv, 'P', hd]), float('cos', ['N', hd]), float('sin', ['N', hd])],
    outputs: [
      float('y', ['B', 'S', H]),
      float('present_k', ['B', nkv, 'T', hd]),
      float('present_v', ['B', nkv, 'T', hd]),
      float('new_k', ['B', nkv, 'S', hd]),
      float('new_v', ['B', nkv, 'S', hd]),
    ],
  };
}

/** Graph input name of the token table when `llamaEmbeddingGraph` is built without one (a table shared with the head). */
export const LLAMA_TABLE_INPUT = 'embed_tokens';

/**
 * Embedding: ids int64 `[B, S]` → hidden `[B, S, H]` = embed_tokens[ids] (no position table), times the description's
 * `embedding.scale` when it has one (Gemma). Without
 * `table` the table `[V, H]` is an input (`LLAMA_TABLE_INPUT`), so a tied head can read the same tensor.
 */
export function llamaEmbeddingGraph(d: ModelDescription, table?: Float32Array): Uint8Array {
  const { H, V } = dims(d);
  if (table && table.length !== V * H) throw new Error(`Llama embedding: the table holds ${table.length} values, [${V}, ${H}] needs ${V * H}`);
  const g = new GraphBuilder();
  addEmbedding(g, d, table ? g.floatTensor(LLAMA_TABLE_INPUT, table, [V, H]) : LLAMA_TABLE_INPUT, 'ids', 'hidden');
  return encodeModel({
    graphName: `${d.family}_embed`,
    nodes: g.nodes,
    initializers: g.initializers,
    inputs: [{ name: 'ids', type: OnnxType.INT64, dims: ['B', 'S'] }, ...(table ? [] : [float(LLAMA_TABLE_INPUT, [V, H])])],
    outputs: [float('hidden', ['B', 'S', H])],
    opset: OPSET,
  });
}

/**
 * A resident layer (weights as initializers) as two stages around a KV cache kept outside onnxruntime (the worker's):
 * - `qkv`: x `[B, S, H]`, cos/sin `[N, hd]` → q `[B, nh, S, hd]`, k/v `[B, nkv, S, hd]` (the step's keys/values, to store);
 * - `rest`: x, q, cache_k/cache_v `[B, nkv, T, hd]` (this step's keys already stored; slots the mask hides may be
 *   unused) and mask `[B, 1, S, T]` → y `[B, S, H]`.
 */
export function llamaLayerStageGraphs(d: ModelDescription, w: LlamaLayerTensors, index = 0): { qkv: Uint8Array; rest: Uint8Array } {
  const { H, nh, nkv, hd } = dims(d);
  const x = float('x', ['B', 'S', H]);
  const q = float('q', ['B', nh, 'S', hd]);

  // Each stage registers only the tensors its nodes read.
  const a = new GraphBuilder();
  const aw = residentLayer(a, d, index, w, (key) => QKV_STAGE_KEYS.includes(key));
  addQkv(a, d, aw, a.op('Reshape', ['x', a.constInt64('flat_hidden', [-1, H])]), addShapeBS(a, 'x'), 'cos', 'sin', { q: 'q', k: 'k', v: 'v' });
  const qkv = encodeModel({
    graphName: `${d.family}_layer_qkv`,
    nodes: a.nodes,
    initializers: a.initializers,
    inputs: [x, float('cos', ['N', hd]), float('sin', ['N', hd])],
    outputs: [q, float('k', ['B', nkv, 'S', hd]), float('v', ['B', nkv, 'S', hd])],
    opset: OPSET,
  });

  const b = new GraphBuilder();
  const bw = residentLayer(b, d, index, w, (key) => !QKV_STAGE_KEYS.includes(key));
  const x2 = b.op('Reshape', ['x', b.constInt64('flat_hidden', [-1, H])]);
  const y = addOutputAndMlp(b, d, bw, x2, addAttention(b, d, 'q', 'cache_k', 'cache_v', 'mask'));
  b.op('Reshape', [y, b.op('Shape', ['x'])], undefined, 'y');
  const rest = encodeModel({
    graphName: `${d.family}_layer_rest`,
    nodes: b.nodes,
    initializers: b.initializers,
    inputs: [x, q, float('cache_k', ['B', nkv, 'T', hd]), float('cache_v', ['B', nkv, 'T', hd]), float('mask', ['B', 1, 'S', 'T'])],
    outputs: [float('y', ['B', 'S', H])],
    opset: OPSET,
  });
  return { qkv, rest };
}

/** Resident layer `index` as one graph with its past in and present out (`LLAMA_LAYER_IO`), weights as initializers. */
export function llamaLayerGraph(d: ModelDescription, w: LlamaLayerTensors, index = 0): Uint8Array {
  dims(d);
  const g = new GraphBuilder();
  addDecoderLayer(g, d, residentLayer(g, d, index, w), LLAMA_LAYER_IO);
  return encodeModel({ graphName: `${d.family}_layer`, nodes: g.nodes, initializers: g.initializers, ...layerIo(d), opset: OPSET });
}

/**
 * The layer of `llamaLayerGraph` with every weight a graph input (`layerTensorName`, `[in, out]` layout), so one
 * session serves every layer whose weights are streamed in (offloading) — every layer with the tensors of layer
 * `index`: a mixture of experts with dense layers needs one graph for its sparse layers and one for its dense ones.
 */
export function llamaStreamedLayerGraph(d: ModelDescription, index = 0): Uint8Array {
  dims(d); // a description of another family is refused by kind before its tensors are named
  const g = new GraphBuilder();
  const { names, inputs } = streamedLayer(d, index);
  addDecoderLayer(g, d, names, LLAMA_LAYER_IO);
  const io = layerIo(d);
  return encodeModel({ graphName: `${d.family}_layer_streamed`, nodes: g.nodes, initializers: g.initializers, inputs: [...io.inputs, ...inputs], outputs: io.outputs, opset: OPSET });
}

function headModel(d: ModelDescription, g: GraphBuilder, graphName: string, weightInputs: OnnxValueInfo[]): Uint8Array {
  const { H, V } = dims(d);
  return encodeModel({ graphName, nodes: g.nodes, initializers: g.initializers, inputs: [float('x', ['N', H]), ...weightInputs], outputs: [float('logits', ['N', V])], opset: OPSET });
}

/** Head: x `[N, H]` → logits `[N, V]`, weights as initializers. */
export function llamaHeadGraph(d: ModelDescription, w: LlamaHeadTensors): Uint8Array {
  const { H, V } = dims(d);
  if (w.finalNorm.length !== H) throw new Error(`Llama head: the final norm holds ${w.finalNorm.length} values, hidden size is ${H}`);
  if (w.head.length !== V * H) throw new Error(`Llama head: the output projection holds ${w.head.length} values, [${V}, ${H}] needs ${V * H}`);
  const g = new GraphBuilder();
  addHead(g, d, 'x', g.floatTensor('final_norm_w', w.finalNorm, [H]), g.floatTensor('lm_head', w.head, [V, H]), 'logits');
  return headModel(d, g, `${d.family}_head`, []);
}

/** The head of `llamaHeadGraph` with its weights as inputs (`LLAMA_HEAD_INPUT`: final norm `[H]`, head `[V, H]`). */
export function llamaStreamedHeadGraph(d: ModelDescription): Uint8Array {
  const { H, V } = dims(d);
  const g = new GraphBuilder();
  addHead(g, d, 'x', LLAMA_HEAD_INPUT.finalNorm, LLAMA_HEAD_INPUT.head, 'logits');
  return headModel(d, g, `${d.family}_head_streamed`, [float(LLAMA_HEAD_INPUT.finalNorm, [H]), float(LLAMA_HEAD_INPUT.head, [V, H])]);
}
