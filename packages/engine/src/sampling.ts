import { SeededUniform } from './random-weights.js';

/** log-softmax of one logits row, in float64: `logprob[i] = logit[i] - logsumexp(logits)`. */
export function logSumExp(logits: Float32Array): number {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i]! > max) max = logits[i]!;
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i]! - max);
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
 * Picks the next token. Greedy at temperature 0; otherwise the Hugging Face order of warpers: divide by temperature,
 * keep the top-k, keep the smallest set of most likely tokens whose probability reaches top-p, then draw.
 */
export function sampleToken(logits: Float32Array, s: SamplingSettings, rng: SeededUniform): number {
  if (s.temperature < 1e-5) return argmax(logits);
  const V = logits.length;
  const order = Array.from({ length: V }, (_, i) => i);
  let keep = V;
  if (s.topK > 0 && s.topK < V) {
    const top = topK(logits, s.topK);
    for (let i = 0; i < top.length; i++) order[i] = top[i]!.id;
    keep = top.length;
  } else {
    order.sort((a, b) => logits[b]! - logits[a]! || a - b);
  }
  const maxLogit = logits[order[0]!]!;
  const probs = new Float64Array(keep);
  let total = 0;
  for (let i = 0; i < keep; i++) {
    probs[i] = Math.exp((logits[order[i]!]! - maxLogit) / s.temperature);
    total += probs[i]!;
  }
  if (s.topP < 1) {
    let cumulative = 0;
    let cut = keep;
    for (let i = 0; i < keep; i++) {
      cumulative += probs[i]! / total;
      if (cumulative >= s.topP) {
        cut = i + 1;
        break;
      }
    }
    keep = cut;
    total = 0;
    for (let i = 0; i < keep; i++) total += probs[i]!;
  }
  let u = rng.next() * total;
  for (let i = 0; i < keep; i++) {
    u -= probs[i]!;
    if (u < 0) return order[i]!;
  }
  return order[keep - 1]!;
}
