// float -> bfloat16 rounding shared by the conversion kernels (kernels.cc) and the norms that write bf16 rows
// (norms.cc): one place for the rounding, so every bf16 row in a layer is rounded the same way.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace flexhelm {

// Round-to-nearest-even float -> bfloat16 bits (NaN stays a quiet NaN).
inline uint16_t bf16Bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}


// bf16Bits for 16 floats at once (same rounding, same NaN handling), packed to 16-bit lanes.
__attribute__((target("avx512f"))) inline __m256i bf16Bits16(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, nan, quiet));
}


}  // namespace flexhelm
