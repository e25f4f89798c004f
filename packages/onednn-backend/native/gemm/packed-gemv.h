// Decode-step GEMMs (a few rows) straight on oneDNN's packed bf16 weights. oneDNN 2.6's matmul at M = 1…8 reads a
// packed opt-1.3b-sized matrix at 0.55–0.65 of the machine's stream bandwidth on the AMD EPYC dev hosts; its packed
// bf16 layout (BA16a<NB>b2a: panels of NB columns, each a contiguous run of 32-row blocks laid out [16 pairs][NB][2])
// is exactly what `vdpbf16ps` wants, so one pass down each panel with the activation pairs broadcast reads the weights
// sequentially, at the stream rate.
#pragma once

#include <dnnl.hpp>

#include <cstddef>
#include <cstdint>

namespace flexhelm {

// Where block (k / 32, n / nb) of a packed bf16 [K, N] weight starts, in elements.
struct PackedBf16Layout {
  int nb = 0;                // columns per panel (16, 32, 48 or 64)
  size_t kBlockStride = 0;   // elements from one 32-row block to the next
  size_t nBlockStride = 0;   // elements from one panel to the next
  int kPadded = 0;           // K rounded up to the 32-row blocks (the padding holds zeros)
};

// The most rows one packedGemvBf16 call takes (PackedLinear calls it for up to 4: kPackedGemvUpToRows).
constexpr int kPackedGemvRows = 8;

// The layout of `desc` when it is one packedGemvBf16 reads (bf16, 2-D, BA16a<nb>b2a or AB16a<nb>b2a, no extra
// compensation); false otherwise (the caller keeps oneDNN's matmul).
bool packedBf16Layout(const dnnl::memory::desc& desc, PackedBf16Layout& layout);

// Whether this CPU runs packedGemvBf16 (AVX-512 bf16); FLEXHELM_PACKED_GEMV=0 turns it off (benchmarks compare).
bool packedGemvAvailable();

// y[m, 0 .. n) (rows ldy apart) = act(x[m] · W + bias) [+ y] for m < M ≤ kPackedGemvRows, W the packed [K, n] block
// at `w` (layout from packedBf16Layout), x bf16 [M, K] rows ldx apart. Sums in fp32 over k pairs in ascending order;
// bias, the accumulate (y += …) and ReLU follow in oneDNN's post-op order. y32 (fp32) or y16 (bf16, nearest even).
void packedGemvBf16(const PackedBf16Layout& layout, const uint16_t* w, int K, int n, const uint16_t* x, size_t ldx, int M,
                    const float* bias, bool relu, bool accumulate, float* y32, uint16_t* y16, size_t ldy);

// The driver of the decode kernels on packed panels (this one and compactGemvBf16): activation pairs (row m's pair p,
// x[2p] in the low half, zeros past K), panels of nb columns in parallel, up to 4 rows a pass, then bias, accumulate,
// ReLU and the bf16 rounding as packedGemvBf16 describes. sums(ctx, panel, rows, pairs of the pass's first row,
// pairStride, out) writes the panel's fp32 sums, row r's at out + r · nb.
using PanelSumsFn = void (*)(const void* ctx, int panel, int rows, const uint32_t* xPairs, size_t pairStride, float* out);
void gemvOverPanels(int kPadded, int nb, int K, int n, const uint16_t* x, size_t ldx, int M, const float* bias, bool relu, bool accumulate, float* y32,
                    uint16_t* y16, size_t ldy, PanelSumsFn sums, const void* ctx);

}  // namespace flexhelm
