#include "logits-math.h"

#include "cpu-features.h"

#include <immintrin.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>

// Exact bits need every multiplication and addition rounded on its own, as JavaScript rounds them: no contraction
// into fused multiply-adds, which GCC does by default in AVX-512 code.
#pragma GCC optimize("fp-contract=off")

namespace flexhelm {

namespace {

double fromWords(uint32_t high, uint32_t low) {
  const uint64_t bits = (static_cast<uint64_t>(high) << 32) | low;
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}

// fdlibm's constants (e_exp.c), as contract's exp-of-non-positive.ts spells them.
const double kHalfLn2 = fromWords(0x3fd62e43, 0);  // |x| ≥ this: reduce by k·ln2
const double kTiny = fromWords(0x3e300000, 0);     // |x| < 2⁻²⁸: exp(x) rounds to 1 + x
const double kLn2Hi = fromWords(0x3fe62e42, 0xfee00000);
const double kLn2Lo = fromWords(0x3dea39ef, 0x35793c76);
const double kInvLn2 = fromWords(0x3ff71547, 0x652b82fe);
const double kP1 = fromWords(0x3fc55555, 0x5555553e);
const double kP2 = fromWords(0xbf66c16c, 0x16bebd93);
const double kP3 = fromWords(0x3f11566a, 0xaf25de2c);
const double kP4 = fromWords(0xbebbbd41, 0xc5d26bf1);
const double kP5 = fromWords(0x3e663769, 0x72bea4d0);
constexpr double kLowest = -700;  // fdlibm's subnormal and overflow paths start below −708

// exp(x) for −700 < x ≤ 0, fdlibm's steps. For |x| in [ln2/2, 1.5·ln2) fdlibm takes k = −1 without multiplying; the
// general k = trunc(x/ln2 − 0.5) is −1 there too and k·ln2_hi, k·ln2_lo are then exact, so one formula serves both.
inline double expScalar(double x) {
  const double ax = -x;
  if (ax >= kHalfLn2) {
    const double k = std::trunc(kInvLn2 * x - 0.5);
    const double hi = x - k * kLn2Hi;
    const double lo = k * kLn2Lo;
    const double r = hi - lo;
    const double t = r * r;
    const double c = r - t * (kP1 + t * (kP2 + t * (kP3 + t * (kP4 + t * kP5))));
    return (1 - (lo - (r * c) / (2 - c) - hi)) * std::ldexp(1.0, static_cast<int>(k));
  }
  if (ax < kTiny) return 1 + x;
  const double t = x * x;
  const double c = x - t * (kP1 + t * (kP2 + t * (kP3 + t * (kP4 + t * kP5))));
  return 1 - ((x * c) / (c - 2) - x);
}

#define LSE_AVX512 __attribute__((target("avx512f")))

// The largest value of a row without NaN.
LSE_AVX512 float maxAvx512(const float* v, size_t n) {
  __m512 m = _mm512_set1_ps(v[0]);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(v + i));
  float top = _mm512_reduce_max_ps(m);
  for (; i < n; i++) top = std::max(top, v[i]);
  return top;
}

// x − x is 0 for a finite x and NaN otherwise: one running sum of them flags every NaN and infinity.
LSE_AVX512 bool allFiniteAvx512(const float* v, size_t n) {
  __m512 bad = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(v + i);
    bad = _mm512_add_ps(bad, _mm512_sub_ps(x, x));
  }
  if (_mm512_cmp_ps_mask(bad, bad, _CMP_UNORD_Q) != 0) return false;
  for (; i < n; i++)
    if (!std::isfinite(v[i])) return false;
  return true;
}

// Whether the row holds a NaN (infinities compare as the JavaScript compares them).
LSE_AVX512 bool hasNanAvx512(const float* v, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(v + i);
    if (_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q)) return true;
  }
  for (; i < n; i++)
    if (std::isnan(v[i])) return true;
  return false;
}

