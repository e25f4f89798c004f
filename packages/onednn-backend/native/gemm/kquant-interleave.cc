#include "kquant-interleave.h"

#include "kquant-decode.h"
#include "kquant-gemm.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace flexhelm {

using namespace kquant;

namespace {

constexpr int kLanes = 16;  // columns of a group: one zmm of int32 lanes
// The decode kernels ask for the line this many bytes ahead of each word they read (into L1; 0: off). The layer's
// blocks come from memory once per step, and a core keeps too few misses in flight by itself. Swept in one process,
// layers interleaved (RESULTS.md, 2026-12-05, Intel family 6 model 207, 2 threads, 1 row, 400–600 MB of layers):
// Q4_K / Q6_K 21.3 / 19.1 GB/s at 2 KiB, 22.6 / 23.5 at 8 KiB, 22.6 / 23.8 at 16 KiB, into L2 (prefetcht1) at 4–12
// KiB 15.7 / 13.0; without (a separate run) 14.0 / 10.4. A macro so a benchmark build can sweep it.
#ifndef FLEXHELM_KQI_PREFETCH
#define FLEXHELM_KQI_PREFETCH 8192
#endif
constexpr int kPrefetch = FLEXHELM_KQI_PREFETCH;

inline void prefetchAhead(const uint8_t* p) {
  if constexpr (kPrefetch > 0) _mm_prefetch(reinterpret_cast<const char*>(p) + kPrefetch, _MM_HINT_T0);
}

// The 32-bit words of a block, and the bytes left after them (Q6_K's f16 d).
constexpr int wordsOf(QuantType t) { return static_cast<int>(quantBlockBytes(t) / 4); }
constexpr int tailOf(QuantType t) { return static_cast<int>(quantBlockBytes(t) % 4); }

// Where group g starts: the groups before it are all kLanes wide.
inline size_t groupOffset(QuantType t, int supers, int g) { return static_cast<size_t>(g) * kLanes * supers * quantBlockBytes(t); }

// 16 words (w0 …) of 16 columns at a time through registers; returns the first word left for the caller.
KQUANT_VNNI int moveWords16(uint8_t* sb, uint8_t* blk, size_t rowStride, int words, bool toGroup) {
  int w0 = 0;
  for (; w0 + 16 <= words; w0 += 16) {
    __m512i r[16];
    if (toGroup) {
      for (int c = 0; c < 16; c++) r[c] = _mm512_loadu_si512(blk + c * rowStride + 4 * w0);
      transpose16(r);
      for (int i = 0; i < 16; i++) _mm512_storeu_si512(sb + 64 * (w0 + i), r[i]);
    } else {
      for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_si512(sb + 64 * (w0 + i));
      transpose16(r);
      for (int c = 0; c < 16; c++) _mm512_storeu_si512(blk + c * rowStride + 4 * w0, r[c]);
    }
  }
  return w0;
}

// One group's super-blocks [b0, b1) between the two layouts, column c's blocks at rows + c · rowStride. Whole groups
// move 16 words at a time through a 16 × 16 transpose (a word of every column ↔ 16 words of one column); the rest word
// by word.
void moveGroup(QuantType t, uint8_t* group, int L, int supers, int b0, int b1, uint8_t* rows, size_t rowStride, bool toGroup) {
  const size_t bb = quantBlockBytes(t);
  const int words = wordsOf(t), tail = tailOf(t);
  const size_t stride = static_cast<size_t>(L) * 4;  // bytes per word of the group
  static const bool simd = kquantGemmAvailable();
  for (int b = b0; b < b1; b++) {
    uint8_t* sb = group + static_cast<size_t>(b) * words * stride;
    uint8_t* tl = group + static_cast<size_t>(supers) * words * stride + static_cast<size_t>(b) * L * tail;
    uint8_t* blk = rows + static_cast<size_t>(b - b0) * bb;
    int w0 = 0;
    if (simd && L == kLanes) w0 = moveWords16(sb, blk, rowStride, words, toGroup);
    for (int c = 0; c < L; c++) {
      uint8_t* col = blk + c * rowStride;
      for (int w = w0; w < words; w++) {
        if (toGroup) std::memcpy(sb + w * stride + 4 * c, col + 4 * w, 4);
        else std::memcpy(col + 4 * w, sb + w * stride + 4 * c, 4);
      }
      if (tail == 0) continue;
      if (toGroup) std::memcpy(tl + tail * c, col + 4 * words, tail);
      else std::memcpy(col + 4 * words, tl + tail * c, tail);
    }
  }
}

void relayout(QuantType t, uint8_t* rows, int K, int N, uint8_t* packed, bool toPacked) {
  if (!kquantInterleavable(t)) throw std::invalid_argument("kquant interleave: Q4_K and Q6_K only");
  if (K % kSuper != 0) throw std::invalid_argument("kquant interleave: K must be a multiple of 256");
  const int supers = K / kSuper;
  const size_t rowBytes = static_cast<size_t>(supers) * quantBlockBytes(t);
  const int groups = (N + kLanes - 1) / kLanes;
#pragma omp parallel for schedule(static)
  for (int g = 0; g < groups; g++) {
    const int L = std::min(kLanes, N - g * kLanes);
    moveGroup(t, packed + groupOffset(t, supers, g), L, supers, 0, supers, rows + static_cast<size_t>(g) * kLanes * rowBytes, rowBytes, toPacked);
  }
}

// ---- the decode-row kernel ------------------------------------------------------------------------------------------

// A group L columns wide: word w of a super-block at sb + w · stride. `word` loads it — whole groups unmasked, the last
// one masked to its L lanes (zeros past them: zero scales, zero values, so those lanes come out 0 and are not
// stored) — and asks for the line kPrefetch bytes ahead.
template <bool Full>
struct GroupWords {
  size_t stride;
  __mmask16 mask;
  explicit GroupWords(int L) : stride(Full ? 64 : static_cast<size_t>(4) * L), mask(static_cast<__mmask16>((1u << L) - 1)) {}
  KQUANT_VNNI __m512i word(const uint8_t* sb, int w) const {
    prefetchAhead(sb + w * stride);
    // Unaligned loads: Q6_K groups start 32 bytes into a line when K/256 is odd.
    if constexpr (Full) return _mm512_loadu_si512(sb + 64 * w);
    else return _mm512_maskz_loadu_epi32(mask, sb + stride * w);
  }
};

// Four activation bytes (one word's values) broadcast to every lane.
KQUANT_VNNI inline __m512i xWord(const int8_t* p) {
  int32_t four;
  std::memcpy(&four, p, 4);
  return _mm512_set1_epi32(four);
}

// vpshufb controls: byte k of each 32-bit lane to the lane's low byte (the rest zero), to its high byte, and bytes
// (2p, 2p + 1) to the low bytes of its two 16-bit halves.
struct Selectors {
  __m512i low[4], high[4], pair[2];
  KQUANT_VNNI Selectors() {
    alignas(64) int8_t v[64];
    for (int k = 0; k < 4; k++) {
      for (int i = 0; i < 64; i++) v[i] = i % 4 == 0 ? static_cast<int8_t>(i / 4 % 4 * 4 + k) : -128;
      low[k] = _mm512_load_si512(v);
      for (int i = 0; i < 64; i++) v[i] = i % 4 == 3 ? static_cast<int8_t>(i / 4 % 4 * 4 + k) : -128;
      high[k] = _mm512_load_si512(v);
    }
    for (int p = 0; p < 2; p++) {
      for (int i = 0; i < 64; i++) v[i] = i % 2 == 0 ? static_cast<int8_t>(i / 4 % 4 * 4 + 2 * p + i % 4 / 2) : -128;
      pair[p] = _mm512_load_si512(v);
    }
  }
};

const Selectors& selectors() {
  static const Selectors s;
  return s;
}

// Q4_K, MR rows × one group: acc[m] (16 lanes) += the group's outputs for row m.
//  block words: 0 = f16 d | f16 dmin, 1–3 = the 12 bytes of 6-bit scales and mins, 4 + 8t + i = nibbles of sub-block
//  pair t (low: sub-block 2t values 4i … 4i + 3, high: sub-block 2t + 1 the same).
template <bool Full, int MR>
KQUANT_VNNI void groupQ4K(const uint8_t* group, int L, int supers, const int8_t* const* xq, const float* const* xd, const int32_t* const* aux, __m512 acc[MR]) {
  constexpr int words = wordsOf(QuantType::q4_k);
  const GroupWords<Full> at(L);
  const Selectors& sel = selectors();
  const __m512i low6 = _mm512_set1_epi8(0x3f), low4 = _mm512_set1_epi8(0x0f), high4 = _mm512_set1_epi8(static_cast<char>(0xf0)), bits45 = _mm512_set1_epi8(0x30);
  for (int b = 0; b < supers; b++) {
    const uint8_t* sb = group + static_cast<size_t>(b) * words * at.stride;
    // The 6-bit scales and mins of 16 columns (scalesMins8, lane-wise): bytes k of scLo / scHi are scales k / 4 + k.
    const __m512i a = at.word(sb, 1), bw = at.word(sb, 2), c = at.word(sb, 3);
    const __m512i scLo = _mm512_and_si512(a, low6);
    const __m512i scHi = _mm512_or_si512(_mm512_and_si512(c, low4), _mm512_and_si512(_mm512_srli_epi32(a, 2), bits45));
    const __m512i mnLo = _mm512_and_si512(bw, low6);
    const __m512i mnHi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(c, 4), low4), _mm512_and_si512(_mm512_srli_epi32(bw, 2), bits45));
    __m512i total[MR];
    for (int m = 0; m < MR; m++) total[m] = _mm512_setzero_si512();
    for (int t = 0; t < 4; t++) {
      const __m512i scs = t < 2 ? scLo : scHi;
      const __m512i scEven = _mm512_shuffle_epi8(scs, sel.low[(2 * t) % 4]);
      const __m512i scOdd = _mm512_shuffle_epi8(scs, sel.low[(2 * t + 1) % 4]);
      __m512i even[MR], odd[MR];
      for (int m = 0; m < MR; m++) even[m] = odd[m] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int i = 0; i < 8; i++) {
        const __m512i raw = at.word(sb, 4 + 8 * t + i);
        const __m512i lo = _mm512_and_si512(raw, low4);
        // The high nibbles in place (16 × the value): no shift, the sum divided by 16 after (exactly).
        const __m512i hi = _mm512_and_si512(raw, high4);
        for (int m = 0; m < MR; m++) {
          const int8_t* x = xq[m] + static_cast<size_t>(b) * kSuper + 64 * t + 4 * i;
          even[m] = _mm512_dpbusd_epi32(even[m], lo, xWord(x));
          odd[m] = _mm512_dpbusd_epi32(odd[m], hi, xWord(x + 32));
        }
      }
      for (int m = 0; m < MR; m++)
        total[m] = _mm512_add_epi32(_mm512_add_epi32(total[m], _mm512_mullo_epi32(even[m], scEven)), _mm512_mullo_epi32(_mm512_srai_epi32(odd[m], 4), scOdd));
    }
    // Mins of sub-blocks (2p, 2p + 1) as int16 pairs against the row's pair of sub-block sums.
    const __m512i mins[4] = {_mm512_shuffle_epi8(mnLo, sel.pair[0]), _mm512_shuffle_epi8(mnLo, sel.pair[1]), _mm512_shuffle_epi8(mnHi, sel.pair[0]), _mm512_shuffle_epi8(mnHi, sel.pair[1])};
    const __m512i dd = at.word(sb, 0);
    const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
    const __m512 dmw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
    for (int m = 0; m < MR; m++) {
      const int32_t* ax = aux[m] + static_cast<size_t>(b) * 4;
      __m512i offset = _mm512_setzero_si512();
      for (int p = 0; p < 4; p++) offset = _mm512_dpwssd_epi32(offset, mins[p], _mm512_set1_epi32(ax[p]));
      const __m512 dx = _mm512_set1_ps(xd[m][b]);
      acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total[m]), _mm512_mul_ps(dw, dx), acc[m]);
      acc[m] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(offset), _mm512_mul_ps(dmw, dx), acc[m]);
    }
  }
}

