#include "kquant-gemv.h"

#include "../bf16-bits.h"
#include "kquant-decode.h"
#include "../cpu-features.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace flexhelm {

using namespace kquant;

namespace {

// IEEE half → float without F16C (the scalar reference runs anywhere).
float halfValue(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const float v = e == 0 ? std::ldexp(static_cast<float>(m), -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(static_cast<float>(m | 1024), e - 25);
  return h & 0x8000 ? -v : v;
}

// One super-block in the form every kernel multiplies: 256 unsigned values u (0–63), per 16-value group an integer
// scale sc and offset multiplier mn, and two float scales, so that
//   value i = d·sc[g]·u[i] − dm·mn[g]   (g = i / 16)
// Q4_K/Q5_K: sc, mn the sub-block's 6-bit scale and min (each shared by two groups), dm = dmin.
// Q6_K: sc the group's int8 scale, mn = 32·sc (the −32 offset of its 6-bit values), dm = d.
struct Decoded {
  uint8_t u[kSuper];
  int16_t sc[kGroups], mn[kGroups];
  float d, dm;
};

// ggml's 6-bit scale and min of sub-block j of a Q4_K/Q5_K block, from the 12 packed bytes (the layout, read plainly).
void scaleMin(const uint8_t* q, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// The scalar decoding of a stored super-block, value by value from the layouts (the reference the SIMD decoding is
// tested against through the kernels).
void decodeScalar(QuantType t, const uint8_t* p, Decoded& s) {
  if (t == QuantType::q6_k) {
    s.d = s.dm = halfValue(u16At(p + 208));
    for (int i = 0; i < kSuper; i++) {
      const int h = i / 128, r = i % 128, quarter = r / 32, l = r % 32;
      const uint8_t lowByte = p[64 * h + l + 32 * (quarter & 1)];
      const int low = quarter >= 2 ? lowByte >> 4 : lowByte & 0xf;
      const int high = (p[128 + 32 * h + l] >> (2 * quarter)) & 3;
      s.u[i] = static_cast<uint8_t>(low | (high << 4));
    }
    for (int g = 0; g < kGroups; g++) {
      s.sc[g] = static_cast<int8_t>(p[192 + g]);
      s.mn[g] = static_cast<int16_t>(32 * s.sc[g]);
    }
    return;
  }
  s.d = halfValue(u16At(p));
  s.dm = halfValue(u16At(p + 2));
  const bool five = t == QuantType::q5_k;
  const uint8_t* qh = p + 16;
  const uint8_t* qs = p + (five ? 48 : 16);
  for (int i = 0; i < kSuper; i++) {
    const int sub = i / 32, l = i % 32;
    const uint8_t byte = qs[32 * (sub / 2) + l];
    int u = sub % 2 ? byte >> 4 : byte & 0xf;
    if (five && (qh[l] >> sub & 1)) u += 16;
    s.u[i] = static_cast<uint8_t>(u);
  }
  for (int j = 0; j < 8; j++) {
    int sc, m;
    scaleMin(p + 4, j, &sc, &m);
    s.sc[2 * j] = s.sc[2 * j + 1] = static_cast<int16_t>(sc);
    s.mn[2 * j] = s.mn[2 * j + 1] = static_cast<int16_t>(m);
  }
}

// Scalar reference: per super-block the exact integer sums I = Σ_g sc·Σ u·q and O = Σ_g mn·bsum, then
// d·xd·I − dm·xd·O, super-blocks added in ascending order.
void dotScalar(QuantType t, const uint8_t* wrow, int K, const int8_t* xq, const float* xd, const int16_t* bsum, float* out) {
  const size_t bb = quantBlockBytes(t);
  Decoded s;
  float acc = 0;
  for (int b = 0; b < K / kSuper; b++) {
    decodeScalar(t, wrow + b * bb, s);
    int32_t I = 0, O = 0;
    for (int g = 0; g < kGroups; g++) {
      int32_t dot = 0;
      for (int i = 16 * g; i < 16 * g + 16; i++) dot += s.u[i] * xq[b * kSuper + i];
      I += s.sc[g] * dot;
      O += s.mn[g] * bsum[b * kGroups + g];
    }
    acc += static_cast<float>(I) * (s.d * xd[b]) - static_cast<float>(O) * (s.dm * xd[b]);
  }
  *out = acc;
}

KQUANT_VNNI inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// AVX-512 VNNI: per super-block and row, `vpmaddubsw` (unsigned values × int8 activations; pair sums ≤ 2·63·127, no
// saturation) and `vpdpwssd` (× the group scales, into int32), so the scales cost nothing per row beyond the
// multiply-add; one float step per super-block for d and one for the offsets. Decoded once per column for MR rows.
template <QuantType T, int MR>
KQUANT_VNNI void dotVnni(const uint8_t* wrow, int K, const LaneGroups& lanes, const int8_t* const* xq, const float* const* xd, const int16_t* const* bsum, float* out) {
  constexpr size_t bb = quantBlockBytes(T);
  __m512 acc[MR];
  __m256 macc[MR];
  for (int m = 0; m < MR; m++) acc[m] = _mm512_setzero_ps(), macc[m] = _mm256_setzero_ps();
  Decoded512 s;
  for (int b = 0; b < K / kSuper; b++) {
    decode512<T>(wrow + b * bb, lanes, s);
    for (int m = 0; m < MR; m++) {
      const int8_t* x = xq[m] + b * kSuper;
      __m512i I = _mm512_setzero_si512();
      for (int j = 0; j < 4; j++) I = _mm512_dpwssd_epi32(I, _mm512_maddubs_epi16(s.w[j], _mm512_loadu_si512(x + 64 * j)), s.sc[j]);
      const __m256i O = _mm256_madd_epi16(s.mn, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsum[m] + b * kGroups)));
      const float xs = xd[m][b];
      acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I), _mm512_set1_ps(s.d * xs), acc[m]);
      macc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(O), _mm256_set1_ps(s.dm * xs), macc[m]);
    }
  }
  for (int m = 0; m < MR; m++) out[m] = _mm512_reduce_add_ps(acc[m]) - hsum256(macc[m]);
}

