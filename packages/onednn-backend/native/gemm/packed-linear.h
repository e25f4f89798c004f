// y = act(x · Wᵀ + b) [+ y] with W reordered once into oneDNN's packed format (f32, bf16, or int8 with per-output-
// channel scales). Wide weights are split into column blocks, each packed separately and writing its own columns of
// the contiguous output (faster in oneDNN 2.6 when the packed block is ≤ 16 MiB).
#pragma once

#include <dnnl.hpp>

#include "compact-bf16.h"
#include "group4-weights.h"
#include "packed-gemv.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace flexhelm {

enum class Dtype { f32, bf16, int8 };

Dtype parseDtype(const std::string& name);
const char* dtypeName(Dtype d);

// Scratch memory reused across calls (grown on demand, 64-byte aligned).
class Scratch {
 public:
  void* get(size_t slot, size_t bytes);
  ~Scratch();

 private:
  struct Block {
    void* data = nullptr;
    size_t bytes = 0;
  };
  std::vector<Block> blocks_;
};

// Packed-weight memory for `bytes`, 64-byte aligned (free with std::free); from 4 MiB on it starts on a 2 MiB boundary
// and is marked for transparent huge pages (streamed once per decode step: 4 KiB pages stop the hardware prefetchers
// at every page boundary; +20–30% on decode GEMMs in bench/packed-gemv.mjs). FLEXHELM_HUGE_PAGES=0 keeps 4 KiB pages.
// (Tried and not kept: the same for allocFloat32 arrays and the host tier's pinned copies, where an offloaded decode
// step measured no gain or a loss.)
void* allocPacked(size_t bytes);

dnnl::engine& cpuEngine();
dnnl::stream& cpuStream();

struct LinearOptions {
  Dtype dtype = Dtype::bf16;
  bool relu = false;
  // Column blocks are sized so one packed block holds at most this many bytes (0 = never split).
  size_t chunkBytes = 16u << 20;
  // int8 only: one activation scale per row (token) or one for the whole input.
  bool perTokenScale = true;
  // The weight is given as [K, N] (in × out, the offloading tiers' layout) instead of PyTorch's [N, K]; packing reads
  // either layout directly, so streamed weights are never transposed on the way in.
  bool transposed = false;
  // Packed blocks come from (and go back to) a process-wide free list instead of fresh memory: streamed layers are
  // packed at every step, and first-touching fresh memory costs ~5 ms per MiB on the VMs this runs on.
  bool recycle = false;
  // > 0: a streamed layer's weights are kept where they are ([K, N] fp32, the caller keeps them alive) and only packed
  // by the first call with at least this many rows; calls with fewer rows (decode steps) multiply the unpacked fp32
  // weights directly. Packing a streamed layer costs ~4 ns per weight; a decode step's GEMM reads each weight once.
  int packAtRows = 0;
  // Unpacked runs of at most kSkinnyRows rows use the one-pass AVX-512 kernel (skinnyGemm) instead of oneDNN's fp32
  // GEMM on the plain layout, which read the streamed weights at about half the memory bandwidth. false: oneDNN (for
  // benchmarks comparing the two).
  bool skinny = true;
  // Packed bf16 runs of at most kPackedGemvRows rows use packedGemvBf16 (one sequential pass down each packed panel)
  // instead of oneDNN's matmul. false: oneDNN (for benchmarks comparing the two).
  bool packedGemv = true;
  // Resident bf16 blocks are kept in 12 bits a weight (compact-bf16.h: lossless; decode steps read a quarter fewer
  // bytes, prompt rows widen each block back before oneDNN's matmul) where compactBf16Available(). false: 16 bits.
  bool compact = true;
};

