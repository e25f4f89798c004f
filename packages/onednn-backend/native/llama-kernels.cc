#include "llama-kernels.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels.h"
#include "vector-exp.h"

namespace flexhelm {

namespace {

// Below this many elements a loop stays on the calling thread (waking the team costs more than the work).
constexpr size_t kParallelMin = size_t{1} << 16;

bool hasAvx512() {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512;
}

// Σ x² of one row in float32 (16 partial sums, then their sum).
__attribute__((target("avx512f"))) float sumSquares16(const float* x, int dim) {
  __m512 s = _mm512_setzero_ps();
  for (int i = 0; i < dim; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    s = _mm512_fmadd_ps(v, v, s);
  }
  return _mm512_reduce_add_ps(s);
}

float sumSquares(const float* x, int dim) {
  if (hasAvx512() && dim % 16 == 0) return sumSquares16(x, dim);
  float s = 0.f;
  for (int i = 0; i < dim; i++) s += x[i] * x[i];
  return s;
}

// One row into out (float32): separate from the store so the bf16 variant rounds the same values.
void rmsNormRow(const float* x, float* out, int dim, const float* w, float eps) {
  const float inv = 1.f / std::sqrt(sumSquares(x, dim) / static_cast<float>(dim) + eps);
  for (int i = 0; i < dim; i++) out[i] = w[i] * (x[i] * inv);
}

}  // namespace

void rmsNormRows(const float* x, float* y, int rows, int dim, const float* w, float eps, float* copy) {
  if (copy == x) copy = nullptr;
#pragma omp parallel for schedule(static) if (static_cast<size_t>(rows) * dim >= kParallelMin)
  for (int r = 0; r < rows; r++) {
    const size_t at = static_cast<size_t>(r) * dim;
    if (copy) std::memcpy(copy + at, x + at, sizeof(float) * dim);
    rmsNormRow(x + at, y + at, dim, w, eps);
  }
}

void rmsNormRowsBf16(const float* x, uint16_t* y, int rows, int dim, const float* w, float eps, float* copy) {
  if (copy == x) copy = nullptr;
#pragma omp parallel if (static_cast<size_t>(rows) * dim >= kParallelMin)
  {
    thread_local std::vector<float> row;
    if (row.size() < static_cast<size_t>(dim)) row.resize(dim);
#pragma omp for schedule(static)
    for (int r = 0; r < rows; r++) {
      const size_t at = static_cast<size_t>(r) * dim;
      if (copy) std::memcpy(copy + at, x + at, sizeof(float) * dim);
      rmsNormRow(x + at, row.data(), dim, w, eps);
      toBf16(row.data(), y + at, dim);
    }
  }
}

void ropeRows(float* x, int rows, size_t ld, int heads, int headDim, const int* positions, const float* invFreq) {
  const int half = headDim / 2;
#pragma omp parallel if (static_cast<size_t>(rows) * heads * headDim >= kParallelMin)
  {
    thread_local std::vector<float> cs;
    if (cs.size() < static_cast<size_t>(headDim)) cs.resize(headDim);
    float* cosv = cs.data();
    float* sinv = cs.data() + half;
#pragma omp for schedule(static)
    for (int r = 0; r < rows; r++) {
      // The angle is rounded to float32 first, as transformers computes it (position_ids.float() · inv_freq).
      for (int i = 0; i < half; i++) {
        const float angle = static_cast<float>(static_cast<double>(positions[r]) * invFreq[i]);
        cosv[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
        sinv[i] = static_cast<float>(std::sin(static_cast<double>(angle)));
      }
      float* row = x + static_cast<size_t>(r) * ld;
      for (int h = 0; h < heads; h++) {
        float* v = row + static_cast<size_t>(h) * headDim;
        for (int i = 0; i < half; i++) {
          const float a = v[i], b = v[i + half];
          v[i] = a * cosv[i] - b * sinv[i];
          v[i + half] = b * cosv[i] + a * sinv[i];
        }
      }
    }
  }
}

namespace {

// silu(g) · u for 16 lanes: g / (1 + exp(-g)) · u.
__attribute__((target("avx512f"))) inline __m512 swiglu16(__m512 g, __m512 u) {
  const __m512 one = _mm512_set1_ps(1.f);
  return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), g)))), u);
}

__attribute__((target("avx512f"))) void swigluRow16(const float* gate, const float* up, int I, float* out) {
  for (int i = 0; i < I; i += 16) _mm512_storeu_ps(out + i, swiglu16(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
}

void swigluRow(const float* gate, const float* up, int I, float* out) {
  if (hasAvx512() && I % 16 == 0) return swigluRow16(gate, up, I, out);
  for (int i = 0; i < I; i++) out[i] = gate[i] / (1.f + std::exp(-gate[i])) * up[i];
}

}  // namespace

void swigluRows(const float* gateUp, int rows, int I, float* out) {
#pragma omp parallel for schedule(static) if (static_cast<size_t>(rows) * I >= kParallelMin)
  for (int r = 0; r < rows; r++) {
    const float* g = gateUp + static_cast<size_t>(r) * 2 * I;
    swigluRow(g, g + I, I, out + static_cast<size_t>(r) * I);
  }
}

void swigluRowsBf16(const float* gateUp, int rows, int I, uint16_t* out) {
#pragma omp parallel if (static_cast<size_t>(rows) * I >= kParallelMin)
  {
    thread_local std::vector<float> row;
    if (row.size() < static_cast<size_t>(I)) row.resize(I);
#pragma omp for schedule(static)
    for (int r = 0; r < rows; r++) {
      const float* g = gateUp + static_cast<size_t>(r) * 2 * I;
      swigluRow(g, g + I, I, row.data());
      toBf16(row.data(), out + static_cast<size_t>(r) * I, I);
    }
  }
}

}  // namespace flexhelm
