// A linear layer whose weights stay as ggml Q8_0 / Q4_0 blocks: activations are quantized per 32-block to int8 and
// multiplied with integer dot products (AVX-512 VNNI `vpdpbusd`, an AVX2 `vpmaddubsw` fallback, a scalar reference).
#pragma once

#include "quant-blocks.h"

#include <cstdint>
#include <vector>

namespace flexhelm {

class QuantLinear {
 public:
  // blocks: the [N, K] weight as GGUF stores it (row n = K/32 consecutive blocks); copied, K a multiple of 32.
  QuantLinear(QuantType type, const uint8_t* blocks, int K, int N);
  ~QuantLinear();
  QuantLinear(const QuantLinear&) = delete;
  QuantLinear& operator=(const QuantLinear&) = delete;

  // y [M, N] = x [M, K] · Wᵀ (+ y when accumulate). Within one kernel the integer sums are exact and the block terms
  // are added in ascending block order, so results do not depend on the thread count.
  void run(const float* x, int M, float* y, bool accumulate, QuantKernel kernel = QuantKernel::best);

  int K() const { return K_; }
  int N() const { return N_; }
  QuantType type() const { return type_; }
  size_t bytes() const { return bytes_; }

 private:
  QuantType type_;
  int K_, N_;
  size_t rowBytes_, bytes_;
  // The blocks, 64-byte aligned; Q8_0's signed bytes are stored +128 (xor 0x80) so `vpdpbusd` can take them as its
  // unsigned operand (the same 34 bytes a block; the kernels subtract 128·Σx back).
  uint8_t* w_ = nullptr;
  // Activation scratch (quantized rows), grown on demand.
  std::vector<int8_t> xq_;
  std::vector<float> xd_;
  std::vector<int32_t> xs_;
};

// ggml's activation quantization of one row: K/32 blocks of int8 with their scales and sums (exposed for tests).
void quantizeRowQ8(const float* x, int K, int8_t* q, float* d, int32_t* sum);

}  // namespace flexhelm
