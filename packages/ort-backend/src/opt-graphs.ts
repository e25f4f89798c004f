import { MASK_BIAS, type LayerTensors, type TransposedLayerWeights } from '@flexhelm/contract';
import {
  headDim,
  OPT_POSITION_OFFSET,
  optDescription,
  positionTable,
  transposed,
  transposeLayerTensors,
  type EmbeddingWeights,
  type HeadWeights,
  type LayerWeights,
  type OptConfig,
} from '@flexhelm/engine';
import { encodeModel, GraphBuilder, OnnxType, type OnnxValueInfo } from './onnx-writer.js';

/** ai.onnx opset of every graph here (LayerNormalization needs 17). */
export const OPSET = 17;

function layerNormNode(g: GraphBuilder, c: OptConfig, x: string, w: string, b: string, out?: string): string {
  return g.op('LayerNormalization', [x, w, b], { axis: -1, epsilon: { float: c.layerNormEps } }, out);
}

/** Gather token rows (+ project_in) and add the position rows: ids/positions int64 of any shape → `[..., E]`. */
function addEmbedding(g: GraphBuilder, c: OptConfig, w: EmbeddingWeights, ids: string, positions: string, out: string): void {
  g.floatTensor('embed_tokens', w.tokens, [c.vocabSize, c.wordEmbedProjDim]);
  const table = positionTable(w);
  g.floatTensor('embed_positions', table, [table.length / c.hiddenSize, c.hiddenSize]);
  let tok = g.op('Gather', ['embed_tokens', ids], { axis: 0 });
  if (w.projectIn) {
    g.floatTensor('project_in_t', transposed(w.projectIn, c.hiddenSize, c.wordEmbedProjDim), [c.wordEmbedProjDim, c.hiddenSize]);
    tok = g.op('MatMul', [tok, 'project_in_t']);
  }
  g.op('Add', [tok, g.op('Gather', ['embed_positions', positions], { axis: 0 })], undefined, out);
}

export interface LayerIo {
  x: string;
  mask: string;
  pastK: string;
  pastV: string;
  y: string;
  presentK: string;
  presentV: string;
  /** Also output this step's own keys/values `[B, H, S, D]` under these names (a backend-held cache appends them). */
  newK?: string;
  newV?: string;
}

/**
 * How attention is computed: `fused` is onnxruntime's com.microsoft MultiHeadAttention (one kernel for QKᵀ, mask,
 * softmax and ·V per head, no [B, H, S, T] intermediates in between); `ops` is plain ai.onnx ops, the graph a standard
 * exporter writes (what the exported model for @huggingface/transformers uses).
 */
export type AttentionKind = 'fused' | 'ops';

/**
 * LN1 (pre-LN models) and the fused q/k/v projection of a layer: `x2` `[N, E]` → qkv `[N, 3E]` (bias added, q not yet
 * scaled). Registers the weights it uses as `<prefix>…` initializers.
 */
function addQkvProjection(g: GraphBuilder, c: OptConfig, w: TransposedLayerWeights, prefix: string, x2: string): string {
  const E = c.hiddenSize;
  const n = (s: string) => `${prefix}${s}`;
  // Row e of the fused [E, 3E] matrix is row e of qᵀ, kᵀ and vᵀ side by side.
  const qkvT = new Float32Array(E * 3 * E);
  for (let e = 0; e < E; e++) {
    const row = e * 3 * E;
    qkvT.set(w.qW.subarray(e * E, (e + 1) * E), row);
    qkvT.set(w.kW.subarray(e * E, (e + 1) * E), row + E);
    qkvT.set(w.vW.subarray(e * E, (e + 1) * E), row + 2 * E);
  }
  const qkvB = new Float32Array(3 * E);
  qkvB.set(w.qB, 0);
  qkvB.set(w.kB, E);
  qkvB.set(w.vB, 2 * E);
  g.floatTensor(n('qkv_w'), qkvT, [E, 3 * E]);
  g.floatTensor(n('qkv_b'), qkvB, [3 * E]);
  let h1 = x2;
  if (c.doLayerNormBefore) {
    g.floatTensor(n('ln1_w'), w.ln1W, [E]);
    g.floatTensor(n('ln1_b'), w.ln1B, [E]);
    h1 = layerNormNode(g, c, x2, n('ln1_w'), n('ln1_b'));
  }
  return g.op('Gemm', [h1, n('qkv_w'), n('qkv_b')]);
}

