// Causal attention over the engine's [B, H, T, D] KV layout. The AVX-512 path works on blocks of 8 queries: K is
// transposed once per (batch, head) so that 8 × 32 scores come from register-blocked FMAs, the softmax uses a
// vectorised exp, and P·V runs 8 rows × 32 columns at a time; keys past a row's last visible one are never computed.
// With bf16 asked for (a bf16 layer) and AVX512_BF16 present, the same blocks run on vdpbf16ps: q, K, V and the
// probabilities rounded to bf16, scores, softmax and sums in fp32. One query row (decode) reads K directly instead
// (a transpose would cost more than the dots), in fp32. CPUs without AVX-512, or head sizes not a multiple of 16,
// take the plain loop at the end.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels.h"
#include "vector-exp.h"

namespace flexhelm {

namespace {

constexpr float kMaskedBelow = -1e29f;
constexpr size_t kParallelMin = size_t{1} << 16;
constexpr int kBlockRows = 8;
constexpr int kTileKeys = 32;

// Per-thread scratch kept across calls: fresh memory is slow to touch on the VMs this runs on.
struct AttentionScratch {
  std::vector<float> kT, scores, q, acc, kWide, vWide;
  std::vector<uint32_t> kPairs, vPairs, qPairs;
  std::vector<uint16_t> probs;
};
AttentionScratch& threadScratch() {
  thread_local AttentionScratch s;
  return s;
}
template <class T>
T* sized(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Keys past the last visible one contribute nothing; a row with no visible key attends uniformly to all T.
int visibleKeys(const float* mask, int T) {
  int limit = T;
  while (limit > 0 && mask[limit - 1] <= kMaskedBelow) limit--;
  return limit == 0 ? T : limit;
}

// Whether mask[0, L) is all zeros (then adding it changes no score, and the bf16 softmax skips reading it).
bool zeroBias(const float* mask, int L) {
  for (int t = 0; t < L; t++)
    if (mask[t] != 0.f) return false;
  return true;
}

__attribute__((target("avx512f"))) inline __mmask16 tailMask(int n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

// Gemma 2's attention soft-cap on the scaled scores, before the mask: s = cap · tanh(s / cap) (cap 0: none).
void softcapRow(float* s, int L, float cap) {
  if (cap <= 0.f) return;
  for (int t = 0; t < L; t++) s[t] = cap * std::tanh(s[t] / cap);
}

// s[0, L) = exp(softcap(s) + mask - max) in place; returns the sum.
__attribute__((target("avx512f"))) double softmaxRow(float* s, const float* mask, int L, float cap) {
  softcapRow(s, L, cap);
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
__attribute__((target("avx512f"))) void headBlocked(const AttentionShape& s, const float* q, const float* k, const float* v, const float* maskBias, const int* limits, float* out, int b, int h) {
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
        limit[r] = limits[static_cast<size_t>(b) * S + i0 + r];
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
        inv[r] = static_cast<float>(1.0 / softmaxRow(sr, maskBias + (static_cast<size_t>(b) * S + i0 + r) * T, limit[r], s.logitSoftcap));
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

// ---- bf16 blocks (vdpbf16ps: each 32-bit lane multiplies a pair of bf16 values and adds both products) ----

#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// 16 floats rounded to bf16 (nearest even), as 16-bit lanes.
BF16_TARGET inline __m256i bf16x16(__m512 x) {
  return reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(x));
}

BF16_TARGET inline __m512bh asPairs(__m512i x) { return reinterpret_cast<__m512bh>(x); }

// K as pairs of head dimensions, 16 keys to a tile: kP[(j·D/2 + p)·16 + i] = (k[16j + i, 2p], k[16j + i, 2p + 1]),
// zero past T, so one vector holds the same pair for 16 keys. Tiles up to Tpad (a multiple of kTileKeys).
// 16 keys' or values' bf16 bits: rounded from floats, or as stored in a bf16 cache.
BF16_TARGET inline __m256i bf16Load(const float* p) { return bf16x16(_mm512_loadu_ps(p)); }
BF16_TARGET inline __m256i bf16Load(const uint16_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// n (a multiple of 16) floats rounded to bf16 (vcvtneps2bf16): as bits, or as the floats those bits are.
BF16_TARGET void roundRowBf16(const float* x, uint16_t* y, size_t n) {
  for (size_t d = 0; d < n; d += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + d), bf16Load(x + d));
}
BF16_TARGET void roundRowBf16(const float* x, float* y, size_t n) {
  for (size_t d = 0; d < n; d += 16) _mm512_storeu_ps(y + d, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bf16Load(x + d)), 16)));
}

template <class KV>
BF16_TARGET void packKeyPairs(const KV* k, int T, int D, int Tpad, uint32_t* kP) {
  const int Dp = D / 2;
  alignas(64) uint16_t row[128];
  uint32_t pairs[64];
  for (int t = 0; t < Tpad; t++) {
    if (t < T) {
      for (int d = 0; d < D; d += 16) _mm256_store_si256(reinterpret_cast<__m256i*>(row + d), bf16Load(k + static_cast<size_t>(t) * D + d));
      std::memcpy(pairs, row, sizeof(uint16_t) * D);
    } else {
      std::fill(pairs, pairs + Dp, 0u);
    }
    uint32_t* tile = kP + static_cast<size_t>(t / 16) * Dp * 16 + t % 16;
    for (int p = 0; p < Dp; p++) tile[p * 16] = pairs[p];
  }
}

// V as pairs of keys: vP[tp·D + d] = (v[2tp, d], v[2tp + 1, d]) for tp < ceil(T / 2), a missing last key as zero.
template <class KV>
BF16_TARGET void packValuePairs(const KV* v, int T, int D, uint32_t* vP) {
  for (int t = 0; t < T; t += 2) {
    const KV* v0 = v + static_cast<size_t>(t) * D;
    const KV* v1 = v0 + D;
    for (int d = 0; d < D; d += 16) {
      const __m512i lo = _mm512_cvtepu16_epi32(bf16Load(v0 + d));
      const __m512i hi = t + 1 < T ? _mm512_cvtepu16_epi32(bf16Load(v1 + d)) : _mm512_setzero_si512();
      _mm512_storeu_si512(vP + static_cast<size_t>(t / 2) * D + d, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
  }
}

// scores[r, t0 .. t0+32) = Σ_p q[r, pair p] · kP[tile, pair p] for 8 query rows (q as D/2 pairs per row).
BF16_TARGET void scoreTileBf16(const uint32_t* q, int Dp, const uint32_t* kP, int t0, float* s, size_t lds) {
  __m512 a[kBlockRows][2];
  for (auto& row : a) row[0] = row[1] = _mm512_setzero_ps();
  const uint32_t* k0 = kP + static_cast<size_t>(t0 / 16) * Dp * 16;
  const uint32_t* k1 = k0 + static_cast<size_t>(Dp) * 16;
  for (int p = 0; p < Dp; p++) {
    const __m512bh x0 = asPairs(_mm512_loadu_si512(k0 + p * 16)), x1 = asPairs(_mm512_loadu_si512(k1 + p * 16));
    for (int r = 0; r < kBlockRows; r++) {
      const __m512bh qp = asPairs(_mm512_set1_epi32(static_cast<int>(q[r * Dp + p])));
      a[r][0] = _mm512_dpbf16_ps(a[r][0], qp, x0);
      a[r][1] = _mm512_dpbf16_ps(a[r][1], qp, x1);
    }
  }
  for (int r = 0; r < kBlockRows; r++) {
    _mm512_storeu_ps(s + r * lds + t0, a[r][0]);
    _mm512_storeu_ps(s + r * lds + t0 + 16, a[r][1]);
  }
}

// As softmaxRow, the exponentials written as bf16 to p[0, L) and zeros to p[L, Lpad); returns the sum of the
// unrounded exponentials. mask null: no bias to add.
BF16_TARGET double softmaxRowBf16(float* s, const float* mask, int L, uint16_t* p, int Lpad, float cap) {
  softcapRow(s, L, cap);
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int t = 0; t < L; t += 16) {
    const __mmask16 m = tailMask(L - t);
    __m512 x = _mm512_maskz_loadu_ps(m, s + t);
    if (mask) {
      x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, mask + t));
      _mm512_mask_storeu_ps(s + t, m, x);
    }
    mx = _mm512_mask_max_ps(mx, m, mx, x);
  }
  const __m512 vmax = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  __m512 sum = _mm512_setzero_ps();
  for (int t = 0; t < L; t += 16) {
    const __mmask16 m = tailMask(L - t);
    const __m512 e = _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + t), vmax)));
    _mm256_mask_storeu_epi16(p + t, m, bf16x16(e));
    sum = _mm512_add_ps(sum, e);
  }
  std::fill(p + L, p + std::max(L, Lpad), uint16_t{0});
  return _mm512_reduce_add_ps(sum);
}

