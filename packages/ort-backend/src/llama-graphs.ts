/**
 * onnxruntime graphs of every family (OPT; Llama 2/3, Mistral, Qwen2, Gemma 2, Phi-3, OLMo 2; the `llama` names are
 * historical): the embedding (OPT's learned positions and project_in, Gemma's scale), a resident layer's two stages
 * around the worker's KV cache, one streamed layer graph with the weights as inputs, and the head (OPT's project_out,
 * Gemma 2's soft-cap). The layer itself is `ort-decoder-layer.ts`'s, chosen by kind; cos/sin and the layer's mask are
 * inputs the host computes (`ropeCosSin`, the engine's mask and, for Gemma 2's even layers, the windowed one). Opset
 * 17; the fused form (`fusedLayer`, OPT) also uses com.microsoft's MultiHeadAttention.
 *
 * Shapes: B batch rows, S new tokens per row, P cached tokens, T = P + S keys, N = B·S, H hidden, nh/nkv query/kv heads,
 * hd head_dim, Q = nh·hd, KV = nkv·hd, I intermediate, V vocab. Weights are in the description's `[in, out]` layout
 * (`layerTensors[].shape`); the head is `[V, H]` as checkpoints store it.
 */
import { transposed, type LayerTensorKey as OptLayerTensorKey, type RotaryLayerTensorKey } from '@flexhelm/engine';
import { layerTensorsOf, type ModelDescription } from '@flexhelm/contract';
import { encodeModel, GraphBuilder, OnnxType, OPSET, type OnnxValueInfo } from './onnx-writer.js';
import {
  addAttention,
  addBshToHeads,
  addDecoderLayer,
  addEmbedding,
  addFusedQkv,
  addHead,
  addMultiHeadAttention,
  addOutputAndMlp,
  addQkv,
  addShapeBS,
  type DecoderLayerIo,
  fusedLayer,
  inQkvStage,
  type LayerNames,
  layerDims,
  QKV_KEYS,
} from './ort-decoder-layer.js';

/**
 * One decoder layer's tensors by description key, `[in, out]` layout; biases and norms only where the description has
 * them; a sparse layer's router and experts by their `MoeLayerTensorKey`.
 */
export type LlamaLayerTensors = Partial<Record<string, Float32Array>>;

/**
 * The final norm (absent on post-norm models; `finalNormB`: LayerNorm's bias), OPT's project_out `[H, dim]` (`[in,
 * out]`) and the output projection `[V, dim]` (the token embedding itself when the head is tied).
 */
export interface LlamaHeadTensors {
  finalNorm?: Float32Array;
  finalNormB?: Float32Array;
  projectOut?: Float32Array;
  head: Float32Array;
}

/** Graph names of a layer's tensors: initializers of the resident graphs, inputs of the streamed one. */
export const LLAMA_TENSOR_NAME: Record<RotaryLayerTensorKey | OptLayerTensorKey, string> = {
  inNormW: 'in_norm_w', qW: 'q_w', qB: 'q_b', kW: 'k_w', kB: 'k_b', vW: 'v_w', vB: 'v_b', oW: 'o_w', oB: 'o_b',
  qNormW: 'q_norm_w', kNormW: 'k_norm_w', attnOutNormW: 'attn_out_norm_w', postNormW: 'post_norm_w', mlpOutNormW: 'mlp_out_norm_w',
  gateW: 'gate_w', gateB: 'gate_b', upW: 'up_w', upB: 'up_b', downW: 'down_w', downB: 'down_b',
  ln1W: 'ln1_w', ln1B: 'ln1_b', fc1W: 'fc1_w', fc1B: 'fc1_b', fc2W: 'fc2_w', fc2B: 'fc2_b', ln2W: 'ln2_w', ln2B: 'ln2_b',
};

/**
 * Graph name of layer tensor `key`: `LLAMA_TENSOR_NAME`'s, or a mixture of experts' key in snake case
 * (`expert.3.gateW` → `expert_3_gate_w`, `sharedExpertGateW` → `shared_expert_gate_w`).
 */
