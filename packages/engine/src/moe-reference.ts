import { gatedMlp } from './gated-mlp.js';
import type { LayerTensors, ModelDescription, MoeSpec } from '@flexhelm/contract';
import { linear } from './families/opt/opt-reference.js';

/** Each token's chosen experts and their weights: `experts[n·k + j]`, `weights[n·k + j]`, j = 0 … k−1 best first. */
export interface TokenRoutes {
  topK: number;
  experts: Int32Array;
  weights: Float32Array;
}

/**
 * Routing as transformers 4.47.1's Mixtral and Qwen2-MoE blocks do it, from router logits `[N, E]` (float32):
 * `p = softmax(logits)` in float32, the `topK` largest p (torch.topk; on an exact tie the lower expert index first),
 * then, with `renormalize`, `p_k / Σ p_top` (Mixtral always; Qwen2-MoE's norm_topk_prob), else the raw p_k, which sum
 * to less than 1. Weights are float32 like transformers' (`.to(hidden dtype)`).
 */
export function routeTokens(moe: Pick<MoeSpec, 'experts' | 'topK' | 'renormalize'>, logits: Float32Array, N: number): TokenRoutes {
  const { experts: E, topK: K } = moe;
  const experts = new Int32Array(N * K);
  const weights = new Float32Array(N * K);
  const p = new Float32Array(E);
  for (let n = 0; n < N; n++) {
    // softmax [E], float32 result (accumulated in float64)
    let max = -Infinity;
    for (let e = 0; e < E; e++) max = Math.max(max, logits[n * E + e]!);
    let sum = 0;
    for (let e = 0; e < E; e++) sum += Math.exp(logits[n * E + e]! - max);
    for (let e = 0; e < E; e++) p[e] = Math.exp(logits[n * E + e]! - max) / sum;
    // top-k by selection: k passes, each taking the largest p not yet taken (strictly larger wins: lower index on ties).
    const taken = new Uint8Array(E);
    let chosenSum = 0;
    for (let j = 0; j < K; j++) {
      let best = -1;
      for (let e = 0; e < E; e++) if (!taken[e] && (best < 0 || p[e]! > p[best]!)) best = e;
      taken[best] = 1;
      experts[n * K + j] = best;
      weights[n * K + j] = p[best]!;
      chosenSum = Math.fround(chosenSum + p[best]!);
    }
    if (moe.renormalize) for (let j = 0; j < K; j++) weights[n * K + j] = Math.fround(weights[n * K + j]! / chosenSum);
  }
  return { topK: K, experts, weights };
}

/**
 * The sparse MLP of `x` `[N, H]` (a layer `isSparseLayer` names), as transformers 4.47.1 computes it:
 *
 *   logits = x · routerWᵀ                       [N, E]
 *   routes = routeTokens(logits)                 [N, k] experts and weights
 *   out[n] = Σ_k w_nk · expert_{e_nk}(x[n])      [N, H], summed in expert-index order (index_add_), float32
 *   out[n] += sigmoid(x[n] · sharedExpertGateW) · shared(x[n])   (Qwen2-MoE's shared expert)
 *
 * Each expert computes all the rows routed to it at once (`[n_e, H]` → `[n_e, Ie]` → `[n_e, H]`), as transformers'
 * loop over experts does; experts no row chose are skipped. Weights are in the checkpoint's `[out, in]` layout.
 * `onRoutes` sees each call's routes (routing statistics, the conformance check of `derived.routing`).
 */
export function moeMlp(d: ModelDescription, w: LayerTensors, x: Float32Array, N: number, onRoutes?: (routes: TokenRoutes) => void): Float32Array {
  const routes = routeLayerTokens(d, w, x, N);
  onRoutes?.(routes);
  return routedMlp(d, w, x, N, routes, () => w);
}

