// ggml's 32-value quantized blocks as GGUF files store them, and the q8 activation blocks the quantized kernels
// multiply them with. Weights stay in these blocks in memory (34 / 18 bytes per 32 values, no widening to bf16/f32).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace flexhelm {

constexpr int kQuantBlock = 32;

// q4_k / q5_k / q6_k: ggml's K-quants, 256-value super-blocks (kquant-gemv.h describes them and their kernels).
enum class QuantType { q8_0, q4_0, q4_k, q5_k, q6_k };

// block_q8_0: f16 scale d, 32 signed bytes; value i = d · q[i].
// block_q4_0: f16 scale d, 16 bytes of nibbles (low nibble of byte j = value j, high nibble = value j + 16);
// value = d · (q − 8).
constexpr bool isKQuant(QuantType t) { return t == QuantType::q4_k || t == QuantType::q5_k || t == QuantType::q6_k; }
constexpr int quantBlockValues(QuantType t) { return isKQuant(t) ? 256 : kQuantBlock; }
constexpr size_t quantBlockBytes(QuantType t) {
  return t == QuantType::q8_0 ? 34 : t == QuantType::q4_0 ? 18 : t == QuantType::q4_k ? 144 : t == QuantType::q5_k ? 176 : 210;
}

QuantType parseQuantType(const std::string& name);
const char* quantTypeName(QuantType t);

// Which code multiplies: the best this CPU has for the row count, or one on purpose (tests and benchmarks compare each
// against the scalar reference). avx512vnni / avx2 / scalar: integer dot products on q8-quantized activations;
// bf16: the blocks widened to a bf16 scratch copy for this call only and oneDNN's bf16 matmul (many rows: prefill).
// vnni-gemm: the register-tiled VNNI GEMM of quant-gemm.h (many rows). amx-bf16: the blocks widened to bf16 a panel at
// a time inside an AMX tile GEMM (amx-gemm.h; many rows, AMX hosts).
enum class QuantKernel { best, avx512vnni, avx2, scalar, bf16, vnniGemm, amxBf16 };

// With AVX-512 VNNI a Q8_0 / Q4_0 layer is interleaved (the default; FLEXHELM_QUANT_GEMM=0 keeps GGUF's rows) and
// `best` is vnni-gemm at every row count (QuantLinear::bestKernel; bench/quant-linear.mjs, Llama-3.2-1B layer shapes,
// AMD EPYC family 26, 2 threads, quiet, 2026-12-05: vnni-gemm 0.95× / 0.95× the row kernel's time at 1 row, 0.40× /
// 0.38× at 8, Q8_0 / Q4_0; at 512 rows 0.61× / 0.66× the widened bf16 path's, which FLEXHELM_QUANT_INT8_PREFILL=0
// keeps above this many rows). K-quants run the tiled GEMM from kKQuantGemmRows (kquant-gemm.h; interleaved Q4_K / Q6_K from kquantInterleavedRows).
// On a Q8_0 / Q4_0 layer in GGUF's row order (no VNNI, or FLEXHELM_QUANT_GEMM=0) `best` runs the integer row kernels
// up to this many rows and the bf16 path above (2026-12-04: at 8 rows the VNNI row kernel took 0.68× / 0.77× the bf16 path's time, at 512 rows 3.5× /
// 2.9× of it).
constexpr int kQuantIntRows = 8;

// On AMX hosts `best` runs amx-bf16 from this many rows for interleaved Q8_0 / Q4_0 blocks (widened straight into
// tiles) and from kAmxKQuantRows for K-quants and row-order blocks (widened row by row, then transposed).
// bench/quant-linear.mjs, Llama-3.2-1B layer shapes, Intel family 6 model 207 (AMX), 2 threads, 2026-12-05, amx-bf16's
// time ÷ vnni-gemm's: Q4_0 / Q8_0 1.65 / 1.60 at 16 rows, 0.67 / 0.78 at 64, 0.38 / 0.48 at 512; Q4_K / Q6_K 2.15 /
// 1.96 at 16, 1.05 / 0.93 at 64, 0.65 / 0.64 at 128, 0.43 / 0.39 at 512.
constexpr int kAmxRows = 64;
constexpr int kAmxKQuantRows = 128;

// The tiled Q8_0 / Q4_0 GEMM (quant-gemm.h) streams a layer's blocks from memory once per call (later row tiles find
// them in cache), and reaches the memory's rate only with enough reads in flight: its first row tile asks for the line
// this many bytes ahead (bench/RESULTS.md, 2026-12-05: a 1-row step's Q4_0 GEMVs 4.7–6.4 ms instead of 6.7–9.5). The
// K-quant row kernels gained nothing from it (Q4_K / Q6_K within noise) and do without. A macro so a benchmark build
// can sweep it; 0 turns it off.
#ifndef FLEXHELM_QGEMM_PREFETCH
#define FLEXHELM_QGEMM_PREFETCH 2048
#endif
constexpr int kQuantPrefetch = FLEXHELM_QGEMM_PREFETCH;

QuantKernel parseQuantKernel(const std::string& name);
const char* quantKernelName(QuantKernel k);
// The kernel `best` means on this CPU (FLEXHELM_ONEDNN_PLAIN_KERNELS forces scalar, as for the other kernels).
QuantKernel bestQuantKernel();
bool quantKernelAvailable(QuantKernel k);

}  // namespace flexhelm
