#include "packed-linear.h"

#include "../cpu-features.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>

#include <sys/mman.h>

#include "../kernels.h"

namespace flexhelm {

using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

Dtype parseDtype(const std::string& name) {
  if (name == "fp32" || name == "f32") return Dtype::f32;
  if (name == "bf16") return Dtype::bf16;
  if (name == "int8") return Dtype::int8;
  throw std::invalid_argument("dtype must be 'fp32', 'bf16' or 'int8', got '" + name + "'");
}

const char* dtypeName(Dtype d) { return d == Dtype::f32 ? "fp32" : d == Dtype::bf16 ? "bf16" : "int8"; }

void* Scratch::get(size_t slot, size_t bytes) {
  if (blocks_.size() <= slot) blocks_.resize(slot + 1);
  Block& b = blocks_[slot];
  if (b.bytes < bytes) {
    std::free(b.data);
    size_t rounded = (bytes + 63) / 64 * 64;
    b.data = std::aligned_alloc(64, rounded);
    if (!b.data) throw std::bad_alloc();
    b.bytes = rounded;
  }
  return b.data;
}

Scratch::~Scratch() {
  for (Block& b : blocks_) std::free(b.data);
}

dnnl::engine& cpuEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& cpuStream() {
  static dnnl::stream stream(cpuEngine());
  return stream;
}

namespace {
// Packed weights of at least this many bytes start on a 2 MiB boundary and are marked for transparent huge pages
// (madvise; the hosts here run THP in madvise mode): decode steps stream them once per step, and with 4 KiB pages the
// hardware prefetchers stop at every page boundary. FLEXHELM_HUGE_PAGES=0 keeps 4 KiB pages (benchmarks compare).
constexpr size_t kHugePageFrom = 4u << 20;
constexpr size_t kHugePage = 2u << 20;

bool hugePages() {
  static const bool on = !envSwitchedOff("FLEXHELM_HUGE_PAGES");
  return on;
}
}  // namespace

void* allocPacked(size_t bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  if (bytes < kHugePageFrom || !hugePages()) {
    void* p = std::aligned_alloc(64, rounded);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void* p = nullptr;
  if (posix_memalign(&p, kHugePage, rounded) != 0) throw std::bad_alloc();
  madvise(p, rounded, MADV_HUGEPAGE);
  return p;
}

namespace {

// Free packed-weight buffers by size, for LinearOptions::recycle. Bounded: past kMaxBytes a returned buffer is freed.
class RecycledBlocks {
 public:
  void* take(size_t bytes) {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      auto it = free_.find(bytes);
      if (it != free_.end()) {
        void* p = it->second;
        free_.erase(it);
        held_ -= bytes;
        return p;
      }
    }
    return allocPacked(bytes);
  }
  // May run on the JS thread (a layer released there): hence the lock.
  void give(void* p, size_t bytes) {
    std::lock_guard<std::mutex> guard(mutex_);
    if (held_ + bytes > kMaxBytes) {
      std::free(p);
      return;
    }
    free_.emplace(bytes, p);
    held_ += bytes;
  }

 private:
  static constexpr size_t kMaxBytes = size_t{1} << 30;
  std::mutex mutex_;
  std::multimap<size_t, void*> free_;
  size_t held_ = 0;
};

RecycledBlocks& recycledBlocks() {
  static RecycledBlocks* blocks = new RecycledBlocks();  // never destroyed: layers may be freed during teardown
  return *blocks;
}

dt srcType(Dtype d) { return d == Dtype::f32 ? dt::f32 : d == Dtype::bf16 ? dt::bf16 : dt::s8; }
size_t eltBytes(Dtype d) { return d == Dtype::f32 ? 4 : d == Dtype::bf16 ? 2 : 1; }
// The M the packed weight layout is chosen for; every other M reuses that layout.
constexpr int kLayoutM = 256;
}  // namespace

PackedLinear::PackedLinear(const float* weight, const float* bias, int K, int N, const LinearOptions& options)
    : K_(K), N_(N), options_(options) {
  if (K <= 0 || N <= 0) throw std::invalid_argument("linear layer dimensions must be positive");
  if (bias) bias_.assign(bias, bias + N);
  sources_.push_back({weight, options.transposed ? static_cast<size_t>(N) : static_cast<size_t>(K), N});
  if (options_.packAtRows <= 0) pack();
}

PackedLinear::PackedLinear(const std::vector<ColumnSource>& sources, const float* bias, int K, const LinearOptions& options)
    : K_(K), N_(0), options_(options), sources_(sources) {
  if (!options.transposed) throw std::invalid_argument("column sources take weights in the [in, out] layout (transposed)");
  if (K <= 0 || sources.empty()) throw std::invalid_argument("linear layer dimensions must be positive");
  for (const ColumnSource& s : sources) {
    if (s.n <= 0) throw std::invalid_argument("linear layer dimensions must be positive");
    if ((s.data != nullptr) + (s.f16 != nullptr) + s.q4.present() != 1) throw std::invalid_argument("a column source holds float, f16 or 4-bit weights (one of them)");
    if (s.q4.present() && (s.q4.groupSize < 2 || s.q4.groupSize % 2 != 0 || s.ld != static_cast<size_t>(s.n))) throw std::invalid_argument("a 4-bit column source is a whole [K, n] tensor with an even group size");
    N_ += s.n;
  }
  if (bias) bias_.assign(bias, bias + N_);
  if (options_.packAtRows <= 0) pack();
}

std::vector<ColumnSource> PackedLinear::floatSources() {
  size_t halves = 0;
  for (const ColumnSource& s : sources_)
    if (s.widened()) halves += static_cast<size_t>(K_) * s.n;
  if (halves == 0) return sources_;
  if (!widenedSources_.empty()) return widenedSources_;
  widened_.resize(halves);
  std::vector<ColumnSource> out;
  size_t at = 0;
  for (const ColumnSource& s : sources_) {
    if (!s.widened()) {
      out.push_back(s);
      continue;
    }
    // Dense [K, n] rows (a source's ld may exceed n).
    float* dst = widened_.data() + at;
    if (s.q4.present()) group4Rows(s.q4, K_, s.n, 0, s.n, dst);
    else if (s.ld == static_cast<size_t>(s.n)) fromF16(s.f16, dst, static_cast<size_t>(K_) * s.n);
    else
      for (int k = 0; k < K_; k++) fromF16(s.f16 + k * s.ld, dst + static_cast<size_t>(k) * s.n, s.n);
    out.push_back({dst, static_cast<size_t>(s.n), s.n});
    at += static_cast<size_t>(K_) * s.n;
  }
  // Kept for the following runs of this shape (a lazily packed layer's mid-sized runs); dropped once packed.
  if (options_.packAtRows > 0) widenedSources_ = out;
  return out;
}

void PackedLinear::pack() {
  const int K = K_;
  const auto& options = options_;
  const size_t perColumn = static_cast<size_t>(K) * eltBytes(options.dtype);
  auto& engine = cpuEngine();
  auto& stream = cpuStream();
  int outOffset = 0;
  // Packing reads each source where it lies; an f16 source is widened (exactly) block by block first, so it packs to
  // what its fp32 copy would.
  for (const ColumnSource& source : sources_) {
    const int N = source.n;
    int cols = N;
    if (options.chunkBytes > 0 && perColumn * N > options.chunkBytes) {
      int maxCols = std::max<int>(64, static_cast<int>(options.chunkBytes / perColumn) / 64 * 64);
      int count = (N + maxCols - 1) / maxCols;
      cols = ((N + count - 1) / count + 63) / 64 * 64;
    }
    const size_t sourceLd = source.ld;
    for (int n0 = 0; n0 < N; n0 += cols) {
      Chunk c;
      c.n0 = outOffset + n0;
      c.n = std::min(cols, N - n0);
      // Element (k, n0 + j) of this block is data[k * ld + col0 + j].
      const float* data = source.data;
      size_t ld = sourceLd;
      int col0 = n0;
      if (source.widened()) {
        // Into memory reused across blocks and layers: fresh memory costs ~5 ms per MiB to touch on these VMs (a
        // whole-layer widening into fresh memory tripled the packing time).
        thread_local std::vector<float> wide;
        if (wide.size() < static_cast<size_t>(K) * c.n) wide.resize(static_cast<size_t>(K) * c.n);
        if (source.q4.present()) group4Rows(source.q4, K, N, n0, c.n, wide.data());
        else fromF16Rows(source.f16 + n0, source.ld, wide.data(), K, c.n);
        data = wide.data();
        ld = static_cast<size_t>(c.n);
        col0 = 0;
      }
      dnnl::primitive_attr attr;
      std::vector<int8_t> quantized;
      if (options.dtype == Dtype::int8) {
        // Per output channel: scale[n] = max|W[n, :]| / 127.
        c.weightScale.resize(c.n);
        quantized.resize(static_cast<size_t>(c.n) * K);
        auto q = [](float v, float s) { return static_cast<int8_t>(std::max(-127.f, std::min(127.f, std::nearbyint(v / s)))); };
        if (options.transposed) {
          // [K, N]: walk rows (contiguous) and keep one running maximum per output channel.
          std::vector<float> amax(c.n, 0.f);
          for (int k = 0; k < K; k++) {
            const float* row = data + static_cast<size_t>(k) * ld + col0;
            for (int j = 0; j < c.n; j++) amax[j] = std::max(amax[j], std::fabs(row[j]));
          }
          for (int j = 0; j < c.n; j++) c.weightScale[j] = amax[j] > 0.f ? amax[j] / 127.f : 1.f;
          for (int k = 0; k < K; k++) {
            const float* row = data + static_cast<size_t>(k) * ld + col0;
            int8_t* out = quantized.data() + static_cast<size_t>(k) * c.n;  // [K, n], row by row
            for (int j = 0; j < c.n; j++) out[j] = q(row[j], c.weightScale[j]);
          }
        } else {
          for (int j = 0; j < c.n; j++) {
            const float* row = data + static_cast<size_t>(col0 + j) * ld;
            float amax = 0.f;
            for (int k = 0; k < K; k++) amax = std::max(amax, std::fabs(row[k]));
            const float s = amax > 0.f ? amax / 127.f : 1.f;
            c.weightScale[j] = s;
            for (int k = 0; k < K; k++) quantized[static_cast<size_t>(j) * K + k] = q(row[k], s);
          }
        }
        attr.set_output_scales(1 << 1, c.weightScale);
      }
      dnnl::memory::desc src({kLayoutM, K}, srcType(options.dtype), dnnl::memory::format_tag::ab);
      dnnl::memory::desc wAny({K, c.n}, options.dtype == Dtype::int8 ? dt::s8 : srcType(options.dtype), dnnl::memory::format_tag::any);
      dnnl::memory::desc dst({kLayoutM, c.n}, dt::f32, dnnl::memory::format_tag::ab);
      auto pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wAny, dst), attr, engine);
      c.packedDesc = pd.weights_desc();
      if (options.dtype == Dtype::bf16) c.gemv = packedBf16Layout(c.packedDesc, c.gemvLayout);
      if (impl_.empty()) impl_ = pd.impl_info_str();
      // The weights as they are: [K, n] with K contiguous (W is [N, K]), or with n contiguous (W given as [K, N]; the
      // int8 copy of such a W is a dense [K, n]).
      const bool rowMajorKN = options.transposed && options.dtype != Dtype::int8;
      const dims strides = !options.transposed ? dims{1, static_cast<dnnl::memory::dim>(ld)} : options.dtype == Dtype::int8 ? dims{c.n, 1} : dims{static_cast<dnnl::memory::dim>(ld), 1};
      dnnl::memory::desc plain({K, c.n}, options.dtype == Dtype::int8 ? dt::s8 : dt::f32, strides);
      const float* first = rowMajorKN ? data + col0 : data + static_cast<size_t>(col0) * ld;
      void* plainData = options.dtype == Dtype::int8 ? static_cast<void*>(quantized.data()) : static_cast<void*>(const_cast<float*>(first));
      dnnl::memory plainMem(plain, engine, plainData);
      if (options.recycle) {
        c.recycled = recycledBlocks().take(c.packedDesc.get_size());
        c.weights = dnnl::memory(c.packedDesc, engine, c.recycled);
      } else {
        c.owned = allocPacked(c.packedDesc.get_size());
        c.weights = dnnl::memory(c.packedDesc, engine, c.owned);
      }
      dnnl::reorder(plainMem, c.weights).execute(stream, plainMem, c.weights);
      stream.wait();
      // Resident blocks only: streamed ones (recycled, or packed lazily by a prompt) are read once or twice per pack.
      // And only where decode steps run the packed-panel kernels (otherwise each step would widen them for oneDNN).
      if (options.compact && options.packedGemv && c.gemv && !options.recycle && options.packAtRows <= 0 && compactBf16Available())
        c.compact = makeCompactBf16(c.gemvLayout, static_cast<const uint16_t*>(c.owned), K, c.n, c.packedDesc.get_size());
      if (c.compact) {
        std::free(c.owned);
        c.owned = nullptr;
        c.weights = dnnl::memory();
      }
      packedBytes_ += c.compact ? c.compact->compactBytes() : c.packedDesc.get_size();
      if (!bias_.empty() && options.dtype != Dtype::int8) {
        c.bias = dnnl::memory({{1, c.n}, dt::f32, dnnl::memory::format_tag::ab}, engine, bias_.data() + c.n0);
      }
      chunks_.push_back(std::move(c));
    }
    outOffset += N;
  }
  // Packed: the source tensors are no longer read (the caller may let them go with the layer).
  if (options_.packAtRows > 0) unpacked_.clear();
  std::vector<float>().swap(widened_);
  widenedSources_.clear();
}

