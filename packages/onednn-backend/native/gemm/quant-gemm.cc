#include "quant-gemm.h"

#include "../cpu-features.h"
#include "quant-gemv.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <vector>

namespace flexhelm {

bool quantGemmAvailable() { return cpuAvx512Bw() && __builtin_cpu_supports("avx512vnni"); }

namespace {

#define QGEMM_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma")))

// `vpdpbusd` multiplies 4 unsigned weight bytes by 4 signed activation bytes per 32-bit lane. A packed group is 16
// output columns, one lane each: per 32-block its 16 scales as floats (64 bytes), then 8 vectors of 4 consecutive k
// per column (512 bytes). The panel lives in L2 for one task only, so it is unpacked for speed (Q4_0's nibbles widened
// to bytes, scales to f32); the layer keeps its GGUF blocks (34 / 18 bytes per 32 weights).
constexpr int kGroup = 16;
constexpr size_t kGroupBlockBytes = 64 + 8 * 64;
// Columns per task: its packed panel (K = 8192: 590 KB) stays in a core's L2 while every row passes over it.
constexpr int kPanelCols = 64;
constexpr int kPanelGroups = kPanelCols / kGroup;
// Register tile: kRows rows × kVecs·16 columns of int32 block sums and fp32 totals (24 of the 32 zmm registers).
constexpr int kRows = 6;
constexpr int kVecs = 2;

// Packs columns [n0, n0 + cols) into `panel` (group-major, then block): one dword gather per 4 k of 16 columns.
QGEMM_VNNI void packPanel(QuantType t, const uint8_t* w, size_t rowBytes, int blocks, int N, int n0, int cols, uint8_t* panel) {
  const size_t bb = quantBlockBytes(t);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i idx = _mm512_mullo_epi32(lane, _mm512_set1_epi32(static_cast<int>(rowBytes)));
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  for (int g = 0; g * kGroup < cols; g++) {
    const int c0 = n0 + g * kGroup;
    const int valid = std::min(kGroup, N - c0);
    // Columns past N: zero scales and bytes, so they add nothing (and are never stored).
    const __mmask16 live = static_cast<__mmask16>((1u << valid) - 1);
    const uint8_t* col0 = w + static_cast<size_t>(c0) * rowBytes;
    uint8_t* dst = panel + static_cast<size_t>(g) * blocks * kGroupBlockBytes;
    for (int b = 0; b < blocks; b++, dst += kGroupBlockBytes) {
      const uint8_t* blk = col0 + b * bb;
      const __m512i head = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, idx, blk, 1);
      _mm512_store_ps(dst, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head)));
      if (t == QuantType::q8_0) {
        for (int q = 0; q < 8; q++)
          _mm512_store_si512(dst + 64 + 64 * q, _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, idx, blk + 2 + 4 * q, 1));
      } else {
        // Byte j of a Q4_0 block holds value j (low nibble) and j + 16 (high): the dword at 4j gives k 4j.. and 16 + 4j..
        for (int j = 0; j < 4; j++) {
          const __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, idx, blk + 2 + 4 * j, 1);
          _mm512_store_si512(dst + 64 + 64 * j, _mm512_and_si512(v, low4));
          _mm512_store_si512(dst + 64 + 64 * (j + 4), _mm512_and_si512(_mm512_srli_epi16(v, 4), low4));
        }
      }
    }
  }
}

// MR rows × NV groups over all blocks. Each block's int32 sums start at the seed −offset·Σx (the weights are stored
// unsigned, value + offset), so they come out as the exact signed dot product; then total += sum · (dw · dx).
template <int MR, int NV>
QGEMM_VNNI void tile(const uint8_t* group, size_t groupStride, int blocks, const int8_t* xq, int K, const float* xd, const int32_t* seed,
                     float* y, int N, int n0, bool accumulate) {
  __m512 total[MR][NV];
  for (int m = 0; m < MR; m++)
    for (int v = 0; v < NV; v++) total[m][v] = _mm512_setzero_ps();
  for (int b = 0; b < blocks; b++) {
    const uint8_t* pb = group + b * kGroupBlockBytes;
    __m512i sum[MR][NV];
    for (int m = 0; m < MR; m++) {
      const __m512i s = _mm512_set1_epi32(seed[m * blocks + b]);
      for (int v = 0; v < NV; v++) sum[m][v] = s;
    }
    for (int q = 0; q < 8; q++) {
      __m512i wv[NV];
      for (int v = 0; v < NV; v++) wv[v] = _mm512_load_si512(pb + v * groupStride + 64 + 64 * q);
      for (int m = 0; m < MR; m++) {
        int32_t four;
        __builtin_memcpy(&four, xq + static_cast<size_t>(m) * K + b * kQuantBlock + 4 * q, 4);
        const __m512i xv = _mm512_set1_epi32(four);
        for (int v = 0; v < NV; v++) sum[m][v] = _mm512_dpbusd_epi32(sum[m][v], wv[v], xv);
      }
    }
    for (int m = 0; m < MR; m++) {
      const __m512 dx = _mm512_set1_ps(xd[m * blocks + b]);
      for (int v = 0; v < NV; v++)
        total[m][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[m][v]), _mm512_mul_ps(_mm512_load_ps(pb + v * groupStride), dx), total[m][v]);
    }
  }
  for (int v = 0; v < NV; v++) {
    const int c = n0 + v * kGroup;
    const __mmask16 live = static_cast<__mmask16>((1u << std::min(kGroup, N - c)) - 1);
    for (int m = 0; m < MR; m++) {
      float* dst = y + static_cast<size_t>(m) * N + c;
      __m512 r = total[m][v];
      if (accumulate) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(live, dst));
      _mm512_mask_storeu_ps(dst, live, r);
    }
  }
}

