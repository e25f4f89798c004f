/**
 * The one onnxruntime decoder layer of every family (OPT; Llama 2/3, Mistral, Qwen2, Gemma 2, Phi-3, OLMo 2), as ONNX
 * nodes (opset 17), its norm, placement, positions, attention and MLP sub-graphs chosen from the description's kinds,
 * computing what `referenceLayer` (opt-reference.ts) and `decoderLayer` (llama-reference.ts, llama/check.md) compute.
 * The resident stage graphs and the streamed graph (llama-graphs.ts) and the whole-model export graph
 * (llama-onnx-graph.ts) all build their layers, embedding and head here.
 *
 * Two forms of the same layer (`fusedLayer`): learned-position models (OPT) run q/k/v as one `[H, 3H]` Gemm, every
 * linear as a Gemm with its bias, and attention in onnxruntime's MultiHeadAttention kernel (the export graph, which
 * must stay plain ai.onnx, uses the plain-op attention); the rotary families run MatMul + Add and plain-op attention.
 * Each form is the one its family's conformance goldens and speed figures were set with; moving the rotary families
 * to the fused form would be a change of its own, measured and checked against their goldens.
 *
 * Host-side kinds, not in these nodes: RoPE cos/sin are inputs (`ropeCosSin`, so every `rope_scaling` type — longrope's
 * factor switch and cos/sin scale included — is the host's business), and a sliding window arrives in the mask the
 * caller feeds each layer (Gemma 2's even layers get a windowed mask, its odd ones the plain one).
 *
 * Shapes: B batch rows, S new tokens per row, P cached tokens, T = P + S keys, N = B·S, H hidden, nh/nkv query/kv heads,
 * hd head_dim, Q = nh·hd, KV = nkv·hd, I intermediate, V vocab. Linear weights are `[in, out]`; the head is `[V, H]`.
 */
import type { LayerTensorKey as OptLayerTensorKey, MoeLayerTensorKey, RotaryLayerTensorKey } from '@flexhelm/engine';
import { requireKinds, type ModelDescription, type ModelKind } from '@flexhelm/contract';
import type { GraphBuilder } from './onnx-writer.js';
import { addMoeMlp } from './ort-moe-mlp.js';

/**
 * Key → graph tensor name of each tensor a layer uses (initializers, or inputs when streamed); a sparse layer of a
 * mixture of experts names its router and experts (`MoeLayerTensorKey`) instead of the dense MLP's. LayerNorm models
 * (OPT) name their norms `ln1W`/`ln1B` (attention) and `ln2W`/`ln2B` (MLP) and their ReLU MLP `fc1W`… (`LayerTensorKey`);
 * the fused form (`fusedLayer`) reads q/k/v as one packed `qkvW` `[H, Q + 2·KV]` and `qkvB` instead of qW…vB.
 */
export type LayerNames = Partial<Record<RotaryLayerTensorKey | MoeLayerTensorKey | OptLayerTensorKey | 'qkvW' | 'qkvB', string>>;

/** The kinds this layer (with the host's cos/sin and masks) computes. */
export const ORT_LAYER_KINDS: readonly ModelKind[] = [
  'norm:layernorm', 'norm:rmsnorm', 'norm:rmsnorm-plus-one',
  'placement:pre', 'placement:post', 'placement:post-branch', 'placement:pre-and-post-branch',
  'positions:learned', 'rope:default', 'rope:linear', 'rope:dynamic', 'rope:llama3', 'rope:longrope',
  'attention:scale', 'attention:logit-softcap', 'attention:window', 'attention:window-even-layers', 'attention:qk-norm',
  'mlp:relu', 'mlp:swiglu', 'mlp:geglu-tanh', 'mlp:moe', 'mlp:moe-shared-expert', 'mlp:moe-dense-layers',
  'embedding:scale', 'head:logit-softcap',
];

/** The tensors the q/k/v stage reads (the rest of a layer reads the others). */
const QKV_STAGE_KEYS: readonly RotaryLayerTensorKey[] = ['inNormW', 'qW', 'qB', 'kW', 'kB', 'vW', 'vB', 'qNormW', 'kNormW'];

/** Whether layer tensor `key` is read by the q/k/v stage of `d`'s layer (LayerNorm's ln1 only when it is the input norm). */
export function inQkvStage(d: ModelDescription, key: string): boolean {
  if (key === 'ln1W' || key === 'ln1B') return d.norm.placement !== 'post';
  return (QKV_STAGE_KEYS as readonly string[]).includes(key);
}