namespace {
// Rows from which a bf16 layer's f16 sources take the bf16 kernel (skinnyGemmBf16) instead of the fp32 one
// (bench/skinny-kernel.mjs, AMD EPYC, 2 threads, 2026-12-02 10:56): at 1–2 rows the fp32 one reads 10–50% faster, at
// 4–6 they are within a few percent (fp32 ahead), at 8 the bf16 one is 3–13% faster; past 8 rows only the bf16 one
// applies.
constexpr int kBf16SkinnyFromRows = 8;
// Rows up to which packed bf16 runs take packedGemvBf16: at 1, 2 and 4 rows it read the opt-1.3b layer shapes 1.0–1.5×
// faster than oneDNN's matmul, at 8 rows 0.7–1.15× (bench/packed-gemv.mjs, AMD EPYC family 25, 2026-12-02, noisy).
constexpr int kPackedGemvUpToRows = 4;
}  // namespace

// The lazy mode's small-M path: fp32 matmuls straight on each source's [K, n] rows (no reorder), bias and ReLU as
// post-ops like the packed path. Activations arriving or leaving as bf16 are widened/narrowed around it (M rows only).
void PackedLinear::runUnpacked(const void* x, bool xBf16, int M, void* y, bool yBf16, bool accumulate, Scratch& scratch) {
  auto& engine = cpuEngine();
  auto& stream = cpuStream();
  // Decode steps: each source's weights read once, in place, written straight into y's columns. f16 sources take the
  // few-row kernels (plain C++ without AVX-512): in a bf16 layer the bf16 one from kBf16SkinnyFromRows rows (bf16
  // products, as the packed layer computes), else the fp32 one; float sources take the fp32 one where it runs
  // vectorised, else oneDNN below.
  const bool bf16Kernel = options_.dtype == Dtype::bf16 && M >= kBf16SkinnyFromRows && M <= kSkinnyBf16Rows;
  // 4-bit sources take their own fp32 kernel (vectorised or plain) at up to kSkinnyRows rows.
  bool fits = options_.skinny;
  for (const ColumnSource& s : sources_) fits = fits && (s.q4.present() ? M <= kSkinnyRows : s.f16 ? bf16Kernel || M <= kSkinnyRows : M <= kSkinnyRows && skinnyGemmVectorised());
  const float* src = static_cast<const float*>(x);
  bool needFloat = !fits;
  for (const ColumnSource& s : sources_) needFloat = needFloat || !s.f16 || !bf16Kernel;
  if (xBf16 && needFloat) {
    auto* widened = static_cast<float*>(scratch.get(10, sizeof(float) * M * static_cast<size_t>(K_)));
    fromBf16(static_cast<const uint16_t*>(x), widened, static_cast<size_t>(M) * K_);
    src = widened;
  }
  if (fits) {
    // The bf16 kernel's activations: bf16 as given, or rounded to nearest even as the packed path rounds them.
    const uint16_t* src16 = nullptr;
    if (bf16Kernel) {
      if (xBf16) src16 = static_cast<const uint16_t*>(x);
      else {
        auto* rounded = static_cast<uint16_t*>(scratch.get(12, sizeof(uint16_t) * M * static_cast<size_t>(K_)));
        toBf16Serial(static_cast<const float*>(x), rounded, static_cast<size_t>(M) * K_);
        src16 = rounded;
      }
    }
    const float* bias = bias_.empty() ? nullptr : bias_.data();
    int at = 0;
    for (const ColumnSource& s : sources_) {
      float* y32 = yBf16 ? nullptr : static_cast<float*>(y) + at;
      uint16_t* y16 = yBf16 ? static_cast<uint16_t*>(y) + at : nullptr;
      const float* b = bias ? bias + at : nullptr;
      if (s.q4.present()) skinnyGemmGroup4(src, M, K_, s.q4, s.n, b, options_.relu, accumulate, y32, y16, N_);
      else if (s.f16 && bf16Kernel) skinnyGemmBf16(src16, M, K_, s.f16, s.ld, s.n, b, options_.relu, accumulate, y32, y16, N_);
      else if (s.f16) skinnyGemmF16(src, M, K_, s.f16, s.ld, s.n, b, options_.relu, accumulate, y32, y16, N_);
      else skinnyGemm(src, M, K_, s.data, s.ld, s.n, b, options_.relu, accumulate, y32, y16, N_);
      at += s.n;
    }
    return;
  }
  // f16 and 4-bit sources beyond the few-row kernels' rows: widened once, kept until the layer is packed or released.
  const std::vector<ColumnSource> sources = floatSources();
  if (unpacked_.size() != sources_.size()) unpacked_.assign(sources_.size(), {});
  // One source writing f32 straight into y needs no staging; otherwise each block goes through dense scratch.
  const bool direct = sources_.size() == 1 && !yBf16;
  dnnl::memory srcMem({{M, K_}, dt::f32, dnnl::memory::format_tag::ab}, engine, const_cast<float*>(src));
  int n0 = 0;
  for (size_t i = 0; i < sources.size(); i++) {
    const ColumnSource& s = sources[i];
    const int n = s.n;
    auto& cache = unpacked_[i];
    auto key = std::make_pair(M, accumulate);
    auto found = cache.find(key);
    dnnl::memory::desc wDesc({K_, n}, dt::f32, dims{static_cast<dnnl::memory::dim>(s.ld), 1});
    dnnl::memory::desc dDesc({M, n}, dt::f32, dnnl::memory::format_tag::ab);
    dnnl::memory::desc bDesc({1, n}, dt::f32, dnnl::memory::format_tag::ab);
    if (found == cache.end()) {
      dnnl::primitive_attr attr;
      dnnl::post_ops ops;
      if (accumulate) ops.append_sum(1.f);
      if (options_.relu) ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      attr.set_post_ops(ops);
      auto desc = bias_.empty() ? dnnl::matmul::desc(srcMem.get_desc(), wDesc, dDesc) : dnnl::matmul::desc(srcMem.get_desc(), wDesc, bDesc, dDesc);
      if (cache.size() >= 32) cache.clear();
      found = cache.emplace(key, dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, engine))).first;
    }
    float* dst = direct ? static_cast<float*>(y) : static_cast<float*>(scratch.get(11, sizeof(float) * M * static_cast<size_t>(n)));
    auto* y32 = static_cast<float*>(y);
    if (!direct && accumulate)
      for (int m = 0; m < M; m++) std::memcpy(dst + static_cast<size_t>(m) * n, y32 + static_cast<size_t>(m) * N_ + n0, sizeof(float) * n);
    dnnl::memory wMem(wDesc, engine, const_cast<float*>(s.data));
    dnnl::memory dMem(dDesc, engine, dst);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, srcMem}, {DNNL_ARG_WEIGHTS, wMem}, {DNNL_ARG_DST, dMem}};
    if (!bias_.empty()) args.emplace(DNNL_ARG_BIAS, dnnl::memory(bDesc, engine, bias_.data() + n0));
    found->second.execute(stream, args);
    stream.wait();
    if (!direct) {
      for (int m = 0; m < M; m++) {
        const float* row = dst + static_cast<size_t>(m) * n;
        if (yBf16) toBf16(row, static_cast<uint16_t*>(y) + static_cast<size_t>(m) * N_ + n0, n);
        else std::memcpy(y32 + static_cast<size_t>(m) * N_ + n0, row, sizeof(float) * n);
      }
    }
    n0 += n;
  }
}

