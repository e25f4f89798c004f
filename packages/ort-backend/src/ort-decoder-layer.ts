/**
 * The one onnxruntime decoder layer of the rotary families (Llama 2/3, Mistral, Qwen2, Gemma 2, Phi-3, OLMo 2), as ONNX
 * nodes (opset 17, plain ai.onnx ops), its norm, placement, attention and MLP sub-graphs chosen from the description's
 * kinds, computing what llama/check.md describes and `decoderLayer` (llama-reference.ts) computes. The resident stage
 * graphs and the streamed graph (llama-graphs.ts) and the whole-model export graph (llama-onnx-graph.ts) all build
 * their layers, embedding scale and head here.
 *
 * Host-side kinds, not in these nodes: RoPE cos/sin are inputs (`ropeCosSin`, so every `rope_scaling` type — longrope's
 * factor switch and cos/sin scale included — is the host's business), and a sliding window arrives in the mask the
 * caller feeds each layer (Gemma 2's even layers get a windowed mask, its odd ones the plain one).
 *
 * Shapes: B batch rows, S new tokens per row, P cached tokens, T = P + S keys, N = B·S, H hidden, nh/nkv query/kv heads,
 * hd head_dim, Q = nh·hd, KV = nkv·hd, I intermediate, V vocab. Linear weights are `[in, out]`; the head is `[V, H]`.
 */
import type { MoeLayerTensorKey, RotaryLayerTensorKey } from '@flexhelm/engine';
import { requireKinds, type ModelDescription, type ModelKind } from '@flexhelm/contract';
import type { GraphBuilder } from './onnx-writer.js';
import { addMoeMlp } from './ort-moe-mlp.js';

/**
 * Key → graph tensor name of each tensor a layer uses (initializers, or inputs when streamed); a sparse layer of a
 * mixture of experts names its router and experts (`MoeLayerTensorKey`) instead of the dense MLP's.
 */
export type LayerNames = Partial<Record<RotaryLayerTensorKey | MoeLayerTensorKey, string>>;

/** The kinds this layer (with the host's cos/sin and masks) computes. */
export const ORT_LAYER_KINDS: readonly ModelKind[] = [
  'norm:rmsnorm', 'norm:rmsnorm-plus-one',
  'placement:pre', 'placement:post-branch', 'placement:pre-and-post-branch',
  'rope:default', 'rope:linear', 'rope:dynamic', 'rope:llama3', 'rope:longrope',
  'attention:scale', 'attention:logit-softcap', 'attention:window', 'attention:window-even-layers', 'attention:qk-norm',
  'mlp:swiglu', 'mlp:geglu-tanh', 'mlp:moe', 'mlp:moe-shared-expert', 'mlp:moe-dense-layers',
  'embedding:scale', 'head:logit-softcap',
];

/** The tensors the q/k/v stage reads (the rest of a layer reads the others). */
export const QKV_STAGE_KEYS: readonly RotaryLayerTensorKey[] = ['inNormW', 'qW', 'qB', 'kW', 'kB', 'vW', 'vB', 'qNormW', 'kNormW'];

export interface LayerDims {
  H: number;
  nh: number;
  nkv: number;
  hd: number;
  I: number;
  V: number;
}

/** The description's sizes, after checking its kinds and shapes are ones this layer computes. */
export function layerDims(d: ModelDescription): LayerDims {
  requireKinds(d, 'onnxruntime', ORT_LAYER_KINDS, 'the reference backend (--backend reference) computes it');
  const problems: string[] = [];
  if (!d.norm.final) problems.push('no final norm (the rotary layer needs a final RMSNorm)');
  if (d.embedding.dim !== d.hiddenSize) problems.push(`embedding width ${d.embedding.dim} ≠ hidden ${d.hiddenSize}`);
  const { heads, kvHeads, headDim } = d.attention;
  if (heads % kvHeads !== 0) problems.push(`${heads} query heads are not a multiple of ${kvHeads} kv heads`);
  if (headDim % 2 !== 0) problems.push(`head_dim ${headDim} is odd`);
  if (problems.length) throw new Error(`onnxruntime's rotary-family graphs cannot compute ${d.family} model ${d.name}: ${problems.join('; ')}`);
  return { H: d.hiddenSize, nh: heads, nkv: kvHeads, hd: headDim, I: d.mlp.intermediateSize, V: d.vocabSize };
}

