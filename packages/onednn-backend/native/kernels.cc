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

void layerNormRows(const float* x, float* y, int rows, int dim, const float* w, const float* b, float eps) {
#pragma omp parallel for schedule(static) if (static_cast<size_t>(rows) * dim >= kParallelMin)
  for (int r = 0; r < rows; r++) {
    const float* xr = x + static_cast<size_t>(r) * dim;
    float* yr = y + static_cast<size_t>(r) * dim;
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
    for (int i = 0; i < dim; i++) yr[i] = static_cast<float>((xr[i] - mean) * inv * w[i] + b[i]);
  }
}

namespace {
constexpr float kMaskedBelow = -1e29f;

// scores[t] = Σ_d q[d] · kT[d, t] with kT laid out [D, tokens]: the inner loop runs over t, so it vectorises without
// reassociating any sum.
__attribute__((target_clones("avx512f", "avx2", "default")))
void dotRows(const float* q, const float* kT, int D, int tokens, int ldk, float* scores) {
  for (int t = 0; t < tokens; t++) scores[t] = 0.f;
  for (int d = 0; d < D; d++) {
    const float qd = q[d];
    const float* row = kT + static_cast<size_t>(d) * ldk;
    for (int t = 0; t < tokens; t++) scores[t] += qd * row[t];
  }
}

// out[d] = Σ_t p[t] · v[t, d]
__attribute__((target_clones("avx512f", "avx2", "default")))
void weightedSum(const float* p, const float* v, int tokens, int D, float* out) {
  for (int d = 0; d < D; d++) out[d] = 0.f;
  for (int t = 0; t < tokens; t++) {
    const float pt = p[t];
    if (pt == 0.f) continue;
    const float* row = v + static_cast<size_t>(t) * D;
    for (int d = 0; d < D; d++) out[d] += pt * row[d];
  }
}
}  // namespace

void attention(const AttentionShape& s, const float* q, const float* k, const float* v, const float* maskBias, float* out) {
  const int B = s.batch, S = s.seq, H = s.heads, D = s.headDim;
  const int T = s.past + S;
  const size_t E = static_cast<size_t>(H) * D;
  const size_t work = static_cast<size_t>(B) * H * S * T * D;
#pragma omp parallel if (work >= kParallelMin)
  {
    std::vector<float> kT(static_cast<size_t>(D) * T), scores(T), qs(D), acc(D);
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < B; b++) {
      for (int h = 0; h < H; h++) {
        const float* kbh = k + (static_cast<size_t>(b) * H + h) * T * D;
        const float* vbh = v + (static_cast<size_t>(b) * H + h) * T * D;
        for (int t = 0; t < T; t++)
          for (int d = 0; d < D; d++) kT[static_cast<size_t>(d) * T + t] = kbh[static_cast<size_t>(t) * D + d];
        for (int i = 0; i < S; i++) {
          const float* mask = maskBias + (static_cast<size_t>(b) * S + i) * T;
          // Keys past the last visible one contribute nothing; a row with no visible key attends uniformly to all.
          int limit = T;
          while (limit > 0 && mask[limit - 1] <= kMaskedBelow) limit--;
          if (limit == 0) limit = T;
          const float* qrow = q + (static_cast<size_t>(b) * S + i) * s.qStride + static_cast<size_t>(h) * D;
          for (int d = 0; d < D; d++) qs[d] = qrow[d] * s.qScale;
          dotRows(qs.data(), kT.data(), D, limit, T, scores.data());
          float mx = -INFINITY;
          for (int t = 0; t < limit; t++) {
            scores[t] += mask[t];
            mx = std::max(mx, scores[t]);
          }
          double sum = 0;
          for (int t = 0; t < limit; t++) {
            scores[t] = std::exp(scores[t] - mx);
            sum += scores[t];
          }
          weightedSum(scores.data(), vbh, limit, D, acc.data());
          float* o = out + (static_cast<size_t>(b) * S + i) * E + static_cast<size_t>(h) * D;
          const float inv = static_cast<float>(1.0 / sum);
          for (int d = 0; d < D; d++) o[d] = acc[d] * inv;
        }
      }
    }
  }
}

void writePresent(const AttentionShape& s, const float* past, const float* fresh, size_t freshStride, float* present) {
  const int B = s.batch, S = s.seq, H = s.heads, D = s.headDim, P = s.past;
  const int T = P + S;
#pragma omp parallel for collapse(2) schedule(static) if (static_cast<size_t>(B) * H * T * D >= kParallelMin)
  for (int b = 0; b < B; b++) {
    for (int h = 0; h < H; h++) {
      float* dst = present + (static_cast<size_t>(b) * H + h) * T * D;
      if (P > 0) std::memcpy(dst, past + (static_cast<size_t>(b) * H + h) * P * D, sizeof(float) * P * D);
      for (int i = 0; i < S; i++)
        std::memcpy(dst + static_cast<size_t>(P + i) * D, fresh + (static_cast<size_t>(b) * S + i) * freshStride + static_cast<size_t>(h) * D, sizeof(float) * D);
    }
  }
}

void toBf16(const float* x, uint16_t* y, size_t n) {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (size_t i = 0; i < n; i++) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
      y[i] = static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
    } else {
      bits += 0x7fffu + ((bits >> 16) & 1u);
      y[i] = static_cast<uint16_t>(bits >> 16);
    }
  }
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
