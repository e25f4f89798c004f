import type { ModelDescription } from '@flexhelm/contract';

/**
 * A deliberately naive mixture-of-experts MLP for one token (test helper), written apart from moe-reference.ts: float64
 * throughout, experts sorted by probability (a stable sort: the lower index first on a tie), each chosen expert
 * computed on its own. Whether the layer is sparse is read from the checkpoint (a router tensor under `prefix`), and
 * the tensor names are spelled out per family. Returns undefined for a dense layer.
 */
export function naiveMoeMlp(d: ModelDescription, get: (name: string) => Float64Array, has: (name: string) => boolean, prefix: string, x: Float64Array): Float64Array | undefined {
  const mixtral = has(`${prefix}block_sparse_moe.gate.weight`);
  if (!mixtral && !has(`${prefix}mlp.gate.weight`)) return undefined;
  const moe = d.moe!;
  const H = x.length;
  const dot = (W: Float64Array, row: number) => {
    let s = 0;
    for (let i = 0; i < H; i++) s += W[row * H + i]! * x[i]!;
    return s;
  };
  // SwiGLU: down(silu(gate x) · up x), W [out, in]
  const swiglu = (gate: Float64Array, up: Float64Array, down: Float64Array, I: number) => {
    const a = new Float64Array(I);
    for (let j = 0; j < I; j++) {
      const g = dot(gate, j);
      a[j] = (g / (1 + Math.exp(-g))) * dot(up, j);
    }
    const y = new Float64Array(H);
    for (let o = 0; o < H; o++) for (let j = 0; j < I; j++) y[o] = y[o]! + down[o * I + j]! * a[j]!;
    return y;
  };
  const router = get(mixtral ? `${prefix}block_sparse_moe.gate.weight` : `${prefix}mlp.gate.weight`);
  const logits = Array.from({ length: moe.experts }, (_, e) => dot(router, e));
  const max = Math.max(...logits);
  const exps = logits.map((l) => Math.exp(l - max));
  const total = exps.reduce((a, b) => a + b, 0);
  const p = exps.map((v) => v / total);
  const chosen = p.map((_, e) => e).sort((a, b) => p[b]! - p[a]!).slice(0, moe.topK);
  const chosenSum = chosen.reduce((a, e) => a + p[e]!, 0);
  const y = new Float64Array(H);
  for (const e of chosen) {
    const n = mixtral
      ? [`${prefix}block_sparse_moe.experts.${e}.w1.weight`, `${prefix}block_sparse_moe.experts.${e}.w3.weight`, `${prefix}block_sparse_moe.experts.${e}.w2.weight`]
      : [`${prefix}mlp.experts.${e}.gate_proj.weight`, `${prefix}mlp.experts.${e}.up_proj.weight`, `${prefix}mlp.experts.${e}.down_proj.weight`];
    const out = swiglu(get(n[0]!), get(n[1]!), get(n[2]!), moe.expertIntermediateSize);
    const weight = moe.renormalize ? p[e]! / chosenSum : p[e]!;
    for (let o = 0; o < H; o++) y[o] = y[o]! + weight * out[o]!;
  }
  if (has(`${prefix}mlp.shared_expert_gate.weight`)) {
    const gate = 1 / (1 + Math.exp(-dot(get(`${prefix}mlp.shared_expert_gate.weight`), 0)));
    const s = `${prefix}mlp.shared_expert.`;
    const out = swiglu(get(`${s}gate_proj.weight`), get(`${s}up_proj.weight`), get(`${s}down_proj.weight`), moe.sharedExpertIntermediateSize!);
    for (let o = 0; o < H; o++) y[o] = y[o]! + gate * out[o]!;
  }
  return y;
}