/**
 * The rest of a layer after attention: out projection + residual (+ LN1 on post-LN models such as opt-350m), then
 * the MLP fc2(relu(fc1(LN2(r)))) + residual. `x2` and `ctx2` are `[N, E]`; returns y `[N, E]`.
 */
function addOutputAndMlp(g: GraphBuilder, c: OptConfig, w: TransposedLayerWeights, prefix: string, x2: string, ctx2: string): string {
  const E = c.hiddenSize;
  const F = c.ffnDim;
  const n = (s: string) => `${prefix}${s}`;
  const pre = c.doLayerNormBefore;
  g.floatTensor(n('out_w'), w.oW, [E, E]);
  g.floatTensor(n('out_b'), w.oB, [E]);
  if (!pre) {
    g.floatTensor(n('ln1_w'), w.ln1W, [E]);
    g.floatTensor(n('ln1_b'), w.ln1B, [E]);
  }
  g.floatTensor(n('fc1_w'), w.fc1W, [E, F]);
  g.floatTensor(n('fc1_b'), w.fc1B, [F]);
  g.floatTensor(n('fc2_w'), w.fc2W, [F, E]);
  g.floatTensor(n('fc2_b'), w.fc2B, [E]);
  g.floatTensor(n('ln2_w'), w.ln2W, [E]);
  g.floatTensor(n('ln2_b'), w.ln2B, [E]);
  // Linear layers run as Gemm on [N, ·] (bias fused).
  const gemm = (a: string, wName: string, bName: string) => g.op('Gemm', [a, wName, bName]);
  let r = g.op('Add', [x2, gemm(ctx2, n('out_w'), n('out_b'))]);
  if (!pre) r = layerNormNode(g, c, r, n('ln1_w'), n('ln1_b'));
  const h2 = pre ? layerNormNode(g, c, r, n('ln2_w'), n('ln2_b')) : r;
  const f = g.op('Relu', [gemm(h2, n('fc1_w'), n('fc1_b'))]);
  let y = g.op('Add', [r, gemm(f, n('fc2_w'), n('fc2_b'))]);
  if (!pre) y = layerNormNode(g, c, y, n('ln2_w'), n('ln2_b'));
  return y;
}

/**
 * One decoder layer. x `[B, S, E]`, mask `[B, 1, S, T]` additive, past k/v `[B, H, P, D]` → y `[B, S, E]`,
 * present k/v `[B, H, T, D]`. Weights become initializers named `<prefix>…`.
 */
export function addLayer(g: GraphBuilder, c: OptConfig, w: LayerWeights, prefix: string, io: LayerIo, attention: AttentionKind = 'ops'): void {
  addLayerInOut(g, c, inOut(c, w), prefix, io, attention);
}

/** PyTorch `[out, in]` layer weights → the graphs' `[in, out]` (vectors shared). */
function inOut(c: OptConfig, w: LayerWeights): TransposedLayerWeights {
  return transposeLayerTensors(optDescription(c), w as unknown as LayerTensors) as unknown as TransposedLayerWeights;
}

