// Kernels around the oneDNN GEMMs (AVX-512 where the CPU has it, plain C++ otherwise): the attention call's shape and
// entry (defined in attention/), the KV cache copy, the few-row GEMMs on unpacked weights, and the activation
// conversions (bf16 rounding, int8 quantisation). Loops are parallel over rows with OpenMP (the same
// runtime oneDNN uses, so the two never oversubscribe the cores).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gemm/group4-weights.h"

namespace flexhelm {

// Shapes of one attention call. q rows are read with stride qStride (the fused QKV buffer), the output is written
// as [batch, seq, heads * headDim]. K/V are [B, H, kvTokens, D] with the first past + seq tokens filled: kvTokens is
// the capacity of a cache that grows in place (0 = exactly past + seq).
struct AttentionShape {
  int batch, seq, past, heads, headDim;
  size_t qStride;
  float qScale;
  size_t kvTokens = 0;
  // Blocks of queries may run on bf16 operands (vdpbf16ps) with fp32 softmax and sums: for bf16 layers only.
  bool bf16 = false;
  // Grouped-query attention: K/V hold kvHeads heads ([B, kvHeads, T, D]) and query head h reads kv head
  // h / (heads / kvHeads) (transformers' repeat_kv). 0 = heads. The fused QKV rows then hold q (heads·D), k and v
  // (kvHeads·D each).
  int kvHeads = 0;
  // K/V hold bf16 bits (a bf16 layer's cache): new keys and values are rounded to bf16 as they are stored.
  bool kvBf16 = false;
  // Gemma 2: scores (after qScale) become cap · tanh(score / cap) before the mask is added (0: no cap).
  float logitSoftcap = 0.f;
  size_t tokenStride() const { return kvTokens ? kvTokens : static_cast<size_t>(past) + seq; }
  int kvHeadCount() const { return kvHeads > 0 ? kvHeads : heads; }
};

// out[b, s, h*D + d] = softmax_t(softcap(q·k_t) + mask[b, s, t]) · v over t < past + seq.
// Masked keys (bias <= -1e29) contribute exactly 0, as exp(-1e30 - max) does in float, so they are skipped.
// With out16 the result is given as bf16 bits there instead (out may then be overwritten: scratch for the paths that
// compute in fp32). With writeFresh, q's rows are the fused QKV rows (keys at column heads·headDim, values at
// (heads + kvHeads)·headDim) and each (batch, kv head)'s new keys and values are first copied from them into k and v.
// k and v are float, or uint16_t (bf16 bits) with shape.kvBf16.
void attention(const AttentionShape& shape, const float* q, void* k, void* v, const float* maskBias, float* out, uint16_t* out16 = nullptr, bool writeFresh = false);

// Writes the past [B, kvH, P, D] (when past is not null; a cache growing in place already holds it) and, when fresh is
// not null, the new keys/values (rows of the fused QKV buffer) into present [B, kvH, tokenStride, D].
void writePresent(const AttentionShape& shape, const float* past, const float* fresh, size_t freshStride, float* present);

// Reads n bytes once with every OpenMP thread (XOR of the 64-bit words, so nothing can be skipped): the memory
// bandwidth a decode step's weight reads are bounded by. n is a multiple of 8.
uint64_t streamRead(const void* data, size_t n);

// Few-row GEMM straight on a weight in the [in, out] layout, for decode steps of streamed layers: y[m, j] (m < M,
// j < n; rows ldy apart) = act(Σ_k x[m, k] · w[k, j] + bias[j] (+ y[m, j] when accumulate)), written as floats (y32)
// or bf16 bits (y16). w is [K, n] with rows ld floats apart and is read exactly once. Returns false (nothing done)
// where it does not apply: more than kSkinnyRows rows, or no AVX-512 (BW/VL).
constexpr int kSkinnyRows = 8;
bool skinnyGemm(const float* x, int M, int K, const float* w, size_t ld, int n, const float* bias, bool relu, bool accumulate, float* y32, uint16_t* y16, size_t ldy);
// Whether skinnyGemm runs here (AVX-512 with BW/VL, not switched off by FLEXHELM_ONEDNN_PLAIN_KERNELS).
bool skinnyGemmVectorised();

// The same on IEEE half weights (a streamed layer's f16 copies, read at half the bytes of fp32): each weight is widened
// exactly and the sums run in the same order, so the result equals skinnyGemm on the widened weights. Plain C++ where
// the CPU lacks AVX-512 (or FLEXHELM_ONEDNN_PLAIN_KERNELS is set). 1 to kSkinnyRows rows.
void skinnyGemmF16(const float* x, int M, int K, const uint16_t* w, size_t ld, int n, const float* bias, bool relu, bool accumulate, float* y32, uint16_t* y16, size_t ldy);

// The same on a FlexLLMGen 4-bit matrix ([K, n], group4-weights.h: a streamed layer's compressed copy, read at about
// an eighth of fp32's bytes): each weight is dequantized in registers to the value dequantize4 gives and the sums run
// in skinnyGemm's order, so the result equals skinnyGemm on the dequantized weights. Plain C++ where the CPU lacks
// AVX-512 BW/VL or the group size is not a multiple of 32. 1 to kSkinnyRows rows.
void skinnyGemmGroup4(const float* x, int M, int K, const Group4Weights& w, int n, const float* bias, bool relu, bool accumulate, float* y32, uint16_t* y16, size_t ldy);

// bf16 layers: the same few-row GEMM with bf16 products (vdpbf16ps) on IEEE half weights. x is bf16 bits [M, K]; each
// weight is rounded f16 -> bf16 (nearest even, as packing rounds it) and each sum runs k ascending with one fp32
// rounding per product, so the result is bit for bit skinnyGemm on the bf16-rounded weights (away from fp32
// denormals, which vdpbf16ps flushes). Plain C++ with the same rounding and order where the CPU lacks AVX-512 bf16 (or
// FLEXHELM_ONEDNN_PLAIN_KERNELS is set). 1 to kSkinnyBf16Rows rows.
constexpr int kSkinnyBf16Rows = 16;
void skinnyGemmBf16(const uint16_t* x, int M, int K, const uint16_t* w, size_t ld, int n, const float* bias, bool relu, bool accumulate, float* y32, uint16_t* y16, size_t ldy);
// Whether skinnyGemmBf16 runs vectorised here (AVX-512 BW/VL and bf16).
bool skinnyGemmBf16Vectorised();

// IEEE half bits -> float (exact).
void fromF16(const uint16_t* x, float* y, size_t n);
// The same for rows of cols halves ld apart, into dense rows.
void fromF16Rows(const uint16_t* x, size_t ld, float* y, int rows, int cols);

// Round-to-nearest-even float -> bfloat16 bits.
void toBf16(const float* x, uint16_t* y, size_t n);

// The same on the calling thread only (no OpenMP region): for the short rows converted inside parallel loops.
void toBf16Serial(const float* x, uint16_t* y, size_t n);

// bfloat16 bits -> float (exact: the low mantissa bits are zero).
void fromBf16(const uint16_t* x, float* y, size_t n);

// Symmetric int8 quantisation of rows: scale[r] = max|x[r, :]| / 127 (per token), or one scale for all rows.
void quantizeRows(const float* x, int rows, int cols, bool perToken, int8_t* q, float* scale);

}  // namespace flexhelm