// acc[r, d0 .. d0 + 16·W) = Σ_{tp < pairs} p[r, pair tp] · vP[tp, d0 ..] for 8 rows.
template <int W>
BF16_TARGET void valueTileBf16(const uint16_t* p, size_t ldp, const uint32_t* vP, int D, int d0, int pairs, float* acc) {
  __m512 a[kBlockRows][W];
  for (auto& row : a)
    for (auto& x : row) x = _mm512_setzero_ps();
  for (int tp = 0; tp < pairs; tp++) {
    const uint32_t* vt = vP + static_cast<size_t>(tp) * D + d0;
    __m512bh vv[W];
    for (int w = 0; w < W; w++) vv[w] = asPairs(_mm512_loadu_si512(vt + 16 * w));
    for (int r = 0; r < kBlockRows; r++) {
      uint32_t pr;
      std::memcpy(&pr, p + r * ldp + 2 * tp, sizeof pr);
      const __m512bh pp = asPairs(_mm512_set1_epi32(static_cast<int>(pr)));
      for (int w = 0; w < W; w++) a[r][w] = _mm512_dpbf16_ps(a[r][w], pp, vv[w]);
    }
  }
  for (int r = 0; r < kBlockRows; r++)
    for (int w = 0; w < W; w++) _mm512_storeu_ps(acc + r * D + d0 + 16 * w, a[r][w]);
}

