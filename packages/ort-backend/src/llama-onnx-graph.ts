import { layerTensorsOf, MASK_BIAS, type LayerTensors, type ModelDescription } from '@flexhelm/contract';
import { layerHasWindow, positionTable, ropeInvFreq, transposed, type EmbeddingWeights, type HeadWeights, type RotaryLayerTensorKey } from '@flexhelm/engine';
import { type GraphBuilder, OnnxType, type OnnxValueInfo } from './onnx-writer.js';
import { addDecoderLayer, addEmbedding, addHead, fusedLayer, type LayerNames, layerDims } from './ort-decoder-layer.js';
import { layerTensorName } from './llama-graphs.js';

/**
 * The whole decoder of any family (OPT; Llama 2/3, Mistral, Qwen2, Gemma 2, Phi-3, OLMo 2) as one ONNX graph of plain
 * ai.onnx ops in the interface `@huggingface/transformers` drives: inputs `input_ids`, `attention_mask`,
 * `past_key_values.<i>.key|value` `[B, kv heads, past, head_dim]`; outputs `logits` and `present.<i>.key|value`.
 * Positions come from the mask inside the graph (rotary: `cumsum(mask) − 1`, pads 1, as `generate()`; learned:
 * `cumsum(mask)·mask − 1` plus the table offset, as OPT's embedding), so no `position_ids` input; cos/sin and the
 * masks (causal, pads, and the sliding window on the layers that have one) are computed in the graph too, and every
 * layer is `addDecoderLayer` (ort-decoder-layer.ts), the layer the onnxruntime backend runs, with plain-op attention.
 * Layers come with Linear weights `[in, out]`, read one at a time; the head is `[vocab, dim]` as in the checkpoint.
 */
export function addLlamaFullModel(g: GraphBuilder, d: ModelDescription, embedding: EmbeddingWeights, layer: (i: number) => Partial<LayerTensors>, head: HeadWeights): { inputs: OnnxValueInfo[]; outputs: OnnxValueInfo[] } {
  const { H, nkv, hd, V } = layerDims(d);
  const E = d.embedding.dim;
  const one = g.constInt64('one_i64', [1], []);
  const zero = g.constInt64('zero_i64', [0], []);
  const axis1 = g.constInt64('axis1_i64', [1], []);
  const idsShape = g.op('Shape', ['input_ids']);
  const seqLen = g.op('Gather', [idsShape, one], { axis: 0 });
  const totalLen = g.op('Gather', [g.op('Shape', ['attention_mask']), one], { axis: 0 });
  const pastLen = g.op('Sub', [totalLen, seqLen]);
  const cum = g.op('CumSum', ['attention_mask', axis1]);
  const maskBool = g.op('Cast', ['attention_mask'], { to: OnnxType.BOOL });
  const sliceNew = (all: string) => g.op('Slice', [all, g.op('Unsqueeze', [pastLen, zero]), g.op('Unsqueeze', [totalLen, zero]), g.constInt64('axes1', [1])]);
  let cos: string | undefined;
  let sin: string | undefined;
  let learned: { rows: string; tableRows: number } | undefined;
  if (d.positions.kind === 'learned') {
    // Table rows = cumsum(mask)·mask − 1 + offset: pads read row offset − 1 (masked out anyway).
    const rows = sliceNew(g.op('Add', [g.op('Mul', [cum, 'attention_mask']), g.constInt64('pos_offset', [d.positions.offset - 1], [])]));
    learned = { rows, tableRows: d.maxPositions + d.positions.offset };
  } else {
    // positions = where(mask, cumsum(mask) − 1, 1)[:, past:]
    const rotary = addCosSin(g, d, sliceNew(g.op('Where', [maskBool, g.op('Sub', [cum, one]), one])), totalLen);
    cos = rotary.cos;
    sin = rotary.sin;
  }
  // Mask bias [B, 1, S, T]: key t visible from query q (absolute indices) when t <= q and mask[t] = 1; the windowed
  // mask also needs q − t < window.
  const keys = g.op('Range', [zero, totalLen, one]);
  const queries = g.op('Range', [pastLen, totalLen, one]);
  const kRow = g.op('Unsqueeze', [keys, zero]);
  const qCol = g.op('Unsqueeze', [queries, one]);
  const allowed = g.op('And', [g.op('LessOrEqual', [kRow, qCol]), g.op('Unsqueeze', [maskBool, g.constInt64('axes12', [1, 2])])]);
  const bias = (ok: string) => g.op('Where', [ok, g.constFloat('zero_f', [0], []), g.constFloat('mask_bias', [MASK_BIAS], [])]);
  const maskBias = bias(allowed);
  const { slidingWindow } = d.attention;
  const windowBias = slidingWindow === undefined ? maskBias : bias(g.op('And', [allowed, g.op('Less', [g.op('Sub', [qCol, kRow]), g.constInt64('sliding_window', [slidingWindow], [])])]));
  g.floatTensor('embed_tokens', embedding.tokens, [V, E]);
  let h = learned
    ? addEmbedding(g, d, 'embed_tokens', 'input_ids', undefined, {
        table: g.floatTensor('embed_positions', positionTable(embedding), [learned.tableRows, H]),
        positions: learned.rows,
        projectIn: embedding.projectIn && g.floatTensor('project_in_t', transposed(embedding.projectIn, H, E), [E, H]),
      })
    : addEmbedding(g, d, 'embed_tokens', 'input_ids');
  const inputs: OnnxValueInfo[] = [
    { name: 'input_ids', type: OnnxType.INT64, dims: ['batch_size', 'sequence_length'] },
    { name: 'attention_mask', type: OnnxType.INT64, dims: ['batch_size', 'total_sequence_length'] },
  ];
  const outputs: OnnxValueInfo[] = [{ name: 'logits', type: OnnxType.FLOAT, dims: ['batch_size', 'sequence_length', V] }];
  for (let i = 0; i < d.layers; i++) {
    const lw = layer(i);
    const names: LayerNames = {};
    const fused = fusedLayer(d);
    for (const spec of layerTensorsOf(d, i)) {
      const key = spec.key as RotaryLayerTensorKey;
      const data = lw[key];
      if (!data) throw new Error(`${d.name}: layer ${i} has no ${key} (${spec.checkpointSuffix})`);
      names[key] = g.floatTensor(`layers.${i}.${layerTensorName(key)}`, data, spec.shape);
    }
    if (fused) {
      // The fused form reads q/k/v packed: concatenated in the graph (onnxruntime folds the constant at load), so the
      // file keeps the tensors as the checkpoint has them.
      names.qkvW = g.op('Concat', [names.qW!, names.kW!, names.vW!], { axis: 1 }, `layers.${i}.qkv_w`);
      if (d.attention.bias) names.qkvB = g.op('Concat', [names.qB!, names.kB!, names.vB!], { axis: 0 }, `layers.${i}.qkv_b`);
    }
    const io = { pastK: `past_key_values.${i}.key`, pastV: `past_key_values.${i}.value`, presentK: `present.${i}.key`, presentV: `present.${i}.value` };
    for (const name of [io.pastK, io.pastV]) inputs.push({ name, type: OnnxType.FLOAT, dims: ['batch_size', nkv, 'past_sequence_length', hd] });
    for (const name of [io.presentK, io.presentV]) outputs.push({ name, type: OnnxType.FLOAT, dims: ['batch_size', nkv, 'total_sequence_length', hd] });
    const y = `layers.${i}.y`;
    addDecoderLayer(g, d, names, { ...io, x: h, mask: layerHasWindow(d, i) ? windowBias : maskBias, cos, sin, y }, 'ops');
    h = y;
  }
  if (d.norm.final && !head.finalLnW) throw new Error(`${d.name}: the head has no final norm weight`);
  if (d.norm.final && d.norm.kind === 'layernorm' && !head.finalLnB) throw new Error(`${d.name}: the head has no final norm bias`);
  // The head reads rows [N, H]; logits back to [B, S, V].
  const rows = g.op('Reshape', [h, g.constInt64('flat_hidden', [-1, H])]);
  const norm = d.norm.final ? { w: g.floatTensor('final_norm', head.finalLnW!, [H]), b: head.finalLnB && g.floatTensor('final_norm_b', head.finalLnB, [H]) } : undefined;
  const projectOut = head.projectOut && g.floatTensor('project_out_t', transposed(head.projectOut, E, H), [H, E]);
  const logits = addHead(g, d, rows, norm, g.floatTensor('lm_head', head.lmHead, [V, E]), 'logits_rows', projectOut);
  const bsv = g.op('Concat', [g.op('Slice', [idsShape, g.constInt64('zero_1d', [0]), g.constInt64('two_1d', [2])]), g.constInt64('vocab_1d', [V])], { axis: 0 });
  g.op('Reshape', [logits, bsv], undefined, 'logits');
  return { inputs, outputs };
}

