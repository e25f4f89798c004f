#include "activations.h"

#include <immintrin.h>

#include <cmath>
#include <vector>

#include "cpu-features.h"
#include "kernels.h"
#include "vector-exp.h"

namespace flexhelm {

namespace {

constexpr size_t kParallelMin = size_t{1} << 16;

// silu(g) · u for 16 lanes: g / (1 + exp(-g)) · u.
__attribute__((target("avx512f"))) inline __m512 swiglu16(__m512 g, __m512 u) {
  const __m512 one = _mm512_set1_ps(1.f);
  return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), g)))), u);
}

__attribute__((target("avx512f"))) void swigluRow16(const float* gate, const float* up, int I, float* out) {
  for (int i = 0; i < I; i += 16) _mm512_storeu_ps(out + i, swiglu16(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
}

void swigluRow(const float* gate, const float* up, int I, float* out) {
  if (cpuAvx512() && I % 16 == 0) return swigluRow16(gate, up, I, out);
  for (int i = 0; i < I; i++) out[i] = gate[i] / (1.f + std::exp(-gate[i])) * up[i];
}

// gelu_pytorch_tanh in float32 as torch computes it (inner = √(2/π)·(z + 0.044715·z³), tanh in float). Scalar: only
// Gemma 2 takes it, and tanh has no exp16-style polynomial here that matches std::tanh to float rounding.
void gegluRow(const float* gate, const float* up, int I, float* out) {
  constexpr float kBeta = 0.7978845608028654f;  // sqrt(2/π)
  constexpr float kKappa = 0.044715f;
  for (int i = 0; i < I; i++) {
    const float z = gate[i];
    const float inner = kBeta * (z + kKappa * z * z * z);
    out[i] = 0.5f * z * (1.f + std::tanh(inner)) * up[i];
  }
}

void gatedRow(GatedActivation act, const float* gate, const float* up, int I, float* out) {
  if (act == GatedActivation::geluTanh) return gegluRow(gate, up, I, out);
  swigluRow(gate, up, I, out);
}

}  // namespace

void gatedRows(GatedActivation act, const float* gateUp, int rows, int I, float* out) {
#pragma omp parallel for schedule(static) if (static_cast<size_t>(rows) * I >= kParallelMin)
  for (int r = 0; r < rows; r++) {
    const float* g = gateUp + static_cast<size_t>(r) * 2 * I;
    gatedRow(act, g, g + I, I, out + static_cast<size_t>(r) * I);
  }
}

void gatedRowsBf16(GatedActivation act, const float* gateUp, int rows, int I, uint16_t* out) {
#pragma omp parallel if (static_cast<size_t>(rows) * I >= kParallelMin)
  {
    thread_local std::vector<float> row;
    if (row.size() < static_cast<size_t>(I)) row.resize(I);
#pragma omp for schedule(static)
    for (int r = 0; r < rows; r++) {
      const float* g = gateUp + static_cast<size_t>(r) * 2 * I;
      gatedRow(act, g, g + I, I, row.data());
      toBf16Serial(row.data(), out + static_cast<size_t>(r) * I, I);
    }
  }
}

}  // namespace flexhelm
