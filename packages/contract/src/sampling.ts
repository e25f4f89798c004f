import { expOfNonPositive } from './exp-of-non-positive.js';
import type { SeededUniform } from './seeded-uniform.js';

/** log-softmax of one logits row, in float64: `logprob[i] = logit[i] - logsumexp(logits)`. */
export function logSumExp(logits: Float32Array): number {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i]! > max) max = logits[i]!;
  let sum = 0;
  // Math.exp's bits, inlined (every argument is ≤ 0): once per vocabulary entry per generated token.
  for (let i = 0; i < logits.length; i++) sum += expOfNonPositive(logits[i]! - max);
  return max + Math.log(sum);
}

/** Index of the largest logit (the first one on ties, like torch.argmax on CPU). */
export function argmax(logits: Float32Array): number {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[best]!) best = i;
  return best;
}

/** The k largest entries, highest first (ties keep the lower id first). */
export function topK(logits: Float32Array, k: number): { id: number; value: number }[] {
  const top: { id: number; value: number }[] = [];
  if (k <= 0) return top;
  for (let i = 0; i < logits.length; i++) {
    const v = logits[i]!;
    if (top.length === k && v <= top[k - 1]!.value) continue;
    let at = top.length;
    while (at > 0 && top[at - 1]!.value < v) at--;
    top.splice(at, 0, { id: i, value: v });
    if (top.length > k) top.pop();
  }
  return top;
}

export interface SamplingSettings {
  /** 0 (or below 1e-5) means greedy. */
  temperature: number;
  /** Nucleus sampling mass in (0, 1]; 1 disables it. */
  topP: number;
  /** Keep only the k most likely tokens; 0 disables it. */
  topK: number;
}

/**
 * The distribution sampling draws from, as Hugging Face's warpers leave it (HF's `output_scores`): logits divided by
 * the temperature (when > 0), tokens outside the top-k (ties kept) and outside the top-p nucleus set to -Infinity.
 */
export function processedLogits(logits: Float32Array, s: SamplingSettings): Float32Array {
  const V = logits.length;
  const out = new Float32Array(V);
  const scale = s.temperature > 0 ? 1 / s.temperature : 1;
  for (let i = 0; i < V; i++) out[i] = logits[i]! * scale;
  if (s.topK > 0 && s.topK < V) {
    const kth = topK(out, s.topK)[s.topK - 1]!.value;
    for (let i = 0; i < V; i++) if (out[i]! < kth) out[i] = -Infinity;
  }
  if (s.topP < 1) {
    // Keep the most likely tokens until their mass reaches top_p (HF: drop the ascending prefix with mass <= 1 - top_p).
    const order = Array.from({ length: V }, (_, i) => i).filter((i) => out[i]! > -Infinity);
    order.sort((a, b) => out[b]! - out[a]! || a - b);
    const lse = logSumExp(out);
    let cumulative = 0;
    let keep = order.length;
    for (let r = 0; r < order.length; r++) {
      cumulative += Math.exp(out[order[r]!]! - lse);
      if (cumulative >= s.topP) {
        keep = r + 1;
        break;
      }
    }
    for (let r = keep; r < order.length; r++) out[order[r]!] = -Infinity;
  }
  return out;
}

/** Picks the next token: greedy (argmax) below temperature 1e-5, else a draw from `processedLogits`. */
export function sampleToken(logits: Float32Array, s: SamplingSettings, rng: SeededUniform): number {
  if (s.temperature < 1e-5) return argmax(logits);
  const p = processedLogits(logits, s);
  const max = p[argmax(p)]!;
  let total = 0;
  for (let i = 0; i < p.length; i++) total += Math.exp(p[i]! - max);
  let u = rng.next() * total;
  let last = 0;
  for (let i = 0; i < p.length; i++) {
    if (p[i] === -Infinity) continue;
    last = i;
    u -= Math.exp(p[i]! - max);
    if (u < 0) return i;
  }
  return last;
}
