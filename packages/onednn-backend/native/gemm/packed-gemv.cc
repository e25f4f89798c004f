#include "packed-gemv.h"

#include "../cpu-features.h"
#include "../kernels.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace flexhelm {

bool packedBf16Layout(const dnnl::memory::desc& desc, PackedBf16Layout& layout) {
  const dnnl_memory_desc_t& d = desc.data;
  if (d.ndims != 2 || d.data_type != dnnl_bf16 || d.format_kind != dnnl_blocked || d.offset0 != 0 || d.extra.flags != 0) return false;
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  // Inner blocks outermost first: 16 pairs of K rows (dim 0), nb columns (dim 1), the 2 rows of a pair (dim 0).
  if (b.inner_nblks != 3 || b.inner_idxs[0] != 0 || b.inner_idxs[1] != 1 || b.inner_idxs[2] != 0) return false;
  if (b.inner_blks[0] != 16 || b.inner_blks[2] != 2) return false;
  const int nb = static_cast<int>(b.inner_blks[1]);
  if (nb % 16 != 0 || nb < 16 || nb > 64) return false;
  if (d.padded_dims[0] % 32 != 0 || d.padded_dims[1] % nb != 0) return false;
  layout.nb = nb;
  layout.kBlockStride = static_cast<size_t>(b.strides[0]);
  layout.nBlockStride = static_cast<size_t>(b.strides[1]);
  layout.kPadded = static_cast<int>(d.padded_dims[0]);
  return true;
}

bool packedGemvAvailable() {
  static const bool available = [] {
    return !envSwitchedOff("FLEXHELM_PACKED_GEMV") && cpuAvx512BwIsa() && __builtin_cpu_supports("avx512bf16");
  }();
  return available;
}

namespace {

#define AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// How far ahead each pair row's lines are prefetched: 2 KiB measured best of 0, 1, 2, 4 and 8 KiB at one row
// (bench/packed-gemv.mjs, AMD EPYC family 25, 2026-12-02; none gave the whole stream rate).
constexpr int kPrefetchBytes = 2048;

// Sums of MR activation rows against G groups of 16 columns of one panel, down all of K: acc[m][g] lane j is
// Σ_p x[m, 2p]·w[2p, col] + x[m, 2p+1]·w[2p+1, col] with p ascending (one vdpbf16ps per pair row).
template <int MR, int G>
AVX512BF16 void panelSums(const PackedBf16Layout& L, const uint16_t* panel, int kBlocks, const uint32_t* xPairs, size_t pairStride,
                          float* out /* [MR][G * 16] */) {
  __m512 acc[MR][G];
  for (int m = 0; m < MR; m++)
    for (int g = 0; g < G; g++) acc[m][g] = _mm512_setzero_ps();
  const size_t pairRow = static_cast<size_t>(L.nb) * 2;  // elements from one pair row of a block to the next
  for (int kb = 0; kb < kBlocks; kb++) {
    const uint16_t* block = panel + kb * L.kBlockStride;
    for (int p = 0; p < 16; p++) {
      const uint16_t* row = block + p * pairRow;
      // Every line of the pair row kPrefetchBytes ahead (the panel is one sequential run).
      for (int g = 0; g < G; g++) _mm_prefetch(reinterpret_cast<const char*>(row + g * 32) + kPrefetchBytes, _MM_HINT_T0);
      __m512i w[G];
      for (int g = 0; g < G; g++) w[g] = _mm512_loadu_si512(row + g * 32);
      const int pair = kb * 16 + p;
      for (int m = 0; m < MR; m++) {
        const __m512i xb = _mm512_set1_epi32(static_cast<int>(xPairs[m * pairStride + pair]));
        for (int g = 0; g < G; g++) acc[m][g] = _mm512_dpbf16_ps(acc[m][g], reinterpret_cast<__m512bh>(w[g]), reinterpret_cast<__m512bh>(xb));
      }
    }
  }
  for (int m = 0; m < MR; m++)
    for (int g = 0; g < G; g++) _mm512_storeu_ps(out + (m * G + g) * 16, acc[m][g]);
}

using PanelFn = void (*)(const PackedBf16Layout&, const uint16_t*, int, const uint32_t*, size_t, float*);

template <int G>
constexpr PanelFn kPanels[4] = {panelSums<1, G>, panelSums<2, G>, panelSums<3, G>, panelSums<4, G>};

PanelFn panelFn(int rows, int groups) {
  switch (groups) {
    case 1: return kPanels<1>[rows - 1];
    case 2: return kPanels<2>[rows - 1];
    case 3: return kPanels<3>[rows - 1];
    default: return kPanels<4>[rows - 1];
  }
}

}  // namespace