int PackedLinear::compactChunks() const {
  int n = 0;
  for (const Chunk& c : chunks_) n += c.compact ? 1 : 0;
  return n;
}

PackedLinear::~PackedLinear() {
  for (Chunk& c : chunks_)
    if (c.recycled) recycledBlocks().give(c.recycled, c.packedDesc.get_size());
    else std::free(c.owned);
}

dnnl::matmul& PackedLinear::primitive(Chunk& c, int M, bool accumulate, bool bf16Out) {
  const bool fusedPostOps = options_.dtype != Dtype::int8;
  auto key = std::make_tuple(M, fusedPostOps && accumulate, bf16Out);
  auto found = c.byShape.find(key);
  if (found != c.byShape.end()) return found->second;
  dnnl::primitive_attr attr;
  dnnl::post_ops ops;
  if (fusedPostOps) {
    if (accumulate) ops.append_sum(1.f);
    if (options_.relu) ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(ops);
  } else {
    attr.set_output_scales(1 << 1, c.weightScale);
  }
  dnnl::memory::desc src({M, K_}, srcType(options_.dtype), dnnl::memory::format_tag::ab);
  dnnl::memory::desc dst({M, c.n}, bf16Out ? dt::bf16 : dt::f32, dnnl::memory::format_tag::ab);
  dnnl::matmul::desc desc = c.bias ? dnnl::matmul::desc(src, c.packedDesc, c.bias.get_desc(), dst) : dnnl::matmul::desc(src, c.packedDesc, dst);
  auto pd = dnnl::matmul::primitive_desc(desc, attr, cpuEngine());
  // Keep the cache small: a long decode sees few distinct M values, a benchmark sweep may see many.
  if (c.byShape.size() >= 32) c.byShape.clear();
  return c.byShape.emplace(key, dnnl::matmul(pd)).first->second;
}

