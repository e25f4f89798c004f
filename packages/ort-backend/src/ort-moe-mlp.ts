/**
 * The mixture-of-experts MLP of the onnxruntime rotary layer (Mixtral, Qwen2-MoE), plain ai.onnx ops (opset 17), as
 * `moeMlp` (moe-reference.ts) and transformers 4.47.1 compute it. x `[N, H]` → `[N, H]`:
 *
 *   probs  = softmax(x · routerW)                          [N, E] float32
 *   top    = TopK(probs, k)                                [N, k] values and expert indices (ONNX TopK: on an exact
 *                                                          tie the lower index first, as torch.topk and the reference)
 *   top   /= Σ top   (with `renormalize`)
 *   dense  = ScatterElements(zeros [N, E], indices, top)   each token's weight per expert, 0 for unchosen experts
 *   per expert e, in index order:
 *     rows = NonZero(dense[:, e] > 0)                      [n_e, 1] the tokens that chose e
 *     out  = ScatterND(out, rows, expert_e(x[rows]) · dense[rows, e], reduction add)
 *   out   += sigmoid(x · sharedExpertGateW) · shared(x)    (Qwen2-MoE's shared expert)
 *
 * Why gathered rows rather than every expert on every token weighted by `dense`: the dense form is E/k times the
 * expert FLOPs (4× for Mixtral's 8 experts, top 2; 15× for Qwen2-MoE's 60, top 4), the gathered one computes only the
 * rows each expert was chosen by, as transformers' loop over experts does, for about a dozen small ops per expert
 * (NonZero, two GatherND, ScatterND) whose cost is O(N·H) — negligible against the expert's O(n_e·H·Ie) GEMMs. An
 * expert no token chose gets n_e = 0: its ops run on empty tensors. The adds into `out` go in expert-index order, each
 * product rounded to float32 first, exactly the reference's order. A weight that underflowed to 0 skips its expert,
 * which adds nothing either way.
 */
import type { ModelDescription } from '@flexhelm/contract';
import type { GraphBuilder } from './onnx-writer.js';

/** Names of a sparse layer's MLP tensors in the graph (initializers or inputs), by `MoeLayerTensorKey`. */
type MoeNames = Partial<Record<string, string>>;

/** `down(act(x · gate) · (x · up))`, the gated MLP every expert and the shared expert compute (weights `[in, out]`). */
type GatedMlp = (x: string, gate: string, up: string, down: string) => string;

export function addMoeMlp(g: GraphBuilder, d: ModelDescription, w: MoeNames, x: string, gatedMlp: GatedMlp): string {
  const moe = d.moe;
  if (!moe) throw new Error(`${d.name}: a mixture-of-experts MLP on a model without one`);
  const need = (key: string): string => {
    const name = w[key];
    if (!name) throw new Error(`${d.name}: the sparse layer has no ${key}`);
    return name;
  };
  const lastAxis = g.constInt64('moe_last_axis', [-1]);
  const probs = g.op('Softmax', [g.op('MatMul', [x, need('routerW')])], { axis: -1 });
  const [topValues, topIndices] = g.multi('TopK', [probs, g.constInt64('moe_top_k', [moe.topK])], [`${probs}_top_values`, `${probs}_top_indices`], { axis: -1, largest: 1, sorted: 1 });
  const weights = moe.renormalize ? g.op('Div', [topValues!, g.op('ReduceSum', [topValues!, lastAxis], { keepdims: 1 })]) : topValues!;
  // [N, E]: zero but for each token's k chosen experts.
  const zero = g.constFloat('moe_zero', [0], []);
  const dense = g.op('ScatterElements', [g.op('Expand', [zero, g.op('Shape', [probs])]), topIndices!, weights], { axis: 1 });
  let out = g.op('Expand', [zero, g.op('Shape', [x])]);
  for (let e = 0; e < moe.experts; e++) {
    const column = g.op('Gather', [dense, g.constInt64(`moe_expert_${e}`, [e], [])], { axis: 1 });
    // [1, n_e] → [n_e, 1]: GatherND/ScatterND indices of the chosen rows.
    const rows = g.op('Transpose', [g.op('NonZero', [g.op('Greater', [column, zero])])], { perm: [1, 0] });
    const ys = gatedMlp(g.op('GatherND', [x, rows]), need(`expert.${e}.gateW`), need(`expert.${e}.upW`), need(`expert.${e}.downW`));
    const rowWeights = g.op('Unsqueeze', [g.op('GatherND', [column, rows]), lastAxis]);
    out = g.op('ScatterND', [out, rows, g.op('Mul', [ys, rowWeights])], { reduction: 'add' });
  }
  if (moe.sharedExpertIntermediateSize !== undefined) {
    const gate = g.op('Sigmoid', [g.op('MatMul', [x, need('sharedExpertGateW')])]);
    out = g.op('Add', [out, g.op('Mul', [gate, gatedMlp(x, need('sharedGateW'), need('sharedUpW'), need('sharedDownW'))])]);
  }
  return out;
}
