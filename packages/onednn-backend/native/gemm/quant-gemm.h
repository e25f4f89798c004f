// The many-row (prefill, batched decode) GEMM on ggml Q8_0 / Q4_0 blocks: register-tiled AVX-512 VNNI over column
// panels packed per call, activations quantized per 32-block to int8 as the decode kernels take them.
#pragma once

#include "quant-blocks.h"

#include <cstdint>

namespace flexhelm {

bool quantGemmAvailable();

// y [M, N] = x · Wᵀ (+ y when accumulate). w: the [N, K] blocks as QuantLinear stores them (Q8_0 bytes +128);
// xq [M, K] the activations' int8 values, xd / xs [M, K/32] their block scales and sums (quantizeRowQ8).
// Each output is one thread's, its block terms added in ascending order: results do not depend on the thread count.
void quantGemmVnni(QuantType t, const uint8_t* w, int K, int N, const int8_t* xq, const float* xd, const int32_t* xs, int M, float* y, bool accumulate);

}  // namespace flexhelm
