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

}  // namespace flexhelm