void PackedLinear::run(const void* x, bool xBf16, int M, void* y, bool yBf16, bool accumulate, Scratch& scratch) {
  if (M <= 0) return;
  if ((xBf16 || yBf16) && options_.dtype != Dtype::bf16) throw std::invalid_argument("bf16 activations need a bf16 linear layer");
  if (yBf16 && accumulate) throw std::invalid_argument("a bf16 output cannot accumulate");
  if (!packed()) {
    if (M < options_.packAtRows) return runUnpacked(x, xBf16, M, y, yBf16, accumulate, scratch);
    const auto t0 = std::chrono::steady_clock::now();
    pack();
    lazyPackMs_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  auto& engine = cpuEngine();
  auto& stream = cpuStream();
  const size_t inCount = static_cast<size_t>(M) * K_;
  void* src = const_cast<void*>(x);
  float* actScale = nullptr;
  if (options_.dtype == Dtype::bf16 && !xBf16) {
    auto* converted = static_cast<uint16_t*>(scratch.get(0, inCount * 2));
    toBf16(static_cast<const float*>(x), converted, inCount);
    src = converted;
  } else if (options_.dtype == Dtype::int8) {
    auto* q = static_cast<int8_t*>(scratch.get(0, inCount));
    actScale = static_cast<float*>(scratch.get(1, sizeof(float) * M));
    quantizeRows(static_cast<const float*>(x), M, K_, options_.perTokenScale, q, actScale);
    src = q;
  }
  // Decode steps on bf16 blocks: one sequential pass down each packed panel (see packed-gemv.h) instead of oneDNN's
  // matmul, which reads the same bytes at 0.45–0.65 of the stream rate at these row counts.
  // Compact blocks are read by their own kernel up to kPackedGemvRows rows (widening them for oneDNN would write more
  // than the rows' arithmetic); packed ones up to kPackedGemvUpToRows.
  bool gemv = options_.packedGemv && options_.dtype == Dtype::bf16 && packedGemvAvailable();
  bool allCompact = gemv && M <= kPackedGemvRows;
  for (const Chunk& c : chunks_) allCompact = allCompact && c.compact;
  gemv = gemv && M <= kPackedGemvUpToRows;
  for (const Chunk& c : chunks_) gemv = gemv && c.gemv;
  if (gemv || allCompact) {
    for (Chunk& c : chunks_) {
      const float* b = bias_.empty() ? nullptr : bias_.data() + c.n0;
      float* y32 = yBf16 ? nullptr : static_cast<float*>(y) + c.n0;
      uint16_t* y16 = yBf16 ? static_cast<uint16_t*>(y) + c.n0 : nullptr;
      const auto* x16 = static_cast<const uint16_t*>(src);
      if (c.compact) compactGemvBf16(*c.compact, x16, K_, M, b, options_.relu, accumulate, y32, y16, N_);
      else packedGemvBf16(c.gemvLayout, static_cast<const uint16_t*>(c.weights.get_data_handle()), K_, c.n, x16, K_, M, b, options_.relu, accumulate, y32, y16, N_);
    }
    return;
  }
  const size_t outBytes = yBf16 ? 2 : 4;
  auto* out = static_cast<char*>(options_.dtype == Dtype::int8 ? scratch.get(2, sizeof(float) * M * N_) : y);
  dnnl::memory srcMem({{M, K_}, srcType(options_.dtype), dnnl::memory::format_tag::ab}, engine, src);
  // oneDNN 2.6 falls back to its reference kernel for a strided destination, so a column block of several rows is
  // computed into dense scratch and copied into place (one row needs no copy: its stride does not matter).
  const bool direct = chunks_.size() == 1 || M == 1;
  const bool fusedSum = accumulate && options_.dtype != Dtype::int8;
  const size_t rowBytes = outBytes * N_;
  for (Chunk& c : chunks_) {
    dnnl::matmul& mm = primitive(c, M, accumulate, yBf16);
    const size_t blockBytes = outBytes * c.n;
    char* dst = out + outBytes * c.n0;
    if (!direct) {
      dst = static_cast<char*>(scratch.get(6, blockBytes * M));
      if (fusedSum) {
#pragma omp parallel for schedule(static) if (static_cast<size_t>(M) * N_ >= (size_t{1} << 16))
        for (int m = 0; m < M; m++) std::memcpy(dst + blockBytes * m, out + rowBytes * m + outBytes * c.n0, blockBytes);
      }
    }
    dnnl::memory dstMem({{M, c.n}, yBf16 ? dt::bf16 : dt::f32, dnnl::memory::format_tag::ab}, engine, dst);
    dnnl::memory weights = c.weights;
    if (c.compact) {
      // The block widened back into scratch for this call (every block of a linear is ≤ chunkBytes).
      auto* wide = static_cast<uint16_t*>(scratch.get(16, c.packedDesc.get_size()));
      widenCompactBf16(*c.compact, wide);
      weights = dnnl::memory(c.packedDesc, engine, wide);
    }
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, srcMem}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dstMem}};
    if (c.bias) args.emplace(DNNL_ARG_BIAS, c.bias);
    mm.execute(stream, args);
    stream.wait();
    if (!direct) {
#pragma omp parallel for schedule(static) if (static_cast<size_t>(M) * N_ >= (size_t{1} << 16))
      for (int m = 0; m < M; m++) std::memcpy(out + rowBytes * m + outBytes * c.n0, dst + blockBytes * m, blockBytes);
    }
  }
  if (options_.dtype == Dtype::int8) {
    const bool relu = options_.relu;
    const float* b = bias_.empty() ? nullptr : bias_.data();
    const auto* o32 = reinterpret_cast<const float*>(out);
    auto* y32 = static_cast<float*>(y);
#pragma omp parallel for schedule(static) if (static_cast<size_t>(M) * N_ >= (size_t{1} << 16))
    for (int m = 0; m < M; m++) {
      const float s = actScale[m];
      const float* o = o32 + static_cast<size_t>(m) * N_;
      float* yr = y32 + static_cast<size_t>(m) * N_;
      for (int n = 0; n < N_; n++) {
        float v = o[n] * s;
        if (b) v += b[n];
        if (accumulate) v += yr[n];
        yr[n] = relu && v < 0.f ? 0.f : v;
      }
    }
  }
}

}  // namespace flexhelm