// headBlocked on bf16 operands.
template <class KV>
BF16_TARGET void headBlockedBf16(const AttentionShape& s, const float* q, const KV* k, const KV* v, const float* maskBias, const int* limits, const uint8_t* unbiased, uint16_t* out, int b, int h) {
  const int S = s.seq, D = s.headDim, Dp = D / 2, T = s.past + S;
  const size_t E = static_cast<size_t>(s.heads) * D;
  const int Tpad = (T + kTileKeys - 1) / kTileKeys * kTileKeys;
  AttentionScratch& w = threadScratch();
  uint32_t* kP = sized(w.kPairs, static_cast<size_t>(Dp) * Tpad);
  uint32_t* vP = sized(w.vPairs, static_cast<size_t>(D) * Tpad / 2);
  uint32_t* qP = sized(w.qPairs, static_cast<size_t>(kBlockRows) * Dp);
  uint16_t* pr = sized(w.probs, static_cast<size_t>(kBlockRows) * Tpad);
  float* sc = sized(w.scores, static_cast<size_t>(kBlockRows) * Tpad);
  float* acc = sized(w.acc, static_cast<size_t>(kBlockRows) * D);
  packKeyPairs(k, T, D, Tpad, kP);
  packValuePairs(v, T, D, vP);
  alignas(64) uint16_t qrow16[128];
  for (int i0 = 0; i0 < S; i0 += kBlockRows) {
    const int rows = std::min(kBlockRows, S - i0);
    const int* limit = limits + static_cast<size_t>(b) * S + i0;
    int lmax = 0;
    for (int r = 0; r < kBlockRows; r++) {
      if (r < rows) {
        const float* qrow = q + (static_cast<size_t>(b) * S + i0 + r) * s.qStride + static_cast<size_t>(h) * D;
        for (int d = 0; d < D; d += 16) _mm256_store_si256(reinterpret_cast<__m256i*>(qrow16 + d), bf16x16(_mm512_mul_ps(_mm512_loadu_ps(qrow + d), _mm512_set1_ps(s.qScale))));
        std::memcpy(qP + r * Dp, qrow16, sizeof(uint16_t) * D);
        lmax = std::max(lmax, limit[r]);
        // The next block's query row: rows of the fused QKV buffer are far apart, so the hardware prefetcher
        // misses them, and the dots wait for each.
        if (i0 + kBlockRows + r < S)
          for (int d = 0; d < D; d += 16) _mm_prefetch(reinterpret_cast<const char*>(qrow + kBlockRows * s.qStride + d), _MM_HINT_T0);
      } else {
        std::fill(qP + r * Dp, qP + (r + 1) * Dp, 0u);
      }
    }
    for (int t0 = 0; t0 < lmax; t0 += kTileKeys) scoreTileBf16(qP, Dp, kP, t0, sc, Tpad);
    const int pairs = (lmax + 1) / 2;
    float inv[kBlockRows] = {};
    for (int r = 0; r < kBlockRows; r++) {
      uint16_t* p = pr + static_cast<size_t>(r) * Tpad;
      const size_t row = static_cast<size_t>(b) * S + i0 + r;
      if (r < rows) inv[r] = static_cast<float>(1.0 / softmaxRowBf16(sc + static_cast<size_t>(r) * Tpad, unbiased[row] ? nullptr : maskBias + row * T, limit[r], p, 2 * pairs, s.logitSoftcap));
      else std::fill(p, p + 2 * pairs, uint16_t{0});
    }
    int d0 = 0;
    for (; d0 + 32 <= D; d0 += 32) valueTileBf16<2>(pr, Tpad, vP, D, d0, pairs, acc);
    if (d0 < D) valueTileBf16<1>(pr, Tpad, vP, D, d0, pairs, acc);
    for (int r = 0; r < rows; r++) {
      uint16_t* o = out + (static_cast<size_t>(b) * S + i0 + r) * E + static_cast<size_t>(h) * D;
      for (int d = 0; d < D; d += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + d), bf16x16(_mm512_mul_ps(_mm512_loadu_ps(acc + r * D + d), _mm512_set1_ps(inv[r]))));
    }
  }
}

// 16 floats of a K or V row: as stored, or widened from a bf16 cache (exact: bf16 is the top half of a float).
__attribute__((target("avx512f"))) inline __m512 rowLoad(const float* p) { return _mm512_loadu_ps(p); }
__attribute__((target("avx512f"))) inline __m512 rowLoad(const uint16_t* p) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
}

// One query row (decode): scores straight from K's rows, then Σ p_t v_t with the columns in registers (D ≤ 128).
template <class KV>
__attribute__((target("avx512f"))) void headSingleRow(const AttentionShape& s, const float* q, const KV* k, const KV* v, const float* maskBias, const int* limits, float* out, int b, int h, int i) {
  const int S = s.seq, D = s.headDim, T = s.past + S;
  const size_t E = static_cast<size_t>(s.heads) * D;
  AttentionScratch& w = threadScratch();
  float* sc = sized(w.scores, static_cast<size_t>(T) + 16);
  const float* mask = maskBias + (static_cast<size_t>(b) * S + i) * T;
  const int L = limits[static_cast<size_t>(b) * S + i];
  const float* qrow = q + (static_cast<size_t>(b) * S + i) * s.qStride + static_cast<size_t>(h) * D;
  const int vecs = D / 16;
  __m512 qv[8];
  for (int j = 0; j < vecs; j++) qv[j] = _mm512_mul_ps(_mm512_loadu_ps(qrow + 16 * j), _mm512_set1_ps(s.qScale));
  for (int t = 0; t < L; t++) {
    const KV* kt = k + static_cast<size_t>(t) * D;
    __m512 a = _mm512_mul_ps(qv[0], rowLoad(kt));
    for (int j = 1; j < vecs; j++) a = _mm512_fmadd_ps(qv[j], rowLoad(kt + 16 * j), a);
    sc[t] = _mm512_reduce_add_ps(a);
  }
  const float inv = static_cast<float>(1.0 / softmaxRow(sc, mask, L, s.logitSoftcap));
  __m512 a[8];
  for (int j = 0; j < vecs; j++) a[j] = _mm512_setzero_ps();
  for (int t = 0; t < L; t++) {
    const float pt = sc[t];
    if (pt == 0.f) continue;
    const __m512 p = _mm512_set1_ps(pt);
    const KV* vt = v + static_cast<size_t>(t) * D;
    for (int j = 0; j < vecs; j++) a[j] = _mm512_fmadd_ps(p, rowLoad(vt + 16 * j), a[j]);
  }
  float* o = out + (static_cast<size_t>(b) * S + i) * E + static_cast<size_t>(h) * D;
  for (int j = 0; j < vecs; j++) _mm512_storeu_ps(o + 16 * j, _mm512_mul_ps(a[j], _mm512_set1_ps(inv)));
}

