/**
 * onnxruntime graphs of the Llama family (Llama 2/3, Mistral, Qwen2), computing what llama/check.md describes and
 * `LlamaReference` computes: RMSNorm, q/k/v (optional biases), rotate-half RoPE with cos/sin given as inputs (computed
 * on the host by `ropeCosSin`, so every `rope_scaling` type is the host's business), grouped-query attention over a
 * cache of `kvHeads` heads, SwiGLU, final RMSNorm and head. Plain ai.onnx ops (opset 17) only.
 *
 * Shapes: B batch rows, S new tokens per row, P cached tokens, T = P + S keys, N = B·S, H hidden, nh/nkv query/kv heads,
 * hd head_dim, Q = nh·hd, KV = nkv·hd, I intermediate, V vocab. Weights are in the description's `[in, out]` layout
 * (`layerTensors[].shape`); the head is `[V, H]` as checkpoints store it.
 */
import type { LlamaLayerTensorKey } from './llama-description.js';
import { requireKinds, type ModelDescription, type ModelKind } from './model-description.js';
import { encodeModel, GraphBuilder, OnnxType, type OnnxValueInfo } from './onnx-writer.js';
import { OPSET, type LayerIo } from './opt-graphs.js';

/** One decoder layer's tensors by description key, `[in, out]` layout; biases only where the description has them. */
export type LlamaLayerTensors = Partial<Record<LlamaLayerTensorKey, Float32Array>>;

/** The final norm and the output projection `[V, H]` (the token embedding itself when the head is tied). */
export interface LlamaHeadTensors {
  finalNorm: Float32Array;
  head: Float32Array;
}

/** Graph names of a layer's tensors: initializers of the resident graphs, inputs of the streamed one. */
export const LLAMA_TENSOR_NAME: Record<LlamaLayerTensorKey, string> = {
  inNormW: 'in_norm_w', qW: 'q_w', qB: 'q_b', kW: 'k_w', kB: 'k_b', vW: 'v_w', vB: 'v_b', oW: 'o_w', oB: 'o_b',
  postNormW: 'post_norm_w', gateW: 'gate_w', gateB: 'gate_b', upW: 'up_w', upB: 'up_b', downW: 'down_w', downB: 'down_b',
};

/** Graph input names of `llamaStreamedHeadGraph`. */
export const LLAMA_HEAD_INPUT = { finalNorm: 'final_norm_w', head: 'lm_head' } as const;

/**
 * Tensor names of a layer with its past passed in and the present passed out (`addLlamaLayer`): OPT's (`LayerIo`, with
 * nkv heads in the past, present and new keys/values) and the step's RoPE tables cos/sin `[N, hd]`.
 */
export interface LlamaLayerIo extends LayerIo {
  cos: string;
  sin: string;
}

export const LLAMA_LAYER_IO: LlamaLayerIo = {
  x: 'x', mask: 'mask', cos: 'cos', sin: 'sin', pastK: 'past_k', pastV: 'past_v', y: 'y', presentK: 'present_k', presentV: 'present_v', newK: 'new_k', newV: 'new_v',
};

/** Key → graph tensor name of each tensor a layer uses. */
type LayerNames = Partial<Record<LlamaLayerTensorKey, string>>;

interface Dims {
  H: number;
  nh: number;
  nkv: number;
  hd: number;
  I: number;
  V: number;
}

/**
 * The kinds these graphs compute. Longrope is not among them: its cos/sin scale and its per-call switch between short
 * and long factors are not wired into the cos/sin inputs yet.
 */
export const LLAMA_GRAPH_KINDS: readonly ModelKind[] = [
  'norm:rmsnorm', 'placement:pre', 'rope:default', 'rope:linear', 'rope:dynamic', 'rope:llama3', 'attention:window', 'mlp:swiglu',
];

/** The description's sizes, after checking it is a family these graphs compute. */
function dims(d: ModelDescription): Dims {
  requireKinds(d, 'onnxruntime', LLAMA_GRAPH_KINDS, 'the reference backend (--backend reference) computes it');
  const problems: string[] = [];
  if (!d.norm.final) problems.push('no final norm (needs pre-norm RMSNorm with a final norm)');
  if (d.embedding.dim !== d.hiddenSize) problems.push(`embedding width ${d.embedding.dim} ≠ hidden ${d.hiddenSize}`);
  const { heads, kvHeads, headDim } = d.attention;
  if (heads % kvHeads !== 0) problems.push(`${heads} query heads are not a multiple of ${kvHeads} kv heads`);
  if (headDim % 2 !== 0) problems.push(`head_dim ${headDim} is odd`);
  if (problems.length) throw new Error(`Llama-family graphs cannot compute ${d.family} model ${d.name}: ${problems.join('; ')}`);
  return { H: d.hiddenSize, nh: heads, nkv: kvHeads, hd: headDim, I: d.mlp.intermediateSize, V: d.vocabSize };
}

