#include "norms.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "cpu-features.h"
#include "kernels.h"

namespace flexhelm {

namespace {

// Below this many elements a loop stays on the calling thread (waking the team costs more than the work).
constexpr size_t kParallelMin = size_t{1} << 16;

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
  if (cpuAvx512() && dim % 16 == 0) return sumSquares16(x, dim);
  float s = 0.f;
  for (int i = 0; i < dim; i++) s += x[i] * x[i];
  return s;
}

float inverseRms(const float* x, int dim, float eps) { return 1.f / std::sqrt(sumSquares(x, dim) / static_cast<float>(dim) + eps); }

// One row into out (float32): separate from the store so the bf16 variant rounds the same values. out may alias x.
void rmsNormRow(const float* x, float* out, int dim, const float* w, float eps) {
  const float inv = inverseRms(x, dim, eps);
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
      toBf16Serial(row.data(), y + at, dim);
    }
  }
}

void rmsNormStrided(float* x, int rows, size_t ld, int dim, const float* w, float eps) {
#pragma omp parallel for schedule(static) if (static_cast<size_t>(rows) * dim >= kParallelMin)
  for (int r = 0; r < rows; r++) {
    float* row = x + static_cast<size_t>(r) * ld;
    rmsNormRow(row, row, dim, w, eps);
  }
}

void rmsNormAddRows(const float* x, const float* residual, float* y, int rows, int dim, const float* w, float eps) {
#pragma omp parallel for schedule(static) if (static_cast<size_t>(rows) * dim >= kParallelMin)
  for (int r = 0; r < rows; r++) {
    const size_t at = static_cast<size_t>(r) * dim;
    const float inv = inverseRms(x + at, dim, eps);
    // The normed value is rounded to float32 (as the reference's array holds it) before the add.
    for (int i = 0; i < dim; i++) y[at + i] = residual[at + i] + w[i] * (x[at + i] * inv);
  }
}

}  // namespace flexhelm