/**
 * RMSNorm over the last axis, float32: `x / sqrt(mean(x²) + eps)` times w (`rmsnorm`, the pattern onnxruntime fuses)
 * or times (1 + w) (`rmsnorm-plus-one`, Gemma; 1 + w rounds to float32 as transformers' `1.0 + weight.float()`).
 */
function addRmsNorm(g: GraphBuilder, d: ModelDescription, x: string, w: string, kind: ModelDescription['norm']['kind'] = d.norm.kind): string {
  const meanSq = g.op('ReduceMean', [g.op('Pow', [x, g.constFloat('two_f', [2], [])])], { axes: [-1], keepdims: 1 });
  const normed = g.op('Div', [x, g.op('Sqrt', [g.op('Add', [meanSq, g.constFloat('rms_eps', [d.norm.eps], [])])])]);
  return g.op('Mul', [normed, kind === 'rmsnorm-plus-one' ? g.op('Add', [w, g.constFloat('one_f', [1], [])]) : w]);
}

/** x `[N, in]` · w `[in, out]` (+ b `[out]`). */
function addLinear(g: GraphBuilder, x: string, w: string, b?: string): string {
  const y = g.op('MatMul', [x, w]);
  return b ? g.op('Add', [y, b]) : y;
}

/** `cap · tanh(x / cap)` (Gemma 2's soft-capping of attention scores and of the logits). */
function addSoftcap(g: GraphBuilder, x: string, cap: number, tag: string, out?: string): string {
  return g.op('Mul', [g.op('Tanh', [g.op('Div', [x, g.constFloat(`${tag}_cap`, [cap], [])])]), `${tag}_cap`], undefined, out);
}

/**
 * Rotate-half RoPE: x `[N, heads·hd]`, cos/sin `[N, hd]` → `[N, heads, hd]` = x·cos + cat(−x₂, x₁)·sin, with x₁/x₂
 * the two halves of each head (dimension i pairs with i + hd/2).
 */
