import { encodeModel, GraphBuilder, OnnxType } from './onnx-writer.js';
import { headDim, type OptConfig } from './opt-config.js';
import type { EmbeddingWeights, HeadWeights, LayerWeights } from './opt-weights.js';

/** ai.onnx opset of every graph here (LayerNormalization needs 17). */
export const OPSET = 17;

/** Transposes a row-major `[rows, cols]` matrix into `dst` (`[cols, rows]`), written at column offset `colOffset` of a wider `[cols, dstCols]`. */
export function transposeInto(src: Float32Array, rows: number, cols: number, dst: Float32Array, dstCols: number, colOffset: number): void {
  const BLOCK = 64;
  for (let r0 = 0; r0 < rows; r0 += BLOCK) {
    const r1 = Math.min(rows, r0 + BLOCK);
    for (let c0 = 0; c0 < cols; c0 += BLOCK) {
      const c1 = Math.min(cols, c0 + BLOCK);
      for (let r = r0; r < r1; r++) {
        const so = r * cols;
        for (let c = c0; c < c1; c++) dst[c * dstCols + colOffset + r] = src[so + c]!;
      }
    }
  }
}

/** PyTorch `[out, in]` → MatMul's `[in, out]`. */
export function transposed(w: Float32Array, outDim: number, inDim: number): Float32Array {
  const t = new Float32Array(w.length);
  transposeInto(w, outDim, inDim, t, outDim, 0);
  return t;
}

/**
 * Token + position embedding: `ids`, `positions` int64 `[N]` → `hidden` `[N, E]` (positions are table rows, i.e.
 * already offset by 2).
 */
export function embeddingGraph(c: OptConfig, w: EmbeddingWeights): Uint8Array {
  const g = new GraphBuilder();
  g.floatTensor('embed_tokens', w.tokens, [c.vocabSize, c.wordEmbedProjDim]);
  g.floatTensor('embed_positions', w.positions, [w.positions.length / c.hiddenSize, c.hiddenSize]);
  let tok = g.op('Gather', ['embed_tokens', 'ids'], { axis: 0 });
  if (w.projectIn) {
    g.floatTensor('project_in_t', transposed(w.projectIn, c.hiddenSize, c.wordEmbedProjDim), [c.wordEmbedProjDim, c.hiddenSize]);
    tok = g.op('MatMul', [tok, 'project_in_t']);
  }
  const pos = g.op('Gather', ['embed_positions', 'positions'], { axis: 0 });
  g.op('Add', [tok, pos], undefined, 'hidden');
  return encodeModel({
    graphName: 'opt_embed',
    nodes: g.nodes,
    initializers: g.initializers,
    inputs: [
      { name: 'ids', type: OnnxType.INT64, dims: ['N'] },
      { name: 'positions', type: OnnxType.INT64, dims: ['N'] },
    ],
    outputs: [{ name: 'hidden', type: OnnxType.FLOAT, dims: ['N', c.hiddenSize] }],
    opset: OPSET,
  });
}

/**
 * One decoder layer with its weights as initializers (packed once by onnxruntime).
 * Inputs: `x` `[B, S, E]`, `mask` `[B, 1, S, T]` additive, `past_k`/`past_v` `[B, H, P, D]`.
 * Outputs: `y` `[B, S, E]`, `present_k`/`present_v` `[B, H, T, D]`.
 */
