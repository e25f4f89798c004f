#include "quant-gemm.h"

#include "../bf16-bits.h"
#include "../cpu-features.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace flexhelm {

bool quantGemmAvailable() {
  static const bool yes = cpuAvx512Bw() && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("f16c");
  return yes;
}

namespace {

constexpr int kGroup = 16;
// Register tile: kRows rows × kVecs groups of int32 block sums and fp32 totals (24 of the 32 zmm registers).
constexpr int kRows = 6;
constexpr int kVecs = 2;
// A single row (a batch-1 decode step) reads kDecodeVecs groups side by side instead: more weight streams in flight
// per thread draw more of the memory's rate (a Q4_0 GEMV from memory, 2 threads, Intel family 6 model 207: 30.1 →
// 31.8 GB/s at 2048 × 3072, 32.0 → 33.8 at 8192 × 2048; one group at a time reads 20.5); all in registers at one row.
constexpr int kDecodeVecs = 4;

inline int qBytes(QuantType t) { return t == QuantType::q8_0 ? 32 : 16; }

// Copies between the layouts: toPacked picks the direction.
void relayout(QuantType t, uint8_t* rows, int K, int N, uint8_t* packed, bool toPacked) {
  const int blocks = K / kQuantBlock;
  const int qb = qBytes(t);
  const int words = qb / 4;
  const size_t bb = quantBlockBytes(t);
  const size_t rowBytes = static_cast<size_t>(blocks) * bb;
#pragma omp parallel for schedule(static)
  for (int g = 0; g < (N + kGroup - 1) / kGroup; g++) {
    const int L = std::min(kGroup, N - g * kGroup);
    uint8_t* group = packed + static_cast<size_t>(g) * kGroup * rowBytes;
    uint8_t* scales = group + static_cast<size_t>(blocks) * qb * L;
    for (int c = 0; c < L; c++) {
      uint8_t* row = rows + static_cast<size_t>(g * kGroup + c) * rowBytes;
      for (int b = 0; b < blocks; b++) {
        uint8_t* blk = row + b * bb;
        uint8_t* scale = scales + (static_cast<size_t>(b) * L + c) * 2;
        if (toPacked) std::memcpy(scale, blk, 2);
        else std::memcpy(blk, scale, 2);
        for (int j = 0; j < words; j++) {
          uint8_t* word = group + ((static_cast<size_t>(b) * words + j) * L + c) * 4;
          if (toPacked) std::memcpy(word, blk + 2 + 4 * j, 4);
          else std::memcpy(blk + 2 + 4 * j, word, 4);
        }
      }
    }
  }
}

#define QGEMM_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma")))

// MR rows × NV groups over all blocks. The weights are unsigned (value + offset: Q8_0 stored +128, Q4_0's nibbles
// q with value q − 8), so each block's int32 sums start at the seed −offset·Σx and come out as the exact signed dot
// product; then total += sum · (dw · dx), block by block.
template <QuantType T, int MR, int NV, bool FULL>
QGEMM_VNNI void tile(const uint8_t* const* group, const int* lanes, int blocks, const int8_t* xq, int K, const float* xd, const int32_t* seed, float* y,
                     int N, int n0, bool accumulate, bool prefetch) {
  constexpr int words = T == QuantType::q8_0 ? 8 : 4;
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  // FULL: every group 16 columns wide (all but a last partial one), loaded without masks.
  __mmask16 live[NV];
  int width[NV];
  const uint8_t* scales[NV];
  for (int v = 0; v < NV; v++) {
    width[v] = FULL ? kGroup : lanes[v];
    live[v] = static_cast<__mmask16>((1u << width[v]) - 1);
    scales[v] = group[v] + static_cast<size_t>(blocks) * words * 4 * width[v];
  }
  __m512 total[MR][NV];
  for (int m = 0; m < MR; m++)
    for (int v = 0; v < NV; v++) total[m][v] = _mm512_setzero_ps();
  // Few rows leave too few independent `vpdpbusd` chains to hide its latency: split each block's sum over P partial
  // sums (int32 addition is exact, so the result is the same).
  constexpr int P = MR * NV >= 6 ? 1 : MR * NV >= 3 ? 2 : 4;
  for (int b = 0; b < blocks; b++) {
    __m512i sum[P][MR][NV];
    for (int m = 0; m < MR; m++) {
      const __m512i s = _mm512_set1_epi32(seed[m * blocks + b]);
      for (int v = 0; v < NV; v++) {
        sum[0][m][v] = s;
        for (int p = 1; p < P; p++) sum[p][m][v] = _mm512_setzero_si512();
      }
    }
    const int8_t* xb = xq + b * kQuantBlock;
    // Unrolled: a rolled word loop left GCC shuffling the 12 sums between registers each word (a 512-row GEMM on 2
    // threads, AMD family 26: ×1.04 for Q8_0 words, ×1.08 for Q4_0's).
#pragma GCC unroll 8
    for (int j = 0; j < words; j++) {
      __m512i wv[NV];
      for (int v = 0; v < NV; v++) {
        const uint8_t* at = group[v] + ((static_cast<size_t>(b) * words + j) * width[v]) * 4;
        if (kQuantPrefetch > 0 && prefetch) _mm_prefetch(reinterpret_cast<const char*>(at) + kQuantPrefetch, _MM_HINT_T0);
        wv[v] = FULL ? _mm512_loadu_si512(at) : _mm512_maskz_loadu_epi32(live[v], at);
      }
      if (T == QuantType::q8_0) {
        for (int m = 0; m < MR; m++) {
          int32_t four;
          std::memcpy(&four, xb + static_cast<size_t>(m) * K + 4 * j, 4);
          const __m512i xv = _mm512_set1_epi32(four);
          for (int v = 0; v < NV; v++) sum[j % P][m][v] = _mm512_dpbusd_epi32(sum[j % P][m][v], wv[v], xv);
        }
      } else {
        // Word j's low nibbles are k 4j.., its high nibbles k 16 + 4j.. (ggml's Q4_0 byte order).
        __m512i hi[NV];
        for (int v = 0; v < NV; v++) {
          hi[v] = _mm512_and_si512(_mm512_srli_epi16(wv[v], 4), low4);
          wv[v] = _mm512_and_si512(wv[v], low4);
        }
        for (int m = 0; m < MR; m++) {
          int32_t lo4, hi4;
          std::memcpy(&lo4, xb + static_cast<size_t>(m) * K + 4 * j, 4);
          std::memcpy(&hi4, xb + static_cast<size_t>(m) * K + 16 + 4 * j, 4);
          const __m512i xl = _mm512_set1_epi32(lo4);
          const __m512i xh = _mm512_set1_epi32(hi4);
          for (int v = 0; v < NV; v++) {
            sum[(2 * j) % P][m][v] = _mm512_dpbusd_epi32(sum[(2 * j) % P][m][v], wv[v], xl);
            sum[(2 * j + 1) % P][m][v] = _mm512_dpbusd_epi32(sum[(2 * j + 1) % P][m][v], hi[v], xh);
          }
        }
      }
    }
    __m512 dw[NV];
    for (int v = 0; v < NV; v++) {
      const uint8_t* at = scales[v] + static_cast<size_t>(b) * width[v] * 2;
      dw[v] = _mm512_cvtph_ps(FULL ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at)) : _mm256_maskz_loadu_epi16(live[v], at));
    }
    for (int m = 0; m < MR; m++) {
      const __m512 dx = _mm512_set1_ps(xd[m * blocks + b]);
      for (int v = 0; v < NV; v++) {
        __m512i whole = sum[0][m][v];
        for (int p = 1; p < P; p++) whole = _mm512_add_epi32(whole, sum[p][m][v]);
        total[m][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(whole), _mm512_mul_ps(dw[v], dx), total[m][v]);
      }
    }
  }
  for (int v = 0; v < NV; v++) {
    for (int m = 0; m < MR; m++) {
      float* dst = y + static_cast<size_t>(m) * N + n0 + v * kGroup;
      __m512 r = total[m][v];
      if (FULL) {
        if (accumulate) r = _mm512_add_ps(r, _mm512_loadu_ps(dst));
        _mm512_storeu_ps(dst, r);
      } else {
        if (accumulate) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(live[v], dst));
        _mm512_mask_storeu_ps(dst, live[v], r);
      }
    }
  }
}

