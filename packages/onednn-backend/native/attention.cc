// Causal attention over the engine's [B, H, T, D] KV layout, fp32 throughout. The AVX-512 path works on blocks of
// 8 queries: K is transposed once per (batch, head) so that 8 × 32 scores come from register-blocked FMAs, the
// softmax uses a vectorised exp, and P·V runs 8 rows × 32 columns at a time; keys past a row's last visible one are
// never computed. One query row (decode) reads K directly instead (a transpose would cost more than the dots). CPUs
// without AVX-512, or head sizes not a multiple of 16, take the plain loop at the end.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels.h"

namespace flexhelm {

namespace {

constexpr float kMaskedBelow = -1e29f;
constexpr size_t kParallelMin = size_t{1} << 16;
constexpr int kBlockRows = 8;
constexpr int kTileKeys = 32;

// Per-thread scratch kept across calls: fresh memory is slow to touch on the VMs this runs on.
struct AttentionScratch {
  std::vector<float> kT, scores, q, acc;
};
AttentionScratch& threadScratch() {
  thread_local AttentionScratch s;
  return s;
}
float* sized(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Keys past the last visible one contribute nothing; a row with no visible key attends uniformly to all T.
int visibleKeys(const float* mask, int T) {
  int limit = T;
  while (limit > 0 && mask[limit - 1] <= kMaskedBelow) limit--;
  return limit == 0 ? T : limit;
}

__attribute__((target("avx512f"))) inline __mmask16 tailMask(int n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

// exp(x) for 16 floats: Cephes' expf polynomial after range reduction, 2^n by scalef. Below -103.97 (where expf
// underflows) the result is exactly 0, so masked keys (bias -1e30) drop out as they do with std::exp.
__attribute__((target("avx512f"))) inline __m512 exp16(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-103.972084f);
  const __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  x = _mm512_min_ps(_mm512_max_ps(x, lo), _mm512_set1_ps(88.7228391f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 y = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~under), _mm512_scalef_ps(y, n));
}

// s[0, L) = exp(s + mask - max) in place; returns the sum.
__attribute__((target("avx512f"))) double softmaxRow(float* s, const float* mask, int L) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int t = 0; t < L; t += 16) {
    const __mmask16 m = tailMask(L - t);
    const __m512 x = _mm512_add_ps(_mm512_maskz_loadu_ps(m, s + t), _mm512_maskz_loadu_ps(m, mask + t));
    _mm512_mask_storeu_ps(s + t, m, x);
    mx = _mm512_mask_max_ps(mx, m, mx, x);
  }
  const __m512 vmax = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  __m512 sum = _mm512_setzero_ps();
  for (int t = 0; t < L; t += 16) {
    const __mmask16 m = tailMask(L - t);
    const __m512 e = _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + t), vmax)));
    _mm512_mask_storeu_ps(s + t, m, e);
    sum = _mm512_add_ps(sum, e);
  }
  return _mm512_reduce_add_ps(sum);
}

// scores[r, t0 .. t0+32) = Σ_d q[r, d] · kT[d, t0 ..] for 8 query rows.
__attribute__((target("avx512f"))) void scoreTile(const float* q, int D, const float* kT, size_t ldk, int t0, float* s, size_t lds) {
  __m512 a[kBlockRows][2];
  for (auto& row : a) row[0] = row[1] = _mm512_setzero_ps();
  for (int d = 0; d < D; d++) {
    const float* k = kT + static_cast<size_t>(d) * ldk + t0;
    const __m512 k0 = _mm512_loadu_ps(k), k1 = _mm512_loadu_ps(k + 16);
    for (int r = 0; r < kBlockRows; r++) {
      const __m512 qd = _mm512_set1_ps(q[r * D + d]);
      a[r][0] = _mm512_fmadd_ps(qd, k0, a[r][0]);
      a[r][1] = _mm512_fmadd_ps(qd, k1, a[r][1]);
    }
  }
  for (int r = 0; r < kBlockRows; r++) {
    _mm512_storeu_ps(s + r * lds + t0, a[r][0]);
    _mm512_storeu_ps(s + r * lds + t0 + 16, a[r][1]);
  }
}

