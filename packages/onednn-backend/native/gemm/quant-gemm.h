// The register-tiled GEMM on ggml Q8_0 / Q4_0 blocks (AVX-512 VNNI), over the column-interleaved layout QuantLinear
// keeps its blocks in on such CPUs; activations quantized per 32-block to int8 as for the row kernels.
//
// Layout: columns in groups of 16 (the last group L = N mod 16 columns wide), group g from byte g·16·rowBytes, so the
// bytes are the GGUF tensor's, only reordered. In a group of L columns, for block b: its q bytes (32 Q8_0 bytes, or 16
// Q4_0 nibble bytes) as 4-byte words, word j of column c at ((b·W + j)·L + c)·4 (W = 8 or 4 words a block); after all
// blocks' words, the f16 scales, column c's of block b at (b·L + c)·2. One 64-byte load gives `vpdpbusd` 4 consecutive
// k of 16 columns.
#pragma once

#include "quant-blocks.h"

#include <cstdint>

namespace flexhelm {

bool quantGemmAvailable();

// Row layout ([N, K], row n = K/32 consecutive blocks) to the interleaved layout, and back; both rowBytes·N bytes.
void quantInterleave(QuantType t, const uint8_t* rows, int K, int N, uint8_t* out);
void quantDeinterleave(QuantType t, const uint8_t* packed, int K, int N, uint8_t* rows);
// Block b of column n back in GGUF's form (quantBlockBytes(t) bytes at `block`).
void quantGatherBlock(QuantType t, const uint8_t* packed, int K, int N, int n, int b, uint8_t* block);

// The interleaved blocks widened to bf16 rows ([N, K], as `dequantizeRowsBf16` gives from GGUF's rows, the same bits):
// whole 16-column groups with AVX-512, a last partial group through `column` (one column n into `row`).
void dequantizeInterleavedBf16Vnni(QuantType t, const uint8_t* packed, int K, int N, uint16_t* out, void (*column)(QuantType t, const uint8_t* packed, int K, int N, int n, uint16_t* row));

// Blocks [b0, b1) of the full 16-column group g straight into AMX B tiles (amx-gemm.h's layout; block b's at tiles + (b − b0)·512), with
// AVX512_BF16's rounding (nearest-even as bf16Bits; subnormal products flush to zero). AMX hosts only.
void widenInterleavedGroupTiles(QuantType t, const uint8_t* packed, int K, int g, int b0, int b1, uint16_t* tiles);

// ggml's q8_0 quantization of M rows (quantizeRowQ8's arithmetic, vectorized: the same bits), rows in parallel.
void quantizeRowsQ8Vnni(const float* x, int M, int K, int8_t* q, float* d, int32_t* sum);
// The same from bf16 rows (a bf16 layer's activations), each value widened exactly as it is loaded: the bits of
// quantizeRowsQ8Vnni on the widened floats, without writing them out first.
void quantizeRowsQ8VnniBf16(const uint16_t* x, int M, int K, int8_t* q, float* d, int32_t* sum);

// y [M, N] = x · Wᵀ (+ y when accumulate). w: the interleaved blocks (Q8_0 bytes +128 as QuantLinear stores them);
// xq [M, K] the activations' int8 values, xd / xs [M, K/32] their block scales and sums (quantizeRowQ8).
// Each output is one thread's, its block terms added in ascending order: results do not depend on the thread count.
void quantGemmVnni(QuantType t, const uint8_t* w, int K, int N, const int8_t* xq, const float* xd, const int32_t* xs, int M, float* y, bool accumulate);

}  // namespace flexhelm