/** `addLayer` with the weights already `[in, out]` (`TransposedLayerWeights`): initializers without a transpose. */
function addLayerInOut(g: GraphBuilder, c: OptConfig, w: TransposedLayerWeights, prefix: string, io: LayerIo, attention: AttentionKind): void {
  const E = c.hiddenSize;
  const H = c.numAttentionHeads;
  const D = headDim(c);
  const n = (s: string) => `${prefix}${s}`;
  const split = g.constInt64('qkv_split', [E, E, E]);
  const flatShape = g.constInt64('flat_shape', [-1, E]);
  // Linear layers run on [B·S, ·]; only attention needs the [B, S] split.
  const x2 = g.op('Reshape', [io.x, flatShape]);
  const qkv = addQkvProjection(g, c, w, prefix, x2);
  let ctx: string;
  if (attention === 'fused') {
    // q, k, v as [B, S, E]; the kernel scales q·kᵀ by D^-½ (the same product up to rounding), adds the mask bias,
    // appends k/v to the past and writes the context straight back in [B, S, E].
    const shapeBS = g.op('Slice', [g.op('Shape', [io.x]), g.constInt64('zero_1d', [0]), g.constInt64('two_1d', [2])]);
    const qkv3 = g.op('Reshape', [qkv, g.op('Concat', [shapeBS, g.constInt64('three_e', [3 * E])], { axis: 0 })]);
    const [q, k, v] = g.multi('Split', [qkv3, split], [n('q'), n('k'), n('v')], { axis: -1 });
    ctx = n('ctx');
    g.nodes.push({
      op: 'MultiHeadAttention',
      domain: 'com.microsoft',
      inputs: [q!, k!, v!, '', '', io.mask, io.pastK, io.pastV],
      outputs: [ctx, io.presentK, io.presentV],
      attributes: { num_heads: H, scale: { float: D ** -0.5 } },
    });
    const toHeadsNew = (t: string) => g.op('Transpose', [g.op('Reshape', [t, g.constInt64('bs_heads', [0, 0, H, D])])], { perm: [0, 2, 1, 3] });
    if (io.newK) g.op('Identity', [toHeadsNew(k!)], undefined, io.newK);
    if (io.newV) g.op('Identity', [toHeadsNew(v!)], undefined, io.newV);
    ctx = g.op('Reshape', [ctx, flatShape]);
  } else {
    const scale = g.constFloat('attn_scale', [D ** -0.5], []);
    const shapeBS = g.op('Slice', [g.op('Shape', [io.x]), g.constInt64('zero_1d', [0]), g.constInt64('two_1d', [2])]);
    const headsShape = g.op('Concat', [shapeBS, g.constInt64('heads_tail', [H, D])], { axis: 0 });
    const [q, k, v] = g.multi('Split', [qkv, split], [n('q'), n('k'), n('v')], { axis: -1 });
    const toHeads = (t: string) => g.op('Transpose', [g.op('Reshape', [t, headsShape])], { perm: [0, 2, 1, 3] });
    const qh = toHeads(g.op('Mul', [q!, scale]));
    const kh = toHeads(k!);
    const vh = toHeads(v!);
    if (io.newK) g.op('Identity', [kh], undefined, io.newK);
    if (io.newV) g.op('Identity', [vh], undefined, io.newV);
    g.op('Concat', [io.pastK, kh], { axis: 2 }, io.presentK);
    g.op('Concat', [io.pastV, vh], { axis: 2 }, io.presentV);
    const kT = g.op('Transpose', [io.presentK], { perm: [0, 1, 3, 2] });
    const probs = g.op('Softmax', [g.op('Add', [g.op('MatMul', [qh, kT]), io.mask])], { axis: -1 });
    ctx = g.op('Reshape', [g.op('Transpose', [g.op('MatMul', [probs, io.presentV])], { perm: [0, 2, 1, 3] }), flatShape]);
  }
  const y = addOutputAndMlp(g, c, w, prefix, x2, ctx);
  g.op('Reshape', [y, g.op('Shape', [io.x])], undefined, io.y);
}