using TileFn = void (*)(const uint8_t* const*, const int*, int, const int8_t*, int, const float*, const int32_t*, float*, int, int, bool, bool);

template <QuantType T, int MR>
TileFn tileFor(int nv, bool full) {
  if constexpr (MR == 1) {
    if (nv == 4) return full ? &tile<T, 1, 4, true> : &tile<T, 1, 4, false>;
    if (nv == 3) return full ? &tile<T, 1, 3, true> : &tile<T, 1, 3, false>;
  }
  if (nv == 2) return full ? &tile<T, MR, 2, true> : &tile<T, MR, 2, false>;
  return full ? &tile<T, MR, 1, true> : &tile<T, MR, 1, false>;
}

template <QuantType T>
TileFn pickTile(int mr, int nv, bool full) {
  switch (mr) {
    case 6: return tileFor<T, 6>(nv, full);
    case 5: return tileFor<T, 5>(nv, full);
    case 4: return tileFor<T, 4>(nv, full);
    case 3: return tileFor<T, 3>(nv, full);
    case 2: return tileFor<T, 2>(nv, full);
    default: return tileFor<T, 1>(nv, full);
  }
}

// One 32-block: amax, scale = amax / 127, q = round-to-nearest-even(v · (1 / scale)) as quantizeRowQ8 (the same float
// operations in the same order; cvtps rounds to nearest even like nearbyint in the default mode).
QGEMM_VNNI inline __m512 load16(const float* v) { return _mm512_loadu_ps(v); }
// bf16 bits to their float (exact: the bits in the high half).
QGEMM_VNNI inline __m512 load16(const uint16_t* v) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v))), 16));
}