KQUANT_VNNI void decodeToBf16Vnni(QuantType t, const uint8_t* p, const LaneGroups& lanes, uint16_t* out) {
  Decoded512 s;
  if (t == QuantType::q4_k) decode512<QuantType::q4_k, false>(p, lanes, s);
  else if (t == QuantType::q5_k) decode512<QuantType::q5_k, false>(p, lanes, s);
  else decode512<QuantType::q6_k, false>(p, lanes, s);
  alignas(32) int16_t sc[kGroups], mn[kGroups];
  _mm256_store_si256(reinterpret_cast<__m256i*>(sc), s.sc16);
  _mm256_store_si256(reinterpret_cast<__m256i*>(mn), s.mn);
  alignas(64) uint8_t u[kSuper];
  for (int j = 0; j < 4; j++) _mm512_store_si512(u + 64 * j, s.w[j]);
  for (int g = 0; g < kGroups; g++) {
    const __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(u + 16 * g))));
    const __m512 y = _mm512_fmadd_ps(_mm512_set1_ps(s.d * sc[g]), v, _mm512_set1_ps(-(s.dm * mn[g])));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16 * g), bf16Bits16(y));
  }
}

// decodeToBf16Vnni's values with AVX512_BF16's conversion (round to nearest even as bf16Bits16, subnormals flushed),
// the group scales converted once per super-block and read back as broadcast loads: about a third of its instructions,
// for the AMX GEMM's widening (AMX hosts all have AVX512_BF16).
template <QuantType T>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16,f16c,fma"))) void decodeToBf16Ne(const uint8_t* p, const LaneGroups& lanes, uint16_t* out) {
  Decoded512 s;
  decode512<T, false>(p, lanes, s);
  // value = d·sc[g]·u − dm·mn[g], the products rounded as decodeToBf16Vnni's.
  alignas(64) float scale[kGroups], offset[kGroups];
  _mm512_store_ps(scale, _mm512_mul_ps(_mm512_set1_ps(s.d), _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(s.sc16))));
  _mm512_store_ps(offset, _mm512_mul_ps(_mm512_set1_ps(-s.dm), _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(s.mn))));
  alignas(64) uint8_t u[kSuper];
  for (int j = 0; j < 4; j++) _mm512_store_si512(u + 64 * j, s.w[j]);
  for (int g = 0; g < kGroups; g += 2) {
    __m512 y[2];
    for (int q = 0; q < 2; q++) {
      const __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(u + 16 * (g + q)))));
      y[q] = _mm512_fmadd_ps(_mm512_set1_ps(scale[g + q]), v, _mm512_set1_ps(offset[g + q]));
    }
    _mm512_storeu_si512(out + 16 * g, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(y[1], y[0])));
  }
}

