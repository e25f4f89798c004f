/**
 * cos and sin `[N, headDim]` of each position for rotate-half RoPE (llama/check.md): entries i and i + headDim/2 both
 * hold cos/sin(p · inv_freq[i]). Angles, cos and sin are rounded to float32 as transformers computes them, so the
 * graphs that take these as inputs rotate exactly like `applyRope`; `scale` multiplies both (Phi-3's longrope
 * `cosSinScale`, in float32 as `applyRope` does).
 */
export function ropeCosSin(positions: ArrayLike<number>, invFreq: Float32Array, scale = 1): { cos: Float32Array; sin: Float32Array } {
  const s = Math.fround(scale);
  const half = invFreq.length;
  const hd = 2 * half;
  const cos = new Float32Array(positions.length * hd);
  const sin = new Float32Array(positions.length * hd);
  for (let n = 0; n < positions.length; n++) {
    const p = positions[n]!;
    const o = n * hd;
    for (let i = 0; i < half; i++) {
      const angle = Math.fround(p * invFreq[i]!);
      cos[o + i] = cos[o + i + half] = Math.fround(Math.cos(angle)) * s;
      sin[o + i] = sin[o + i + half] = Math.fround(Math.sin(angle)) * s;
    }
  }
  return { cos, sin };
}