template <typename In>
QGEMM_VNNI void quantizeBlockQ8(const In* v, int8_t* q, float* d, int32_t* sum) {
  const __m512 a = load16(v);
  const __m512 b = load16(v + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
  const float scale = amax / 127.0f;
  const __m512 inv = _mm512_set1_ps(scale != 0 ? 1.0f / scale : 0.0f);
  const __m512i lim = _mm512_set1_epi32(127);
  const __m512i qa = _mm512_max_epi32(_mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(a, inv)), lim), _mm512_sub_epi32(_mm512_setzero_si512(), lim));
  const __m512i qb = _mm512_max_epi32(_mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(b, inv)), lim), _mm512_sub_epi32(_mm512_setzero_si512(), lim));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtepi32_epi8(qa));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm512_cvtepi32_epi8(qb));
  *d = scale;
  *sum = _mm512_reduce_add_epi32(_mm512_add_epi32(qa, qb));
}

template <typename In>
void quantizeRows(const In* x, int M, int K, int8_t* q, float* d, int32_t* sum) {
  const int blocks = K / kQuantBlock;
// One row (a decode step) on the calling thread: waking the team costs more than quantizing its K values.
#pragma omp parallel for schedule(static) if (M > 1)
  for (int m = 0; m < M; m++)
    for (int b = 0; b < blocks; b++) {
      const size_t at = static_cast<size_t>(m) * blocks + b;
      quantizeBlockQ8(x + at * kQuantBlock, q + at * kQuantBlock, d + at, sum + at);
    }
}

}  // namespace

void quantizeRowsQ8Vnni(const float* x, int M, int K, int8_t* q, float* d, int32_t* sum) { quantizeRows(x, M, K, q, d, sum); }