// Eight of expScalar's results (lanes −700 < x ≤ 0), every lane the scalar's bits: the three branches are blended,
// each computed as the scalar computes it (one division: the k = 0 branch's c − 2 or the others' 2 − c).
LSE_AVX512 inline __m512d exp8(__m512d x) {
  const __m512d one = _mm512_set1_pd(1.0);
  const __m512d two = _mm512_set1_pd(2.0);
  const __m512d ax = _mm512_sub_pd(_mm512_setzero_pd(), x);
  const __mmask8 reduce = _mm512_cmp_pd_mask(ax, _mm512_set1_pd(kHalfLn2), _CMP_GE_OQ);
  const __mmask8 tiny = _mm512_cmp_pd_mask(ax, _mm512_set1_pd(kTiny), _CMP_LT_OQ);
  const __m512d k = _mm512_roundscale_pd(_mm512_sub_pd(_mm512_mul_pd(_mm512_set1_pd(kInvLn2), x), _mm512_set1_pd(0.5)), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512d hi = _mm512_sub_pd(x, _mm512_mul_pd(k, _mm512_set1_pd(kLn2Hi)));
  const __m512d lo = _mm512_mul_pd(k, _mm512_set1_pd(kLn2Lo));
  const __m512d r = _mm512_mask_blend_pd(reduce, x, _mm512_sub_pd(hi, lo));
  const __m512d t = _mm512_mul_pd(r, r);
  __m512d p = _mm512_add_pd(_mm512_set1_pd(kP4), _mm512_mul_pd(t, _mm512_set1_pd(kP5)));
  p = _mm512_add_pd(_mm512_set1_pd(kP3), _mm512_mul_pd(t, p));
  p = _mm512_add_pd(_mm512_set1_pd(kP2), _mm512_mul_pd(t, p));
  p = _mm512_add_pd(_mm512_set1_pd(kP1), _mm512_mul_pd(t, p));
  const __m512d c = _mm512_sub_pd(r, _mm512_mul_pd(t, p));
  const __m512d q = _mm512_div_pd(_mm512_mul_pd(r, c), _mm512_mask_blend_pd(reduce, _mm512_sub_pd(c, two), _mm512_sub_pd(two, c)));
  // Reduced: (1 − (lo − q − hi)) · 2^k (scalef multiplies by 2^k exactly: the results stay normal for x > −700).
  const __m512d reduced = _mm512_scalef_pd(_mm512_sub_pd(one, _mm512_sub_pd(_mm512_sub_pd(lo, q), hi)), k);
  // Small: 1 − (q − x); tiny: 1 + x.
  const __m512d small = _mm512_mask_blend_pd(tiny, _mm512_sub_pd(one, _mm512_sub_pd(q, x)), _mm512_add_pd(one, x));
  return _mm512_mask_blend_pd(reduce, small, reduced);
}

LSE_AVX512 bool expSumAvx512(const float* v, size_t n, double* maxOut, double* sumOut) {
  if (!allFiniteAvx512(v, n)) return false;
  const double max = maxAvx512(v, n);
  const __m512d shift = _mm512_set1_pd(max);
  const __m512d lowest = _mm512_set1_pd(kLowest);
  __mmask8 out = 0;
  double sum = 0;
  alignas(64) double e[8];
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512d x = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(v + i)), shift);
    out |= _mm512_cmp_pd_mask(x, lowest, _CMP_LE_OQ);
    _mm512_store_pd(e, exp8(x));
    // In index order, one addition at a time: the JavaScript's rounding.
    for (int j = 0; j < 8; j++) sum += e[j];
  }
  if (out) return false;
  for (; i < n; i++) {
    const double x = static_cast<double>(v[i]) - max;
    if (!(x > kLowest)) return false;
    sum += expScalar(x);
  }
  *maxOut = max;
  *sumOut = sum;
  return true;
}

// The first index of the largest value: the largest value, then the first lane equal to it.
LSE_AVX512 int64_t argmaxAvx512(const float* v, size_t n) {
  if (hasNanAvx512(v, n)) return -1;
  const float top = maxAvx512(v, n);
  const __m512 t = _mm512_set1_ps(top);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_loadu_ps(v + i), t, _CMP_EQ_OQ);
    if (hit) return static_cast<int64_t>(i) + __builtin_ctz(hit);
  }
  for (; i < n; i++)
    if (v[i] == top) return static_cast<int64_t>(i);
  return 0;
}