void gemvOverPanels(int kPadded, int nb, int K, int n, const uint16_t* x, size_t ldx, int M, const float* bias, bool relu, bool accumulate, float* y32,
                    uint16_t* y16, size_t ldy, PanelSumsFn sums, const void* ctx) {
  if (M < 1 || M > kPackedGemvRows) throw std::invalid_argument("a packed bf16 GEMV takes 1 to " + std::to_string(kPackedGemvRows) + " rows");
  if (y16 && accumulate) throw std::invalid_argument("a packed bf16 GEMV: a bf16 output cannot accumulate");
  // Activation pairs (x[2p] in the low half, as the packed pairs hold w[2p]), zeros past K: the padded weight rows
  // are zeros, and 0·0 adds nothing.
  const int pairs = kPadded / 2;
  thread_local std::vector<uint32_t> xPairs;
  xPairs.assign(static_cast<size_t>(M) * pairs, 0u);
  for (int m = 0; m < M; m++) {
    const uint16_t* xr = x + m * ldx;
    uint32_t* pr = xPairs.data() + static_cast<size_t>(m) * pairs;
    for (int k = 0; k < K; k++) pr[k / 2] |= static_cast<uint32_t>(xr[k]) << (16 * (k % 2));
  }
  const int panels = (n + nb - 1) / nb;
  // Up to 4 rows a pass (4 × 4 accumulators); 5–8 rows take two passes down each panel (the second from cache).
  const int passes = (M + 3) / 4;
  // The calling thread's buffer: inside the parallel loop `xPairs` would name each worker thread's own (empty) one.
  const uint32_t* xp = xPairs.data();
#pragma omp parallel for schedule(static)
  for (int panel = 0; panel < panels; panel++) {
    alignas(64) float out[4 * 64];
    for (int pass = 0; pass < passes; pass++) {
      const int m0 = pass * 4;
      const int rows = std::min(4, M - m0);
      sums(ctx, panel, rows, xp + static_cast<size_t>(m0) * pairs, pairs, out);
      const int c0 = panel * nb;
      const int cols = std::min(nb, n - c0);
      for (int r = 0; r < rows; r++) {
        float* s = out + r * nb;
        const size_t at = static_cast<size_t>(m0 + r) * ldy + c0;
        float* dst = y16 ? s : y32 + at;
        for (int j = 0; j < cols; j++) {
          float v = s[j];
          if (bias) v += bias[c0 + j];
          if (accumulate) v += y32[at + j];
          if (relu && v < 0.f) v = 0.f;
          dst[j] = v;
        }
        if (y16) toBf16Serial(s, y16 + at, static_cast<size_t>(cols));
      }
    }
  }
}

namespace {

struct PackedPanels {
  const PackedBf16Layout* layout;
  const uint16_t* w;
};

void packedPanelSums(const void* ctx, int panel, int rows, const uint32_t* xPairs, size_t pairStride, float* out) {
  const auto& p = *static_cast<const PackedPanels*>(ctx);
  const PackedBf16Layout& L = *p.layout;
  panelFn(rows, L.nb / 16)(L, p.w + panel * L.nBlockStride, L.kPadded / 32, xPairs, pairStride, out);
}

}  // namespace

void packedGemvBf16(const PackedBf16Layout& L, const uint16_t* w, int K, int n, const uint16_t* x, size_t ldx, int M, const float* bias, bool relu,
                    bool accumulate, float* y32, uint16_t* y16, size_t ldy) {
  const PackedPanels panels{&L, w};
  gemvOverPanels(L.kPadded, L.nb, K, n, x, ldx, M, bias, relu, accumulate, y32, y16, ldy, packedPanelSums, &panels);
}

}  // namespace flexhelm