bool vnniAvailable() { return cpuAvx512Bw() && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma"); }


// Columns per task and rows per pass over them: a decoded super-block is reused for up to 8 rows (all of a decode
// step's rows at batch ≤ 8), so its unpacking is paid once per column.
constexpr int kColumnTile = 16;
constexpr int kRowGroup = 8;

template <QuantType T>
void dotRowsVnni(int mr, const uint8_t* wrow, int K, const int8_t* const* xq, const float* const* xd, const int16_t* const* bsum, float* out) {
  const LaneGroups& l = laneGroups();
  switch (mr) {
    case 8: return dotVnni<T, 8>(wrow, K, l, xq, xd, bsum, out);
    case 7: return dotVnni<T, 7>(wrow, K, l, xq, xd, bsum, out);
    case 6: return dotVnni<T, 6>(wrow, K, l, xq, xd, bsum, out);
    case 5: return dotVnni<T, 5>(wrow, K, l, xq, xd, bsum, out);
    case 4: return dotVnni<T, 4>(wrow, K, l, xq, xd, bsum, out);
    case 3: return dotVnni<T, 3>(wrow, K, l, xq, xd, bsum, out);
    case 2: return dotVnni<T, 2>(wrow, K, l, xq, xd, bsum, out);
    default: return dotVnni<T, 1>(wrow, K, l, xq, xd, bsum, out);
  }
}

// One super-block of a row: amax, scale = amax / 127, q = round-to-nearest-even(v · (1 / scale)) clamped to ±127, and
// each 16 values' sum, as quantizeRowQ8K (the same float operations; cvtps rounds to nearest even like nearbyint).
KQUANT_VNNI void quantizeSuperQ8K(const float* v, int8_t* q, float* d, int16_t* bsum) {
  __m512 amax = _mm512_setzero_ps();
  for (int g = 0; g < kGroups; g++) amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_loadu_ps(v + 16 * g)));
  const float scale = _mm512_reduce_max_ps(amax) / 127.0f;
  const __m512 inv = _mm512_set1_ps(scale != 0 ? 1.0f / scale : 0.0f);
  const __m512i hi = _mm512_set1_epi32(127);
  const __m512i lo = _mm512_set1_epi32(-127);
  for (int g = 0; g < kGroups; g++) {
    const __m512i qi = _mm512_max_epi32(_mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(v + 16 * g), inv)), hi), lo);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16 * g), _mm512_cvtepi32_epi8(qi));
    bsum[g] = static_cast<int16_t>(_mm512_reduce_add_epi32(qi));
  }
  *d = scale;
}

}  // namespace

QuantKernel bestKQuantKernel() {
  static const QuantKernel k = vnniAvailable() ? QuantKernel::avx512vnni : QuantKernel::scalar;
  return k;
}

void quantizeRowQ8K(const float* x, int K, int8_t* q, float* d, int16_t* bsum16) {
  for (int b = 0; b < K / kSuper; b++) {
    const float* v = x + b * kSuper;
    float amax = 0;
    for (int i = 0; i < kSuper; i++) amax = std::max(amax, std::fabs(v[i]));
    const float scale = amax / 127.0f;
    const float inv = scale != 0 ? 1.0f / scale : 0.0f;
    for (int g = 0; g < kGroups; g++) {
      int s = 0;
      for (int i = 16 * g; i < 16 * g + 16; i++) {
        const int qi = std::clamp(static_cast<int>(std::nearbyint(v[i] * inv)), -127, 127);
        q[b * kSuper + i] = static_cast<int8_t>(qi);
        s += qi;
      }
      bsum16[b * kGroups + g] = static_cast<int16_t>(s);
    }
    d[b] = scale;
  }
}

Q8KRows quantizeRowsQ8K(const float* x, int M, int K, bool vectorized) {
  const int supers = K / kSuper;
  // Per calling thread: one compute thread runs the layers, but tests may run linears from several.
  thread_local std::vector<int8_t> q;
  thread_local std::vector<float> d;
  thread_local std::vector<int16_t> bsum;
  q.resize(static_cast<size_t>(M) * K);
  d.resize(static_cast<size_t>(M) * supers);
  bsum.resize(static_cast<size_t>(M) * supers * kGroups);
  int8_t* qp = q.data();
  float* dp = d.data();
  int16_t* sp = bsum.data();
// One row (a decode step) on the calling thread: waking the team costs more than quantizing its K values.
#pragma omp parallel for schedule(static) if (M > 1)
  for (int m = 0; m < M; m++)
    for (int b = 0; b < supers; b++) {
      const size_t at = static_cast<size_t>(m) * supers + b;
      if (vectorized) quantizeSuperQ8K(x + at * kSuper, qp + at * kSuper, dp + at, sp + at * kGroups);
      else quantizeRowQ8K(x + at * kSuper, kSuper, qp + at * kSuper, dp + at, sp + at * kGroups);
    }
  return {qp, dp, sp};
}