void quantizeRowsQ8VnniBf16(const uint16_t* x, int M, int K, int8_t* q, float* d, int32_t* sum) { quantizeRows(x, M, K, q, d, sum); }

void quantGatherBlock(QuantType t, const uint8_t* packed, int K, int N, int n, int b, uint8_t* block) {
  const int blocks = K / kQuantBlock;
  const int words = qBytes(t) / 4;
  const int g = n / kGroup;
  const int c = n % kGroup;
  const int L = std::min(kGroup, N - g * kGroup);
  const uint8_t* group = packed + static_cast<size_t>(g) * kGroup * blocks * quantBlockBytes(t);
  std::memcpy(block, group + static_cast<size_t>(blocks) * qBytes(t) * L + (static_cast<size_t>(b) * L + c) * 2, 2);
  for (int j = 0; j < words; j++) std::memcpy(block + 2 + 4 * j, group + ((static_cast<size_t>(b) * words + j) * L + c) * 4, 4);
}

namespace {

// 16 bf16 of columns 4q…4q+3 (4 each) to their rows of a block's tile (32 values a column) at k.
QGEMM_VNNI inline void store4(uint16_t (*tile)[kQuantBlock], __m256i bf, int q, int k) {
  alignas(32) uint64_t piece[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(piece), bf);
  for (int i = 0; i < 4; i++) std::memcpy(&tile[4 * q + i][k], &piece[i], 8);
}

// One full 16-column group widened to bf16 rows (`out` + c·K for column c): per block, the 16 columns' f16 scales in
// one load, then each 64-byte word (4 k of 16 columns) as 4 column chunks of 16 values, each chunk's scales spread by
// a permute, multiplied, rounded to bf16 and stored 8 bytes a column. The same float products and rounding as the
// row path (`blockToBf16Avx512`), so the same bits.
template <QuantType T>
QGEMM_VNNI void widenGroup(const uint8_t* group, int blocks, uint16_t* out, size_t K) {
  constexpr int words = T == QuantType::q8_0 ? 8 : 4;
  const uint8_t* scales = group + static_cast<size_t>(blocks) * words * 4 * kGroup;
  __m512i spread[4];
  for (int q = 0; q < 4; q++) {
    alignas(64) int32_t idx[16];
    for (int i = 0; i < 16; i++) idx[i] = 4 * q + i / 4;
    spread[q] = _mm512_load_si512(idx);
  }
  const __m128i low4 = _mm_set1_epi8(0x0f);
  const __m128i flip = _mm_set1_epi8(static_cast<char>(0x80));
  const __m512i eight = _mm512_set1_epi32(8);
  // A block's 16 columns are assembled in a 1 KiB tile, then written one 64-byte line a column: the 16 rows lie K·2
  // bytes apart (the same L1 set when that is a multiple of 4 KiB), so 8-byte pieces straight into them thrash it.
  alignas(64) uint16_t tile[kGroup][kQuantBlock];
  for (int b = 0; b < blocks; b++) {
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + static_cast<size_t>(b) * kGroup * 2)));
    for (int j = 0; j < words; j++) {
      const __m512i word = _mm512_loadu_si512(group + (static_cast<size_t>(b) * words + j) * 64);
      for (int q = 0; q < 4; q++) {
        const __m128i part = _mm512_extracti32x4_epi32(word, q);
        const __m512 dq = _mm512_permutexvar_ps(spread[q], d);
        if constexpr (T == QuantType::q8_0) {
          // Stored +128: back to the signed values.
          const __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_xor_si128(part, flip)));
          store4(tile, bf16Bits16(_mm512_mul_ps(v, dq)), q, 4 * j);
        } else {
          // Low nibbles are values 4j…4j+3 of the block, high nibbles 16 + 4j….
          const __m512 lo = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_and_si128(part, low4)), eight));
          const __m512 hi = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(part, 4), low4)), eight));
          store4(tile, bf16Bits16(_mm512_mul_ps(lo, dq)), q, 4 * j);
          store4(tile, bf16Bits16(_mm512_mul_ps(hi, dq)), q, 16 + 4 * j);
        }
      }
    }
    for (int c = 0; c < kGroup; c++) _mm512_storeu_si512(out + static_cast<size_t>(c) * K + static_cast<size_t>(b) * kQuantBlock, _mm512_load_si512(tile[c]));
  }
}