/**
 * A resident layer as two stages around a KV cache kept outside onnxruntime (the worker's), so attention reads the
 * cache where it is instead of concatenating past and new into a fresh present every step:
 * - `qkv`: x `[B, S, E]` → q `[B, S, E]`, k and v `[B, H, S, D]` (the step's new keys/values, to store in the cache);
 * - `rest`: x, q, the cache `cache_k`/`cache_v` `[B, H, T, D]` (new keys already stored; slots past the mask's
 *   visible keys may be unused) and mask `[B, 1, S, T]` → y `[B, S, E]`.
 * Attention is onnxruntime's MultiHeadAttention with keys/values given per head (BNSH): the same kernel and sums as
 * the single-graph layer with a past (`layerGraph`).
 */
export function layerStageGraphs(c: OptConfig, w: LayerWeights): { qkv: Uint8Array; rest: Uint8Array } {
  return layerStageGraphsInOut(c, inOut(c, w));
}

/**
 * `layerStageGraphs` from `[in, out]` weights (the backends' layout), the same bytes: the large matrices are the
 * initializers as given, never transposed back and forth.
 */
export function layerStageGraphsInOut(c: OptConfig, w: TransposedLayerWeights): { qkv: Uint8Array; rest: Uint8Array } {
  const E = c.hiddenSize;
  const H = c.numAttentionHeads;
  const D = headDim(c);
  const x = { name: 'x', type: OnnxType.FLOAT, dims: ['B', 'S', E] } satisfies OnnxValueInfo;
  const q = { name: 'q', type: OnnxType.FLOAT, dims: ['B', 'S', E] } satisfies OnnxValueInfo;

  const a = new GraphBuilder();
  const x2 = a.op('Reshape', ['x', a.constInt64('flat_shape', [-1, E])]);
  const qkv = addQkvProjection(a, c, w, '', x2);
  const shapeBS = a.op('Slice', [a.op('Shape', ['x']), a.constInt64('zero_1d', [0]), a.constInt64('two_1d', [2])]);
  const qkvBS = a.op('Reshape', [qkv, a.op('Concat', [shapeBS, a.constInt64('three_e', [3 * E])], { axis: 0 })]);
  const [qOut, k, v] = a.multi('Split', [qkvBS, a.constInt64('qkv_split', [E, E, E])], ['q_raw', 'k_raw', 'v_raw'], { axis: -1 });
  a.op('Identity', [qOut!], undefined, 'q');
  const toHeads = (t: string, out: string) => a.op('Transpose', [a.op('Reshape', [t, a.constInt64('bs_heads', [0, 0, H, D])])], { perm: [0, 2, 1, 3] }, out);
  toHeads(k!, 'k');
  toHeads(v!, 'v');
  const headsOut = (name: string) => ({ name, type: OnnxType.FLOAT, dims: ['B', H, 'S', D] }) satisfies OnnxValueInfo;
  const qkvModel = encodeModel({ graphName: 'opt_layer_qkv', nodes: a.nodes, initializers: a.initializers, inputs: [x], outputs: [q, headsOut('k'), headsOut('v')], opset: OPSET });

  const b = new GraphBuilder();
  const flat = b.constInt64('flat_shape', [-1, E]);
  b.nodes.push({
    op: 'MultiHeadAttention',
    domain: 'com.microsoft',
    inputs: ['q', 'cache_k', 'cache_v', '', '', 'mask'],
    outputs: ['ctx'],
    attributes: { num_heads: H, scale: { float: D ** -0.5 } },
  });
  const y = addOutputAndMlp(b, c, w, '', b.op('Reshape', ['x', flat]), b.op('Reshape', ['ctx', flat]));
  b.op('Reshape', [y, b.op('Shape', ['x'])], undefined, 'y');
  const cacheIn = (name: string) => ({ name, type: OnnxType.FLOAT, dims: ['B', H, 'T', D] }) satisfies OnnxValueInfo;
  const rest = encodeModel({
    graphName: 'opt_layer_rest',
    nodes: b.nodes,
    initializers: b.initializers,
    inputs: [x, q, cacheIn('cache_k'), cacheIn('cache_v'), { name: 'mask', type: OnnxType.FLOAT, dims: ['B', 1, 'S', 'T'] }],
    outputs: [{ name: 'y', type: OnnxType.FLOAT, dims: ['B', 'S', E] }],
    opset: OPSET,
    microsoft: true,
  });
  return { qkv: qkvModel, rest };
}