// The JavaScript topK's steps for one value: skipped unless the list has room or it beats the last; inserted after
// the values it does not exceed (so a tie keeps the lower id first), the last dropped when the list was full.
inline void offer(int32_t id, float value, int k, int* count, int32_t* ids, float* values) {
  if (*count == k && value <= values[k - 1]) return;
  int at = *count;
  while (at > 0 && values[at - 1] < value) at--;
  const int last = std::min(*count, k - 1);
  for (int j = last; j > at; j--) {
    ids[j] = ids[j - 1];
    values[j] = values[j - 1];
  }
  ids[at] = id;
  values[at] = value;
  if (*count < k) (*count)++;
}

// Once the list is full, 16 values at a time are compared with its last value: only lanes above it are offered, in
// index order (the bound only rises, so every value the JavaScript would insert still gets through).
LSE_AVX512 int topKAvx512(const float* v, size_t n, int k, int32_t* ids, float* values) {
  int count = 0;
  size_t i = 0;
  for (; i < n && count < k; i++) offer(static_cast<int32_t>(i), v[i], k, &count, ids, values);
  for (; i < n && (i & 15) != 0; i++) offer(static_cast<int32_t>(i), v[i], k, &count, ids, values);
  for (; i + 16 <= n; i += 16) {
    __mmask16 above = _mm512_cmp_ps_mask(_mm512_loadu_ps(v + i), _mm512_set1_ps(values[k - 1]), _CMP_GT_OQ);
    while (above) {
      const int lane = __builtin_ctz(above);
      above &= above - 1;
      offer(static_cast<int32_t>(i + lane), v[i + lane], k, &count, ids, values);
    }
  }
  for (; i < n; i++) offer(static_cast<int32_t>(i), v[i], k, &count, ids, values);
  return count;
}

bool allFiniteScalar(const float* v, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!std::isfinite(v[i])) return false;
  return true;
}

bool expSumScalar(const float* v, size_t n, double* maxOut, double* sumOut) {
  if (!allFiniteScalar(v, n)) return false;
  const double max = *std::max_element(v, v + n);
  double sum = 0;
  for (size_t i = 0; i < n; i++) {
    const double x = static_cast<double>(v[i]) - max;
    if (!(x > kLowest)) return false;
    sum += expScalar(x);
  }
  *maxOut = max;
  *sumOut = sum;
  return true;
}

}  // namespace

bool expSumBelowMax(const float* v, size_t n, double* maxOut, double* sumOut, bool scalar) {
  if (n == 0) return false;
  if (cpuAvx512() && !scalar) return expSumAvx512(v, n, maxOut, sumOut);
  return expSumScalar(v, n, maxOut, sumOut);
}

bool allFiniteRow(const float* v, size_t n, bool scalar) {
  return cpuAvx512() && !scalar ? allFiniteAvx512(v, n) : allFiniteScalar(v, n);
}

int64_t argmaxRow(const float* v, size_t n, bool scalar) {
  if (n == 0) return -1;
  if (cpuAvx512() && !scalar) return argmaxAvx512(v, n);
  int64_t best = 0;
  for (size_t i = 0; i < n; i++) {
    if (std::isnan(v[i])) return -1;
    if (v[i] > v[best]) best = static_cast<int64_t>(i);
  }
  return best;
}

int topKRow(const float* v, size_t n, int k, int32_t* ids, float* values, bool scalar) {
  if (k <= 0) return 0;
  if (k > kTopKMax || n > static_cast<size_t>(INT32_MAX)) return -1;
  if (cpuAvx512() && !scalar) {
    if (hasNanAvx512(v, n)) return -1;
    return topKAvx512(v, n, k, ids, values);
  }
  int count = 0;
  for (size_t i = 0; i < n; i++) {
    if (std::isnan(v[i])) return -1;
    offer(static_cast<int32_t>(i), v[i], k, &count, ids, values);
  }
  return count;
}

}  // namespace flexhelm