/** A sparse layer's routes for `x` `[N, H]`: its router `routerW` `[H, E]`, then `routeTokens`. */
export function routeLayerTokens(d: ModelDescription, w: LayerTensors, x: Float32Array, N: number): TokenRoutes {
  const moe = moeOf(d);
  return routeTokens(moe, linear(x, N, d.hiddenSize, tensorOf(d, w, 'routerW'), moe.experts), N);
}

/** For each expert chosen, the rows (token indices, ascending) that chose it and the weight each gives it. */
export function rowsByExpert(routes: TokenRoutes, N: number): Map<number, { rows: number[]; weights: number[] }> {
  const out = new Map<number, { rows: number[]; weights: number[] }>();
  const K = routes.topK;
  for (let n = 0; n < N; n++) {
    for (let j = 0; j < K; j++) {
      const e = routes.experts[n * K + j]!;
      const entry = out.get(e) ?? { rows: [], weights: [] };
      entry.rows.push(n);
      entry.weights.push(routes.weights[n * K + j]!);
      out.set(e, entry);
    }
  }
  return out;
}

/** The experts `routes` picked, distinct, in index order (what a layer must read of its experts). */
export function chosenExperts(routes: TokenRoutes): number[] {
  return [...new Set(routes.experts)].sort((a, b) => a - b);
}

/**
 * `moeMlp` after routing: expert e's tensors (`expert.<e>.gateW`/`upW`/`downW`) are read from `expertTensors(e)`, the
 * router's and the shared expert's from `w`. So an offloaded layer can bring in only the experts `routes` chose.
 */
export function routedMlp(d: ModelDescription, w: LayerTensors, x: Float32Array, N: number, routes: TokenRoutes, expertTensors: (e: number) => Partial<LayerTensors>): Float32Array {
  const moe = moeOf(d);
  const H = d.hiddenSize;
  const E = moe.experts;
  const need = (key: string, from: Partial<LayerTensors> = w) => tensorOf(d, from, key);
  const out = new Float32Array(N * H);
  const byExpert = rowsByExpert(routes, N);
  for (let e = 0; e < E; e++) {
    // rows [n_e] that chose expert e, and the weight each gives it
    const { rows, weights: rowWeights } = byExpert.get(e) ?? { rows: [], weights: [] };
    if (rows.length === 0) continue;
    // xs [n_e, H] → ys [n_e, H]
    const xs = new Float32Array(rows.length * H);
    rows.forEach((n, r) => {
      xs.set(x.subarray(n * H, (n + 1) * H), r * H);
    });
    const ew = expertTensors(e);
    const ys = gatedMlp(d, d.mlp.kind, { gate: need(`expert.${e}.gateW`, ew), up: need(`expert.${e}.upW`, ew), down: need(`expert.${e}.downW`, ew) }, xs, rows.length, moe.expertIntermediateSize);
    rows.forEach((n, r) => {
      const wt = rowWeights[r]!;
      for (let i = 0; i < H; i++) out[n * H + i] = out[n * H + i]! + Math.fround(ys[r * H + i]! * wt);
    });
  }
  const Is = moe.sharedExpertIntermediateSize;
  if (Is !== undefined) {
    // gate [N, 1]; shared [N, H]
    const gate = linear(x, N, H, need('sharedExpertGateW'), 1);
    const shared = gatedMlp(d, d.mlp.kind, { gate: need('sharedGateW'), up: need('sharedUpW'), down: need('sharedDownW') }, x, N, Is);
    for (let n = 0; n < N; n++) {
      const g = Math.fround(1 / (1 + Math.exp(-gate[n]!)));
      for (let i = 0; i < H; i++) out[n * H + i] = out[n * H + i]! + Math.fround(g * shared[n * H + i]!);
    }
  }
  return out;
}

function moeOf(d: ModelDescription): MoeSpec {
  if (!d.moe) throw new Error(`${d.name}: a sparse MLP on a model without a mixture of experts`);
  return d.moe;
}

function tensorOf(d: ModelDescription, w: Partial<LayerTensors>, key: string): Float32Array {
  const t = w[key];
  if (!t) throw new Error(`${d.name}: the sparse layer has no ${key}`);
  return t;
}