#define QGEMM_PAIRS __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,f16c")))

// Two B-tile rows from one 64-byte word load (16 columns × 4 signed bytes, 4 consecutive k each): bytes 0–1 of each
// column make the pair row at out, bytes 2–3 the one at out + 32. scaleLo / scaleHi: columns 0–7 / 8–15's scales,
// each twice (one per value of a pair).
QGEMM_PAIRS inline void pairRows(__m512i word, __m512 scaleLo, __m512 scaleHi, uint16_t* out) {
  for (int half = 0; half < 2; half++) {
    const __m256i bytes = _mm512_cvtepi32_epi16(half ? _mm512_srli_epi32(word, 16) : word);
    const __m512 lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(bytes))), scaleLo);
    const __m512 hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(bytes, 1))), scaleHi);
    _mm512_store_si512(out + half * 32, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
  }
}

template <QuantType T>
QGEMM_PAIRS void groupTiles(const uint8_t* group, int blocks, int b0, int b1, uint16_t* tiles) {
  constexpr int words = T == QuantType::q8_0 ? 8 : 4;
  const uint8_t* scales = group + static_cast<size_t>(blocks) * words * 4 * kGroup;
  const __m512i lowHalf = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  const __m512i highHalf = _mm512_add_epi32(lowHalf, _mm512_set1_epi32(8));
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i eight = _mm512_set1_epi8(8);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int b = b0; b < b1; b++) {
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + static_cast<size_t>(b) * kGroup * 2)));
    const __m512 dLo = _mm512_permutexvar_ps(lowHalf, d);
    const __m512 dHi = _mm512_permutexvar_ps(highHalf, d);
    uint16_t* tile = tiles + static_cast<size_t>(b - b0) * 512;
    for (int j = 0; j < words; j++) {
      const __m512i word = _mm512_loadu_si512(group + (static_cast<size_t>(b) * words + j) * 64);
      if constexpr (T == QuantType::q8_0) {
        // Stored +128: back to the signed values. Word j is k = 4j … 4j + 3: pair rows 2j, 2j + 1.
        pairRows(_mm512_xor_si512(word, flip), dLo, dHi, tile + 2 * j * 32);
      } else {
        // Low nibbles are k = 4j … 4j + 3 (pair rows 2j, 2j + 1), high nibbles k = 16 + 4j … (rows 8 + 2j, 9 + 2j).
        pairRows(_mm512_sub_epi8(_mm512_and_si512(word, low4), eight), dLo, dHi, tile + 2 * j * 32);
        pairRows(_mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(word, 4), low4), eight), dLo, dHi, tile + (8 + 2 * j) * 32);
      }
    }
  }
}

}  // namespace

void widenInterleavedGroupTiles(QuantType t, const uint8_t* packed, int K, int g, int b0, int b1, uint16_t* tiles) {
  const int blocks = K / kQuantBlock;
  const uint8_t* group = packed + static_cast<size_t>(g) * blocks * quantBlockBytes(t) * kGroup;
  if (t == QuantType::q8_0) groupTiles<QuantType::q8_0>(group, blocks, b0, b1, tiles);
  else groupTiles<QuantType::q4_0>(group, blocks, b0, b1, tiles);
}