// ---- decode: one query row per head, every query head of a kv head at once ----
//
// A decode step reads each (batch, kv head)'s K and V once from memory (the cache is far larger than the CPU's caches),
// so this path is about streaming them at memory speed: K key by key (16 keys' dots summed by one shuffle tree, not a
// horizontal sum per key), the softmax over the scores, then V key by key. The K pass prefetches 4 KiB ahead (its
// loads come in bursts of 16 keys between the shuffle trees; without it the batch-8 step was 17-36% slower); the V
// pass, one plain stream, is left to the hardware prefetcher (prefetching it too, or K 8 KiB ahead, was no faster).
// Query heads that share a kv head (grouped-query attention) take their dots and sums from the same K and V lines
// while they are in L1.
// Sums run in fp32 on the stored values: a 64-byte load of a bf16 row holds 32 values as 16 (even, odd) pairs; the odd
// ones are the pairs with the low half cleared, the even ones the pairs shifted left by 16, both exact floats. So q
// and the sums are split into even and odd elements instead of widening in order; a float cache is read in the same
// split (a permute), which keeps a bf16 layer's results identical with either cache.

#define DECODE_TARGET __attribute__((target("avx512f,avx512bw")))

constexpr int kDecodeKeys = 16;     // keys whose dots one shuffle tree sums
constexpr int kDecodeChunk = 64;    // keys of V each query head of a group takes from L1 in turn
constexpr int kDecodeMaxGroup = 8;  // query heads per kv head read together (more: done in turns)
constexpr size_t kDecodePrefetch = 4096;  // bytes of K prefetched ahead of the 16 keys being read

// Elements 2i and 2i + 1 of 32 consecutive values as floats.
DECODE_TARGET inline void evenOdd(const uint16_t* p, __m512& even, __m512& odd) {
  const __m512i x = _mm512_loadu_si512(p);
  even = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
  odd = _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
}
DECODE_TARGET inline void evenOdd(const float* p, __m512& even, __m512& odd) {
  const __m512 lo = _mm512_loadu_ps(p), hi = _mm512_loadu_ps(p + 16);
  const __m512i e = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  even = _mm512_permutex2var_ps(lo, e, hi);
  odd = _mm512_permutex2var_ps(lo, _mm512_add_epi32(e, _mm512_set1_epi32(1)), hi);
}

// Lane j = the sum of x[j]'s 16 lanes. Halves are added pairwise in four rounds, each round putting two vectors'
// partial sums side by side; the last permute puts key j in lane j.
DECODE_TARGET inline __m512 sum16(const __m512* x) {
  __m512 a[8], b[4], c[2];
  // a[i]: lanes 0-7 partial sums of x[i], 8-15 of x[i + 8].
  for (int i = 0; i < 8; i++)
    a[i] = _mm512_add_ps(_mm512_shuffle_f32x4(x[i], x[i + 8], 0x44), _mm512_shuffle_f32x4(x[i], x[i + 8], 0xee));
  // b[i]: 128-bit lanes hold x[i], x[i + 8], x[i + 4], x[i + 12] (4 partial sums each).
  for (int i = 0; i < 4; i++)
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[i], a[i + 4], 0x88), _mm512_shuffle_f32x4(a[i], a[i + 4], 0xdd));
  // c[i]: in each 128-bit lane, 2 partial sums of b[i]'s key, then 2 of b[i + 2]'s.
  for (int i = 0; i < 2; i++)
    c[i] = _mm512_add_ps(_mm512_shuffle_ps(b[i], b[i + 2], 0x44), _mm512_shuffle_ps(b[i], b[i + 2], 0xee));
  // Lane 4l + e: b[0], b[2], b[1], b[3]'s key (e = 0..3) of 128-bit lane l (x offset 0, 8, 4, 12).
  const __m512 s = _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], 0x88), _mm512_shuffle_ps(c[0], c[1], 0xdd));
  // So s holds keys 0 2 1 3 | 8 10 9 11 | 4 6 5 7 | 12 14 13 15; lane[j] is where key j is.
  const __m512i lane = _mm512_set_epi32(15, 13, 14, 12, 7, 5, 6, 4, 11, 9, 10, 8, 3, 1, 2, 0);
  return _mm512_permutexvar_ps(lane, s);
}

DECODE_TARGET inline void prefetchBytes(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (size_t at = 0; at < bytes; at += 64) _mm_prefetch(c + at, _MM_HINT_T0);
}

// This thread's scratch for one decode group: scores [kDecodeMaxGroup, Lpad] (L rounded up to whole blocks of
// kDecodeKeys keys) and sums [kDecodeMaxGroup, D].
struct DecodeScratch {
  AttentionScratch& w;
  size_t Lpad;
  float* scores;
  float* acc;
  DecodeScratch(int L, int D)
      : w(threadScratch()),
        Lpad((static_cast<size_t>(L) + kDecodeKeys - 1) / kDecodeKeys * kDecodeKeys),
        scores(sized(w.scores, kDecodeMaxGroup * Lpad)),
        acc(sized(w.acc, kDecodeMaxGroup * static_cast<size_t>(D))) {}
};