/** Final LayerNorm (pre-LN), project_out, logits = h·lm_headᵀ; `x` `[N, E]` (Gemm) or `[B, S, E]` (`threeD`). */
function addHead(g: GraphBuilder, c: OptConfig, w: HeadWeights, x: string, out: string, threeD: boolean): void {
  let h = x;
  if (w.finalLnW && w.finalLnB) {
    g.floatTensor('final_ln_w', w.finalLnW, [c.hiddenSize]);
    g.floatTensor('final_ln_b', w.finalLnB, [c.hiddenSize]);
    h = layerNormNode(g, c, h, 'final_ln_w', 'final_ln_b');
  }
  if (w.projectOut) {
    g.floatTensor('project_out_t', transposed(w.projectOut, c.wordEmbedProjDim, c.hiddenSize), [c.hiddenSize, c.wordEmbedProjDim]);
    h = g.op('MatMul', [h, 'project_out_t']);
  }
  if (threeD) {
    g.floatTensor('lm_head_t', transposed(w.lmHead, c.vocabSize, c.wordEmbedProjDim), [c.wordEmbedProjDim, c.vocabSize]);
    g.op('MatMul', [h, 'lm_head_t'], undefined, out);
  } else {
    g.floatTensor('lm_head', w.lmHead, [c.vocabSize, c.wordEmbedProjDim]);
    g.op('Gemm', [h, 'lm_head'], { transB: 1 }, out);
  }
}

/** Embedding stage: `ids`, `positions` int64 `[B, S]` (table rows, offset 2 included) → `hidden` `[B, S, E]`. */
export function embeddingGraph(c: OptConfig, w: EmbeddingWeights): Uint8Array {
  const g = new GraphBuilder();
  addEmbedding(g, c, w, 'ids', 'positions', 'hidden');
  return encodeModel({
    graphName: 'opt_embed',
    nodes: g.nodes,
    initializers: g.initializers,
    inputs: [
      { name: 'ids', type: OnnxType.INT64, dims: ['B', 'S'] },
      { name: 'positions', type: OnnxType.INT64, dims: ['B', 'S'] },
    ],
    outputs: [{ name: 'hidden', type: OnnxType.FLOAT, dims: ['B', 'S', c.hiddenSize] }],
    opset: OPSET,
  });
}

/** Graph inputs and outputs of a layer stage (`layerGraph`, `streamedLayerGraph`), names as in `LAYER_IO`. */
export function layerStageIo(c: OptConfig): { inputs: OnnxValueInfo[]; outputs: OnnxValueInfo[] } {
  const H = c.numAttentionHeads;
  const D = headDim(c);
  const E = c.hiddenSize;
  return {
    inputs: [
      { name: 'x', type: OnnxType.FLOAT, dims: ['B', 'S', E] },
      { name: 'mask', type: OnnxType.FLOAT, dims: ['B', 1, 'S', 'T'] },
      { name: 'past_k', type: OnnxType.FLOAT, dims: ['B', H, 'P', D] },
      { name: 'past_v', type: OnnxType.FLOAT, dims: ['B', H, 'P', D] },
    ],
    outputs: [
      { name: 'y', type: OnnxType.FLOAT, dims: ['B', 'S', E] },
      { name: 'present_k', type: OnnxType.FLOAT, dims: ['B', H, 'T', D] },
      { name: 'present_v', type: OnnxType.FLOAT, dims: ['B', H, 'T', D] },
      { name: 'new_k', type: OnnxType.FLOAT, dims: ['B', H, 'S', D] },
      { name: 'new_v', type: OnnxType.FLOAT, dims: ['B', H, 'S', D] },
    ],
  };
}

/**
 * Tensor names of a layer stage. Callers fetch either the present K/V (the engine-held cache: past in, present out)
 * or only this step's new K/V (a cache kept beside the sessions appends them, so the whole cache is not copied out).
 */