// Q6_K, MR rows × one group. Block words: 16h + r / 16h + 8 + r = low nibbles of half h (ql[l], ql[l + 32] for
// l = 4r …), 32 + 8h + r = their 2-bit highs (qh[l]), 48–51 = the 16 int8 scales; the f16 d after the words.
// Word r of half h gives values 128h + 4r + 32s (s = 0…3) of groups 8h + 2s + r/4.
template <bool Full, int MR>
KQUANT_VNNI void groupQ6K(const uint8_t* group, int L, int supers, const int8_t* const* xq, const float* const* xd, const int32_t* const* aux, __m512 acc[MR]) {
  constexpr int words = wordsOf(QuantType::q6_k);
  const GroupWords<Full> at(L);
  const Selectors& sel = selectors();
  const __m512i low4 = _mm512_set1_epi8(0x0f), bits45 = _mm512_set1_epi8(0x30);
  const uint8_t* ds = group + static_cast<size_t>(supers) * words * at.stride;
  for (int b = 0; b < supers; b++) {
    const uint8_t* sb = group + static_cast<size_t>(b) * words * at.stride;
    __m512i total[MR];
    for (int m = 0; m < MR; m++) total[m] = _mm512_setzero_si512();
    for (int h = 0; h < 2; h++) {
      const __m512i scw[2] = {at.word(sb, 48 + 2 * h), at.word(sb, 49 + 2 * h)};
      for (int q = 0; q < 2; q++) {
        // Groups 8h + 2s + q: scale byte q (s even) or 2 + q (s odd) of word 48 + 2h + s/2, sign-extended.
        __m512i scale[4];
        for (int s = 0; s < 4; s++) scale[s] = _mm512_srai_epi32(_mm512_shuffle_epi8(scw[s / 2], sel.high[q + 2 * (s % 2)]), 24);
        __m512i sum[MR][4];
        for (int m = 0; m < MR; m++)
          for (int s = 0; s < 4; s++) sum[m][s] = _mm512_set1_epi32(aux[m][static_cast<size_t>(b) * kGroups + 8 * h + 2 * s + q]);
#pragma GCC unroll 4
        for (int r = 4 * q; r < 4 * q + 4; r++) {
          const __m512i lo0 = at.word(sb, 16 * h + r), lo1 = at.word(sb, 16 * h + 8 + r), hb = at.word(sb, 32 + 8 * h + r);
          // 0xF8: a | (b & c) — the low nibble with its two high bits moved to bits 4–5.
          const __m512i v[4] = {
              _mm512_ternarylogic_epi32(_mm512_and_si512(lo0, low4), _mm512_slli_epi16(hb, 4), bits45, 0xF8),
              _mm512_ternarylogic_epi32(_mm512_and_si512(lo1, low4), _mm512_slli_epi16(hb, 2), bits45, 0xF8),
              _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(lo0, 4), low4), hb, bits45, 0xF8),
              _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(lo1, 4), low4), _mm512_srli_epi16(hb, 2), bits45, 0xF8),
          };
          for (int m = 0; m < MR; m++) {
            const int8_t* x = xq[m] + static_cast<size_t>(b) * kSuper + 128 * h + 4 * r;
            for (int s = 0; s < 4; s++) sum[m][s] = _mm512_dpbusd_epi32(sum[m][s], v[s], xWord(x + 32 * s));
          }
        }
        for (int m = 0; m < MR; m++)
          for (int s = 0; s < 4; s++) total[m] = _mm512_add_epi32(total[m], _mm512_mullo_epi32(sum[m][s], scale[s]));
      }
    }
    const uint8_t* dp = ds + static_cast<size_t>(b) * L * 2;
    const __m512 dw = _mm512_cvtph_ps(Full ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(dp)) : _mm256_maskz_loadu_epi16(at.mask, dp));
    for (int m = 0; m < MR; m++) acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total[m]), _mm512_mul_ps(dw, _mm512_set1_ps(xd[m][b])), acc[m]);
  }
}