// Query heads h0 .. h0 + G of batch b against kv head (b, kh)'s K and V ([T, D] rows, the first L visible), NV = D/32.
template <int NV, class KV>
DECODE_TARGET void decodeGroup(const AttentionShape& s, const float* q, const KV* k, const KV* v, const float* mask, int L, float* out, int b, int h0, int G) {
  constexpr int D = 32 * NV;
  const size_t E = static_cast<size_t>(s.heads) * D;
  const size_t row = sizeof(KV) * D;
  const DecodeScratch ds(L, D);
  const size_t Lpad = ds.Lpad;
  float* sc = ds.scores;
  float* acc = ds.acc;
  // Each query head's q, scaled, split into even and odd elements.
  __m512 qs[kDecodeMaxGroup][2 * NV];
  const __m512i evens = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odds = _mm512_add_epi32(evens, _mm512_set1_epi32(1));
  for (int g = 0; g < G; g++) {
    const float* qr = q + static_cast<size_t>(b) * s.qStride + static_cast<size_t>(h0 + g) * D;
    for (int j = 0; j < NV; j++) {
      const __m512 lo = _mm512_mul_ps(_mm512_loadu_ps(qr + 32 * j), _mm512_set1_ps(s.qScale));
      const __m512 hi = _mm512_mul_ps(_mm512_loadu_ps(qr + 32 * j + 16), _mm512_set1_ps(s.qScale));
      qs[g][2 * j] = _mm512_permutex2var_ps(lo, evens, hi);
      qs[g][2 * j + 1] = _mm512_permutex2var_ps(lo, odds, hi);
    }
  }
  // Scores, 16 keys at a time; the keys past L in the last 16 repeat key L - 1 (in bounds) and are not stored.
  for (int t0 = 0; t0 < L; t0 += kDecodeKeys) {
    prefetchBytes(reinterpret_cast<const char*>(k + static_cast<size_t>(t0) * D) + kDecodePrefetch, kDecodeKeys * row);
    const int n = std::min(kDecodeKeys, L - t0);
    for (int g = 0; g < G; g++) {
      __m512 dots[kDecodeKeys];
      for (int i = 0; i < kDecodeKeys; i++) {
        const KV* kt = k + static_cast<size_t>(t0 + std::min(i, n - 1)) * D;
        __m512 e, o;
        evenOdd(kt, e, o);
        __m512 a = _mm512_mul_ps(qs[g][0], e);
        a = _mm512_fmadd_ps(qs[g][1], o, a);
        for (int j = 1; j < NV; j++) {
          evenOdd(kt + 32 * j, e, o);
          a = _mm512_fmadd_ps(qs[g][2 * j], e, a);
          a = _mm512_fmadd_ps(qs[g][2 * j + 1], o, a);
        }
        dots[i] = a;
      }
      _mm512_mask_storeu_ps(sc + g * Lpad + t0, tailMask(n), sum16(dots));
    }
  }
  float inv[kDecodeMaxGroup];
  for (int g = 0; g < G; g++) inv[g] = static_cast<float>(1.0 / softmaxRow(sc + g * Lpad, mask, L, s.logitSoftcap));
  // Σ p_t v_t in chunks of keys: the first query head brings a chunk of V into L1, the others read it there.
  for (int t0 = 0; t0 < L; t0 += kDecodeChunk) {
    const int t1 = std::min(L, t0 + kDecodeChunk);
    for (int g = 0; g < G; g++) {
      __m512 a[2 * NV];
      for (int j = 0; j < 2 * NV; j++) a[j] = t0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + g * D + 16 * j);
      const float* p = sc + g * Lpad;
      for (int t = t0; t < t1; t++) {
        const KV* vt = v + static_cast<size_t>(t) * D;
        const __m512 pt = _mm512_set1_ps(p[t]);
        for (int j = 0; j < NV; j++) {
          __m512 e, o;
          evenOdd(vt + 32 * j, e, o);
          a[2 * j] = _mm512_fmadd_ps(pt, e, a[2 * j]);
          a[2 * j + 1] = _mm512_fmadd_ps(pt, o, a[2 * j + 1]);
        }
      }
      for (int j = 0; j < 2 * NV; j++) _mm512_storeu_ps(acc + g * D + 16 * j, a[j]);
    }
  }
  // Even and odd sums back into order, times 1 / Σ exp.
  const __m512i lower = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i upper = _mm512_add_epi32(lower, _mm512_set1_epi32(8));
  for (int g = 0; g < G; g++) {
    float* o = out + static_cast<size_t>(b) * E + static_cast<size_t>(h0 + g) * D;
    const __m512 scale = _mm512_set1_ps(inv[g]);
    for (int j = 0; j < NV; j++) {
      const __m512 e = _mm512_loadu_ps(acc + g * D + 32 * j), od = _mm512_loadu_ps(acc + g * D + 32 * j + 16);
      _mm512_storeu_ps(o + 32 * j, _mm512_mul_ps(_mm512_permutex2var_ps(e, lower, od), scale));
      _mm512_storeu_ps(o + 32 * j + 16, _mm512_mul_ps(_mm512_permutex2var_ps(e, upper, od), scale));
    }
  }
}

// The same on bf16 operands for a bf16 layer (with AVX512_BF16), as its prompt blocks compute: q (scaled) and the
// probabilities rounded to bf16, dots and sums in fp32 by vdpbf16ps, which multiplies and adds two bf16 pairs per
// lane. Half the instructions of the fp32 split per key: q·k takes one vdpbf16ps per 32 values of a row; P·V takes
// two keys at once, their rows interleaved into (key t, key t + 1) pairs by unpacklo/hi. A float cache (bf16 values
// in a bf16 layer) is rounded to bf16 as it is read, exactly, so either cache gives the same bits.

// 32 values of a row as bf16 bits, in order.
BF16_TARGET inline __m512i bf16Row(const uint16_t* p) { return _mm512_loadu_si512(p); }
BF16_TARGET inline __m512i bf16Row(const float* p) {
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_loadu_ps(p + 16), _mm512_loadu_ps(p)));
}