export function layerGraph(c: OptConfig, w: LayerWeights): Uint8Array {
  const E = c.hiddenSize;
  const F = c.ffnDim;
  const H = c.numAttentionHeads;
  const D = headDim(c);
  const g = new GraphBuilder();
  const qkvT = new Float32Array(E * 3 * E);
  transposeInto(w.qW, E, E, qkvT, 3 * E, 0);
  transposeInto(w.kW, E, E, qkvT, 3 * E, E);
  transposeInto(w.vW, E, E, qkvT, 3 * E, 2 * E);
  const qkvB = new Float32Array(3 * E);
  qkvB.set(w.qB, 0);
  qkvB.set(w.kB, E);
  qkvB.set(w.vB, 2 * E);
  g.floatTensor('qkv_w', qkvT, [E, 3 * E]);
  g.floatTensor('qkv_b', qkvB, [3 * E]);
  g.floatTensor('out_w', transposed(w.oW, E, E), [E, E]);
  g.floatTensor('out_b', w.oB, [E]);
  g.floatTensor('ln1_w', w.ln1W, [E]);
  g.floatTensor('ln1_b', w.ln1B, [E]);
  g.floatTensor('fc1_w', transposed(w.fc1W, F, E), [E, F]);
  g.floatTensor('fc1_b', w.fc1B, [F]);
  g.floatTensor('fc2_w', transposed(w.fc2W, E, F), [F, E]);
  g.floatTensor('fc2_b', w.fc2B, [E]);
  g.floatTensor('ln2_w', w.ln2W, [E]);
  g.floatTensor('ln2_b', w.ln2B, [E]);
  g.constFloat('scale', [D ** -0.5], []);
  g.constInt64('split3', [E, E, E]);
  g.constInt64('heads_shape', [0, 0, H, D]);
  g.constInt64('merge_shape', [0, 0, E]);
  const ln = (x: string, wName: string, bName: string) => g.op('LayerNormalization', [x, wName, bName], { axis: -1, epsilon: { float: c.layerNormEps } });
  const pre = c.doLayerNormBefore;

  // Attention: qkv = LN1(x)·Wqkv + b → split → heads [B, H, S, D]; q scaled after its bias, as in HF.
  const h1 = pre ? ln('x', 'ln1_w', 'ln1_b') : 'x';
  const qkv = g.op('Add', [g.op('MatMul', [h1, 'qkv_w']), 'qkv_b']);
  const [q, k, v] = g.multi('Split', [qkv, 'split3'], ['q', 'k', 'v'], { axis: -1 });
  const toHeads = (t: string, perm: number[]) => g.op('Transpose', [g.op('Reshape', [t, 'heads_shape'])], { perm });
  const qh = toHeads(g.op('Mul', [q!, 'scale']), [0, 2, 1, 3]);
  g.op('Concat', ['past_k', toHeads(k!, [0, 2, 1, 3])], { axis: 2 }, 'present_k');
  g.op('Concat', ['past_v', toHeads(v!, [0, 2, 1, 3])], { axis: 2 }, 'present_v');
  const kT = g.op('Transpose', ['present_k'], { perm: [0, 1, 3, 2] });
  const scores = g.op('Add', [g.op('MatMul', [qh, kT]), 'mask']);
  const probs = g.op('Softmax', [scores], { axis: -1 });
  const ctx = g.op('Reshape', [g.op('Transpose', [g.op('MatMul', [probs, 'present_v'])], { perm: [0, 2, 1, 3] }), 'merge_shape']);
  const attn = g.op('Add', [g.op('MatMul', [ctx, 'out_w']), 'out_b']);
  let r = g.op('Add', ['x', attn]);
  if (!pre) r = ln(r, 'ln1_w', 'ln1_b');

  // MLP: fc2(relu(fc1(LN2(r))))
  const h2 = pre ? ln(r, 'ln2_w', 'ln2_b') : r;
  const f = g.op('Relu', [g.op('Add', [g.op('MatMul', [h2, 'fc1_w']), 'fc1_b'])]);
  const m = g.op('Add', [g.op('MatMul', [f, 'fc2_w']), 'fc2_b']);
  if (pre) g.op('Add', [r, m], undefined, 'y');
  else g.op('LayerNormalization', [g.op('Add', [r, m]), 'ln2_w', 'ln2_b'], { axis: -1, epsilon: { float: c.layerNormEps } }, 'y');

  return encodeModel({
    graphName: 'opt_layer',
    nodes: g.nodes,
    initializers: g.initializers,
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
    ],
    opset: OPSET,
  });
}

/** Final LayerNorm (pre-LN), project_out, logits: `x` `[N, E]` → `logits` `[N, V]`. */
export function headGraph(c: OptConfig, w: HeadWeights): Uint8Array {
  const g = new GraphBuilder();
  let h = 'x';
  if (w.finalLnW && w.finalLnB) {
    g.floatTensor('ln_w', w.finalLnW, [c.hiddenSize]);
    g.floatTensor('ln_b', w.finalLnB, [c.hiddenSize]);
    h = g.op('LayerNormalization', [h, 'ln_w', 'ln_b'], { axis: -1, epsilon: { float: c.layerNormEps } });
  }
  if (w.projectOut) {
    g.floatTensor('project_out_t', transposed(w.projectOut, c.wordEmbedProjDim, c.hiddenSize), [c.hiddenSize, c.wordEmbedProjDim]);
    h = g.op('MatMul', [h, 'project_out_t']);
  }
  g.floatTensor('lm_head', w.lmHead, [c.vocabSize, c.wordEmbedProjDim]);
  g.op('Gemm', [h, 'lm_head'], { transB: 1 }, 'logits');
  return encodeModel({
    graphName: 'opt_head',
    nodes: g.nodes,
    initializers: g.initializers,
    inputs: [{ name: 'x', type: OnnxType.FLOAT, dims: ['N', c.hiddenSize] }],
    outputs: [{ name: 'logits', type: OnnxType.FLOAT, dims: ['N', c.vocabSize] }],
    opset: OPSET,
  });
}