// Columns [n0, n0 + n) of a linear layer's weights as they lie in memory: [K, n] with rows ld floats apart
// (transposed, the offloading tiers' [in, out] layout), or [n, K] with rows ld apart (PyTorch's [out, in]).
// f16, when not null, holds the weights as IEEE half bits instead (data is then null; transposed layout only): a streamed
// layer's f16 copies, multiplied as they are by decode steps and widened only to be packed. q4, when present, holds
// them in FlexLLMGen's 4-bit format instead (data null, a whole [K, n] tensor: ld is n): a streamed layer's compressed
// copies, likewise multiplied as they are and widened only to be packed.
struct ColumnSource {
  const float* data;
  size_t ld;
  int n;
  const uint16_t* f16 = nullptr;
  Group4Weights q4 = {};
  bool widened() const { return f16 || q4.present(); }
};


class PackedLinear {
 public:
  // weight [N, K] row-major (PyTorch order), or [K, N] with options.transposed; bias [N] or nullptr.
  PackedLinear(const float* weight, const float* bias, int K, int N, const LinearOptions& options);
  // Column blocks from separate tensors side by side (a streamed q/k/v, without concatenating them); transposed only.
  PackedLinear(const std::vector<ColumnSource>& sources, const float* bias, int K, const LinearOptions& options);
  ~PackedLinear();
  PackedLinear(const PackedLinear&) = delete;
  PackedLinear& operator=(const PackedLinear&) = delete;

  // y [M, N] = act(x [M, K] · Wᵀ + b), or y += x · Wᵀ + b (then act) when accumulate. Not thread-safe: callers hold
  // the global execution lock.
  void run(const float* x, int M, float* y, bool accumulate, Scratch& scratch) { run(x, false, M, y, false, accumulate, scratch); }
  // The same with bf16 activations where the dtype is bf16: x given as bf16 bits (xBf16: no conversion pass), y
  // written as bf16 (yBf16, not with accumulate; oneDNN rounds to nearest even, as the conversion pass would).
  void run(const void* x, bool xBf16, int M, void* y, bool yBf16, bool accumulate, Scratch& scratch);

  int K() const { return K_; }
  int N() const { return N_; }
  size_t packedBytes() const { return packedBytes_; }
  bool packed() const { return !chunks_.empty(); }
  // How many column blocks are held compact (compact-bf16.h).
  int compactChunks() const;
  // Milliseconds a lazily packed linear spent packing inside run() (0 when packed at construction).
  double lazyPackMs() const { return lazyPackMs_; }
  int chunks() const { return static_cast<int>(chunks_.size()); }
  const std::string& implName() const { return impl_; }

 private:
  struct Chunk {
    int n0, n;
    dnnl::memory weights;
    void* recycled = nullptr;  // the block's buffer when it came from the free list
    void* owned = nullptr;     // otherwise the block's buffer (allocPacked), freed with the layer
    dnnl::memory bias;
    dnnl::memory::desc packedDesc;
    // bf16 blocks in the layout packedGemvBf16 reads (decode steps then skip oneDNN's matmul).
    bool gemv = false;
    PackedBf16Layout gemvLayout;
    // The same blocks in 12 bits a weight (then `owned` is freed and `weights` empty).
    std::shared_ptr<const CompactBf16> compact;
    std::vector<float> weightScale;  // int8: per output channel
    std::map<std::tuple<int, bool, bool>, dnnl::matmul> byShape;
  };
  dnnl::matmul& primitive(Chunk& c, int M, bool accumulate, bool bf16Out);
  void pack();
  void runUnpacked(const void* x, bool xBf16, int M, void* y, bool yBf16, bool accumulate, Scratch& scratch);
  // sources_ with every f16 or 4-bit source widened to floats (into widened_), for oneDNN's fp32 GEMM.
  std::vector<ColumnSource> floatSources();

  int K_, N_;
  LinearOptions options_;
  std::vector<ColumnSource> sources_;
  std::vector<float> widened_;
  std::vector<ColumnSource> widenedSources_;
  std::vector<Chunk> chunks_;
  // Unpacked fp32 matmuls per source (lazy mode), by (M, accumulate).
  std::vector<std::map<std::pair<int, bool>, dnnl::matmul>> unpacked_;
  std::vector<float> bias_;
  size_t packedBytes_ = 0;
  double lazyPackMs_ = 0;
  std::string impl_;
};

}  // namespace flexhelm