template <int NV, class KV>
BF16_TARGET void decodeGroupBf16(const AttentionShape& s, const float* q, const KV* k, const KV* v, const float* mask, int L, float* out, int b, int h0, int G) {
  constexpr int D = 32 * NV;
  const size_t E = static_cast<size_t>(s.heads) * D;
  const size_t row = sizeof(KV) * D;
  const DecodeScratch ds(L, D);
  const size_t Lpad = ds.Lpad;
  float* sc = ds.scores;
  float* acc = ds.acc;
  uint16_t* pr = sized(ds.w.probs, kDecodeMaxGroup * Lpad);
  // Each query head's q, scaled, as 16 bf16 pairs per 32 values.
  __m512bh qs[kDecodeMaxGroup][NV];
  for (int g = 0; g < G; g++) {
    const float* qr = q + static_cast<size_t>(b) * s.qStride + static_cast<size_t>(h0 + g) * D;
    for (int j = 0; j < NV; j++)
      qs[g][j] = _mm512_cvtne2ps_pbh(_mm512_mul_ps(_mm512_loadu_ps(qr + 32 * j + 16), _mm512_set1_ps(s.qScale)), _mm512_mul_ps(_mm512_loadu_ps(qr + 32 * j), _mm512_set1_ps(s.qScale)));
  }
  // Scores, 16 keys at a time (keys past L repeat key L - 1 and are not stored), as decodeGroup.
  for (int t0 = 0; t0 < L; t0 += kDecodeKeys) {
    prefetchBytes(reinterpret_cast<const char*>(k + static_cast<size_t>(t0) * D) + kDecodePrefetch, kDecodeKeys * row);
    const int n = std::min(kDecodeKeys, L - t0);
    for (int g = 0; g < G; g++) {
      __m512 dots[kDecodeKeys];
      for (int i = 0; i < kDecodeKeys; i++) {
        const KV* kt = k + static_cast<size_t>(t0 + std::min(i, n - 1)) * D;
        __m512 a = _mm512_dpbf16_ps(_mm512_setzero_ps(), qs[g][0], asPairs(bf16Row(kt)));
        for (int j = 1; j < NV; j++) a = _mm512_dpbf16_ps(a, qs[g][j], asPairs(bf16Row(kt + 32 * j)));
        dots[i] = a;
      }
      _mm512_mask_storeu_ps(sc + g * Lpad + t0, tailMask(n), sum16(dots));
    }
  }
  // Probabilities as bf16, zero from L to Lpad (so a last odd key pairs with a zero).
  float inv[kDecodeMaxGroup];
  for (int g = 0; g < G; g++) inv[g] = static_cast<float>(1.0 / softmaxRowBf16(sc + g * Lpad, mask, L, pr + g * Lpad, static_cast<int>(Lpad), s.logitSoftcap));
  // Σ p_t v_t, keys t and t + 1 together: lane 4l + m of unpacklo(v_t, v_t+1) holds column 8l + m's pair, of
  // unpackhi column 8l + 4 + m's (l the 128-bit lane); the sums are put back in order at the end.
  for (int t0 = 0; t0 < L; t0 += kDecodeChunk) {
    const int t1 = std::min(L, t0 + kDecodeChunk);
    for (int g = 0; g < G; g++) {
      __m512 lo[NV], hi[NV];
      for (int j = 0; j < NV; j++) {
        lo[j] = t0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + g * D + 32 * j);
        hi[j] = t0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + g * D + 32 * j + 16);
      }
      const uint16_t* p = pr + g * Lpad;
      for (int t = t0; t < t1; t += 2) {
        const KV* v0 = v + static_cast<size_t>(t) * D;
        uint32_t pair;
        std::memcpy(&pair, p + t, sizeof pair);
        const __m512bh pp = asPairs(_mm512_set1_epi32(static_cast<int>(pair)));
        const bool second = t + 1 < L;  // else the row past the cache's last key is not read
        for (int j = 0; j < NV; j++) {
          const __m512i x0 = bf16Row(v0 + 32 * j);
          const __m512i x1 = second ? bf16Row(v0 + D + 32 * j) : _mm512_setzero_si512();
          lo[j] = _mm512_dpbf16_ps(lo[j], asPairs(_mm512_unpacklo_epi16(x0, x1)), pp);
          hi[j] = _mm512_dpbf16_ps(hi[j], asPairs(_mm512_unpackhi_epi16(x0, x1)), pp);
        }
      }
      for (int j = 0; j < NV; j++) {
        _mm512_storeu_ps(acc + g * D + 32 * j, lo[j]);
        _mm512_storeu_ps(acc + g * D + 32 * j + 16, hi[j]);
      }
    }
  }
  // Columns 0-15 and 16-31 of each 32 from the lo (index < 16) and hi (index ≥ 16) sums, times 1 / Σ exp.
  const __m512i first = _mm512_set_epi32(23, 22, 21, 20, 7, 6, 5, 4, 19, 18, 17, 16, 3, 2, 1, 0);
  const __m512i second = _mm512_add_epi32(first, _mm512_set1_epi32(8));
  for (int g = 0; g < G; g++) {
    float* o = out + static_cast<size_t>(b) * E + static_cast<size_t>(h0 + g) * D;
    const __m512 scale = _mm512_set1_ps(inv[g]);
    for (int j = 0; j < NV; j++) {
      const __m512 l = _mm512_loadu_ps(acc + g * D + 32 * j), h = _mm512_loadu_ps(acc + g * D + 32 * j + 16);
      _mm512_storeu_ps(o + 32 * j, _mm512_mul_ps(_mm512_permutex2var_ps(l, first, h), scale));
      _mm512_storeu_ps(o + 32 * j + 16, _mm512_mul_ps(_mm512_permutex2var_ps(l, second, h), scale));
    }
  }
}

bool bf16Path();

// Whether decodeGroup takes head size D.
bool decodePath(int D) {
  static const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  return avx512 && D % 32 == 0 && D <= 128;
}

