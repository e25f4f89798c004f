// A linear layer whose weights stay as ggml Q8_0 / Q4_0 blocks: activations are quantized per 32-block to int8 and
// multiplied with integer dot products (AVX-512 VNNI `vpdpbusd`, an AVX2 `vpmaddubsw` fallback, a scalar reference).
#pragma once

#include "quant-blocks.h"

#include <dnnl.hpp>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <new>
#include <utility>
#include <vector>

namespace flexhelm {

// 64-byte aligned vector storage (the kernels load whole 512-bit lines).
template <class T>
struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U>&) {}
  T* allocate(size_t n) {
    void* p = std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { std::free(p); }
  template <class U>
  bool operator==(const AlignedAllocator<U>&) const { return true; }
  template <class U>
  bool operator!=(const AlignedAllocator<U>&) const { return false; }
};

class QuantLinear {
 public:
  // blocks: the [N, K] weight as GGUF stores it (row n = K/32 consecutive blocks); copied, K a multiple of 32.
  QuantLinear(QuantType type, const uint8_t* blocks, int K, int N);
  // The same matrix from `store`'s output (same type and shape, made on this host), read where it lies: the bytes must
  // outlive this QuantLinear unchanged (an offloaded layer's home copy). Not 64-byte aligned: copied instead.
  struct Borrow {};
  QuantLinear(QuantType type, const uint8_t* stored, int K, int N, Borrow);
  // The blocks (GGUF's [N, K] rows) in the form a QuantLinear keeps them on this host — Q8_0's quant bytes +128, the
  // column-interleaved layout with VNNI — into `out` (as many bytes as the blocks): what the borrowing constructor
  // reads, so a layer streamed in from the offloading tiers is neither copied nor reordered per use.
  static void store(QuantType type, const uint8_t* blocks, int K, int N, uint8_t* out);
  ~QuantLinear();
  QuantLinear(const QuantLinear&) = delete;
  QuantLinear& operator=(const QuantLinear&) = delete;

  // y [M, N] = x [M, K] · Wᵀ (+ y when accumulate). Within one integer kernel the block sums are exact and the block
  // terms are added in a fixed order, so results do not depend on the thread count.
  void run(const float* x, int M, float* y, bool accumulate, QuantKernel kernel = QuantKernel::best);
  // The same on bf16 rows (a bf16 layer's activations), the results of run() on them widened: the tiled integer GEMM
  // quantizes them as they are, the other kernels take them widened in scratch.
  void run(const uint16_t* x, int M, float* y, bool accumulate);

  int K() const { return K_; }
  int N() const { return N_; }
  QuantType type() const { return type_; }
  size_t bytes() const { return bytes_; }

 private:
  QuantType type_;
  int K_, N_;
  size_t rowBytes_, bytes_;
  // The blocks, 64-byte aligned (rows, or interleaved for the tiled GEMM); Q8_0's signed bytes are stored +128 (xor 0x80) so `vpdpbusd` can take them as its
  // unsigned operand (the same 34 bytes a block; the kernels subtract 128·Σx back).
  uint8_t* w_ = nullptr;
  // Whether w_ is this object's to free (not a borrowed stored copy).
  bool owned_ = true;
  // The bf16 path's matmuls by (rows, accumulate).
  std::map<std::pair<int, bool>, dnnl::matmul> bf16ByShape_;
  // Whether w_ holds the tiled GEMM's column-interleaved layout (quant-gemm.h) rather than GGUF's rows.
  bool interleaved_ = false;
  void runBf16(const float* x, int M, float* y, bool accumulate);
  void dequantizeInterleavedKQuantBf16(uint16_t* out) const;
  QuantKernel bestKernel(int M) const;
  // The blocks in row order: w_, or an interleaved layer's reordered back into a scratch copy.
  const uint8_t* rowBlocks();
};

// The blocks of rows [n0, n1) of a [N, K] weight (stored as QuantLinear keeps them) widened to bf16 bits, row-major.
void dequantizeRowsBf16(QuantType type, const uint8_t* blocks, int K, int n0, int n1, uint16_t* out);

// ggml's activation quantization of one row: K/32 blocks of int8 with their scales and sums (exposed for tests).
void quantizeRowQ8(const float* x, int K, int8_t* q, float* d, int32_t* sum);

}  // namespace flexhelm