void dequantizeInterleavedBf16Vnni(QuantType t, const uint8_t* packed, int K, int N, uint16_t* out, void (*column)(QuantType, const uint8_t*, int, int, int, uint16_t*)) {
  const int blocks = K / kQuantBlock;
  const size_t groupBytes = static_cast<size_t>(blocks) * quantBlockBytes(t) * kGroup;
  const int groups = (N + kGroup - 1) / kGroup;
#pragma omp parallel for schedule(static)
  for (int g = 0; g < groups; g++) {
    uint16_t* dst = out + static_cast<size_t>(g) * kGroup * K;
    if (N - g * kGroup < kGroup) {
      // The last, partial group: column by column.
      for (int n = g * kGroup; n < N; n++) column(t, packed, K, N, n, out + static_cast<size_t>(n) * K);
      continue;
    }
    if (t == QuantType::q8_0) widenGroup<QuantType::q8_0>(packed + g * groupBytes, blocks, dst, K);
    else widenGroup<QuantType::q4_0>(packed + g * groupBytes, blocks, dst, K);
  }
}

void quantInterleave(QuantType t, const uint8_t* rows, int K, int N, uint8_t* out) { relayout(t, const_cast<uint8_t*>(rows), K, N, out, true); }

void quantDeinterleave(QuantType t, const uint8_t* packed, int K, int N, uint8_t* rows) { relayout(t, rows, K, N, const_cast<uint8_t*>(packed), false); }

namespace {

// Rows from which a Q4_0 GEMM widens each task's nibbles to bytes first (see expandQ4Group). 2048 × 8192 on 2 threads,
// AMD family 26, against the nibble tile: 24 rows ×0.87, 48 ×0.97–1.03, 96 ×1.08–1.11, 512 ×1.03–1.07 (both unrolled).
constexpr int kExpandRows = 64;
// The most int8 activations one pass of the tasks covers. Q4_0, 2 threads, AMD family 26, against one pass over all
// rows: 4096 × 8192 (batch 8's down projection) ×1.42–1.57, 4096 × 2048 ×1.16–1.29; 4 MiB against 2 MiB: 512 × 8192
// ×1.05–1.12 (one chunk, not three), others within ±4%.
constexpr size_t kChunkBytes = size_t{4} << 20;

// One Q4_0 group (L columns) rewritten in the Q8_0 layout: word j < 4 of a block holds its low nibbles (k 4j …), word
// 4 + j its high nibbles (k 16 + 4j …), each a byte 0 … 15 (the value + 8), then the f16 scales as they were. The Q8_0
// tile then reads it with the Q4_0 seed (−8 · Σx): the same integer sums, so the same bits as the nibble tile, without
// two shifts and masks per word and row tile (a 512-row prompt runs 86 row tiles over each group).
QGEMM_VNNI void expandQ4Group(const uint8_t* group, int blocks, int L, uint8_t* out) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __mmask16 live = static_cast<__mmask16>((1u << L) - 1);
  for (int b = 0; b < blocks; b++)
    for (int j = 0; j < 4; j++) {
      const __m512i word = _mm512_maskz_loadu_epi32(live, group + (static_cast<size_t>(b) * 4 + j) * L * 4);
      _mm512_mask_storeu_epi32(out + (static_cast<size_t>(b) * 8 + j) * L * 4, live, _mm512_and_si512(word, low4));
      _mm512_mask_storeu_epi32(out + (static_cast<size_t>(b) * 8 + 4 + j) * L * 4, live, _mm512_and_si512(_mm512_srli_epi16(word, 4), low4));
    }
  std::memcpy(out + static_cast<size_t>(blocks) * 32 * L, group + static_cast<size_t>(blocks) * 16 * L, static_cast<size_t>(blocks) * 2 * L);
}

