// The Llama family's elementwise kernels around the GEMMs (AVX-512 where the CPU has it, plain C++ otherwise):
// RMSNorm, rotary position embeddings (rotate-half) and the SwiGLU activation. Rows run in parallel with OpenMP.
#pragma once

#include <cstddef>
#include <cstdint>

namespace flexhelm {

// y[r, :] = w ⊙ (x[r, :] / sqrt(mean(x[r, :]²) + eps)) with float32 statistics, the normalised value rounded to
// float32 before the weight multiplies it (transformers' LlamaRMSNorm). y may alias x. copy, if not null, receives x
// (the residual the next GEMM adds onto) from the same pass.
void rmsNormRows(const float* x, float* y, int rows, int dim, const float* w, float eps, float* copy = nullptr);
// The same written as bf16 bits (rounded to nearest even).
void rmsNormRowsBf16(const float* x, uint16_t* y, int rows, int dim, const float* w, float eps, float* copy = nullptr);

// Rotates `heads` heads of `headDim` at the start of each row (rows `ld` floats apart) in place, rotate-half layout:
// dimension i pairs with i + headDim/2; angle = float32(position · invFreq[i]), cos and sin rounded to float32.
void ropeRows(float* x, int rows, size_t ld, int heads, int headDim, const int* positions, const float* invFreq);

// out[r, i] = silu(gateUp[r, i]) · gateUp[r, I + i]: the gate and up projections side by side in one row of 2I.
void swigluRows(const float* gateUp, int rows, int I, float* out);
// The same written as bf16 bits (what the down projection's bf16 GEMM reads).
void swigluRowsBf16(const float* gateUp, int rows, int I, uint16_t* out);

}  // namespace flexhelm