/** The layer's tensors (those of `only`, default all) as initializers, each checked against the description's shape. */
function residentLayer(g: GraphBuilder, d: ModelDescription, w: LlamaLayerTensors, only?: LlamaLayerTensorKey[]): LayerNames {
  const names: LayerNames = {};
  for (const spec of d.layerTensors) {
    const key = spec.key as LlamaLayerTensorKey;
    if (only && !only.includes(key)) continue;
    const data = w[key];
    const want = spec.shape.reduce((a, b) => a * b, 1);
    if (!data) throw new Error(`Llama layer weights: ${key} (${spec.checkpointSuffix}) is missing`);
    if (data.length !== want) throw new Error(`Llama layer weights: ${key} holds ${data.length} values, its shape [${spec.shape.join(', ')}] needs ${want}`);
    names[key] = g.floatTensor(LLAMA_TENSOR_NAME[key], data, spec.shape);
  }
  return names;
}

/** The layer's tensors as graph inputs (streamed): their names and value infos. */
function streamedLayer(d: ModelDescription): { names: LayerNames; inputs: OnnxValueInfo[] } {
  const names: LayerNames = {};
  const inputs: OnnxValueInfo[] = [];
  for (const spec of d.layerTensors) {
    const key = spec.key as LlamaLayerTensorKey;
    names[key] = LLAMA_TENSOR_NAME[key];
    inputs.push({ name: LLAMA_TENSOR_NAME[key], type: OnnxType.FLOAT, dims: spec.shape });
  }
  return { names, inputs };
}

/** RMSNorm over the last axis, float32: w · x / sqrt(mean(x²) + eps) (the pattern onnxruntime fuses). */
function addRmsNorm(g: GraphBuilder, d: ModelDescription, x: string, w: string): string {
  const meanSq = g.op('ReduceMean', [g.op('Pow', [x, g.constFloat('two_f', [2], [])])], { axes: [-1], keepdims: 1 });
  const normed = g.op('Div', [x, g.op('Sqrt', [g.op('Add', [meanSq, g.constFloat('rms_eps', [d.norm.eps], [])])])]);
  return g.op('Mul', [normed, w]);
}

/** x `[N, in]` · w `[in, out]` (+ b `[out]`). */
function addLinear(g: GraphBuilder, x: string, w: string, b?: string): string {
  const y = g.op('MatMul', [x, w]);
  return b ? g.op('Add', [y, b]) : y;
}

/**
 * Rotate-half RoPE: x `[N, heads·hd]`, cos/sin `[N, hd]` → `[N, heads, hd]` = x·cos + cat(−x₂, x₁)·sin, with x₁/x₂
 * the two halves of each head (dimension i pairs with i + hd/2).
 */
function addRope(g: GraphBuilder, x: string, heads: number, hd: number, cos: string, sin: string, tag: string): string {
  const xh = g.op('Reshape', [x, g.constInt64(`${tag}_heads`, [-1, heads, hd])]);
  const [x1, x2] = g.multi('Split', [xh, g.constInt64('rope_halves', [hd / 2, hd / 2])], [`${tag}_x1`, `${tag}_x2`], { axis: -1 });
  const rotated = g.op('Concat', [g.op('Neg', [x2!]), x1!], { axis: -1 });
  // cos/sin [N, hd] → [N, 1, hd]: the same angles for every head of a token.
  const axis1 = g.constInt64('axis_1', [1]);
  return g.op('Add', [g.op('Mul', [xh, g.op('Unsqueeze', [cos, axis1])]), g.op('Mul', [rotated, g.op('Unsqueeze', [sin, axis1])])]);
}

/** `[N, heads, hd]` (rows b·S + s) → `[B, heads, S, hd]`; `shapeBS` is `[B, S]`. */
function addToHeads(g: GraphBuilder, x: string, shapeBS: string, heads: number, hd: number, out?: string): string {
  const shape = g.op('Concat', [shapeBS, g.constInt64(`heads_${heads}_tail`, [heads, hd])], { axis: 0 });
  return g.op('Transpose', [g.op('Reshape', [x, shape])], { perm: [0, 2, 1, 3] }, out);
}

/** `[B, S]` of a `[B, S, H]` tensor. */
function addShapeBS(g: GraphBuilder, x: string): string {
  return g.op('Slice', [g.op('Shape', [x]), g.constInt64('zero_1d', [0]), g.constInt64('two_1d', [2])]);
}

