// The column-interleaved layout QuantLinear keeps Q4_K / Q6_K layers in on AVX-512 VNNI hosts, and the decode-row
// kernel that multiplies from it without unpacking anything to memory.
//
// GGUF stores a layer row by row ([N, K], each row K/256 super-blocks), so the row kernels decode one column's
// super-block at a time: its 6-bit scales unpacked, its values spread over lanes, sums reduced across lanes — about 50
// cycles a super-block on AVX-512 (RESULTS.md), slower than memory delivers it. Here the columns go in groups of 16 (the
// last group N mod 16 wide), a group's super-blocks in order, and within one super-block the group's blocks are
// interleaved a 32-bit word at a time: word w of column c at 4·(w·L + c) for a group L columns wide. Every 64 bytes
// then hold one word of all 16 columns — 4 values × 16 columns, exactly a `vpdpbusd` operand, and the scales of 16
// columns unpack with a few vector operations. Q6_K's block (210 bytes) ends in 2 bytes (f16 d) after its 52 words:
// those go after all of the group's words, so the words stay 64-byte aligned. Same bytes, same count as GGUF's rows.
#pragma once

#include "quant-blocks.h"

#include <cstddef>
#include <cstdint>

namespace flexhelm {

// The types stored interleaved (those with a kernel below; Q5_K keeps GGUF's rows).
constexpr bool kquantInterleavable(QuantType t) { return t == QuantType::q4_k || t == QuantType::q6_k; }

// `best` runs kquantGemvInterleaved below this many rows, the tiled GEMM (or amx-bf16) from there: it decodes the
// nibbles again for every 4 rows (Q6_K: 2), the GEMM once into a panel. bench/quant-linear.mjs, Llama-3.2-1B layer
// shapes, Intel family 6 model 207, 2 threads, 2026-12-05, interleaved ÷ vnni-gemm time: Q4_K 0.31 / 0.43 / 0.58 /
// 0.80 / 0.95 at 1 / 8 / 16 / 32 / 64 rows, Q6_K 0.39 / 0.77 / 1.04 / 1.41 at 1 / 8 / 16 / 32.
constexpr int kquantInterleavedRows(QuantType t) { return t == QuantType::q6_k ? 16 : 64; }

// GGUF's rows ([N, K]) to the interleaved layout, and back (both N·K/256 blocks; K a multiple of 256).
void kquantInterleave(QuantType t, const uint8_t* rows, int K, int N, uint8_t* packed);
void kquantDeinterleave(QuantType t, const uint8_t* packed, int K, int N, uint8_t* rows);

// Super-blocks [b0, b1) of group g (columns 16g … up to N) back in GGUF's block format, in the calling thread's
// scratch (valid until its next call): column c's at c·(b1 − b0)·bytes per block (the other kernels read these as rows).
const uint8_t* kquantGroupRows(QuantType t, const uint8_t* packed, int K, int N, int g, int b0, int b1);

// y [M, N] = x [M, K] · Wᵀ (+ y when accumulate) from the interleaved layout (AVX-512 VNNI; decode rows): per super-block
// and row one `vpdpbusd` per word of 16 columns into each scale unit's int32 sum, × the unit's scale, the mins
// (Q4_K) as `vpdpwssd`, one float step — the same integers and float steps as the tiled GEMM (kquant-gemm.h), so the
// same bits. Results do not depend on the thread count.
void kquantGemvInterleaved(QuantType t, const uint8_t* packed, int K, int N, const float* x, int M, float* y, bool accumulate);

}  // namespace flexhelm