/** The q/k/v tensors the fused form packs into `qkvW`/`qkvB`. */
export const QKV_KEYS = ['qW', 'kW', 'vW', 'qB', 'kB', 'vB'] as const;

/**
 * Whether `d`'s layer takes the fused form (see the file comment): the learned-position models (OPT), whose heads each
 * have their own keys and values and whose q and k need no rotation between the projection and MultiHeadAttention.
 */
export function fusedLayer(d: ModelDescription): boolean {
  return d.positions.kind === 'learned';
}

/** How attention runs: onnxruntime's MultiHeadAttention (fused form only) or plain ai.onnx ops. */
export type AttentionKernel = 'multi-head-attention' | 'ops';

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
  // Post-norm layers (opt-350m) end on a norm; every other placement needs the final one before the head.
  if (!d.norm.final && d.norm.placement !== 'post') problems.push(`no final norm (a ${d.norm.placement}-norm layer needs one)`);
  // project_in/project_out around the layers exist for OPT's checkpoints only (opt-350m).
  if (d.embedding.dim !== d.hiddenSize && !fusedLayer(d)) problems.push(`embedding width ${d.embedding.dim} ≠ hidden ${d.hiddenSize}`);
  const { heads, kvHeads, headDim } = d.attention;
  if (heads % kvHeads !== 0) problems.push(`${heads} query heads are not a multiple of ${kvHeads} kv heads`);
  if (fusedLayer(d) && heads !== kvHeads) problems.push(`${heads} query heads share ${kvHeads} kv heads (MultiHeadAttention needs one kv head per query head)`);
  if (d.positions.kind === 'rope' && headDim % 2 !== 0) problems.push(`head_dim ${headDim} is odd`);
  if (problems.length) throw new Error(`onnxruntime's layer graphs cannot compute ${d.family} model ${d.name}: ${problems.join('; ')}`);
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

/** A norm's weight and (LayerNorm) bias names. */
export interface NormNames {
  w: string;
  b?: string;
}

/**
 * The description's norm over the last axis: LayerNorm with its bias (onnxruntime's LayerNormalization kernel, eps
 * from the description), else RMSNorm (`addRmsNorm`).
 */
function addNorm(g: GraphBuilder, d: ModelDescription, x: string, n: NormNames, out?: string): string {
  if (d.norm.kind !== 'layernorm') return addRmsNorm(g, d, x, n.w);
  if (!n.b) throw new Error(`${d.name}: a LayerNorm needs its bias (norm ${n.w})`);
  return g.op('LayerNormalization', [x, n.w, n.b], { axis: -1, epsilon: { float: d.norm.eps } }, out);
}

/** The attention branch's input norm (or, post-norm, the norm after its residual add). */
const attnNorm = (w: LayerNames): NormNames => ({ w: (w.inNormW ?? w.ln1W)!, b: w.ln1B });
/** The MLP branch's input norm (or, post-norm, the norm after its residual add). */
const mlpNorm = (w: LayerNames): NormNames => ({ w: (w.postNormW ?? w.ln2W)!, b: w.ln2B });

/**
 * x `[N, in]` · w `[in, out]` (+ b `[out]`): in the fused form a Gemm with the bias fused, else MatMul + Add (the ops
 * each form's figures were set with).
 */
