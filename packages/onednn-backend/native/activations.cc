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

// gelu_pytorch_tanh: 0.5·z·(1 + tanh(u)), u = √(2/π)·(z + 0.044715·z³), written as z · sigmoid(2u) (the same
// function: 1 + tanh(u) = 2 / (1 + exp(−2u))), which has no cancellation where tanh(u) is near −1 and vectorises with
// the softmax's exp16. Differs from torch's float32 tanh form by a few float32 rounding steps.
constexpr float kGeluBeta = 0.7978845608028654f;  // sqrt(2/π)
constexpr float kGeluKappa = 0.044715f;

__attribute__((target("avx512f"))) void gegluRow16(const float* gate, const float* up, int I, float* out) {
  const __m512 one = _mm512_set1_ps(1.f), minusTwoBeta = _mm512_set1_ps(-2.f * kGeluBeta), kappa = _mm512_set1_ps(kGeluKappa);
  for (int i = 0; i < I; i += 16) {
    const __m512 z = _mm512_loadu_ps(gate + i);
    // −2u = −2β · (z + κ·z³)
    const __m512 arg = _mm512_mul_ps(minusTwoBeta, _mm512_fmadd_ps(_mm512_mul_ps(kappa, z), _mm512_mul_ps(z, z), z));
    const __m512 g = _mm512_div_ps(z, _mm512_add_ps(one, exp16(arg)));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(g, _mm512_loadu_ps(up + i)));
  }
}

void gegluRow(const float* gate, const float* up, int I, float* out) {
  if (cpuAvx512() && I % 16 == 0) return gegluRow16(gate, up, I, out);
  for (int i = 0; i < I; i++) {
    const float z = gate[i];
    const float arg = -2.f * kGeluBeta * (z + kGeluKappa * z * z * z);
    out[i] = z / (1.f + std::exp(arg)) * up[i];
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
