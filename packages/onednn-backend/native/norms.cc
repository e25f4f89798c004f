#include "norms.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "bf16-bits.h"
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

// ---- LayerNorm (OPT) ----

namespace {

template <class Out, class Store>
void layerNormImpl(const float* x, Out* y, int rows, int dim, const float* w, const float* b, float eps, Store store) {
#pragma omp parallel for schedule(static) if (static_cast<size_t>(rows) * dim >= kParallelMin)
  for (int r = 0; r < rows; r++) {
    const float* xr = x + static_cast<size_t>(r) * dim;
    Out* yr = y + static_cast<size_t>(r) * dim;
    double mean = 0;
    for (int i = 0; i < dim; i++) mean += xr[i];
    mean /= dim;
    double var = 0;
    for (int i = 0; i < dim; i++) {
      double d = xr[i] - mean;
      var += d * d;
    }
    var /= dim;
    const double inv = 1.0 / std::sqrt(var + static_cast<double>(eps));
    for (int i = 0; i < dim; i++) yr[i] = store(static_cast<float>((xr[i] - mean) * inv * w[i] + b[i]));
  }
}

#define AVX512 __attribute__((target("avx512f")))

// The 16 floats at p widened to two vectors of 8 doubles.
AVX512 inline void widen(const float* p, __m512d& lo, __m512d& hi) {
  const __m512 v = _mm512_loadu_ps(p);
  lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
  hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

// One row of the same computation as layerNormImpl (double mean and variance, the output formula in double), 16
// columns at a time; the second pass and the output read the row from L1. copy (if not null) receives the row too.
template <bool Bf16>
AVX512 void layerNormRow(const float* xr, void* yr, int dim, const float* w, const float* b, float eps, float* copy) {
  __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd(), lo, hi;
  for (int i = 0; i < dim; i += 16) {
    widen(xr + i, lo, hi);
    s0 = _mm512_add_pd(s0, lo);
    s1 = _mm512_add_pd(s1, hi);
  }
  const __m512d mean = _mm512_set1_pd(_mm512_reduce_add_pd(_mm512_add_pd(s0, s1)) / dim);
  s0 = s1 = _mm512_setzero_pd();
  for (int i = 0; i < dim; i += 16) {
    widen(xr + i, lo, hi);
    lo = _mm512_sub_pd(lo, mean);
    hi = _mm512_sub_pd(hi, mean);
    s0 = _mm512_fmadd_pd(lo, lo, s0);
    s1 = _mm512_fmadd_pd(hi, hi, s1);
  }
  const double var = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1)) / dim;
  const __m512d inv = _mm512_set1_pd(1.0 / std::sqrt(var + static_cast<double>(eps)));
  for (int i = 0; i < dim; i += 16) {
    __m512d wl, wh, bl, bh;
    widen(xr + i, lo, hi);
    widen(w + i, wl, wh);
    widen(b + i, bl, bh);
    lo = _mm512_add_pd(_mm512_mul_pd(_mm512_mul_pd(_mm512_sub_pd(lo, mean), inv), wl), bl);
    hi = _mm512_add_pd(_mm512_mul_pd(_mm512_mul_pd(_mm512_sub_pd(hi, mean), inv), wh), bh);
    const __m256 l8 = _mm512_cvtpd_ps(lo), h8 = _mm512_cvtpd_ps(hi);
    const __m512 out = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(l8)), _mm256_castps_pd(h8), 1));
    if (copy) _mm512_storeu_ps(copy + i, _mm512_loadu_ps(xr + i));
    if (Bf16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<uint16_t*>(yr) + i), bf16Bits16(out));
    else _mm512_storeu_ps(static_cast<float*>(yr) + i, out);
  }
}

// Rows in parallel (the OpenMP region stays outside the target-specific code).
template <bool Bf16, class Out>
void layerNormVector(const float* x, Out* y, int rows, int dim, const float* w, const float* b, float eps, float* copy) {
#pragma omp parallel for schedule(static) if (static_cast<size_t>(rows) * dim >= kParallelMin)
  for (int r = 0; r < rows; r++) {
    const size_t at = static_cast<size_t>(r) * dim;
    layerNormRow<Bf16>(x + at, y + at, dim, w, b, eps, copy ? copy + at : nullptr);
  }
}

bool vectorRows(int dim) { return cpuAvx512() && dim % 16 == 0; }
}  // namespace


void layerNormRows(const float* x, float* y, int rows, int dim, const float* w, const float* b, float eps) {
  if (vectorRows(dim)) return layerNormVector<false>(x, y, rows, dim, w, b, eps, nullptr);
  layerNormImpl(x, y, rows, dim, w, b, eps, [](float v) { return v; });
}

void layerNormRowsBf16(const float* x, uint16_t* y, int rows, int dim, const float* w, const float* b, float eps, float* copy) {
  if (copy == x) copy = nullptr;
  if (vectorRows(dim)) return layerNormVector<true>(x, y, rows, dim, w, b, eps, copy);
  layerNormImpl(x, y, rows, dim, w, b, eps, bf16Bits);
  if (copy) std::memcpy(copy, x, sizeof(float) * rows * dim);
}

}  // namespace flexhelm