function addLinear(g: GraphBuilder, d: ModelDescription, x: string, w: string, b?: string): string {
  if (fusedLayer(d) && b) return g.op('Gemm', [x, w, b]);
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

/** The input of the attention branch: x2 normed (placements `pre`, `pre-and-post-branch`) or as is (`post`, `post-branch`). */
function attentionInput(g: GraphBuilder, d: ModelDescription, w: LayerNames, x2: string): string {
  const place = d.norm.placement;
  return place === 'pre' || place === 'pre-and-post-branch' ? addNorm(g, d, x2, attnNorm(w)) : x2;
}

/**
 * The attention input and q/k/v of the rotary families: the input norm, the projections, OLMo 2's q/k norms over the
 * whole projections (Llama-style RMSNorm, before the split into heads and RoPE), RoPE. x2 `[N, H]`, cos/sin
 * `[N, hd]` → q `[B, nh, S, hd]`, k and v `[B, nkv, S, hd]` (k rotated, as the cache stores it; v not).
 */
export function addQkv(g: GraphBuilder, d: ModelDescription, w: LayerNames, x2: string, shapeBS: string, cos: string, sin: string, out: { q?: string; k?: string; v?: string } = {}): { q: string; k: string; v: string } {
  const { nh, nkv, hd } = layerDims(d);
  if (d.positions.kind !== 'rope') throw new Error(`addQkv rotates q and k; ${d.name} has learned positions (addFusedQkv)`);
  const h = attentionInput(g, d, w, x2);
  let qp = addLinear(g, d, h, w.qW!, w.qB);
  let kp = addLinear(g, d, h, w.kW!, w.kB);
  if (d.attention.qkNorm === 'projection') {
    qp = addRmsNorm(g, d, qp, w.qNormW!, 'rmsnorm');
    kp = addRmsNorm(g, d, kp, w.kNormW!, 'rmsnorm');
  }
  const q = addRope(g, qp, nh, hd, cos, sin, 'q_rope');
  const k = addRope(g, kp, nkv, hd, cos, sin, 'k_rope');
  const v = g.op('Reshape', [addLinear(g, d, h, w.vW!, w.vB), g.constInt64('v_heads', [-1, nkv, hd])]);
  return { q: addToHeads(g, q, shapeBS, nh, hd, out.q), k: addToHeads(g, k, shapeBS, nkv, hd, out.k), v: addToHeads(g, v, shapeBS, nkv, hd, out.v) };
}

/**
 * The fused form's attention input and q/k/v: the input norm, one Gemm with the packed `qkvW` `[H, 3Q]` (bias added;
 * q not yet scaled: the attention scales it) split into q, k, v `[B, S, Q]` (the layout MultiHeadAttention reads).
 */
export function addFusedQkv(g: GraphBuilder, d: ModelDescription, w: LayerNames, x2: string, shapeBS: string): { q: string; k: string; v: string } {
  const { nh, hd } = layerDims(d);
  const Q = nh * hd;
  const qkv = g.op('Gemm', w.qkvB ? [attentionInput(g, d, w, x2), w.qkvW!, w.qkvB] : [attentionInput(g, d, w, x2), w.qkvW!]);
  const qkvBS = g.op('Reshape', [qkv, g.op('Concat', [shapeBS, g.constInt64('three_q', [3 * Q])], { axis: 0 })]);
  const [q, k, v] = g.multi('Split', [qkvBS, g.constInt64('qkv_split', [Q, Q, Q])], [`${qkvBS}_q`, `${qkvBS}_k`, `${qkvBS}_v`], { axis: -1 });
  return { q: q!, k: k!, v: v! };
}

/** `[B, S, heads·hd]` → `[B, heads, S, hd]` (the fused form's q/k/v into the cache's layout). */
export function addBshToHeads(g: GraphBuilder, d: ModelDescription, x: string, out?: string): string {
  const { nh, hd } = layerDims(d);
  return g.op('Transpose', [g.op('Reshape', [x, g.constInt64('bs_heads', [0, 0, nh, hd])])], { perm: [0, 2, 1, 3] }, out);
}

/**
 * onnxruntime's MultiHeadAttention (com.microsoft; the graph must be encoded with `microsoft: true`): q `[B, S, Q]`,
 * keys/values `[B, S, Q]` with a past `[B, nh, P, hd]` (then `present` names the outputs `[B, nh, T, hd]`) or, without
 * one, the whole cache `[B, nh, T, hd]`; additive mask `[B, 1, S, T]` → context `[B, S, Q]` named `ctx`. The kernel
 * scales q·kᵀ by the description's scale (head_dim^-½ for OPT: the same product as HF's q scaling, up to rounding).
 */
export function addMultiHeadAttention(g: GraphBuilder, d: ModelDescription, q: string, keys: string, values: string, mask: string, ctx: string, past?: { k: string; v: string; presentK: string; presentV: string }): string {
  const { nh, hd } = layerDims(d);
  if (!fusedLayer(d)) throw new Error(`${d.name}: MultiHeadAttention computes the fused form's layer only (learned positions, one kv head per query head)`);
  g.nodes.push({
    op: 'MultiHeadAttention',
    domain: 'com.microsoft',
    inputs: past ? [q, keys, values, '', '', mask, past.k, past.v] : [q, keys, values, '', '', mask],
    outputs: past ? [ctx, past.presentK, past.presentV] : [ctx],
    attributes: { num_heads: nh, scale: { float: d.attention.scale ?? hd ** -0.5 } },
  });
  return ctx;
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
  const gate = addLinear(g, d, x, w.gate, w.gateB);
  let act: string;
  if (d.mlp.kind === 'geglu-tanh') {
    // gelu_pytorch_tanh: 0.5·z·(1 + tanh(sqrt(2/π)·(z + 0.044715·z³))) (opset 17 has no Gelu op).
    const cube = g.op('Mul', [g.op('Mul', [gate, gate]), gate]);
    const inner = g.op('Mul', [g.op('Add', [gate, g.op('Mul', [cube, g.constFloat('gelu_c3', [0.044715], [])])]), g.constFloat('gelu_k', [Math.sqrt(2 / Math.PI)], [])]);
    act = g.op('Mul', [g.op('Mul', [gate, g.constFloat('half_f', [0.5], [])]), g.op('Add', [g.op('Tanh', [inner]), g.constFloat('one_f', [1], [])])]);
  } else act = g.op('Mul', [gate, g.op('Sigmoid', [gate])]);
  return addLinear(g, d, g.op('Mul', [act, addLinear(g, d, x, w.up, w.upB)]), w.down, w.downB);
}

/**
 * A layer's MLP: OPT's `fc2(relu(fc1(x)))` with biases, the mixture of experts on a sparse layer (its names have a
 * router), else the dense gated MLP.
 */
function addMlp(g: GraphBuilder, d: ModelDescription, w: LayerNames, x: string): string {
  if (d.mlp.kind === 'relu') return addLinear(g, d, g.op('Relu', [addLinear(g, d, x, w.fc1W!, w.fc1B)]), w.fc2W!, w.fc2B);
  if (d.moe && w.routerW) return addMoeMlp(g, d, w, x, (xs, gate, up, down) => addGatedMlp(g, d, xs, { gate, up, down }));
  return addGatedMlp(g, d, x, { gate: w.gateW!, up: w.upW!, down: w.downW!, gateB: w.gateB, upB: w.upB, downB: w.downB });
}

/**
 * The layer after attention: the output projection, the branch-output norm (`post-branch`, `pre-and-post-branch`),
 * the residual add and, post-norm (opt-350m), the attention norm over the sum; then the MLP with its input norm
 * (`pre`, `pre-and-post-branch`) and output norm, the residual add and, post-norm, the MLP norm over the sum.
 * x2, ctx `[N, ·]` → `[N, H]`.
 */
export function addOutputAndMlp(g: GraphBuilder, d: ModelDescription, w: LayerNames, x2: string, ctx: string): string {
  const place = d.norm.placement;
  const normIn = place === 'pre' || place === 'pre-and-post-branch';
  const normOut = place === 'post-branch' || place === 'pre-and-post-branch';
  const branchOut = (x: string, key: RotaryLayerTensorKey) => (normOut ? addNorm(g, d, x, { w: w[key]! }) : x);
  let r = g.op('Add', [x2, branchOut(addLinear(g, d, ctx, w.oW!, w.oB), 'attnOutNormW')]);
  if (place === 'post') r = addNorm(g, d, r, attnNorm(w));
  const y = g.op('Add', [r, branchOut(addMlp(g, d, w, normIn ? addNorm(g, d, r, mlpNorm(w)) : r), 'mlpOutNormW')]);
  return place === 'post' ? addNorm(g, d, y, mlpNorm(w)) : y;
}

/**
 * Tensor names of a layer with its past passed in and the present passed out: x `[B, S, H]`, the layer's mask
 * `[B, 1, S, T]`, cos/sin `[N, hd]` (rotary families), past k/v `[B, nkv, P, hd]` → y `[B, S, H]`, present k/v
 * `[B, nkv, T, hd]`, and (when named) the step's new k/v `[B, nkv, S, hd]`.
 */
export interface DecoderLayerIo {
  x: string;
  mask: string;
  cos?: string;
  sin?: string;
  pastK: string;
  pastV: string;
  y: string;
  presentK: string;
  presentV: string;
  newK?: string;
  newV?: string;
}

/**
 * One decoder layer with its past passed in (`io`); `w` names the layer's tensors (initializers or inputs in `g`).
 * `kernel`: the fused form's attention runs in MultiHeadAttention unless `ops` is asked for (the export graph).
 */
export function addDecoderLayer(g: GraphBuilder, d: ModelDescription, w: LayerNames, io: DecoderLayerIo, kernel: AttentionKernel = fusedLayer(d) ? 'multi-head-attention' : 'ops'): void {
  const { H } = layerDims(d);
  const x2 = g.op('Reshape', [io.x, g.constInt64('flat_hidden', [-1, H])]);
  const shapeBS = addShapeBS(g, io.x);
  let ctx: string;
  if (fusedLayer(d)) {
    const { q, k, v } = addFusedQkv(g, d, w, x2, shapeBS);
    if (kernel === 'multi-head-attention') {
      // The kernel appends k/v to the past itself; the cache-holding caller still gets the step's own k/v.
      const { nh, hd } = layerDims(d);
      const bsh = addMultiHeadAttention(g, d, q, k, v, io.mask, `${q}_ctx`, { k: io.pastK, v: io.pastV, presentK: io.presentK, presentV: io.presentV });
      ctx = g.op('Reshape', [bsh, g.constInt64('ctx_flat', [-1, nh * hd])]);
      if (io.newK) addBshToHeads(g, d, k, io.newK);
      if (io.newV) addBshToHeads(g, d, v, io.newV);
    } else {
      const kh = addBshToHeads(g, d, k, io.newK);
      const vh = addBshToHeads(g, d, v, io.newV);
      g.op('Concat', [io.pastK, kh], { axis: 2 }, io.presentK);
      g.op('Concat', [io.pastV, vh], { axis: 2 }, io.presentV);
      ctx = addAttention(g, d, addBshToHeads(g, d, q), io.presentK, io.presentV, io.mask);
    }
  } else {
    if (kernel !== 'ops') throw new Error(`${d.name}: MultiHeadAttention computes the fused form's layer only`);
    if (!io.cos || !io.sin) throw new Error(`${d.name}: a rotary layer needs the step's cos/sin`);
    const { q, k, v } = addQkv(g, d, w, x2, shapeBS, io.cos, io.sin, { k: io.newK, v: io.newV });
    g.op('Concat', [io.pastK, k], { axis: 2 }, io.presentK);
    g.op('Concat', [io.pastV, v], { axis: 2 }, io.presentV);
    ctx = addAttention(g, d, q, io.presentK, io.presentV, io.mask);
  }
  const y = addOutputAndMlp(g, d, w, x2, ctx);
  g.op('Reshape', [y, g.op('Shape', [io.x])], undefined, io.y);
}

/** The learned-position inputs of the embedding: the position table, the step's table rows, OPT's project_in `[dim, H]`. */
export interface LearnedPositionNames {
  table: string;
  positions: string;
  projectIn?: string;
}

/**
 * Token embeddings `table[ids]` `[B, S, dim]`, times `embedding.scale` when set (Gemma's sqrt(hidden), rounded to
 * float32, the compute dtype); with learned positions (OPT) projected in (`projectIn`) and plus the position rows
 * `learned.table[learned.positions]` (the positions are table rows: the description's offset is already added).
 * `out` names the result `[B, S, H]`.
 */
export function addEmbedding(g: GraphBuilder, d: ModelDescription, table: string, ids: string, out?: string, learned?: LearnedPositionNames): string {
  const s = d.embedding.scale;
  const scaled = s !== undefined && s !== 1;
  if (d.positions.kind === 'learned') {
    if (!learned) throw new Error(`${d.name}: learned positions need the position table and the step's positions`);
    let tok = g.op('Gather', [table, ids], { axis: 0 });
    if (scaled) tok = g.op('Mul', [tok, g.constFloat('embed_scale', [Math.fround(s)], [])]);
    if (learned.projectIn) tok = g.op('MatMul', [tok, learned.projectIn]);
    return g.op('Add', [tok, g.op('Gather', [learned.table, learned.positions], { axis: 0 })], undefined, out);
  }
  if (!scaled) return g.op('Gather', [table, ids], { axis: 0 }, out);
  return g.op('Mul', [g.op('Gather', [table, ids], { axis: 0 }), g.constFloat('embed_scale', [Math.fround(s)], [])], undefined, out);
}

/**
 * The final norm (when the description has one; post-norm layers end on their own), OPT's project_out `[H, dim]`,
 * and logits = h·headᵀ (Gemm with the `[V, dim]` head as stored), then Gemma 2's final soft-cap.
 * x `[N, H]` → `out` `[N, V]`.
 */
export function addHead(g: GraphBuilder, d: ModelDescription, x: string, norm: NormNames | undefined, head: string, out: string, projectOut?: string): string {
  if (d.norm.final && !norm) throw new Error(`${d.name}: the head needs the final norm`);
  let h = d.norm.final && norm ? addNorm(g, d, x, norm) : x;
  if (projectOut) h = g.op('MatMul', [h, projectOut]);
  const cap = d.finalLogitSoftcap;
  const logits = g.op('Gemm', [h, head], { transB: 1 }, cap === undefined ? out : undefined);
  return cap === undefined ? logits : addSoftcap(g, logits, cap, 'head', out);
}