/**
 * RMSNorm_in, q/k/v projections and RoPE. x2 `[N, H]`, cos/sin `[N, hd]` → q `[B, nh, S, hd]`, k and v
 * `[B, nkv, S, hd]` (k rotated, as the cache stores it; v not).
 */
function addQkv(g: GraphBuilder, d: ModelDescription, w: LayerNames, x2: string, shapeBS: string, cos: string, sin: string, out: { q?: string; k?: string; v?: string } = {}): { q: string; k: string; v: string } {
  const { nh, nkv, hd } = dims(d);
  const h = addRmsNorm(g, d, x2, w.inNormW!);
  const q = addRope(g, addLinear(g, h, w.qW!, w.qB), nh, hd, cos, sin, 'q_rope');
  const k = addRope(g, addLinear(g, h, w.kW!, w.kB), nkv, hd, cos, sin, 'k_rope');
  const v = g.op('Reshape', [addLinear(g, h, w.vW!, w.vB), g.constInt64('v_heads', [-1, nkv, hd])]);
  return { q: addToHeads(g, q, shapeBS, nh, hd, out.q), k: addToHeads(g, k, shapeBS, nkv, hd, out.k), v: addToHeads(g, v, shapeBS, nkv, hd, out.v) };
}

/**
 * Grouped-query attention: q `[B, nh, S, hd]`, keys/values `[B, nkv, T, hd]`, mask `[B, 1, S, T]` → context `[N, Q]`.
 * Query head h reads kv head h // (nh/nkv) (transformers' repeat_kv): the group of nh/nkv consecutive query heads is
 * laid out as `[B, nkv, group·S, hd]`, so each kv head is multiplied once with all the query rows that share it and
 * the cache is never expanded. Scores q·kᵀ/√hd, + mask, softmax in float32, · v.
 */
function addAttention(g: GraphBuilder, d: ModelDescription, q: string, keys: string, values: string, mask: string): string {
  const { nh, nkv, hd } = dims(d);
  const group = nh / nkv;
  const qShape = g.op('Shape', [q]);
  const qGrouped = g.op('Reshape', [g.op('Mul', [q, g.constFloat('attn_scale', [hd ** -0.5], [])]), g.constInt64('q_grouped', [0, nkv, -1, hd])]);
  // [B, nkv, group·S, T] (onnxruntime fuses the Transpose into the MatMul)
  const scores = g.op('MatMul', [qGrouped, g.op('Transpose', [keys], { perm: [0, 1, 3, 2] })]);
  // The mask is per query token, the same for each head of a group: scores as [B, nkv, group, S, T] + [B, 1, 1, S, T].
  const seq = g.op('Slice', [qShape, g.constInt64('two_1d', [2]), g.constInt64('three_1d', [3])]);
  const scores5 = g.op('Reshape', [scores, g.op('Concat', [g.constInt64('b_kv_group', [0, nkv, group]), seq, g.constInt64('minus_one_1d', [-1])], { axis: 0 })]);
  const biased = g.op('Add', [scores5, g.op('Unsqueeze', [mask, g.constInt64('axis_2', [2])])]);
  const probs = g.op('Reshape', [g.op('Softmax', [biased], { axis: -1 }), g.op('Shape', [scores])]);
  // [B, nkv, group·S, hd] → [B, nh, S, hd] → [B, S, nh, hd] → [N, Q]
  const ctx = g.op('Transpose', [g.op('Reshape', [g.op('MatMul', [probs, values]), qShape])], { perm: [0, 2, 1, 3] });
  return g.op('Reshape', [ctx, g.constInt64('ctx_flat', [-1, nh * hd])]);
}

/** o_proj + residual, then RMSNorm_post and SwiGLU down(silu(gate(x)) · up(x)) + residual. x2, ctx `[N, ·]` → `[N, H]`. */
function addOutputAndMlp(g: GraphBuilder, d: ModelDescription, w: LayerNames, x2: string, ctx: string): string {
  const r = g.op('Add', [x2, addLinear(g, ctx, w.oW!, w.oB)]);
  const h = addRmsNorm(g, d, r, w.postNormW!);
  const gate = addLinear(g, h, w.gateW!, w.gateB);
  const act = g.op('Mul', [g.op('Mul', [gate, g.op('Sigmoid', [gate])]), addLinear(g, h, w.upW!, w.upB)]);
  return g.op('Add', [r, addLinear(g, act, w.downW!, w.downB)]);
}

/**
 * One decoder layer with its past passed in (`io`): x `[B, S, H]` → y, present = past + this step's keys/values.
 * `w` names the layer's tensors (initializers or inputs already in `g`).
 */
