import type { ModelDescription } from '@flexhelm/contract';
import type { TensorSource } from './tensor-source.js';
import { naiveMoeMlp } from './test-naive-moe.js';

/**
 * A deliberately naive Llama-family forward (test helper), written apart from llama-reference.ts: one unpadded row,
 * positions 0 … n−1, no KV cache, float64 throughout, plain RoPE (no scaling), every head's attention spelled out
 * with the window test `i − j < window`, a mixture of experts' sparse layers by `naiveMoeMlp`. Returns logits `[n, vocab]`.
 */
export function naiveLlamaLogits(d: ModelDescription, source: TensorSource, ids: number[]): Float64Array[] {
  const names = d.checkpointNames!;
  const get = (name: string) => Float64Array.from(source.read(name));
  const has = (name: string) => source.tensors.has(name);
  const H = d.hiddenSize;
  const { heads, kvHeads, headDim: hd, slidingWindow } = d.attention;
  const n = ids.length;
  const theta = d.positions.kind === 'rope' ? d.positions.theta : 10000;
  // W [out, in]: y[o] = Σ_i x[i] W[o, i] + b[o]
  const lin = (x: Float64Array, W: Float64Array, out: number, b?: Float64Array) => {
    const inDim = x.length;
    const y = new Float64Array(out);
    for (let o = 0; o < out; o++) {
      let s = b ? b[o]! : 0;
      for (let i = 0; i < inDim; i++) s += x[i]! * W[o * inDim + i]!;
      y[o] = s;
    }
    return y;
  };
  const norm = (x: Float64Array, w: Float64Array) => {
    const ms = x.reduce((a, v) => a + v * v, 0) / x.length;
    return x.map((v, i) => (w[i]! * v) / Math.sqrt(ms + d.norm.eps));
  };
  const rope = (x: Float64Array, pos: number) => {
    const y = Float64Array.from(x);
    for (let i = 0; i < hd / 2; i++) {
      const angle = pos / theta ** ((2 * i) / hd);
      y[i] = x[i]! * Math.cos(angle) - x[i + hd / 2]! * Math.sin(angle);
      y[i + hd / 2] = x[i + hd / 2]! * Math.cos(angle) + x[i]! * Math.sin(angle);
    }
    return y;
  };
  const embedding = get(names.embedding);
  let h = ids.map((id) => embedding.slice(id * H, (id + 1) * H));
  for (let l = 0; l < d.layers; l++) {
    const p = `${names.layerPrefix}${l}.`;
    const w = (s: string) => get(p + s);
    const b = (s: string) => (has(p + s) ? get(p + s) : undefined);
    const x = h.map((r) => norm(r, w('input_layernorm.weight')));
    const q = x.map((r) => lin(r, w('self_attn.q_proj.weight'), heads * hd, b('self_attn.q_proj.bias')));
    const k = x.map((r) => lin(r, w('self_attn.k_proj.weight'), kvHeads * hd, b('self_attn.k_proj.bias')));
    const v = x.map((r) => lin(r, w('self_attn.v_proj.weight'), kvHeads * hd, b('self_attn.v_proj.bias')));
    const attn = h.map(() => new Float64Array(heads * hd));
    for (let head = 0; head < heads; head++) {
      const g = Math.floor(head / (heads / kvHeads));
      for (let i = 0; i < n; i++) {
        const qi = rope(q[i]!.slice(head * hd, (head + 1) * hd), i);
        const visible = [...Array(i + 1).keys()].filter((j) => slidingWindow === undefined || i - j < slidingWindow);
        const scores = visible.map((j) => {
          const kj = rope(k[j]!.slice(g * hd, (g + 1) * hd), j);
          return qi.reduce((a, qv, e) => a + qv * kj[e]!, 0) / Math.sqrt(hd);
        });
        const max = Math.max(...scores);
        const e = scores.map((s) => Math.exp(s - max));
        const sum = e.reduce((a, c) => a + c, 0);
        visible.forEach((j, t) => {
          for (let c = 0; c < hd; c++) attn[i]![head * hd + c]! += (e[t]! / sum) * v[j]![g * hd + c]!;
        });
      }
    }
    h = h.map((r, i) => {
      const o = lin(attn[i]!, w('self_attn.o_proj.weight'), H, b('self_attn.o_proj.bias'));
      const r1 = r.map((val, c) => val + o[c]!);
      const x2 = norm(r1, w('post_attention_layernorm.weight'));
      const dense = () => {
        const I = d.mlp.intermediateSize;
        const gate = lin(x2, w('mlp.gate_proj.weight'), I, b('mlp.gate_proj.bias'));
        const up = lin(x2, w('mlp.up_proj.weight'), I, b('mlp.up_proj.bias'));
        const act = gate.map((z, c) => (z / (1 + Math.exp(-z))) * up[c]!);
        return lin(act, w('mlp.down_proj.weight'), H, b('mlp.down_proj.bias'));
      };
      // A mixture of experts' sparse layer (a router in the checkpoint), else the dense MLP.
      const down = naiveMoeMlp(d, get, has, p, x2) ?? dense();
      return r1.map((val, c) => val + down[c]!);
    });
  }
  const head = names.head ? get(names.head) : embedding;
  return h.map((r) => lin(norm(r, get(names.finalNorm)), head, d.vocabSize));
}
