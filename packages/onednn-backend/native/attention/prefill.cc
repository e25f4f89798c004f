// Attention over a step's query blocks (prefill). The AVX-512 path works on blocks of 8 queries: K is transposed once
// per (batch, head) so that 8 × 32 scores come from register-blocked FMAs, the softmax uses a vectorised exp, and P·V
// runs 8 rows × 32 columns at a time; keys past a row's last visible one are never computed. With bf16 asked for (a
// bf16 layer) and AVX512_BF16 present, the same blocks run on vdpbf16ps: q, K, V and the probabilities rounded to
// bf16, scores, softmax and sums in fp32. One query row without the decode kernel reads K directly (a transpose would
// cost more than the dots), in fp32. CPUs without AVX-512, or head sizes not a multiple of 16, take the plain loop.
#include "attention-internal.h"

namespace flexhelm {
namespace attn {

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

template <class KV>
BF16_TARGET void packKeyPairs(const KV* k, int T, int D, int Tpad, uint32_t* kP) {
  const int Dp = D / 2;
  alignas(64) uint16_t row[kMaxVectorHeadDim];
  uint32_t pairs[kMaxVectorHeadDim / 2];
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
  alignas(64) uint16_t qrow16[kMaxVectorHeadDim];
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

// One query row (decode): scores straight from K's rows, then Σ p_t v_t with the columns in registers (D ≤ 256).
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
  __m512 qv[kMaxVectorHeadDim / 16];
  for (int j = 0; j < vecs; j++) qv[j] = _mm512_mul_ps(_mm512_loadu_ps(qrow + 16 * j), _mm512_set1_ps(s.qScale));
  for (int t = 0; t < L; t++) {
    const KV* kt = k + static_cast<size_t>(t) * D;
    __m512 a = _mm512_mul_ps(qv[0], rowLoad(kt));
    for (int j = 1; j < vecs; j++) a = _mm512_fmadd_ps(qv[j], rowLoad(kt + 16 * j), a);
    sc[t] = _mm512_reduce_add_ps(a);
  }
  const float inv = static_cast<float>(1.0 / softmaxRow(sc, mask, L, s.logitSoftcap));
  __m512 a[kMaxVectorHeadDim / 16];
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

template void headBlockedBf16<float>(const AttentionShape&, const float*, const float*, const float*, const float*, const int*, const uint8_t*, uint16_t*, int, int);
template void headBlockedBf16<uint16_t>(const AttentionShape&, const float*, const uint16_t*, const uint16_t*, const float*, const int*, const uint8_t*, uint16_t*, int, int);
template void headSingleRow<float>(const AttentionShape&, const float*, const float*, const float*, const float*, const int*, float*, int, int, int);
template void headSingleRow<uint16_t>(const AttentionShape&, const float*, const uint16_t*, const uint16_t*, const float*, const int*, float*, int, int, int);

}  // namespace attn
}  // namespace flexhelm
