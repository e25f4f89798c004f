// ggml's 32-value quantized blocks as GGUF files store them, and the q8 activation blocks the quantized kernels
// multiply them with. Weights stay in these blocks in memory (34 / 18 bytes per 32 values, no widening to bf16/f32).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace flexhelm {

constexpr int kQuantBlock = 32;

enum class QuantType { q8_0, q4_0 };

// block_q8_0: f16 scale d, 32 signed bytes; value i = d · q[i].
// block_q4_0: f16 scale d, 16 bytes of nibbles (low nibble of byte j = value j, high nibble = value j + 16);
// value = d · (q − 8).
constexpr size_t quantBlockBytes(QuantType t) { return t == QuantType::q8_0 ? 34 : 18; }

QuantType parseQuantType(const std::string& name);
const char* quantTypeName(QuantType t);

// Which code runs the integer dot products: the best this CPU has, or one of them on purpose (tests and benchmarks
// compare each against the scalar reference).
enum class QuantKernel { best, avx512vnni, avx2, scalar };

QuantKernel parseQuantKernel(const std::string& name);
const char* quantKernelName(QuantKernel k);
// The kernel `best` means on this CPU (FLEXHELM_ONEDNN_PLAIN_KERNELS forces scalar, as for the other kernels).
QuantKernel bestQuantKernel();
bool quantKernelAvailable(QuantKernel k);

// Activation rows quantized per 32-block to int8 (ggml's q8_0 rounding: d = max|x| / 127, q = round(x / d)), kept
// apart so the kernels load them aligned: q [rows][K] int8, d [rows][K/32] float, and per block the correction
// −offset·Σq as a 16-lane int32 vector seed (offset 128 for Q8_0 weights stored +128, 8 for Q4_0's nibbles) so that
// the unsigned×signed `vpdpbusd` gives the signed dot product without a per-row sign fix.
struct QuantizedRows {
  int rows = 0, K = 0;
  int8_t* q = nullptr;
  float* d = nullptr;
  int32_t* blockSum = nullptr;  // Σ q over each block, [rows][K/32]
};

}  // namespace flexhelm