export const LAYER_IO: LayerIo = { x: 'x', mask: 'mask', pastK: 'past_k', pastV: 'past_v', y: 'y', presentK: 'present_k', presentV: 'present_v', newK: 'new_k', newV: 'new_v' };

/** One layer stage with its weights as initializers (packed once by onnxruntime), fused attention; io as `LAYER_IO`. */
export function layerGraph(c: OptConfig, w: LayerWeights): Uint8Array {
  const g = new GraphBuilder();
  addLayer(g, c, w, '', LAYER_IO, 'fused');
  return encodeModel({ graphName: 'opt_layer', nodes: g.nodes, initializers: g.initializers, ...layerStageIo(c), opset: OPSET, microsoft: true });
}

/** Head stage: `x` `[N, E]` → `logits` `[N, V]`. */
export function headGraph(c: OptConfig, w: HeadWeights): Uint8Array {
  const g = new GraphBuilder();
  addHead(g, c, w, 'x', 'logits', false);
  return encodeModel({
    graphName: 'opt_head',
    nodes: g.nodes,
    initializers: g.initializers,
    inputs: [{ name: 'x', type: OnnxType.FLOAT, dims: ['N', c.hiddenSize] }],
    outputs: [{ name: 'logits', type: OnnxType.FLOAT, dims: ['N', c.vocabSize] }],
    opset: OPSET,
  });
}

/** Graph input names of `streamedHeadGraph`, by `HeadWeights` key. */
export const STREAMED_HEAD_INPUT = { finalLnW: 'final_ln_w', finalLnB: 'final_ln_b', lmHead: 'lm_head' } as const;

/**
 * The head stage of `headGraph` with its weights as graph inputs instead of initializers (final LayerNorm `[E]` when
 * the model is pre-LN, lm_head `[V, E]` as stored), so an offloading backend can stream them in like a layer's. Same
 * nodes as `addHead`'s two-dimensional form. Models with project_out (opt-350m) are not supported: keep their head
 * resident.
 */
export function streamedHeadGraph(c: OptConfig): Uint8Array {
  if (c.wordEmbedProjDim !== c.hiddenSize) throw new Error(`streamedHeadGraph: ${c.name} projects its output (project_out); keep its head resident (loadHead)`);
  const g = new GraphBuilder();
  const inputs: OnnxValueInfo[] = [{ name: 'x', type: OnnxType.FLOAT, dims: ['N', c.hiddenSize] }];
  let h = 'x';
  if (c.doLayerNormBefore) {
    h = layerNormNode(g, c, h, STREAMED_HEAD_INPUT.finalLnW, STREAMED_HEAD_INPUT.finalLnB);
    inputs.push({ name: STREAMED_HEAD_INPUT.finalLnW, type: OnnxType.FLOAT, dims: [c.hiddenSize] }, { name: STREAMED_HEAD_INPUT.finalLnB, type: OnnxType.FLOAT, dims: [c.hiddenSize] });
  }
  g.op('Gemm', [h, STREAMED_HEAD_INPUT.lmHead], { transB: 1 }, 'logits');
  inputs.push({ name: STREAMED_HEAD_INPUT.lmHead, type: OnnxType.FLOAT, dims: [c.vocabSize, c.hiddenSize] });
  return encodeModel({
    graphName: 'opt_head_streamed',
    nodes: g.nodes,
    initializers: g.initializers,
    inputs,
    outputs: [{ name: 'logits', type: OnnxType.FLOAT, dims: ['N', c.vocabSize] }],
    opset: OPSET,
  });
}

/**
 * The whole model as one graph in the layout @huggingface/transformers runs for decoder-only models: inputs
 * `input_ids` `[batch_size, sequence_length]`, `attention_mask` `[batch_size, total_sequence_length]` (int64),
 * `past_key_values.{i}.key|value` `[batch_size, H, past_sequence_length, D]`; outputs `logits` and
 * `present.{i}.key|value`. Positions (cumsum of the mask) and the causal + padding mask are computed in the graph.
 * Layers are added through `layers(i)` one at a time, so only one layer's weights are in memory with an external sink.
 */
