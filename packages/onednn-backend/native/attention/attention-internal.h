// What the attention kernels share (attention/attention.cc dispatches, prefill.cc holds the query-block kernels,
// decode.cc the one-row-per-head ones): per-thread scratch, the visible-key scan, the soft-capped softmax rows in fp32
// and bf16, the bf16 helpers, which path a CPU and head size take, and the kernels each file gives the dispatcher.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../cpu-features.h"
#include "../kernels.h"
#include "../vector-exp.h"

namespace flexhelm {
namespace attn {

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
inline AttentionScratch& threadScratch() {
  thread_local AttentionScratch s;
  return s;
}
template <class T>
inline T* sized(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Keys past the last visible one contribute nothing; a row with no visible key attends uniformly to all T.
inline int visibleKeys(const float* mask, int T) {
  int limit = T;
  while (limit > 0 && mask[limit - 1] <= kMaskedBelow) limit--;
  return limit == 0 ? T : limit;
}

// Whether mask[0, L) is all zeros (then adding it changes no score, and the bf16 softmax skips reading it).
inline bool zeroBias(const float* mask, int L) {
  for (int t = 0; t < L; t++)
    if (mask[t] != 0.f) return false;
  return true;
}

__attribute__((target("avx512f"))) inline __mmask16 tailMask(int n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

// Gemma 2's attention soft-cap on the scaled scores, before the mask: s = cap · tanh(s / cap) (cap 0: none).
inline void softcapRow(float* s, int L, float cap) {
  if (cap <= 0.f) return;
  for (int t = 0; t < L; t++) s[t] = cap * std::tanh(s[t] / cap);
}

// s[0, L) = exp(softcap(s) + mask - max) in place; returns the sum.
__attribute__((target("avx512f"))) inline double softmaxRow(float* s, const float* mask, int L, float cap) {
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
BF16_TARGET inline void roundRowBf16(const float* x, uint16_t* y, size_t n) {
  for (size_t d = 0; d < n; d += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + d), bf16Load(x + d));
}
BF16_TARGET inline void roundRowBf16(const float* x, float* y, size_t n) {
  for (size_t d = 0; d < n; d += 16) _mm512_storeu_ps(y + d, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bf16Load(x + d)), 16)));
}

// As softmaxRow, the exponentials written as bf16 to p[0, L) and zeros to p[L, Lpad); returns the sum of the
// unrounded exponentials. mask null: no bias to add.
BF16_TARGET inline double softmaxRowBf16(float* s, const float* mask, int L, uint16_t* p, int Lpad, float cap) {
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

// The largest head size of the AVX-512 kernels (Gemma 2's 256): the one-row kernel keeps a row of q and of the sums
// in registers, the bf16 blocks a row of q on the stack.
constexpr int kMaxVectorHeadDim = 256;

// Whether the AVX-512 kernels (blocks of 8 queries, one-row fp32) take head size headDim.
inline bool vectorPath(int headDim) { return cpuAvx512() && headDim % 16 == 0 && headDim <= kMaxVectorHeadDim; }

// Whether the bf16 kernels (vdpbf16ps) can run.
inline bool bf16Path() { return cpuAvx512Bf16Isa(); }

// Whether decodeGroup takes head size D.
inline bool decodePath(int D) {
  return cpuAvx512BwIsa() && D % 32 == 0 && D <= 128;
}

// prefill.cc (declared with the target attributes of their definitions): all query rows of one (batch, head) in blocks of 8 (fp32, or bf16 operands); one query row in fp32;
// the plain loop for any CPU and head size.
__attribute__((target("avx512f"))) void headBlocked(const AttentionShape& s, const float* q, const float* k, const float* v, const float* maskBias, const int* limits, float* out, int b, int h);
template <class KV>
BF16_TARGET void headBlockedBf16(const AttentionShape& s, const float* q, const KV* k, const KV* v, const float* maskBias, const int* limits, const uint8_t* unbiased, uint16_t* out, int b, int h);
template <class KV>
__attribute__((target("avx512f"))) void headSingleRow(const AttentionShape& s, const float* q, const KV* k, const KV* v, const float* maskBias, const int* limits, float* out, int b, int h, int i);
void headScalar(const AttentionShape& s, const float* q, const float* k, const float* v, const float* maskBias, const int* limits, float* out, int b, int h);

// decode.cc: every query head of kv head (b, kh) for one query row (decodePath(headDim) only).
template <class KV>
void decodeKvHead(const AttentionShape& s, const float* q, const KV* k, const KV* v, const float* mask, int L, float* out, int b, int kh);

}  // namespace attn
}  // namespace flexhelm