using GroupFn = void (*)(const uint8_t*, int, int, const int8_t* const*, const float* const*, const int32_t* const*, __m512*);

// Rows per pass over a group (its blocks stay in L1/L2 for the next pass): Q6_K's 4 sums a row leave room for 2.
constexpr int rowsPerPass(QuantType t) { return t == QuantType::q6_k ? 2 : 4; }

template <bool Full>
GroupFn pickGroup(QuantType t, int mr) {
  if (t == QuantType::q6_k) return mr == 2 ? &groupQ6K<Full, 2> : &groupQ6K<Full, 1>;
  switch (mr) {
    case 4: return &groupQ4K<Full, 4>;
    case 3: return &groupQ4K<Full, 3>;
    case 2: return &groupQ4K<Full, 2>;
    default: return &groupQ4K<Full, 1>;
  }
}

// Every row of y for group g's columns, rowsPerPass rows a pass over its blocks.
KQUANT_VNNI void groupRows(QuantType t, const uint8_t* group, int L, int K, int N, int g, const KQuantActivations& a, int M, float* y, bool accumulate) {
  const int supers = K / kSuper;
  const int pass = rowsPerPass(t);
  const __mmask16 mask = static_cast<__mmask16>((1u << L) - 1);
  for (int m0 = 0; m0 < M; m0 += pass) {
    const int mr = std::min(pass, M - m0);
    const int8_t* xq[4];
    const float* xd[4];
    const int32_t* aux[4];
    for (int m = 0; m < mr; m++) {
      xq[m] = a.rows.q + static_cast<size_t>(m0 + m) * K;
      xd[m] = a.rows.d + static_cast<size_t>(m0 + m) * supers;
      aux[m] = a.aux + static_cast<size_t>(m0 + m) * supers * a.auxPerSuper;
    }
    __m512 acc[4];
    for (int m = 0; m < mr; m++) acc[m] = _mm512_setzero_ps();
    (L == kLanes ? pickGroup<true>(t, mr) : pickGroup<false>(t, mr))(group, L, supers, xq, xd, aux, acc);
    for (int m = 0; m < mr; m++) {
      float* dst = y + static_cast<size_t>(m0 + m) * N + static_cast<size_t>(g) * kLanes;
      const __m512 r = accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(mask, dst), acc[m]) : acc[m];
      _mm512_mask_storeu_ps(dst, mask, r);
    }
  }
}

}  // namespace

