// The register-tiled GEMM on ggml K-quant super-blocks (Q4_K, Q5_K, Q6_K) for prompt rows, AVX-512 VNNI.
//
// The blocks stay as QuantLinear keeps them — GGUF's rows, or Q4_K / Q6_K interleaved for their decode kernel
// (kquant-interleave.h; a group is read back in row form first) — nothing is widened or duplicated in memory. Each
// task takes 32 columns, decodes their super-blocks once per call into a panel
// in cache — unsigned 8-bit values (0–63) as `vpdpbusd` words of 4 k × 16 columns, the integer scale of each
// sub-block (Q4_K / Q5_K: 32 values; Q6_K: 16) as int32 per column, the Q4_K / Q5_K mins as int16 pairs, d and dmin
// as floats — and every tile of 6 rows multiplies from it: per sub-block one `vpdpbusd` per 4 k into a fresh int32
// sum, then × the column's scale into the super-block's int32 total (exact), the mins term as `vpdpwssd` of the
// columns' mins against the row's sub-block sums, one float step per super-block. Activations are q8_K (one scale per
// 256 values), as the row kernels and llama.cpp round them. For M rows the decoding costs one column pass, the
// products M (RESULTS.md has the rates).
#pragma once

#include "kquant-gemv.h"
#include "quant-blocks.h"

#include <cstdint>

namespace flexhelm {

bool kquantGemmAvailable();

// From this many rows `best` runs the tiled GEMM on row-order K-quant layers (interleaved ones: kquantInterleavedRows),
// below it the row kernel (decoded once per column for up
// to 8 rows, no panel to build). bench/quant-linear.mjs, Llama-3.2-1B layer shapes, AMD EPYC family 26, 2 threads,
// quiet, 2026-12-05: at 8 rows 0.94× / 0.80× the row kernel's time (Q4_K / Q6_K), at 6 rows 1.15× / 1.10×; at 512
// rows 0.57× / 0.60× the widened bf16 path's (1173 / 1112 GFLOP/s, Q4_0's interleaved GEMM 1118).
constexpr int kKQuantGemmRows = 8;

// y [M, N] = x [M, K] · Wᵀ (+ y when accumulate); w in GGUF's rows ([N, K], K a multiple of 256) or interleaved
// (kquant-interleave.h). Each output is one thread's, its super-block terms added in ascending order: results do not
// depend on the thread count.
void kquantGemmVnni(QuantType t, const uint8_t* w, int K, int N, const float* x, int M, float* y, bool accumulate, bool interleaved);

// M rows quantized as q8_K (quantizeRowsQ8K, vectorized) with what the integer K-quant GEMMs read beside them per row
// and super-block (auxPerSuper int32): Q4_K / Q5_K the 4 int16 pairs of sub-block sums (low half sub-block 2p, high
// half 2p + 1), Q6_K the 16 seeds −32 · each group's sum (its values' offset). Valid until the thread's next call.
struct KQuantActivations {
  Q8KRows rows;
  const int32_t* aux;
  int auxPerSuper;
};
KQuantActivations kquantActivations(QuantType t, const float* x, int M, int K);

}  // namespace flexhelm