export function addFullModel(g: GraphBuilder, c: OptConfig, embedding: EmbeddingWeights, layer: (i: number) => LayerWeights, head: HeadWeights): { inputs: OnnxValueInfo[]; outputs: OnnxValueInfo[] } {
  const H = c.numAttentionHeads;
  const D = headDim(c);
  // positions = (cumsum(mask) * mask - 1 + 2)[:, -S:]
  const one = g.constInt64('one_i64', [1], []);
  const zero = g.constInt64('zero_i64', [0], []);
  const axis1 = g.constInt64('axis1_i64', [1], []);
  const offset = g.constInt64('pos_offset', [OPT_POSITION_OFFSET - 1], []);
  const cum = g.op('CumSum', ['attention_mask', axis1]);
  const allPos = g.op('Add', [g.op('Mul', [cum, 'attention_mask']), offset]);
  const idsShape = g.op('Shape', ['input_ids']);
  const maskShape = g.op('Shape', ['attention_mask']);
  const seqLen = g.op('Gather', [idsShape, one], { axis: 0 });
  const totalLen = g.op('Gather', [maskShape, one], { axis: 0 });
  const pastLen = g.op('Sub', [totalLen, seqLen]);
  const sliceStart = g.op('Unsqueeze', [pastLen, zero]);
  const sliceEnd = g.op('Unsqueeze', [totalLen, zero]);
  const axes = g.constInt64('axes1', [1]);
  const positions = g.op('Slice', [allPos, sliceStart, sliceEnd, axes]);
  addEmbedding(g, c, embedding, 'input_ids', positions, 'h_0');
  // mask bias [B, 1, S, T]: key t visible from query s when t <= past + s and attention_mask[b, t] = 1
  const keys = g.op('Range', [zero, totalLen, one]);
  const queries = g.op('Range', [pastLen, totalLen, one]);
  const causal = g.op('LessOrEqual', [g.op('Unsqueeze', [keys, zero]), g.op('Unsqueeze', [queries, one])]);
  const keyOk = g.op('Unsqueeze', [g.op('Cast', ['attention_mask'], { to: OnnxType.BOOL }), g.constInt64('axes12', [1, 2])]);
  const allowed = g.op('And', [causal, keyOk]);
  const maskBias = g.op('Where', [allowed, g.constFloat('zero_f', [0], []), g.constFloat('mask_bias', [MASK_BIAS], [])]);
  const inputs: OnnxValueInfo[] = [
    { name: 'input_ids', type: OnnxType.INT64, dims: ['batch_size', 'sequence_length'] },
    { name: 'attention_mask', type: OnnxType.INT64, dims: ['batch_size', 'total_sequence_length'] },
  ];
  const outputs: OnnxValueInfo[] = [{ name: 'logits', type: OnnxType.FLOAT, dims: ['batch_size', 'sequence_length', c.vocabSize] }];
  for (let i = 0; i < c.numHiddenLayers; i++) {
    const io: LayerIo = {
      x: `h_${i}`,
      mask: maskBias,
      pastK: `past_key_values.${i}.key`,
      pastV: `past_key_values.${i}.value`,
      y: `h_${i + 1}`,
      presentK: `present.${i}.key`,
      presentV: `present.${i}.value`,
    };
    addLayer(g, c, layer(i), `layers.${i}.`, io);
    for (const name of [io.pastK, io.pastV]) inputs.push({ name, type: OnnxType.FLOAT, dims: ['batch_size', H, 'past_sequence_length', D] });
    for (const name of [io.presentK, io.presentV]) outputs.push({ name, type: OnnxType.FLOAT, dims: ['batch_size', H, 'total_sequence_length', D] });
  }
  addHead(g, c, head, `h_${c.numHiddenLayers}`, 'logits', true);
  return { inputs, outputs };
}