// acc[r, 0 .. 16·W) = Σ_{t < L} p[r, t] · v[t, d0 ..] for 8 rows; W = 1 or 2 vectors of columns.
template <int W>
__attribute__((target("avx512f"))) void valueTile(const float* p, size_t ldp, const float* v, int D, int d0, int L, float* acc) {
  __m512 a[kBlockRows][W];
  for (auto& row : a)
    for (auto& x : row) x = _mm512_setzero_ps();
  for (int t = 0; t < L; t++) {
    const float* vt = v + static_cast<size_t>(t) * D + d0;
    __m512 vv[W];
    for (int w = 0; w < W; w++) vv[w] = _mm512_loadu_ps(vt + 16 * w);
    for (int r = 0; r < kBlockRows; r++) {
      const __m512 pr = _mm512_set1_ps(p[r * ldp + t]);
      for (int w = 0; w < W; w++) a[r][w] = _mm512_fmadd_ps(pr, vv[w], a[r][w]);
    }
  }
  for (int r = 0; r < kBlockRows; r++)
    for (int w = 0; w < W; w++) _mm512_storeu_ps(acc + r * D + d0 + 16 * w, a[r][w]);
}

// All query rows of one (batch, head) in blocks of 8.
__attribute__((target("avx512f"))) void headBlocked(const AttentionShape& s, const float* q, const float* k, const float* v, const float* maskBias, float* out, int b, int h) {
  const int S = s.seq, D = s.headDim, T = s.past + S;
  const size_t E = static_cast<size_t>(s.heads) * D;
  const int Tpad = (T + kTileKeys - 1) / kTileKeys * kTileKeys;
  AttentionScratch& w = threadScratch();
  float* kT = sized(w.kT, static_cast<size_t>(D) * Tpad);
  float* sc = sized(w.scores, static_cast<size_t>(kBlockRows) * Tpad);
  float* qs = sized(w.q, static_cast<size_t>(kBlockRows) * D);
  float* acc = sized(w.acc, static_cast<size_t>(kBlockRows) * D);
  for (int t = 0; t < T; t++) {
    const float* kt = k + static_cast<size_t>(t) * D;
    for (int d = 0; d < D; d++) kT[static_cast<size_t>(d) * Tpad + t] = kt[d];
  }
  for (int d = 0; d < D; d++) std::fill(kT + static_cast<size_t>(d) * Tpad + T, kT + static_cast<size_t>(d + 1) * Tpad, 0.f);
  for (int i0 = 0; i0 < S; i0 += kBlockRows) {
    const int rows = std::min(kBlockRows, S - i0);
    int limit[kBlockRows] = {};
    int lmax = 0;
    for (int r = 0; r < kBlockRows; r++) {
      if (r < rows) {
        const float* qrow = q + (static_cast<size_t>(b) * S + i0 + r) * s.qStride + static_cast<size_t>(h) * D;
        for (int d = 0; d < D; d++) qs[r * D + d] = qrow[d] * s.qScale;
        limit[r] = visibleKeys(maskBias + (static_cast<size_t>(b) * S + i0 + r) * T, T);
        lmax = std::max(lmax, limit[r]);
      } else {
        std::fill(qs + r * D, qs + (r + 1) * D, 0.f);
      }
    }
    for (int t0 = 0; t0 < lmax; t0 += kTileKeys) scoreTile(qs, D, kT, Tpad, t0, sc, Tpad);
    float inv[kBlockRows] = {};
    for (int r = 0; r < kBlockRows; r++) {
      float* sr = sc + static_cast<size_t>(r) * Tpad;
      if (r < rows) {
        inv[r] = static_cast<float>(1.0 / softmaxRow(sr, maskBias + (static_cast<size_t>(b) * S + i0 + r) * T, limit[r]));
        std::fill(sr + limit[r], sr + lmax, 0.f);
      } else {
        std::fill(sr, sr + lmax, 0.f);
      }
    }
    int d0 = 0;
    for (; d0 + 32 <= D; d0 += 32) valueTile<2>(sc, Tpad, v, D, d0, lmax, acc);
    if (d0 < D) valueTile<1>(sc, Tpad, v, D, d0, lmax, acc);
    for (int r = 0; r < rows; r++) {
      float* o = out + (static_cast<size_t>(b) * S + i0 + r) * E + static_cast<size_t>(h) * D;
      for (int d = 0; d < D; d++) o[d] = acc[r * D + d] * inv[r];
    }
  }
}