/** The step's cos/sin `[N, hd]` from its positions `[B, S]` (int64) and key count `totalLen`, as `ropeCosSin` on the host. */
function addCosSin(g: GraphBuilder, d: ModelDescription, positions: string, totalLen: string): { cos: string; sin: string } {
  // cos/sin [N, hd] from angles p · inv_freq, duplicated over both halves (rotate-half convention).
  if (d.positions.kind !== 'rope') throw new Error('addCosSin needs rotary positions');
  const { hd } = layerDims(d);
  const scaling = d.positions.scaling;
  let invFreq: string;
  if (scaling?.kind === 'longrope') {
    // Phi-3: long factors once the call's key count (the padded width) passes original_max_position_embeddings.
    const short = g.floatTensor('rope_inv_freq_short', ropeInvFreq(hd, d.positions.theta, scaling, scaling.originalMaxPositions), [1, hd / 2]);
    const long = g.floatTensor('rope_inv_freq_long', ropeInvFreq(hd, d.positions.theta, scaling, scaling.originalMaxPositions + 1), [1, hd / 2]);
    invFreq = g.op('Where', [g.op('Greater', [totalLen, g.constInt64('longrope_limit', [scaling.originalMaxPositions], [])]), long, short]);
  } else {
    // Dynamic NTK scaling depends on the sequence; exported at max_position_embeddings (no change up to that length).
    invFreq = g.floatTensor('rope_inv_freq', ropeInvFreq(hd, d.positions.theta, scaling, d.maxPositions), [1, hd / 2]);
  }
  const posF = g.op('Reshape', [g.op('Cast', [positions], { to: OnnxType.FLOAT }), g.constInt64('positions_column', [-1, 1])]);
  const angles = g.op('Mul', [posF, invFreq]);
  const emb = g.op('Concat', [angles, angles], { axis: -1 });
  let cos = g.op('Cos', [emb]);
  let sin = g.op('Sin', [emb]);
  if (scaling?.kind === 'longrope' && scaling.cosSinScale !== 1) {
    const s = g.constFloat('rope_cos_sin_scale', [Math.fround(scaling.cosSinScale)], []);
    cos = g.op('Mul', [cos, s]);
    sin = g.op('Mul', [sin, s]);
  }
  return { cos, sin };
}
