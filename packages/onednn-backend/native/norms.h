// The norm kernels (AVX-512 where the CPU has it): OPT's LayerNorm and the rotary layers' RMSNorm. Rows run in
// parallel with OpenMP.
// Gemma's `rmsnorm-plus-one` needs no kernel of its own: its `(x / rms) · (1 + w)` in float32 is this one with the
// weight 1 + w (rounded to float32 as transformers adds it), which the TS side hands in.
#pragma once

#include <cstddef>
#include <cstdint>

namespace flexhelm {

// y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * w + b; biased variance, double accumulation (as the reference).
// y may alias x.
void layerNormRows(const float* x, float* y, int rows, int dim, const float* w, const float* b, float eps);

// The same, written as bf16 bits (rounded to nearest even, as toBf16 would round the float result). copy, if not
// null, receives x (the residual the next GEMM adds onto) from the same pass over x.
void layerNormRowsBf16(const float* x, uint16_t* y, int rows, int dim, const float* w, const float* b, float eps, float* copy = nullptr);

// y[r, :] = w ⊙ (x[r, :] / sqrt(mean(x[r, :]²) + eps)) with float32 statistics, the normalised value rounded to
// float32 before the weight multiplies it (transformers' LlamaRMSNorm). y may alias x. copy, if not null, receives x
// (the residual the next GEMM adds onto) from the same pass.
void rmsNormRows(const float* x, float* y, int rows, int dim, const float* w, float eps, float* copy = nullptr);
// The same written as bf16 bits (rounded to nearest even).
void rmsNormRowsBf16(const float* x, uint16_t* y, int rows, int dim, const float* w, float eps, float* copy = nullptr);

// In place on the first dim values of rows ld floats apart (OLMo 2's q/k norm over a projection inside the fused
// q/k/v rows).
void rmsNormStrided(float* x, int rows, size_t ld, int dim, const float* w, float eps);

// y[r, :] = residual[r, :] + RMSNorm(x[r, :]) (a branch's output normed before the residual add: OLMo 2, Gemma 2).
// y may alias residual.
void rmsNormAddRows(const float* x, const float* residual, float* y, int rows, int dim, const float* w, float eps);

}  // namespace flexhelm
