// The K-quant super-block decoding the VNNI kernels share (kquant-gemv.cc's row kernel, kquant-gemm.cc's tiled GEMM):
// one stored super-block into registers, as unsigned values with integer scales (the layouts: kquant-gemv.h).
#pragma once

#include "quant-blocks.h"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace flexhelm {
namespace kquant {

constexpr int kSuper = 256;
constexpr int kGroups = 16;  // 16-value groups per super-block: Q6_K's scale unit, and the q8_K sums' unit

inline uint16_t u16At(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

#define KQUANT_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma")))

// A super-block in registers: four vectors of 64 unsigned values (value order), per vector the s16 scale of each
// `vpmaddubsw` lane (lane i of vector j covers values 64j + 2i, 2i + 1: group 4j + i/8), the 16 group scales and the
// group offsets (s16 each): value i = d·sc16[g]·w − dm·mn[g], g = i / 16.
struct Decoded512 {
  __m512i w[4];
  __m512i sc[4];
  __m256i sc16;
  __m256i mn;
  float d, dm;
};

// The Q4_K/Q5_K sub-block scales and mins as 8 bytes each: bytes 0–3 hold scales 0–3 (low 6 bits) and the top bits of
// scales 4–7, bytes 4–7 the same for the mins, bytes 8–11 the low 4 bits of scales 4–7 (low nibble) and mins 4–7.
inline void scalesMins8(const uint8_t* q, uint64_t* sc, uint64_t* mn) {
  uint32_t a, b, c;
  std::memcpy(&a, q, 4);
  std::memcpy(&b, q + 4, 4);
  std::memcpy(&c, q + 8, 4);
  const uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, bits45 = 0x30303030;
  *sc = (a & low6) | static_cast<uint64_t>((c & low4) | ((a >> 2) & bits45)) << 32;
  *mn = (b & low6) | static_cast<uint64_t>(((c >> 4) & low4) | ((b >> 2) & bits45)) << 32;
}

// 8 byte values, each duplicated into two s16 lanes (one per 16-value group of a 32-value sub-block).
KQUANT_VNNI inline __m256i pairsOf(uint64_t bytes) {
  const __m128i v = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(bytes)));
  return _mm256_set_m128i(_mm_unpackhi_epi16(v, v), _mm_unpacklo_epi16(v, v));
}

// Per vector j the lanes' group: 4j + i/8 for s16 lane i.
struct LaneGroups {
  __m512i idx[4];
  KQUANT_VNNI LaneGroups() {
    alignas(64) int16_t v[32];
    for (int j = 0; j < 4; j++) {
      for (int i = 0; i < 32; i++) v[i] = static_cast<int16_t>(4 * j + i / 8);
      idx[j] = _mm512_load_si512(v);
    }
  }
};

inline const LaneGroups& laneGroups() {
  static const LaneGroups lanes;
  return lanes;
}

// LaneScales: also spread the group scales over the `vpmaddubsw` lanes (sc[4]; the row kernel's, not the GEMM's).
template <QuantType T, bool LaneScales = true>
KQUANT_VNNI inline void decode512(const uint8_t* p, const LaneGroups& lanes, Decoded512& s) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  __m256i sc16;
  if constexpr (T == QuantType::q6_k) {
    s.d = s.dm = _cvtsh_ss(u16At(p + 208));
    const __m512i bits45 = _mm512_set1_epi8(0x30);
    for (int h = 0; h < 2; h++) {
      const __m512i ql = _mm512_loadu_si512(p + 64 * h);
      const __m512i qhb = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 128 + 32 * h)));
      // Upper half: the high bits of values 32–63 (and 96–127) sit 2 bits up in the same bytes.
      const __m512i qh = _mm512_mask_srli_epi16(qhb, 0xFFFF0000u, qhb, 2);
      // 0xF8: a | (b & c).
      s.w[2 * h] = _mm512_ternarylogic_epi32(_mm512_and_si512(ql, low4), _mm512_slli_epi16(qh, 4), bits45, 0xF8);
      s.w[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4), qh, bits45, 0xF8);
    }
    sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192)));
    s.mn = _mm256_slli_epi16(sc16, 5);
  } else {
    s.d = _cvtsh_ss(u16At(p));
    s.dm = _cvtsh_ss(u16At(p + 2));
    uint64_t sc8, mn8;
    scalesMins8(p + 4, &sc8, &mn8);
    sc16 = pairsOf(sc8);
    s.mn = pairsOf(mn8);
    const uint8_t* qs = p + (T == QuantType::q5_k ? 48 : 16);
    __m512i qh;
    if constexpr (T == QuantType::q5_k) qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16)));
    for (int j = 0; j < 4; j++) {
      const __m512i raw = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * j)));
      // Lower half: sub-block 2j (low nibbles); upper half: 2j + 1 (high nibbles).
      __m512i w = _mm512_and_si512(_mm512_mask_srli_epi16(raw, 0xFFFF0000u, raw, 4), low4);
      if constexpr (T == QuantType::q5_k) {
        const __m512i bit = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi8(static_cast<char>(1 << (2 * j)))), _mm256_set1_epi8(static_cast<char>(2 << (2 * j))), 1);
        w = _mm512_mask_add_epi8(w, _mm512_test_epi8_mask(qh, bit), w, _mm512_set1_epi8(16));
      }
      s.w[j] = w;
    }
  }
  s.sc16 = sc16;
  if constexpr (!LaneScales) return;
  const __m512i sc512 = _mm512_castsi256_si512(sc16);
  for (int j = 0; j < 4; j++) s.sc[j] = _mm512_permutexvar_epi16(lanes.idx[j], sc512);
}


// 16 vectors of 16 int32 transposed in registers: afterwards r[i] lane c holds what r[c] lane i held.
KQUANT_VNNI inline void transpose16(__m512i r[16]) {
  __m512i u[16];
  for (int i = 0; i < 16; i += 4) {
    const __m512i t0 = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    const __m512i t1 = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    const __m512i t2 = _mm512_unpacklo_epi32(r[i + 2], r[i + 3]);
    const __m512i t3 = _mm512_unpackhi_epi32(r[i + 2], r[i + 3]);
    u[i] = _mm512_unpacklo_epi64(t0, t2);
    u[i + 1] = _mm512_unpackhi_epi64(t0, t2);
    u[i + 2] = _mm512_unpacklo_epi64(t1, t3);
    u[i + 3] = _mm512_unpackhi_epi64(t1, t3);
  }
  // Now u[4i + k]'s 128-bit lane L holds element 4L + k of rows 4i … 4i + 3: gather the lanes.
  for (int k = 0; k < 4; k++) {
    const __m512i even0 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0x88);  // lanes 0, 2 of rows 0–3, then of rows 4–7
    const __m512i odd0 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0xdd);   // lanes 1, 3
    const __m512i even1 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0x88);
    const __m512i odd1 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0xdd);
    r[k] = _mm512_shuffle_i32x4(even0, even1, 0x88);
    r[8 + k] = _mm512_shuffle_i32x4(even0, even1, 0xdd);
    r[4 + k] = _mm512_shuffle_i32x4(odd0, odd1, 0x88);
    r[12 + k] = _mm512_shuffle_i32x4(odd0, odd1, 0xdd);
  }
}

}  // namespace kquant
}  // namespace flexhelm