// The query heads of kv head (b, kh), in groups of up to kDecodeMaxGroup.
template <class KV>
void decodeKvHead(const AttentionShape& s, const float* q, const KV* k, const KV* v, const float* mask, int L, float* out, int b, int kh) {
  const int group = s.heads / s.kvHeadCount();
  for (int g0 = 0; g0 < group; g0 += kDecodeMaxGroup) {
    const int h0 = kh * group + g0, G = std::min(kDecodeMaxGroup, group - g0);
    if (s.bf16 && bf16Path()) {
      switch (s.headDim / 32) {
        case 1: decodeGroupBf16<1>(s, q, k, v, mask, L, out, b, h0, G); break;
        case 2: decodeGroupBf16<2>(s, q, k, v, mask, L, out, b, h0, G); break;
        case 3: decodeGroupBf16<3>(s, q, k, v, mask, L, out, b, h0, G); break;
        default: decodeGroupBf16<4>(s, q, k, v, mask, L, out, b, h0, G); break;
      }
      continue;
    }
    switch (s.headDim / 32) {
      case 1: decodeGroup<1>(s, q, k, v, mask, L, out, b, h0, G); break;
      case 2: decodeGroup<2>(s, q, k, v, mask, L, out, b, h0, G); break;
      case 3: decodeGroup<3>(s, q, k, v, mask, L, out, b, h0, G); break;
      default: decodeGroup<4>(s, q, k, v, mask, L, out, b, h0, G); break;
    }
  }
}