export function addLlamaLayer(g: GraphBuilder, d: ModelDescription, w: LayerNames, io: LlamaLayerIo): void {
  const { H } = dims(d);
  const x2 = g.op('Reshape', [io.x, g.constInt64('flat_hidden', [-1, H])]);
  const { q, k, v } = addQkv(g, d, w, x2, addShapeBS(g, io.x), io.cos, io.sin, { k: io.newK, v: io.newV });
  g.op('Concat', [io.pastK, k], { axis: 2 }, io.presentK);
  g.op('Concat', [io.pastV, v], { axis: 2 }, io.presentV);
  const y = addOutputAndMlp(g, d, w, x2, addAttention(g, d, q, io.presentK, io.presentV, io.mask));
  g.op('Reshape', [y, g.op('Shape', [io.x])], undefined, io.y);
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
 * Embedding: ids int64 `[B, S]` → hidden `[B, S, H]` = embed_tokens[ids] (no position table, no scaling). Without
 * `table` the table `[V, H]` is an input (`LLAMA_TABLE_INPUT`), so a tied head can read the same tensor.
 */
export function llamaEmbeddingGraph(d: ModelDescription, table?: Float32Array): Uint8Array {
  const { H, V } = dims(d);
  if (table && table.length !== V * H) throw new Error(`Llama embedding: the table holds ${table.length} values, [${V}, ${H}] needs ${V * H}`);
  const g = new GraphBuilder();
  g.op('Gather', [table ? g.floatTensor(LLAMA_TABLE_INPUT, table, [V, H]) : LLAMA_TABLE_INPUT, 'ids'], { axis: 0 }, 'hidden');
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
export function llamaLayerStageGraphs(d: ModelDescription, w: LlamaLayerTensors): { qkv: Uint8Array; rest: Uint8Array } {
  const { H, nh, nkv, hd } = dims(d);
  const x = float('x', ['B', 'S', H]);
  const q = float('q', ['B', nh, 'S', hd]);

  // Each stage registers only the tensors its nodes read.
  const a = new GraphBuilder();
  const aw = residentLayer(a, d, w, ['inNormW', 'qW', 'qB', 'kW', 'kB', 'vW', 'vB']);
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
  const bw = residentLayer(b, d, w, ['oW', 'oB', 'postNormW', 'gateW', 'gateB', 'upW', 'upB', 'downW', 'downB']);
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

/** A resident layer as one graph with its past in and present out (`LLAMA_LAYER_IO`), weights as initializers. */
export function llamaLayerGraph(d: ModelDescription, w: LlamaLayerTensors): Uint8Array {
  const g = new GraphBuilder();
  addLlamaLayer(g, d, residentLayer(g, d, w), LLAMA_LAYER_IO);
  return encodeModel({ graphName: `${d.family}_layer`, nodes: g.nodes, initializers: g.initializers, ...layerIo(d), opset: OPSET });
}

/**
 * The layer of `llamaLayerGraph` with every weight a graph input (`LLAMA_TENSOR_NAME`, `[in, out]` layout), so one
 * session serves every layer whose weights are streamed in (offloading).
 */
export function llamaStreamedLayerGraph(d: ModelDescription): Uint8Array {
  const g = new GraphBuilder();
  const { names, inputs } = streamedLayer(d);
  addLlamaLayer(g, d, names, LLAMA_LAYER_IO);
  const io = layerIo(d);
  return encodeModel({ graphName: `${d.family}_layer_streamed`, nodes: g.nodes, initializers: g.initializers, inputs: [...io.inputs, ...inputs], outputs: io.outputs, opset: OPSET });
}

/** Final RMSNorm and logits = norm(x)·headᵀ (Gemm with the `[V, H]` head as stored). */
function addHead(g: GraphBuilder, d: ModelDescription, norm: string, head: string): void {
  g.op('Gemm', [addRmsNorm(g, d, 'x', norm), head], { transB: 1 }, 'logits');
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
  addHead(g, d, g.floatTensor('final_norm_w', w.finalNorm, [H]), g.floatTensor('lm_head', w.head, [V, H]));
  return headModel(d, g, `${d.family}_head`, []);
}

/** The head of `llamaHeadGraph` with its weights as inputs (`LLAMA_HEAD_INPUT`: final norm `[H]`, head `[V, H]`). */
export function llamaStreamedHeadGraph(d: ModelDescription): Uint8Array {
  const { H, V } = dims(d);
  const g = new GraphBuilder();
  addHead(g, d, LLAMA_HEAD_INPUT.finalNorm, LLAMA_HEAD_INPUT.head);
  return headModel(d, g, `${d.family}_head_streamed`, [float(LLAMA_HEAD_INPUT.finalNorm, [H]), float(LLAMA_HEAD_INPUT.head, [V, H])]);
}
