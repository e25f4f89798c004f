import { MASK_BIAS } from './mask-bias.js';
import type { LayerTensors, ModelDescription } from './model-description.js';
import { type GraphBuilder, OnnxType, type OnnxValueInfo } from './onnx-writer.js';
import { transposed } from './transposed.js';
import type { HeadWeights } from './opt-weights.js';
import { ropeInvFreq } from './rope-inv-freq.js';

/**
 * The whole Llama-family decoder (Llama 2/3, Mistral, Qwen2) as one ONNX graph in the interface
 * `@huggingface/transformers` drives: inputs `input_ids`, `attention_mask`, `past_key_values.<i>.key|value`
 * `[B, kv heads, past, head_dim]`; outputs `logits` and `present.<i>.key|value`. Positions come from the mask inside
 * the graph (`cumsum(mask) − 1`, pads 1, as `generate()`), so no `position_ids` input. Ops only (opset 17): RMSNorm,
 * rotate-half RoPE with the description's (scaled) frequencies, grouped-query attention by repeating kv heads, Mistral's
 * sliding window in the mask, SwiGLU. Layers come as `LlamaCheckpoint.layer` gives them (Linear weights `[in, out]`,
 * read one at a time); the head is `[vocab, hidden]` as in the checkpoint.
 */
export function addLlamaFullModel(g: GraphBuilder, d: ModelDescription, embedding: Float32Array, layer: (i: number) => Partial<LayerTensors>, head: HeadWeights): { inputs: OnnxValueInfo[]; outputs: OnnxValueInfo[] } {
  const { heads: nh, kvHeads: nkv, headDim: hd, slidingWindow } = d.attention;
  const H = d.hiddenSize;
  const I = d.mlp.intermediateSize;
  const V = d.vocabSize;
  if (d.positions.kind !== 'rope') throw new Error('addLlamaFullModel needs rotary positions');
  const one = g.constInt64('one_i64', [1], []);
  const zero = g.constInt64('zero_i64', [0], []);
  const axis1 = g.constInt64('axis1_i64', [1], []);
  const idsShape = g.op('Shape', ['input_ids']);
  const seqLen = g.op('Gather', [idsShape, one], { axis: 0 });
  const totalLen = g.op('Gather', [g.op('Shape', ['attention_mask']), one], { axis: 0 });
  const pastLen = g.op('Sub', [totalLen, seqLen]);
  // positions = where(mask, cumsum(mask) − 1, 1)[:, past:]
  const cum = g.op('CumSum', ['attention_mask', axis1]);
  const maskBool = g.op('Cast', ['attention_mask'], { to: OnnxType.BOOL });
  const allPos = g.op('Where', [maskBool, g.op('Sub', [cum, one]), one]);
  const positions = g.op('Slice', [allPos, g.op('Unsqueeze', [pastLen, zero]), g.op('Unsqueeze', [totalLen, zero]), g.constInt64('axes1', [1])]);
  // cos/sin [B, 1, S, hd] from angles p · inv_freq, duplicated over both halves (rotate-half convention).
  // Dynamic NTK scaling depends on the sequence; exported at max_position_embeddings (no change up to that length).
  const invFreq = ropeInvFreq(hd, d.positions.theta, d.positions.scaling, d.maxPositions);
  g.floatTensor('rope_inv_freq', invFreq, [1, 1, hd / 2]);
  const posF = g.op('Unsqueeze', [g.op('Cast', [positions], { to: OnnxType.FLOAT }), g.constInt64('axes_last', [2])]);
  const angles = g.op('Mul', [posF, 'rope_inv_freq']);
  const emb = g.op('Concat', [angles, angles], { axis: -1 });
  const cos = g.op('Unsqueeze', [g.op('Cos', [emb]), axis1]);
  const sin = g.op('Unsqueeze', [g.op('Sin', [emb]), axis1]);
  // Mask bias [B, 1, S, T]: key t visible from query q (absolute indices) when t <= q, mask[t] = 1, and q − t < window.
  const keys = g.op('Range', [zero, totalLen, one]);
  const queries = g.op('Range', [pastLen, totalLen, one]);
  const kRow = g.op('Unsqueeze', [keys, zero]);
  const qCol = g.op('Unsqueeze', [queries, one]);
  let allowed = g.op('And', [g.op('LessOrEqual', [kRow, qCol]), g.op('Unsqueeze', [maskBool, g.constInt64('axes12', [1, 2])])]);
  if (slidingWindow !== undefined) allowed = g.op('And', [allowed, g.op('Less', [g.op('Sub', [qCol, kRow]), g.constInt64('sliding_window', [slidingWindow], [])])]);
  const maskBias = g.op('Where', [allowed, g.constFloat('zero_f', [0], []), g.constFloat('mask_bias', [MASK_BIAS], [])]);
  g.floatTensor('embed_tokens', embedding, [V, H]);
  let h = g.op('Gather', ['embed_tokens', 'input_ids'], { axis: 0 });
  const inputs: OnnxValueInfo[] = [
    { name: 'input_ids', type: OnnxType.INT64, dims: ['batch_size', 'sequence_length'] },
    { name: 'attention_mask', type: OnnxType.INT64, dims: ['batch_size', 'total_sequence_length'] },
  ];
  const outputs: OnnxValueInfo[] = [{ name: 'logits', type: OnnxType.FLOAT, dims: ['batch_size', 'sequence_length', V] }];
  const eps = g.constFloat('rms_eps', [d.norm.eps], []);
  const rmsNorm = (x: string, weight: Float32Array, name: string) => {
    g.floatTensor(name, weight, [H]);
    const meanSq = g.op('ReduceMean', [g.op('Mul', [x, x])], { axes: [-1], keepdims: 1 });
    return g.op('Mul', [g.op('Div', [x, g.op('Sqrt', [g.op('Add', [meanSq, eps])])]), name]);
  };
  const linear = (x: string, weight: Float32Array, out: number, inDim: number, name: string, bias?: Float32Array) => {
    g.floatTensor(name, weight, [inDim, out]);
    const y = g.op('MatMul', [x, name]);
    if (!bias) return y;
    g.floatTensor(`${name}_bias`, bias, [out]);
    return g.op('Add', [y, `${name}_bias`]);
  };
  const half = g.constInt64('rope_half', [hd / 2]);
  const headEnd = g.constInt64('rope_end', [hd]);
  const lastAxis = g.constInt64('axis_last', [-1]);
  const rope = (x: string) => {
    const x1 = g.op('Slice', [x, g.constInt64('zero_1d', [0]), half, lastAxis]);
    const x2 = g.op('Slice', [x, half, headEnd, lastAxis]);
    const rotated = g.op('Concat', [g.op('Neg', [x2]), x1], { axis: -1 });
    return g.op('Add', [g.op('Mul', [x, cos]), g.op('Mul', [rotated, sin])]);
  };
  const toHeads = (x: string, n: number) => g.op('Transpose', [g.op('Reshape', [x, g.constInt64(`heads_shape_${n}`, [0, 0, n, hd])])], { perm: [0, 2, 1, 3] });
  // repeat_kv: kv head j serves query heads j·group … (j+1)·group − 1.
  const group = nh / nkv;
  const repeatKv = (x: string) => {
    if (group === 1) return x;
    const u = g.op('Unsqueeze', [x, g.constInt64('axes2', [2])]);
    return g.op('Reshape', [g.op('Concat', Array(group).fill(u), { axis: 2 }), g.constInt64('repeated_kv_shape', [0, nh, -1, hd])]);
  };
  const scale = g.constFloat('attn_scale', [1 / Math.sqrt(hd)], []);
  for (let i = 0; i < d.layers; i++) {
    const lw = layer(i);
    const p = `layers.${i}.`;
    const x = rmsNorm(h, lw.inNormW!, `${p}input_layernorm`);
    const q = rope(toHeads(linear(x, lw.qW!, nh * hd, H, `${p}q_proj`, lw.qB), nh));
    const k = rope(toHeads(linear(x, lw.kW!, nkv * hd, H, `${p}k_proj`, lw.kB), nkv));
    const v = toHeads(linear(x, lw.vW!, nkv * hd, H, `${p}v_proj`, lw.vB), nkv);
    const pastK = `past_key_values.${i}.key`;
    const pastV = `past_key_values.${i}.value`;
    const presentK = g.op('Concat', [pastK, k], { axis: 2 }, `present.${i}.key`);
    const presentV = g.op('Concat', [pastV, v], { axis: 2 }, `present.${i}.value`);
    for (const name of [pastK, pastV]) inputs.push({ name, type: OnnxType.FLOAT, dims: ['batch_size', nkv, 'past_sequence_length', hd] });
    for (const name of [presentK, presentV]) outputs.push({ name, type: OnnxType.FLOAT, dims: ['batch_size', nkv, 'total_sequence_length', hd] });
    const scores = g.op('Add', [g.op('Mul', [g.op('MatMul', [q, g.op('Transpose', [repeatKv(presentK)], { perm: [0, 1, 3, 2] })]), scale]), maskBias]);
    const ctx = g.op('MatMul', [g.op('Softmax', [scores], { axis: -1 }), repeatKv(presentV)]);
    const merged = g.op('Reshape', [g.op('Transpose', [ctx], { perm: [0, 2, 1, 3] }), g.constInt64('merged_shape', [0, 0, nh * hd])]);
    h = g.op('Add', [h, linear(merged, lw.oW!, H, nh * hd, `${p}o_proj`, lw.oB)]);
    const y = rmsNorm(h, lw.postNormW!, `${p}post_attention_layernorm`);
    const gate = linear(y, lw.gateW!, I, H, `${p}gate_proj`, lw.gateB);
    const up = linear(y, lw.upW!, I, H, `${p}up_proj`, lw.upB);
    h = g.op('Add', [h, linear(g.op('Mul', [g.op('Mul', [gate, g.op('Sigmoid', [gate])]), up]), lw.downW!, H, I, `${p}down_proj`, lw.downB)]);
  }
  if (!head.finalLnW) throw new Error(`${d.name}: the head has no final norm weight`);
  const last = rmsNorm(h, head.finalLnW, 'final_norm');
  g.floatTensor('lm_head', transposed(head.lmHead, V, H), [H, V]);
  g.op('MatMul', [last, 'lm_head'], undefined, 'logits');
  return { inputs, outputs };
}
