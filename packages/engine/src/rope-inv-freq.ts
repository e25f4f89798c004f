import type { RopeScaling } from '@flexhelm/contract';

/**
 * RoPE inverse frequencies for a head of `headDim` dimensions, as transformers 4.47.1's `ROPE_INIT_FUNCTIONS` compute
 * them: `inv_freq[i] = 1 / theta^(2i / headDim)`, i = 0 … headDim/2 − 1, then the scaling. Returned in float32 like
 * transformers' buffer. `seqLen` is read by `dynamic` (the longest sequence the forward sees: largest position + 1) and
 * by `longrope` (the call's key count, cached + new tokens incl. padding: long factors once it exceeds
 * `originalMaxPositions`).
 */
export function ropeInvFreq(headDim: number, theta: number, scaling?: RopeScaling, seqLen = 0): Float32Array {
  const half = headDim / 2;
  let base = theta;
  if (scaling?.kind === 'dynamic') {
    // Dynamic NTK: grow the base once the sequence passes max_position_embeddings (never shrink below it).
    const len = Math.max(seqLen, scaling.originalMaxPositions);
    base = theta * ((scaling.factor * len) / scaling.originalMaxPositions - (scaling.factor - 1)) ** (headDim / (headDim - 2));
  }
  if (scaling?.kind === 'longrope') {
    // 4.47.1: inv_freq = 1 / (factor · base^(2i/d)), every operand float32; the cos/sin factor is applied with cos/sin.
    const factor = seqLen > scaling.originalMaxPositions ? scaling.longFactor : scaling.shortFactor;
    const out = new Float32Array(half);
    for (let i = 0; i < half; i++) out[i] = 1 / Math.fround(Math.fround(factor[i]!) * Math.fround(Math.fround(base) ** Math.fround((2 * i) / headDim)));
    return out;
  }
  const inv = new Float64Array(half);
  // transformers computes the exponent 2i/d and the power in float32 (torch.arange(...).float() / dim).
  for (let i = 0; i < half; i++) inv[i] = 1 / Math.fround(Math.fround(base) ** Math.fround((2 * i) / headDim));
  if (scaling?.kind === 'linear') for (let i = 0; i < half; i++) inv[i] = inv[i]! / scaling.factor;
  if (scaling?.kind === 'llama3') {
    const { factor, lowFreqFactor, highFreqFactor, originalMaxPositions } = scaling;
    const lowFreqWavelen = originalMaxPositions / lowFreqFactor;
    const highFreqWavelen = originalMaxPositions / highFreqFactor;
    for (let i = 0; i < half; i++) {
      const f = inv[i]!;
      const wavelen = (2 * Math.PI) / f;
      // Short wavelengths stay, long ones are divided by `factor`, the band between is interpolated smoothly.
      if (wavelen > lowFreqWavelen) inv[i] = f / factor;
      else if (wavelen >= highFreqWavelen) {
        const smooth = (originalMaxPositions / wavelen - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
        inv[i] = ((1 - smooth) * f) / factor + smooth * f;
      }
    }
  }
  return Float32Array.from(inv);
}