void kquantInterleave(QuantType t, const uint8_t* rows, int K, int N, uint8_t* packed) { relayout(t, const_cast<uint8_t*>(rows), K, N, packed, true); }
void kquantDeinterleave(QuantType t, const uint8_t* packed, int K, int N, uint8_t* rows) { relayout(t, rows, K, N, const_cast<uint8_t*>(packed), false); }

const uint8_t* kquantGroupRows(QuantType t, const uint8_t* packed, int K, int N, int g, int b0, int b1) {
  const int supers = K / kSuper;
  const int L = std::min(kLanes, N - g * kLanes);
  const size_t rowStride = static_cast<size_t>(b1 - b0) * quantBlockBytes(t);
  // Per thread (the GEMM's, the AMX GEMM's and the widening's OpenMP threads each read their own group).
  thread_local std::vector<uint8_t> rows;
  if (rows.size() < kLanes * rowStride) rows.resize(kLanes * rowStride);
  moveGroup(t, const_cast<uint8_t*>(packed) + groupOffset(t, supers, g), L, supers, b0, b1, rows.data(), rowStride, false);
  return rows.data();
}

void kquantGemvInterleaved(QuantType t, const uint8_t* packed, int K, int N, const float* x, int M, float* y, bool accumulate) {
  if (!kquantInterleavable(t)) throw std::invalid_argument("kquantGemvInterleaved: Q4_K and Q6_K only");
  if (!kquantGemmAvailable()) throw std::invalid_argument("quantized kernel avx512vnni is not available on this CPU");
  if (M <= 0 || N <= 0) return;
  const int supers = K / kSuper;
  const KQuantActivations a = kquantActivations(t, x, M, K);
  const int groups = (N + kLanes - 1) / kLanes;
#pragma omp parallel for schedule(static)
  for (int g = 0; g < groups; g++) groupRows(t, packed + groupOffset(t, supers, g), std::min(kLanes, N - g * kLanes), K, N, g, a, M, y, accumulate);
}

}  // namespace flexhelm
