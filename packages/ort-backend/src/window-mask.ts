import { MASK_BIAS } from '@flexhelm/contract';

/**
 * The step's additive mask `[B, 1, S, T]` (T = pastLen + S) with a sliding window added: query s (padded slot
 * pastLen + s) no longer sees key t once `pastLen + s − t ≥ window` (transformers' `i − j < sliding_window`). For the
 * layers of a model whose window is on some layers only (Gemma 2's even layers): the engine's mask leaves it out.
 */
export function windowMask(maskBias: Float32Array, batch: number, seq: number, pastLen: number, window: number): Float32Array {
  const T = pastLen + seq;
  if (maskBias.length !== batch * seq * T) throw new Error(`windowMask: the mask holds ${maskBias.length} values, [${batch}, 1, ${seq}, ${T}] needs ${batch * seq * T}`);
  const out = maskBias.slice();
  for (let row = 0; row < batch * seq; row++) {
    const i = pastLen + (row % seq);
    // Keys 0 … i − window are out of the window.
    for (let t = 0; t <= i - window; t++) out[row * T + t] = MASK_BIAS;
  }
  return out;
}
