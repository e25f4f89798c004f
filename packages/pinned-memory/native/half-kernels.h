// Half-precision conversion kernels, bit-exact with the pure-JS fallback (src/half-float.ts):
//  - f16 -> f32 is exact; a signalling NaN comes out quiet (payload kept), as F16C hardware does.
//  - f32 -> f16 rounds to nearest-even, overflows to Inf, keeps the top 10 payload bits of a NaN and sets its quiet bit.
//  - bf16 -> f32 is a 16-bit shift (exact, NaN payload untouched).
#pragma once

#include <cstddef>
#include <cstdint>

namespace flexhelm {

inline uint32_t halfToFloatBits(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return sign | 0x7f800000u | (mantissa << 13) | (mantissa != 0 ? 0x400000u : 0u);
  if (exponent == 0) {
    if (mantissa == 0) return sign;
    uint32_t e = 113;  // a subnormal is renormalised: value = mantissa * 2^-24
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --e;
    }
    return sign | (e << 23) | ((mantissa & 0x3ffu) << 13);
  }
  return sign | ((exponent + 112) << 23) | (mantissa << 13);
}

inline uint16_t floatBitsToHalf(uint32_t f) {
  uint32_t sign = (f >> 16) & 0x8000u;
  uint32_t exponent = (f >> 23) & 0xffu;
  uint32_t mantissa = f & 0x7fffffu;
  if (exponent == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mantissa != 0 ? 0x200u | (mantissa >> 13) : 0u));
  int e = static_cast<int>(exponent) - 112;  // biased f16 exponent
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mantissa |= 0x800000u;
    unsigned shift = static_cast<unsigned>(14 - e);
    uint32_t half = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // a carry may round up to Inf, as it should
  return static_cast<uint16_t>(sign | half);
}

// Range kernels, dispatched to AVX-512 / F16C / AVX2 / scalar code at run time.
void convertF16ToF32(const uint16_t* src, float* dst, size_t n);
void convertBf16ToF32(const uint16_t* src, float* dst, size_t n);
void convertF32ToF16(const float* src, uint16_t* dst, size_t n);

}  // namespace flexhelm