// One query row (decode): scores straight from K's rows, then Σ p_t v_t with the columns in registers (D ≤ 128).
__attribute__((target("avx512f"))) void headSingleRow(const AttentionShape& s, const float* q, const float* k, const float* v, const float* maskBias, float* out, int b, int h, int i) {
  const int S = s.seq, D = s.headDim, T = s.past + S;
  const size_t E = static_cast<size_t>(s.heads) * D;
  AttentionScratch& w = threadScratch();
  float* sc = sized(w.scores, static_cast<size_t>(T) + 16);
  const float* mask = maskBias + (static_cast<size_t>(b) * S + i) * T;
  const int L = visibleKeys(mask, T);
  const float* qrow = q + (static_cast<size_t>(b) * S + i) * s.qStride + static_cast<size_t>(h) * D;
  const int vecs = D / 16;
  __m512 qv[8];
  for (int j = 0; j < vecs; j++) qv[j] = _mm512_mul_ps(_mm512_loadu_ps(qrow + 16 * j), _mm512_set1_ps(s.qScale));
  for (int t = 0; t < L; t++) {
    const float* kt = k + static_cast<size_t>(t) * D;
    __m512 a = _mm512_mul_ps(qv[0], _mm512_loadu_ps(kt));
    for (int j = 1; j < vecs; j++) a = _mm512_fmadd_ps(qv[j], _mm512_loadu_ps(kt + 16 * j), a);
    sc[t] = _mm512_reduce_add_ps(a);
  }
  const float inv = static_cast<float>(1.0 / softmaxRow(sc, mask, L));
  __m512 a[8];
  for (int j = 0; j < vecs; j++) a[j] = _mm512_setzero_ps();
  for (int t = 0; t < L; t++) {
    const float pt = sc[t];
    if (pt == 0.f) continue;
    const __m512 p = _mm512_set1_ps(pt);
    const float* vt = v + static_cast<size_t>(t) * D;
    for (int j = 0; j < vecs; j++) a[j] = _mm512_fmadd_ps(p, _mm512_loadu_ps(vt + 16 * j), a[j]);
  }
  float* o = out + (static_cast<size_t>(b) * S + i) * E + static_cast<size_t>(h) * D;
  for (int j = 0; j < vecs; j++) _mm512_storeu_ps(o + 16 * j, _mm512_mul_ps(a[j], _mm512_set1_ps(inv)));
}

// The plain loop (any CPU, any head size).
void headScalar(const AttentionShape& s, const float* q, const float* k, const float* v, const float* maskBias, float* out, int b, int h) {
  const int S = s.seq, D = s.headDim, T = s.past + S;
  const size_t E = static_cast<size_t>(s.heads) * D;
  AttentionScratch& w = threadScratch();
  float* sc = sized(w.scores, T);
  float* acc = sized(w.acc, D);
  for (int i = 0; i < S; i++) {
    const float* mask = maskBias + (static_cast<size_t>(b) * S + i) * T;
    const int L = visibleKeys(mask, T);
    const float* qrow = q + (static_cast<size_t>(b) * S + i) * s.qStride + static_cast<size_t>(h) * D;
    float mx = -INFINITY;
    for (int t = 0; t < L; t++) {
      float dot = 0.f;
      for (int d = 0; d < D; d++) dot += qrow[d] * s.qScale * k[static_cast<size_t>(t) * D + d];
      sc[t] = dot + mask[t];
      mx = std::max(mx, sc[t]);
    }
    double sum = 0;
    for (int t = 0; t < L; t++) {
      sc[t] = std::exp(sc[t] - mx);
      sum += sc[t];
    }
    std::fill(acc, acc + D, 0.f);
    for (int t = 0; t < L; t++)
      for (int d = 0; d < D; d++) acc[d] += sc[t] * v[static_cast<size_t>(t) * D + d];
    float* o = out + (static_cast<size_t>(b) * S + i) * E + static_cast<size_t>(h) * D;
    const float inv = static_cast<float>(1.0 / sum);
    for (int d = 0; d < D; d++) o[d] = acc[d] * inv;
  }
}

bool vectorPath(int headDim) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512 && headDim % 16 == 0 && headDim <= 128;
}

}  // namespace

void attention(const AttentionShape& s, const float* q, const float* k, const float* v, const float* maskBias, float* out) {
  const int B = s.batch, S = s.seq, H = s.heads, D = s.headDim;
  const size_t T = static_cast<size_t>(s.past) + S;
  const size_t ld = s.tokenStride();
  const size_t work = static_cast<size_t>(B) * H * S * T * D;
  const bool vec = vectorPath(D);
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if (work >= kParallelMin)
  for (int b = 0; b < B; b++) {
    for (int h = 0; h < H; h++) {
      const float* kbh = k + (static_cast<size_t>(b) * H + h) * ld * D;
      const float* vbh = v + (static_cast<size_t>(b) * H + h) * ld * D;
      if (!vec) headScalar(s, q, kbh, vbh, maskBias, out, b, h);
      else if (S == 1) headSingleRow(s, q, kbh, vbh, maskBias, out, b, h, 0);
      else headBlocked(s, q, kbh, vbh, maskBias, out, b, h);
    }
  }
}

}  // namespace flexhelm