// Rows c0 … c1 − 1 against every task (`vecs` groups: kVecs, or kDecodeVecs at one row), the tasks in parallel.
void runChunk(QuantType t, const uint8_t* w, int K, int N, const int8_t* xq, const float* xd, const int32_t* seed, float* y, bool accumulate, int c0, int c1, int vecs) {
  const int blocks = K / kQuantBlock;
  const size_t groupBytes = static_cast<size_t>(blocks) * quantBlockBytes(t) * kGroup;
  const int groups = (N + kGroup - 1) / kGroup;
  const int tasks = (groups + vecs - 1) / vecs;
  const bool expand = t == QuantType::q4_0 && c1 - c0 >= kExpandRows;
#pragma omp parallel for schedule(static)
  for (int task = 0; task < tasks; task++) {
    const int g0 = task * vecs;
    const int nv = std::min(vecs, groups - g0);
    const uint8_t* group[kDecodeVecs];
    int lanes[kDecodeVecs];
    bool full = true;
    for (int v = 0; v < nv; v++) {
      group[v] = w + static_cast<size_t>(g0 + v) * groupBytes;
      lanes[v] = std::min(kGroup, N - (g0 + v) * kGroup);
      full = full && lanes[v] == kGroup;
    }
    QuantType kind = t;
    bool prefetch = true;
    if (expand) {
      thread_local std::vector<uint8_t> scratch;
      const size_t each = static_cast<size_t>(blocks) * quantBlockBytes(QuantType::q8_0) * kGroup;
      if (scratch.size() < kVecs * each) scratch.resize(kVecs * each);
      for (int v = 0; v < nv; v++) {
        expandQ4Group(group[v], blocks, lanes[v], scratch.data() + v * each);
        group[v] = scratch.data() + v * each;
      }
      kind = QuantType::q8_0;
      prefetch = false;
    }
    for (int m0 = c0; m0 < c1; m0 += kRows) {
      const int mr = std::min(kRows, c1 - m0);
      const TileFn fn = kind == QuantType::q8_0 ? pickTile<QuantType::q8_0>(mr, nv, full) : pickTile<QuantType::q4_0>(mr, nv, full);
      fn(group, lanes, blocks, xq + static_cast<size_t>(m0) * K, K, xd + static_cast<size_t>(m0) * blocks, seed + static_cast<size_t>(m0) * blocks,
         y + static_cast<size_t>(m0) * N, N, g0 * kGroup, accumulate, /* the first row tile streams the weights */ prefetch && m0 == c0);
    }
  }
}

}  // namespace

void quantGemmVnni(QuantType t, const uint8_t* w, int K, int N, const int8_t* xq, const float* xd, const int32_t* xs, int M, float* y, bool accumulate) {
  static_assert(kRows <= 6 && kVecs == 2 && kDecodeVecs == 4, "pickTile dispatches up to 6 rows and 2 groups, 4 at one row");
  const int blocks = K / kQuantBlock;
  const int offset = t == QuantType::q8_0 ? 128 : 8;
  thread_local std::vector<int32_t> seed;  // per calling thread, as the activations
  if (seed.size() < static_cast<size_t>(M) * blocks) seed.resize(static_cast<size_t>(M) * blocks);
  for (size_t i = 0; i < static_cast<size_t>(M) * blocks; i++) seed[i] = -offset * xs[i];
  // A task is kVecs groups (32 columns) for every row: its weights come from memory once, then from L2 for each
  // further row tile (K = 8192: 278 KB of Q8_0). One row: kDecodeVecs groups.
  const int vecs = M == 1 ? kDecodeVecs : kVecs;
  // Rows in equal chunks of at most kChunkBytes of int8 activations, so that they stay in cache while every task
  // passes over them: a 512-row prompt is one chunk, a batch of 8 such prompts 2 (K = 2048) or 8 (K = 8192).
  const int chunks = static_cast<int>((static_cast<size_t>(M) * K + kChunkBytes - 1) / kChunkBytes);
  const int chunk = ((M + chunks - 1) / chunks + kRows - 1) / kRows * kRows;
  for (int c0 = 0; c0 < M; c0 += chunk) {
    const int c1 = std::min(M, c0 + chunk);
    runChunk(t, w, K, N, xq, xd, seed.data(), y, accumulate, c0, c1, vecs);
  }
}

}  // namespace flexhelm