// The plain loop (any CPU, any head size).
void headScalar(const AttentionShape& s, const float* q, const float* k, const float* v, const float* maskBias, const int* limits, float* out, int b, int h) {
  const int S = s.seq, D = s.headDim, T = s.past + S;
  const size_t E = static_cast<size_t>(s.heads) * D;
  AttentionScratch& w = threadScratch();
  float* sc = sized(w.scores, T);
  float* acc = sized(w.acc, D);
  for (int i = 0; i < S; i++) {
    const float* mask = maskBias + (static_cast<size_t>(b) * S + i) * T;
    const int L = limits[static_cast<size_t>(b) * S + i];
    const float* qrow = q + (static_cast<size_t>(b) * S + i) * s.qStride + static_cast<size_t>(h) * D;
    float mx = -INFINITY;
    for (int t = 0; t < L; t++) {
      float dot = 0.f;
      for (int d = 0; d < D; d++) dot += qrow[d] * s.qScale * k[static_cast<size_t>(t) * D + d];
      sc[t] = (s.logitSoftcap > 0.f ? s.logitSoftcap * std::tanh(dot / s.logitSoftcap) : dot) + mask[t];
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

bool bf16Path();

// This (batch, head)'s new keys and values, from the fused QKV rows into its KV rows past..past+seq: written here,
// just before the head's kernel reads them, they are still in cache when it does.
// h is a kv head: keys start after the query heads' columns, values after the kv heads' keys. A bf16 layer stores
// them rounded to bf16 in a float cache too, so that it computes the same with either cache (`auto` fills its first
// batch's cache in fp32 and narrows it to bf16 afterwards).
void writeFreshKeys(const AttentionShape& s, const float* q, float* k, float* v, int b, int h) {
  const size_t D = s.headDim, keys = static_cast<size_t>(s.heads) * D, values = keys + static_cast<size_t>(s.kvHeadCount()) * D;
  for (int i = 0; i < s.seq; i++) {
    const float* row = q + (static_cast<size_t>(b) * s.seq + i) * s.qStride + h * D;
    float* kr = k + (static_cast<size_t>(s.past) + i) * D;
    float* vr = v + (static_cast<size_t>(s.past) + i) * D;
    if (s.bf16 && s.headDim % 16 == 0 && bf16Path()) {
      roundRowBf16(row + keys, kr, D);
      roundRowBf16(row + values, vr, D);
    } else if (s.bf16) {
      uint16_t bits[256];
      auto store = [&bits](const float* from, float* to, size_t n) {
        toBf16Serial(from, bits, n);
        for (size_t j = 0; j < n; j++) {
          const uint32_t wide = static_cast<uint32_t>(bits[j]) << 16;
          std::memcpy(to + j, &wide, sizeof wide);
        }
      };
      for (size_t d = 0; d < D; d += 256) {
        const size_t n = std::min<size_t>(256, D - d);
        store(row + keys + d, kr + d, n);
        store(row + values + d, vr + d, n);
      }
    } else {
      std::memcpy(kr, row + keys, sizeof(float) * D);
      std::memcpy(vr, row + values, sizeof(float) * D);
    }
  }
}

// The same into a bf16 cache: rounded to nearest even as they are stored.
void writeFreshKeys(const AttentionShape& s, const float* q, uint16_t* k, uint16_t* v, int b, int h) {
  const size_t D = s.headDim, keys = static_cast<size_t>(s.heads) * D, values = keys + static_cast<size_t>(s.kvHeadCount()) * D;
  for (int i = 0; i < s.seq; i++) {
    const float* row = q + (static_cast<size_t>(b) * s.seq + i) * s.qStride + h * D;
    uint16_t* kr = k + (static_cast<size_t>(s.past) + i) * D;
    uint16_t* vr = v + (static_cast<size_t>(s.past) + i) * D;
    if (D % 16 == 0 && bf16Path()) {
      roundRowBf16(row + keys, kr, D);
      roundRowBf16(row + values, vr, D);
    } else {
      toBf16Serial(row + keys, kr, D);
      toBf16Serial(row + values, vr, D);
    }
  }
}

// A (batch, head)'s first n bf16 rows widened into per-thread floats, for the kernels that read fp32 only (the plain
// loop, and CPUs without AVX512_BF16).
const float* widen(const uint16_t* x, size_t n, std::vector<float>& store) {
  float* y = sized(store, n);
  for (size_t i = 0; i < n; i++) {
    const uint32_t bits = static_cast<uint32_t>(x[i]) << 16;
    std::memcpy(y + i, &bits, sizeof bits);
  }
  return y;
}

bool vectorPath(int headDim) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512 && headDim % 16 == 0 && headDim <= 128;
}

bool bf16Path() {
  static const bool bf16 = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return bf16;
}

}  // namespace

void attention(const AttentionShape& s, const float* q, void* kAny, void* vAny, const float* maskBias, float* out, uint16_t* out16, bool writeFresh) {
  const int B = s.batch, S = s.seq, H = s.heads, D = s.headDim;
  const size_t T = static_cast<size_t>(s.past) + S;
  const size_t ld = s.tokenStride();
  const size_t work = static_cast<size_t>(B) * H * S * T * D;
  const bool vec = vectorPath(D);
  // Blocks of queries on bf16 operands; one row (decode) stays on the fp32 kernels, converted at the end.
  const bool bf16 = vec && S > 1 && s.bf16 && out16 && bf16Path();
  const bool decode = S == 1 && decodePath(D);
  // Each query row's visible keys, found once for all heads.
  thread_local std::vector<int> limitsStore;
  thread_local std::vector<uint8_t> unbiasedStore;
  int* limits = sized(limitsStore, static_cast<size_t>(B) * S);
  uint8_t* unbiased = sized(unbiasedStore, static_cast<size_t>(B) * S);
#pragma omp parallel if (work >= kParallelMin)
  {
    // (Decode items find their row's visible keys themselves: one barrier less per call, and the scan from the end
    // stops at once when the newest key is visible.)
    if (!decode) {
#pragma omp for schedule(static)
      for (int r = 0; r < B * S; r++) {
        const float* mask = maskBias + static_cast<size_t>(r) * T;
        limits[r] = visibleKeys(mask, static_cast<int>(T));
        unbiased[r] = bf16 && zeroBias(mask, limits[r]);
      }
    }
    const int KVH = s.kvHeadCount(), group = H / KVH;
    if (decode) {
      // One work item per (batch, kv head): its new key and value, then every query head reading it. Dynamic: on
      // a busy host the threads run at uneven speeds. (Runs of neighbouring items per thread were no faster in a
      // fair side-by-side run, bench/decode-attention.mjs.)
#pragma omp for collapse(2) schedule(dynamic, 1)
      for (int b = 0; b < B; b++)
        for (int g = 0; g < KVH; g++) {
          const size_t at = (static_cast<size_t>(b) * KVH + g) * ld * D;
          const float* mask = maskBias + static_cast<size_t>(b) * T;
          const int L = visibleKeys(mask, static_cast<int>(T));
          if (s.kvBf16) {
            uint16_t* k = static_cast<uint16_t*>(kAny) + at;
            uint16_t* v = static_cast<uint16_t*>(vAny) + at;
            if (writeFresh) writeFreshKeys(s, q, k, v, b, g);
            decodeKvHead(s, q, k, v, mask, L, out, b, g);
          } else {
            float* k = static_cast<float*>(kAny) + at;
            float* v = static_cast<float*>(vAny) + at;
            if (writeFresh) writeFreshKeys(s, q, k, v, b, g);
            decodeKvHead(s, q, k, v, mask, L, out, b, g);
          }
        }
    }
    // Grouped-query attention: several query heads read one kv head, so its new keys are written first, once.
    if (writeFresh && group > 1 && !decode) {
#pragma omp for collapse(2) schedule(static)
      for (int b = 0; b < B; b++)
        for (int g = 0; g < KVH; g++) {
          const size_t at = (static_cast<size_t>(b) * KVH + g) * ld * D;
          if (s.kvBf16) writeFreshKeys(s, q, static_cast<uint16_t*>(kAny) + at, static_cast<uint16_t*>(vAny) + at, b, g);
          else writeFreshKeys(s, q, static_cast<float*>(kAny) + at, static_cast<float*>(vAny) + at, b, g);
        }
    }
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < (decode ? 0 : B); b++) {
      for (int h = 0; h < H; h++) {
        const size_t at = (static_cast<size_t>(b) * KVH + h / group) * ld * D;
        const bool fresh = writeFresh && group == 1;
        if (s.kvBf16) {
          uint16_t* kbh = static_cast<uint16_t*>(kAny) + at;
          uint16_t* vbh = static_cast<uint16_t*>(vAny) + at;
          if (fresh) writeFreshKeys(s, q, kbh, vbh, b, h);
          if (vec && S == 1) headSingleRow(s, q, kbh, vbh, maskBias, limits, out, b, h, 0);
          else if (bf16) headBlockedBf16(s, q, kbh, vbh, maskBias, limits, unbiased, out16, b, h);
          else {
            AttentionScratch& w = threadScratch();
            const float* kw = widen(kbh, T * D, w.kWide);
            const float* vw = widen(vbh, T * D, w.vWide);
            if (vec) headBlocked(s, q, kw, vw, maskBias, limits, out, b, h);
            else headScalar(s, q, kw, vw, maskBias, limits, out, b, h);
          }
          continue;
        }
        float* kbh = static_cast<float*>(kAny) + at;
        float* vbh = static_cast<float*>(vAny) + at;
        if (fresh) writeFreshKeys(s, q, kbh, vbh, b, h);
        if (!vec) headScalar(s, q, kbh, vbh, maskBias, limits, out, b, h);
        else if (S == 1) headSingleRow(s, q, kbh, vbh, maskBias, limits, out, b, h, 0);
        else if (bf16) headBlockedBf16(s, q, kbh, vbh, maskBias, limits, unbiased, out16, b, h);
        else headBlocked(s, q, kbh, vbh, maskBias, limits, out, b, h);
      }
    }
  }
  // The fp32 kernels' rows, rounded for the bf16 GEMM that reads them.
  if (out16 && !bf16) toBf16(out, out16, static_cast<size_t>(B) * S * H * D);
}

}  // namespace flexhelm