export function layerTensorName(key: string): string {
  const known = LLAMA_TENSOR_NAME[key as RotaryLayerTensorKey | OptLayerTensorKey];
  if (known) return known;
  if (!/^(routerW|expert\.\d+\.(gate|up|down)W|shared(Gate|Up|Down|ExpertGate)W)$/.test(key)) throw new Error(`the rotary layer graphs have no tensor ${key}`);
  return key.replace(/\./g, '_').replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** Graph input names of `llamaStreamedHeadGraph` (`finalNormB`: LayerNorm models only). */
export const LLAMA_HEAD_INPUT = { finalNorm: 'final_norm_w', finalNormB: 'final_norm_b', head: 'lm_head' } as const;

/** Tensor names of `llamaLayerGraph` and `llamaStreamedLayerGraph` (`addDecoderLayer`'s io; cos/sin: rotary only). */
export const LLAMA_LAYER_IO: Required<DecoderLayerIo> = {
  x: 'x', mask: 'mask', cos: 'cos', sin: 'sin', pastK: 'past_k', pastV: 'past_v', y: 'y', presentK: 'present_k', presentV: 'present_v', newK: 'new_k', newV: 'new_v',
};

/** The description's sizes, after checking it is a model these graphs compute (`layerDims`). */
const dims = layerDims;

/**
 * Layer `index`'s tensors (`layerTensorsOf`; those of `keep`, default all) as initializers, each checked against the
 * description's shape.
 */
function residentLayer(g: GraphBuilder, d: ModelDescription, index: number, w: LlamaLayerTensors, keep: (key: string) => boolean = () => true): LayerNames {
  const names: LayerNames = {};
  const specs = layerTensorsOf(d, index);
  const checked = (key: string): Float32Array => {
    const spec = specs.find((s) => s.key === key);
    const data = w[key];
    if (!spec) throw new Error(`${d.name} layer ${index} has no tensor ${key}`);
    const want = spec.shape.reduce((a, b) => a * b, 1);
    if (!data) throw new Error(`${d.name} layer weights: ${key} (${spec.checkpointSuffix}) is missing`);
    if (data.length !== want) throw new Error(`${d.name} layer weights: ${key} holds ${data.length} values, its shape [${spec.shape.join(', ')}] needs ${want}`);
    return data;
  };
  const fused = fusedLayer(d);
  for (const spec of specs) {
    const key = spec.key as RotaryLayerTensorKey;
    if (!keep(key) || (fused && (QKV_KEYS as readonly string[]).includes(key))) continue;
    names[key] = g.floatTensor(layerTensorName(key), checked(key), spec.shape);
  }
  if (fused && keep('qW')) {
    // The fused form's one q/k/v Gemm: row i of the packed [H, 3Q] matrix is row i of q, k and v side by side.
    const { H, nh, hd } = layerDims(d);
    const Q = nh * hd;
    const [qW, kW, vW] = [checked('qW'), checked('kW'), checked('vW')];
    const packed = new Float32Array(H * 3 * Q);
    for (let i = 0; i < H; i++) {
      packed.set(qW.subarray(i * Q, (i + 1) * Q), i * 3 * Q);
      packed.set(kW.subarray(i * Q, (i + 1) * Q), i * 3 * Q + Q);
      packed.set(vW.subarray(i * Q, (i + 1) * Q), i * 3 * Q + 2 * Q);
    }
    names.qkvW = g.floatTensor('qkv_w', packed, [H, 3 * Q]);
    if (d.attention.bias) {
      const bias = new Float32Array(3 * Q);
      bias.set(checked('qB'), 0);
      bias.set(checked('kB'), Q);
      bias.set(checked('vB'), 2 * Q);
      names.qkvB = g.floatTensor('qkv_b', bias, [3 * Q]);
    }
  }
  return names;
}

/**
 * Layer `index`'s tensors as graph inputs (streamed): their names and value infos. The fused form concatenates q/k/v
 * in the graph into the packed matrix the resident graphs hold, so both compute the same Gemm.
 */
function streamedLayer(g: GraphBuilder, d: ModelDescription, index: number): { names: LayerNames; inputs: OnnxValueInfo[] } {
  const names: LayerNames = {};
  const inputs: OnnxValueInfo[] = [];
  for (const spec of layerTensorsOf(d, index)) {
    const key = spec.key as RotaryLayerTensorKey;
    names[key] = layerTensorName(key);
    inputs.push({ name: layerTensorName(key), type: OnnxType.FLOAT, dims: spec.shape });
  }
  if (fusedLayer(d)) {
    names.qkvW = g.op('Concat', [names.qW!, names.kW!, names.vW!], { axis: 1 }, 'qkv_w');
    if (d.attention.bias) names.qkvB = g.op('Concat', [names.qB!, names.kB!, names.vB!], { axis: 0 }, 'qkv_b');
  }
  return { names, inputs };
}

const float = (name: string, dimList: (number | string)[]): OnnxValueInfo => ({ name, type: OnnxType.FLOAT, dims: dimList });

/** Inputs and outputs of a layer with a past (`LLAMA_LAYER_IO`), without its weights. */
function layerIo(d: ModelDescription): { inputs: OnnxValueInfo[]; outputs: OnnxValueInfo[] } {
  const { H, nkv, hd } = dims(d);
  const rope = d.positions.kind === 'rope' ? [float('cos', ['N', hd]), float('sin', ['N', hd])] : [];
  return {
    inputs: [float('x', ['B', 'S', H]), float('mask', ['B', 1, 'S', 'T']), float('past_k', ['B', nkv, 'P', hd]), float('past_v', ['B', nkv, 'P', hd]), ...rope],
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

/** Graph input name of the step's position rows (learned positions, OPT: table rows, the offset already added). */
export const POSITIONS_INPUT = 'positions';

/** Learned positions' tables (OPT): the position table `[maxPositions + offset, H]`, project_in `[H, dim]` as stored. */
export interface LearnedPositionTables {
  positions: Float32Array;
  projectIn?: Float32Array;
}

/**
 * Embedding: ids int64 `[B, S]` → hidden `[B, S, H]` = embed_tokens[ids], times the description's `embedding.scale`
 * when it has one (Gemma); with learned positions (OPT; `learned` required) projected in and plus the position rows
 * of input `positions` `[B, S]`. Without `table` the table `[V, dim]` is an input (`LLAMA_TABLE_INPUT`), so a tied
 * head can read the same tensor.
 */
export function llamaEmbeddingGraph(d: ModelDescription, table?: Float32Array, learned?: LearnedPositionTables): Uint8Array {
  const { H, V } = dims(d);
  const E = d.embedding.dim;
  if (table && table.length !== V * E) throw new Error(`${d.name} embedding: the table holds ${table.length} values, [${V}, ${E}] needs ${V * E}`);
  const g = new GraphBuilder();
  const tokens = table ? g.floatTensor(LLAMA_TABLE_INPUT, table, [V, E]) : LLAMA_TABLE_INPUT;
  const inputs: OnnxValueInfo[] = [{ name: 'ids', type: OnnxType.INT64, dims: ['B', 'S'] }];
  if (d.positions.kind === 'learned') {
    if (!learned) throw new Error(`${d.name} embedding: learned positions need the position table (decoder.embed_positions.weight)`);
    const rows = d.maxPositions + d.positions.offset;
    if (learned.positions.length !== rows * H) throw new Error(`${d.name} embedding: the position table holds ${learned.positions.length} values, [${rows}, ${H}] needs ${rows * H}`);
    if ((E !== H) !== (learned.projectIn !== undefined)) throw new Error(`${d.name} embedding: project_in is needed exactly when the embedding width ${E} differs from hidden ${H}`);
    addEmbedding(g, d, tokens, 'ids', 'hidden', {
      table: g.floatTensor('embed_positions', learned.positions, [rows, H]),
      positions: POSITIONS_INPUT,
      projectIn: learned.projectIn && g.floatTensor('project_in_t', transposed(learned.projectIn, H, E), [E, H]),
    });
    inputs.push({ name: POSITIONS_INPUT, type: OnnxType.INT64, dims: ['B', 'S'] });
  } else addEmbedding(g, d, tokens, 'ids', 'hidden');
  return encodeModel({
    graphName: `${d.family}_embed`,
    nodes: g.nodes,
    initializers: g.initializers,
    inputs: [...inputs, ...(table ? [] : [float(LLAMA_TABLE_INPUT, [V, E])])],
    outputs: [float('hidden', ['B', 'S', H])],
    opset: OPSET,
  });
}

/**
 * A resident layer (weights as initializers) as two stages around a KV cache kept outside onnxruntime (the worker's):
 * - `qkv`: x `[B, S, H]`, cos/sin `[N, hd]` (rotary) → q, k/v `[B, nkv, S, hd]` (the step's keys/values, to store);
 * - `rest`: x, q, cache_k/cache_v `[B, nkv, T, hd]` (this step's keys already stored; slots the mask hides may be
 *   unused) and mask `[B, 1, S, T]` → y `[B, S, H]`.
 * q is `[B, nh, S, hd]`, or `[B, S, Q]` in the fused form (`fusedLayer`), whose rest stage attends in MultiHeadAttention
 * with the cache as per-head keys/values (the same kernel and sums as its layer with a past).
 */
export function llamaLayerStageGraphs(d: ModelDescription, w: LlamaLayerTensors, index = 0): { qkv: Uint8Array; rest: Uint8Array } {
  const { H, nh, nkv, hd } = dims(d);
  const fused = fusedLayer(d);
  const x = float('x', ['B', 'S', H]);
  const q = fused ? float('q', ['B', 'S', nh * hd]) : float('q', ['B', nh, 'S', hd]);

  // Each stage registers only the tensors its nodes read.
  const a = new GraphBuilder();
  const aw = residentLayer(a, d, index, w, (key) => inQkvStage(d, key));
  const x2a = a.op('Reshape', ['x', a.constInt64('flat_hidden', [-1, H])]);
  if (fused) {
    const qkv3 = addFusedQkv(a, d, aw, x2a, addShapeBS(a, 'x'));
    a.op('Identity', [qkv3.q], undefined, 'q');
    addBshToHeads(a, d, qkv3.k, 'k');
    addBshToHeads(a, d, qkv3.v, 'v');
  } else addQkv(a, d, aw, x2a, addShapeBS(a, 'x'), 'cos', 'sin', { q: 'q', k: 'k', v: 'v' });
  const qkv = encodeModel({
    graphName: `${d.family}_layer_qkv`,
    nodes: a.nodes,
    initializers: a.initializers,
    inputs: fused ? [x] : [x, float('cos', ['N', hd]), float('sin', ['N', hd])],
    outputs: [q, float('k', ['B', nkv, 'S', hd]), float('v', ['B', nkv, 'S', hd])],
    opset: OPSET,
  });

  const b = new GraphBuilder();
  const bw = residentLayer(b, d, index, w, (key) => !inQkvStage(d, key));
  const x2 = b.op('Reshape', ['x', b.constInt64('flat_hidden', [-1, H])]);
  const ctx = fused
    ? b.op('Reshape', [addMultiHeadAttention(b, d, 'q', 'cache_k', 'cache_v', 'mask', 'ctx'), b.constInt64('ctx_flat', [-1, nh * hd])])
    : addAttention(b, d, 'q', 'cache_k', 'cache_v', 'mask');
  const y = addOutputAndMlp(b, d, bw, x2, ctx);
  b.op('Reshape', [y, b.op('Shape', ['x'])], undefined, 'y');
  const rest = encodeModel({
    graphName: `${d.family}_layer_rest`,
    nodes: b.nodes,
    initializers: b.initializers,
    inputs: [x, q, float('cache_k', ['B', nkv, 'T', hd]), float('cache_v', ['B', nkv, 'T', hd]), float('mask', ['B', 1, 'S', 'T'])],
    outputs: [float('y', ['B', 'S', H])],
    opset: OPSET,
    microsoft: fused,
  });
  return { qkv, rest };
}

/** Resident layer `index` as one graph with its past in and present out (`LLAMA_LAYER_IO`), weights as initializers. */
export function llamaLayerGraph(d: ModelDescription, w: LlamaLayerTensors, index = 0): Uint8Array {
  dims(d);
  const g = new GraphBuilder();
  addDecoderLayer(g, d, residentLayer(g, d, index, w), LLAMA_LAYER_IO);
  return encodeModel({ graphName: `${d.family}_layer`, nodes: g.nodes, initializers: g.initializers, ...layerIo(d), opset: OPSET, microsoft: fusedLayer(d) });
}

/**
 * The layer of `llamaLayerGraph` with every weight a graph input (`layerTensorName`, `[in, out]` layout), so one
 * session serves every layer whose weights are streamed in (offloading) — every layer with the tensors of layer
 * `index`: a mixture of experts with dense layers needs one graph for its sparse layers and one for its dense ones.
 */
export function llamaStreamedLayerGraph(d: ModelDescription, index = 0): Uint8Array {
  dims(d); // a description of another family is refused by kind before its tensors are named
  const g = new GraphBuilder();
  const { names, inputs } = streamedLayer(g, d, index);
  addDecoderLayer(g, d, names, LLAMA_LAYER_IO);
  const io = layerIo(d);
  return encodeModel({ graphName: `${d.family}_layer_streamed`, nodes: g.nodes, initializers: g.initializers, inputs: [...io.inputs, ...inputs], outputs: io.outputs, opset: OPSET, microsoft: fusedLayer(d) });
}

function headModel(d: ModelDescription, g: GraphBuilder, graphName: string, weightInputs: OnnxValueInfo[]): Uint8Array {
  const { H, V } = dims(d);
  return encodeModel({ graphName, nodes: g.nodes, initializers: g.initializers, inputs: [float('x', ['N', H]), ...weightInputs], outputs: [float('logits', ['N', V])], opset: OPSET });
}

/** Head: x `[N, H]` → logits `[N, V]`, weights as initializers. */
export function llamaHeadGraph(d: ModelDescription, w: LlamaHeadTensors): Uint8Array {
  const { H, V } = dims(d);
  const E = d.embedding.dim;
  const problems: string[] = [];
  const sized = (what: string, t: Float32Array | undefined, shape: number[]) => {
    const want = shape.reduce((a, b) => a * b, 1);
    if (t && t.length !== want) problems.push(`${what} holds ${t.length} values, [${shape.join(', ')}] needs ${want}`);
  };
  if (d.norm.final && !w.finalNorm) problems.push(`the final norm's weight (${d.checkpointNames?.finalNorm ?? 'the final norm'}) is missing`);
  if (d.norm.final && d.norm.kind === 'layernorm' && !w.finalNormB) problems.push("the final LayerNorm's bias is missing");
  if ((E !== H) !== (w.projectOut !== undefined)) problems.push(`project_out is needed exactly when the embedding width ${E} differs from hidden ${H}`);
  sized('the final norm', w.finalNorm, [H]);
  sized("the final norm's bias", w.finalNormB, [H]);
  sized('project_out', w.projectOut, [E, H]);
  sized('the output projection', w.head, [V, E]);
  if (problems.length) throw new Error(`${d.name} head: ${problems.join('; ')}`);
  const g = new GraphBuilder();
  const norm = d.norm.final ? { w: g.floatTensor('final_norm_w', w.finalNorm!, [H]), b: w.finalNormB && g.floatTensor('final_norm_b', w.finalNormB, [H]) } : undefined;
  const projectOut = w.projectOut && g.floatTensor('project_out_t', transposed(w.projectOut, E, H), [H, E]);
  addHead(g, d, 'x', norm, g.floatTensor('lm_head', w.head, [V, E]), 'logits', projectOut);
  return headModel(d, g, `${d.family}_head`, []);
}

/** The streamed head's weight inputs (`LLAMA_HEAD_INPUT`): the final norm `[H]` (and LayerNorm's bias) when the model has one, the head `[V, H]`. */
export function llamaHeadInputs(d: ModelDescription): { key: 'finalLnW' | 'finalLnB' | 'lmHead'; input: string; dims: number[] }[] {
  const H = d.hiddenSize;
  return [
    ...(d.norm.final ? [{ key: 'finalLnW' as const, input: LLAMA_HEAD_INPUT.finalNorm, dims: [H] }] : []),
    ...(d.norm.final && d.norm.kind === 'layernorm' ? [{ key: 'finalLnB' as const, input: LLAMA_HEAD_INPUT.finalNormB, dims: [H] }] : []),
    { key: 'lmHead', input: LLAMA_HEAD_INPUT.head, dims: [d.vocabSize, H] },
  ];
}

/**
 * The head of `llamaHeadGraph` with its weights as inputs (`llamaHeadInputs`). A model with project_out (opt-350m)
 * keeps its head resident.
 */
export function llamaStreamedHeadGraph(d: ModelDescription): Uint8Array {
  dims(d);
  if (d.embedding.dim !== d.hiddenSize) throw new Error(`${d.name} projects its output (project_out); its head is not streamed: keep it resident (loadHead)`);
  const g = new GraphBuilder();
  const inputs = llamaHeadInputs(d);
  const name = (key: string) => inputs.find((i) => i.key === key)?.input;
  const norm = d.norm.final ? { w: name('finalLnW')!, b: name('finalLnB') } : undefined;
  addHead(g, d, 'x', norm, LLAMA_HEAD_INPUT.head, 'logits');
  return headModel(d, g, `${d.family}_head_streamed`, inputs.map((i) => float(i.input, i.dims)));
}