void kquantGemv(QuantType type, const uint8_t* w, int K, int N, const float* x, int M, float* y, bool accumulate, QuantKernel kernel) {
  if (!isKQuant(type)) throw std::invalid_argument("kquantGemv: not a K-quant type");
  if (K % kSuper != 0) throw std::invalid_argument("kquantGemv: K must be a multiple of 256");
  if (kernel == QuantKernel::best) kernel = bestKQuantKernel();
  if (kernel != QuantKernel::scalar && kernel != QuantKernel::avx512vnni)
    throw std::invalid_argument(std::string("quantized kernel ") + quantKernelName(kernel) + " does not multiply K-quant blocks: use avx512vnni, scalar, vnni-gemm, bf16 or best");
  if (kernel == QuantKernel::avx512vnni && !vnniAvailable()) throw std::invalid_argument("quantized kernel avx512vnni is not available on this CPU");
  if (M <= 0) return;
  const int supers = K / kSuper;
  const bool vnni = kernel == QuantKernel::avx512vnni;
  const Q8KRows rows = quantizeRowsQ8K(x, M, K, vnni);
  const int8_t* xqp = rows.q;
  const float* xdp = rows.d;
  const int16_t* xsp = rows.bsum;
  const size_t rowBytes = static_cast<size_t>(supers) * quantBlockBytes(type);
  const int tiles = (N + kColumnTile - 1) / kColumnTile;
#pragma omp parallel for schedule(static)
  for (int tile = 0; tile < tiles; tile++) {
    const int n1 = std::min(N, (tile + 1) * kColumnTile);
    for (int m0 = 0; m0 < M; m0 += kRowGroup) {
      const int mr = std::min(kRowGroup, M - m0);
      const int8_t* q[kRowGroup];
      const float* d[kRowGroup];
      const int16_t* s[kRowGroup];
      for (int i = 0; i < mr; i++) {
        q[i] = xqp + static_cast<size_t>(m0 + i) * K;
        d[i] = xdp + static_cast<size_t>(m0 + i) * supers;
        s[i] = xsp + static_cast<size_t>(m0 + i) * supers * kGroups;
      }
      for (int n = tile * kColumnTile; n < n1; n++) {
        const uint8_t* wrow = w + static_cast<size_t>(n) * rowBytes;
        float out[kRowGroup];
        if (!vnni)
          for (int i = 0; i < mr; i++) dotScalar(type, wrow, K, q[i], d[i], s[i], out + i);
        else if (type == QuantType::q4_k) dotRowsVnni<QuantType::q4_k>(mr, wrow, K, q, d, s, out);
        else if (type == QuantType::q5_k) dotRowsVnni<QuantType::q5_k>(mr, wrow, K, q, d, s, out);
        else dotRowsVnni<QuantType::q6_k>(mr, wrow, K, q, d, s, out);
        for (int i = 0; i < mr; i++) {
          float& dst = y[static_cast<size_t>(m0 + i) * N + n];
          dst = accumulate ? dst + out[i] : out[i];
        }
      }
    }
  }
}

void widenKRowBf16Ne(QuantType type, const uint8_t* blocks, int K, int n, int k0, int k1, uint16_t* out) {
  const size_t bb = quantBlockBytes(type);
  const uint8_t* row = blocks + static_cast<size_t>(n) * (K / kSuper) * bb;
  const LaneGroups& lanes = laneGroups();
  for (int b = k0 / kSuper; b < k1 / kSuper; b++) {
    uint16_t* dst = out + (b * kSuper - k0);
    if (type == QuantType::q4_k) decodeToBf16Ne<QuantType::q4_k>(row + b * bb, lanes, dst);
    else if (type == QuantType::q5_k) decodeToBf16Ne<QuantType::q5_k>(row + b * bb, lanes, dst);
    else decodeToBf16Ne<QuantType::q6_k>(row + b * bb, lanes, dst);
  }
}

void widenKRowBf16(QuantType type, const uint8_t* blocks, int K, int n, int k0, int k1, uint16_t* out) {
  const size_t bb = quantBlockBytes(type);
  const uint8_t* row = blocks + static_cast<size_t>(n) * (K / kSuper) * bb;
  static const bool simd = vnniAvailable();
  Decoded s;
  for (int b = k0 / kSuper; b < k1 / kSuper; b++) {
    uint16_t* dst = out + (b * kSuper - k0);
    if (simd) {
      decodeToBf16Vnni(type, row + b * bb, laneGroups(), dst);
      continue;
    }
    decodeScalar(type, row + b * bb, s);
    // As the SIMD path: one rounding of d·sc·u − dm·mn before bf16.
    for (int i = 0; i < kSuper; i++) dst[i] = bf16Bits(std::fma(s.d * s.sc[i / 16], static_cast<float>(s.u[i]), -(s.dm * s.mn[i / 16])));
  }
}

void dequantizeKRowsBf16(QuantType type, const uint8_t* blocks, int K, int n0, int n1, uint16_t* out) {
#pragma omp parallel for schedule(static)
  for (int n = n0; n < n1; n++) widenKRowBf16(type, blocks, K, n, 0, K, out + static_cast<size_t>(n - n0) * K);
}

}  // namespace flexhelm
