#include "kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace flexhelm {

namespace {
// Below this many elements a loop runs on the calling thread: waking the OpenMP team costs more than the work, and
// on a busy machine every parallel region risks waiting for a descheduled thread.
constexpr size_t kParallelMin = size_t{1} << 16;
}  // namespace

namespace {
// Round-to-nearest-even float -> bfloat16 bits (NaN stays a quiet NaN).
inline uint16_t bf16Bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

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
}  // namespace

void layerNormRows(const float* x, float* y, int rows, int dim, const float* w, const float* b, float eps) {
  layerNormImpl(x, y, rows, dim, w, b, eps, [](float v) { return v; });
}

void layerNormRowsBf16(const float* x, uint16_t* y, int rows, int dim, const float* w, const float* b, float eps) {
  layerNormImpl(x, y, rows, dim, w, b, eps, bf16Bits);
}

void writePresent(const AttentionShape& s, const float* past, const float* fresh, size_t freshStride, float* present) {
  const int B = s.batch, S = s.seq, H = s.heads, D = s.headDim, P = s.past;
  const size_t ld = s.tokenStride();
#pragma omp parallel for collapse(2) schedule(static) if (static_cast<size_t>(B) * H * (P + S) * D >= kParallelMin)
  for (int b = 0; b < B; b++) {
    for (int h = 0; h < H; h++) {
      float* dst = present + (static_cast<size_t>(b) * H + h) * ld * D;
      if (P > 0 && past) std::memcpy(dst, past + (static_cast<size_t>(b) * H + h) * P * D, sizeof(float) * P * D);
      for (int i = 0; i < S; i++)
        std::memcpy(dst + static_cast<size_t>(P + i) * D, fresh + (static_cast<size_t>(b) * S + i) * freshStride + static_cast<size_t>(h) * D, sizeof(float) * D);
    }
  }
}

void toBf16(const float* x, uint16_t* y, size_t n) {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (size_t i = 0; i < n; i++) y[i] = bf16Bits(x[i]);
}

void quantizeRows(const float* x, int rows, int cols, bool perToken, int8_t* q, float* scale) {
  std::vector<float> amax(rows);
  const bool parallel = static_cast<size_t>(rows) * cols >= kParallelMin;
#pragma omp parallel for schedule(static) if (parallel)
  for (int r = 0; r < rows; r++) {
    float m = 0.f;
    const float* xr = x + static_cast<size_t>(r) * cols;
    for (int c = 0; c < cols; c++) m = std::max(m, std::fabs(xr[c]));
    amax[r] = m;
  }
  if (!perToken) {
    float m = 0.f;
    for (float a : amax) m = std::max(m, a);
    std::fill(amax.begin(), amax.end(), m);
  }
#pragma omp parallel for schedule(static) if (parallel)
  for (int r = 0; r < rows; r++) {
    const float s = amax[r] > 0.f ? amax[r] / 127.f : 1.f;
    scale[r] = s;
    const float inv = 1.f / s;
    const float* xr = x + static_cast<size_t>(r) * cols;
    int8_t* qr = q + static_cast<size_t>(r) * cols;
    for (int c = 0; c < cols; c++) qr[c] = static_cast<int8_t>(std::max(-127.f, std::min(127.f, std::nearbyint(xr[c] * inv))));
  }
}

}  // namespace flexhelm
