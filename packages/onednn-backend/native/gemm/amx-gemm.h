// Many-row GEMM on AMX-BF16 tiles for weights kept in a compact form (ggml's quantized blocks): the weights are widened
// to bf16 a cache-sized panel at a time, inside the GEMM, and never as a whole matrix in memory. This is the issue's
// "bf16 tiles dequantized in cache": on an AMX host the tile unit does 16×16×32 multiply-adds an instruction, so the
// widening (a few vector operations per 32 weights, done once per panel and reused by every row) costs less than the
// integer path's per-block scale arithmetic.
//
// Shapes: y [M, N] (+)= x [M, K] · Wᵀ, W [N, K]. The caller widens W through `decode`; x is rounded to bf16 here, so
// the products are exact and the sums fp32 (the bf16 path's numbers, in another order).
#pragma once

#include <cstddef>
#include <cstdint>

namespace flexhelm {

// The CPU has AMX-TILE and AMX-BF16 and the kernel lets this process use the tile registers (asked once), unless
// FLEXHELM_QUANT_AMX=0.
bool amxBf16Available();

// What ldtilecfg reads (palette 1, 64 bytes): each tile register's rows and bytes per row; unused tiles stay 0.
struct alignas(64) AmxTileConfig {
  uint8_t palette = 1;
  uint8_t startRow = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// B tiles: the layout the tile unit multiplies, 32 k of 16 weight rows (output columns) in 1 KiB: row p holds the
// pair (k = 2p, 2p + 1) of each of the 16 columns, column c's pair at dword c (the lower k in the low half).
constexpr int kAmxTileValues = 512;

// Writes the weight rows (output columns) n = 16·g … 16·g + 15 over k = k0 … k0 + kc − 1 as kc / 32 B tiles of bf16
// bits, the tile of k0 + 32·t at tiles + t·kAmxTileValues (64-byte aligned). Rows past N are zeros. k0 and kc are
// multiples of the decoder's block (amxGemmBf16's kBlock).
using AmxDecodePanel = void (*)(const void* ctx, int g, int k0, int kc, uint16_t* tiles);

// For decoders that widen row by row: 16 rows of kc bf16 values (row r at rows + r·ld) to kc / 32 B tiles.
void amxRowsToTiles(const uint16_t* rows, size_t ld, int kc, uint16_t* tiles);

// kBlock: the decoder's block of k (32, or 256 for ggml's K-quants); K a multiple of it. Runs on the OpenMP team; each
// output is one thread's, its k terms added in a fixed order, so results do not depend on the thread count.
void amxGemmBf16(const float* x, int M, int K, int N, float* y, bool accumulate, AmxDecodePanel decode, const void* ctx, int kBlock);

}  // namespace flexhelm
