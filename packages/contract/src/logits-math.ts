import { argmax, logSumExp, topK } from './sampling.js';

/**
 * The per-row logits arithmetic `generate` does for every generated and echoed token — the greedy pick, the
 * log-sum-exp under its logprob, the top alternatives — and the engine's finiteness check of each head output. A
 * backend may offer its own (`DecoderBackend.logitsMath`), computed natively, which must give exactly what these
 * JavaScript functions give (the same ids, the same bits): over a 128k vocabulary they cost 0.2–4 ms each per row.
 */
export interface LogitsMath {
  /** Index of the largest logit, the first one on ties (`argmax`). */
  argmax(logits: Float32Array): number;
  /** log Σ exp(logits) in float64 (`logSumExp`). */
  logSumExp(logits: Float32Array): number;
  /** The k largest entries, highest first, ties by lower id (`topK`). */
  topK(logits: Float32Array, k: number): { id: number; value: number }[];
  /** Whether every value is finite (the engine's check of each head's output, over every row at once). */
  allFinite(logits: Float32Array): boolean;
}

function allFinite(logits: Float32Array): boolean {
  for (let i = 0; i < logits.length; i++) {
    const v = logits[i]!;
    if (v - v !== 0) return false;
  }
  return true;
}

/** The JavaScript reference every backend's `LogitsMath` must match. */
export const jsLogitsMath: LogitsMath = { argmax, logSumExp, topK, allFinite };
