// Rotary position embeddings of the rotary decoder layers, rotate-half layout (HF checkpoints). Rows run in parallel
// with OpenMP.
#pragma once

#include <cstddef>

namespace flexhelm {

// Rotates `heads` heads of `headDim` at the start of each row (rows `ld` floats apart) in place: dimension i pairs
// with i + headDim/2; angle = float32(position · invFreq[i]), cos and sin rounded to float32 and then multiplied by
// `scale` in float32 (Phi-3's longrope cos/sin scale; 1 for every other scaling).
void ropeRows(float* x, int rows, size_t ld, int heads, int headDim, const int* positions, const float* invFreq, float scale = 1.f);

}  // namespace flexhelm
