// ggml's K-quants (Q4_K, Q5_K, Q6_K: what Q4_K_M / Q5_K_M files hold) multiplied as GGUF stores them, 256 values a
// super-block (144 / 176 / 210 bytes):
//  - block_q4_k: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins for eight 32-value sub-blocks, 128 bytes of
//    nibbles (32 bytes per sub-block pair: low nibbles sub-block 2j, high nibbles 2j + 1); value = d·sc·q − dmin·m.
//  - block_q5_k: as Q4_K with 32 bytes of fifth bits (qh) before the nibbles: bit s of qh[l] is value l of sub-block s.
//  - block_q6_k: 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 int8 scales (one per 16 values), f16 d;
//    value = d·sc·(q − 32), q 6 bits.
// The activations are quantized as ggml's q8_K (one float scale per 256 values, int8, the sums of each 16), so the
// sub-block scales are applied in integers and a super-block needs one float step per row.
#pragma once

#include "quant-blocks.h"

#include <cstdint>

namespace flexhelm {

// y [M, N] = x [M, K] · Wᵀ (+ y when accumulate) on a K-quant weight ([N, K], row n = K/256 super-blocks), with the
// integer kernel `kernel` (avx512vnni or scalar; best picks). Results do not depend on the thread count.
void kquantGemv(QuantType type, const uint8_t* w, int K, int N, const float* x, int M, float* y, bool accumulate, QuantKernel kernel);

// The integer kernel `best` means for K-quants on this CPU: avx512vnni, else scalar (no AVX2 kernel).
QuantKernel bestKQuantKernel();

// Rows [n0, n1) of a K-quant [N, K] weight widened to bf16 bits, row-major (the many-row path).
void dequantizeKRowsBf16(QuantType type, const uint8_t* blocks, int K, int n0, int n1, uint16_t* out);
// Row n's values k0 … k1 − 1 (multiples of 256) so, on the calling thread.
void widenKRowBf16(QuantType type, const uint8_t* blocks, int K, int n, int k0, int k1, uint16_t* out);
// The same with AVX512_BF16's rounding (nearest even; subnormals flushed to zero): the AMX GEMM's widening.
void widenKRowBf16Ne(QuantType type, const uint8_t* blocks, int K, int n, int k0, int k1, uint16_t* out);

// ggml's q8_K activation quantization of one row (exposed for tests): per 256 values the scale d (max |x| / 127),
// 256 int8 values, and the 16 sums of each 16 values.
void quantizeRowQ8K(const float* x, int K, int8_t* q, float* d, int16_t* bsum16);

// M rows quantized so, into the calling thread's buffers (valid until its next call): vectorized (AVX-512, where the
// VNNI kernels run; the same bits as quantizeRowQ8K) or by quantizeRowQ8K itself; rows in parallel past one.
struct Q8KRows {
  const int8_t* q;      // [M, K]
  const float* d;       // [M, K/256]
  const int16_t* bsum;  // [M, K/256 · 16]
};
Q8KRows quantizeRowsQ8K(const float* x, int M, int K, bool vectorized);

}  // namespace flexhelm