template <int MR>
void tileCols(int nv, const uint8_t* group, size_t groupStride, int blocks, const int8_t* xq, int K, const float* xd, const int32_t* seed, float* y, int N,
              int n0, bool accumulate) {
  if (nv == 2) tile<MR, 2>(group, groupStride, blocks, xq, K, xd, seed, y, N, n0, accumulate);
  else tile<MR, 1>(group, groupStride, blocks, xq, K, xd, seed, y, N, n0, accumulate);
}

void tileRows(int mr, int nv, const uint8_t* group, size_t groupStride, int blocks, const int8_t* xq, int K, const float* xd, const int32_t* seed,
              float* y, int N, int n0, bool accumulate) {
  switch (mr) {
    case 6: return tileCols<6>(nv, group, groupStride, blocks, xq, K, xd, seed, y, N, n0, accumulate);
    case 5: return tileCols<5>(nv, group, groupStride, blocks, xq, K, xd, seed, y, N, n0, accumulate);
    case 4: return tileCols<4>(nv, group, groupStride, blocks, xq, K, xd, seed, y, N, n0, accumulate);
    case 3: return tileCols<3>(nv, group, groupStride, blocks, xq, K, xd, seed, y, N, n0, accumulate);
    case 2: return tileCols<2>(nv, group, groupStride, blocks, xq, K, xd, seed, y, N, n0, accumulate);
    default: return tileCols<1>(nv, group, groupStride, blocks, xq, K, xd, seed, y, N, n0, accumulate);
  }
}

}  // namespace

void quantGemmVnni(QuantType t, const uint8_t* w, int K, int N, const int8_t* xq, const float* xd, const int32_t* xs, int M, float* y, bool accumulate) {
  static_assert(kRows <= 6 && kVecs == 2, "tileRows dispatches up to 6 rows and 2 groups");
  const int blocks = K / kQuantBlock;
  const size_t rowBytes = static_cast<size_t>(blocks) * quantBlockBytes(t);
  const int offset = t == QuantType::q8_0 ? 128 : 8;
  std::vector<int32_t> seed(static_cast<size_t>(M) * blocks);
  for (size_t i = 0; i < seed.size(); i++) seed[i] = -offset * xs[i];
  const size_t groupStride = static_cast<size_t>(blocks) * kGroupBlockBytes;
  const int panels = (N + kPanelCols - 1) / kPanelCols;
#pragma omp parallel
  {
    // One panel per thread, kept between calls (the compute thread's OpenMP team is long-lived).
    static thread_local std::vector<uint8_t, AlignedAllocator<uint8_t>> panel;
    if (panel.size() < kPanelGroups * groupStride) panel.resize(kPanelGroups * groupStride);
#pragma omp for schedule(static)
    for (int p = 0; p < panels; p++) {
      const int n0 = p * kPanelCols;
      const int cols = std::min(kPanelCols, N - n0);
      const int groups = (cols + kGroup - 1) / kGroup;
      packPanel(t, w, rowBytes, blocks, N, n0, cols, panel.data());
      for (int m0 = 0; m0 < M; m0 += kRows) {
        const int mr = std::min(kRows, M - m0);
        for (int g = 0; g < groups; g += kVecs) {
          tileRows(mr, std::min(kVecs, groups - g), panel.data() + g * groupStride, groupStride, blocks, xq + static_cast<size_t>(m0) * K, K,
                   xd + static_cast<size_t>(m0) * blocks, seed.data() + static_cast<size_t>(m0) * blocks, y + static_cast<size_t>(m0) * N, N,
                   n0 + g * kGroup, accumulate);
        }
      }
    }
  }
}

}  // namespace flexhelm