function addRope(g: GraphBuilder, x: string, heads: number, hd: number, cos: string, sin: string, tag: string): string {
  const xh = g.op('Reshape', [x, g.constInt64(`${tag}_heads`, [-1, heads, hd])]);
  const [x1, x2] = g.multi('Split', [xh, g.constInt64('rope_halves', [hd / 2, hd / 2])], [`${xh}_x1`, `${xh}_x2`], { axis: -1 });
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
export function addShapeBS(g: GraphBuilder, x: string): string {
  return g.op('Slice', [g.op('Shape', [x]), g.constInt64('zero_1d', [0]), g.constInt64('two_1d', [2])]);
}

/**
 * The attention input and q/k/v: the input norm (placements `pre`, `pre-and-post-branch`; `post-branch` feeds x as
 * is), the projections, OLMo 2's q/k norms over the whole projections (Llama-style RMSNorm, before the split into heads
 * and RoPE), RoPE. x2 `[N, H]`, cos/sin `[N, hd]` → q `[B, nh, S, hd]`, k and v `[B, nkv, S, hd]` (k rotated, as the
 * cache stores it; v not).
 */
export function addQkv(g: GraphBuilder, d: ModelDescription, w: LayerNames, x2: string, shapeBS: string, cos: string, sin: string, out: { q?: string; k?: string; v?: string } = {}): { q: string; k: string; v: string } {
  const { nh, nkv, hd } = layerDims(d);
  const h = d.norm.placement === 'post-branch' ? x2 : addRmsNorm(g, d, x2, w.inNormW!);
  let qp = addLinear(g, h, w.qW!, w.qB);
  let kp = addLinear(g, h, w.kW!, w.kB);
  if (d.attention.qkNorm === 'projection') {
    qp = addRmsNorm(g, d, qp, w.qNormW!, 'rmsnorm');
    kp = addRmsNorm(g, d, kp, w.kNormW!, 'rmsnorm');
  }
  const q = addRope(g, qp, nh, hd, cos, sin, 'q_rope');
  const k = addRope(g, kp, nkv, hd, cos, sin, 'k_rope');
  const v = g.op('Reshape', [addLinear(g, h, w.vW!, w.vB), g.constInt64('v_heads', [-1, nkv, hd])]);
  return { q: addToHeads(g, q, shapeBS, nh, hd, out.q), k: addToHeads(g, k, shapeBS, nkv, hd, out.k), v: addToHeads(g, v, shapeBS, nkv, hd, out.v) };
}

/**
 * Grouped-query attention: q `[B, nh, S, hd]`, keys/values `[B, nkv, T, hd]`, mask `[B, 1, S, T]` → context `[N, Q]`.
 * Query head h reads kv head h // (nh/nkv) (transformers' repeat_kv): the group of nh/nkv consecutive query heads is
 * laid out as `[B, nkv, group·S, hd]`, so each kv head is multiplied once with all the query rows that share it and
 * the cache is never expanded. Scores q·kᵀ times the scale (head_dim^-½, or Gemma 2's query_pre_attn_scalar^-½),
 * Gemma 2's soft-cap before the mask, + mask, softmax in float32, · v.
 */
export function addAttention(g: GraphBuilder, d: ModelDescription, q: string, keys: string, values: string, mask: string): string {
  const { nh, nkv, hd } = layerDims(d);
  const group = nh / nkv;
  const qShape = g.op('Shape', [q]);
  const scale = d.attention.scale ?? hd ** -0.5;
  const qGrouped = g.op('Reshape', [g.op('Mul', [q, g.constFloat('attn_scale', [scale], [])]), g.constInt64('q_grouped', [0, nkv, -1, hd])]);
  // [B, nkv, group·S, T] (onnxruntime fuses the Transpose into the MatMul)
  let scores = g.op('MatMul', [qGrouped, g.op('Transpose', [keys], { perm: [0, 1, 3, 2] })]);
  if (d.attention.logitSoftcap !== undefined) scores = addSoftcap(g, scores, d.attention.logitSoftcap, 'attn');
  // The mask is per query token, the same for each head of a group: scores as [B, nkv, group, S, T] + [B, 1, 1, S, T].
  const seq = g.op('Slice', [qShape, g.constInt64('two_1d', [2]), g.constInt64('three_1d', [3])]);
  const scores5 = g.op('Reshape', [scores, g.op('Concat', [g.constInt64('b_kv_group', [0, nkv, group]), seq, g.constInt64('minus_one_1d', [-1])], { axis: 0 })]);
  const biased = g.op('Add', [scores5, g.op('Unsqueeze', [mask, g.constInt64('axis_2', [2])])]);
  const probs = g.op('Reshape', [g.op('Softmax', [biased], { axis: -1 }), g.op('Shape', [scores])]);
  // [B, nkv, group·S, hd] → [B, nh, S, hd] → [B, S, nh, hd] → [N, Q]
  const ctx = g.op('Transpose', [g.op('Reshape', [g.op('MatMul', [probs, values]), qShape])], { perm: [0, 2, 1, 3] });
  return g.op('Reshape', [ctx, g.constInt64('ctx_flat', [-1, nh * hd])]);
}

/**
 * The gated MLP `down(act(x · gate + gateB) · (x · up + upB)) + downB`: SiLU (SwiGLU) or tanh GELU (Gemma's GeGLU)
 * on the gate only. The dense MLP, each expert and the shared expert of a mixture of experts.
 */
function addGatedMlp(g: GraphBuilder, d: ModelDescription, x: string, w: { gate: string; up: string; down: string; gateB?: string; upB?: string; downB?: string }): string {
  const gate = addLinear(g, x, w.gate, w.gateB);
  let act: string;
  if (d.mlp.kind === 'geglu-tanh') {
    // gelu_pytorch_tanh: 0.5·z·(1 + tanh(sqrt(2/π)·(z + 0.044715·z³))) (opset 17 has no Gelu op).
    const cube = g.op('Mul', [g.op('Mul', [gate, gate]), gate]);
    const inner = g.op('Mul', [g.op('Add', [gate, g.op('Mul', [cube, g.constFloat('gelu_c3', [0.044715], [])])]), g.constFloat('gelu_k', [Math.sqrt(2 / Math.PI)], [])]);
    act = g.op('Mul', [g.op('Mul', [gate, g.constFloat('half_f', [0.5], [])]), g.op('Add', [g.op('Tanh', [inner]), g.constFloat('one_f', [1], [])])]);
  } else act = g.op('Mul', [gate, g.op('Sigmoid', [gate])]);
  return addLinear(g, g.op('Mul', [act, addLinear(g, x, w.up, w.upB)]), w.down, w.downB);
}

/** A layer's MLP: the mixture of experts on a sparse layer (its names have a router), else the dense gated MLP. */
function addMlp(g: GraphBuilder, d: ModelDescription, w: LayerNames, x: string): string {
  if (d.moe && w.routerW) return addMoeMlp(g, d, w, x, (xs, gate, up, down) => addGatedMlp(g, d, xs, { gate, up, down }));
  return addGatedMlp(g, d, x, { gate: w.gateW!, up: w.upW!, down: w.downW!, gateB: w.gateB, upB: w.upB, downB: w.downB });
}

/**
 * The layer after attention: o_proj, the branch-output norm (`post-branch`, `pre-and-post-branch`), the residual add;
 * then the MLP with its input norm (`pre`, `pre-and-post-branch`) and output norm, and the residual add.
 * x2, ctx `[N, ·]` → `[N, H]`.
 */
export function addOutputAndMlp(g: GraphBuilder, d: ModelDescription, w: LayerNames, x2: string, ctx: string): string {
  const place = d.norm.placement;
  const branchIn = (x: string, key: RotaryLayerTensorKey) => (place === 'post-branch' ? x : addRmsNorm(g, d, x, w[key]!));
  const branchOut = (x: string, key: RotaryLayerTensorKey) => (place === 'pre' ? x : addRmsNorm(g, d, x, w[key]!));
  const r = g.op('Add', [x2, branchOut(addLinear(g, ctx, w.oW!, w.oB), 'attnOutNormW')]);
  return g.op('Add', [r, branchOut(addMlp(g, d, w, branchIn(r, 'postNormW')), 'mlpOutNormW')]);
}

/**
 * Tensor names of a layer with its past passed in and the present passed out: x `[B, S, H]`, the layer's mask
 * `[B, 1, S, T]`, cos/sin `[N, hd]`, past k/v `[B, nkv, P, hd]` → y `[B, S, H]`, present k/v `[B, nkv, T, hd]`, and
 * (when named) the step's new k/v `[B, nkv, S, hd]`.
 */
export interface DecoderLayerIo {
  x: string;
  mask: string;
  cos: string;
  sin: string;
  pastK: string;
  pastV: string;
  y: string;
  presentK: string;
  presentV: string;
  newK?: string;
  newV?: string;
}

/** One decoder layer with its past passed in (`io`); `w` names the layer's tensors (initializers or inputs in `g`). */
export function addDecoderLayer(g: GraphBuilder, d: ModelDescription, w: LayerNames, io: DecoderLayerIo): void {
  const { H } = layerDims(d);
  const x2 = g.op('Reshape', [io.x, g.constInt64('flat_hidden', [-1, H])]);
  const { q, k, v } = addQkv(g, d, w, x2, addShapeBS(g, io.x), io.cos, io.sin, { k: io.newK, v: io.newV });
  g.op('Concat', [io.pastK, k], { axis: 2 }, io.presentK);
  g.op('Concat', [io.pastV, v], { axis: 2 }, io.presentV);
  const y = addOutputAndMlp(g, d, w, x2, addAttention(g, d, q, io.presentK, io.presentV, io.mask));
  g.op('Reshape', [y, g.op('Shape', [io.x])], undefined, io.y);
}

/**
 * Token embeddings `table[ids]` `[B, S, H]`, times `embedding.scale` when set (Gemma's sqrt(hidden), rounded to float32,
 * the compute dtype); `out` names the result.
 */
export function addEmbedding(g: GraphBuilder, d: ModelDescription, table: string, ids: string, out?: string): string {
  const s = d.embedding.scale;
  if (s === undefined || s === 1) return g.op('Gather', [table, ids], { axis: 0 }, out);
  return g.op('Mul', [g.op('Gather', [table, ids], { axis: 0 }), g.constFloat('embed_scale', [Math.fround(s)], [])], undefined, out);
}

/**
 * Final norm and logits = norm(x)·headᵀ (Gemm with the `[V, H]` head as stored), then Gemma 2's final soft-cap.
 * x `[N, H]` → `out` `[N, V]`.
 */
export function addHead(g: GraphBuilder, d: ModelDescription, x: string, norm: string, head: string, out: string): string {
  const cap = d.finalLogitSoftcap;
  const logits = g.op('Gemm', [addRmsNorm(g, d, x, norm), head], { transB: 1 }, cap === undefined ? out : undefined);
  return cap === undefined ? logits : addSoftcap(g, logits, cap, 'head', out);
}
