// Decode attention alone (one query row per head over a bf16 KV cache growing in place), two builds of attention.cc
// in one process: `base` (a git revision's sources, compiled into namespace flexbase) and `cur` (this checkout's),
// called in turn, then the stream bandwidth read of the same bytes, so host noise hits all three alike. Compiled and
// run by decode-attention.mjs. Prints one JSON line per shape.
//   decode-attention B P H KVH D repeats rounds
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace flexbase {
void runDecode(int B, int P, int H, int KVH, int D, size_t cap, const float* q, void* k, void* v, const float* mask, float* out, uint16_t* out16);
}
namespace flexhelm {
void runDecode(int B, int P, int H, int KVH, int D, size_t cap, const float* q, void* k, void* v, const float* mask, float* out, uint16_t* out16);
uint64_t streamRead(const void* data, size_t n);
}

namespace {
void* zeroed(size_t n) {
  void* p = nullptr;
  if (posix_memalign(&p, 64, std::max<size_t>(n, 64)) != 0) std::abort();
  std::memset(p, 0, n);
  return p;
}
double msSince(std::chrono::steady_clock::time_point t0) { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(); }
double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: decode-attention B P H KVH D repeats rounds\n");
    return 2;
  }
  const int B = std::atoi(argv[1]), P = std::atoi(argv[2]), H = std::atoi(argv[3]), KVH = std::atoi(argv[4]), D = std::atoi(argv[5]);
  const int repeats = std::atoi(argv[6]), rounds = std::atoi(argv[7]);
  // Four caches: base reads copies 0 and 2, this build 1 and 3, in turn, so that each call's cache was last read four
  // calls before (three other caches of the same size in between: out of the last-level cache at batch 8), as the
  // decode steps of different layers are; neither build reads what the other just brought in.
  constexpr int kCopies = 4;
  const size_t cap = static_cast<size_t>(P) + 64, kvN = static_cast<size_t>(B) * KVH * cap * D;
  std::vector<uint16_t*> K(kCopies), V(kCopies);
  for (int c = 0; c < kCopies; c++) {
    K[c] = static_cast<uint16_t*>(zeroed(2 * kvN));
    V[c] = static_cast<uint16_t*>(zeroed(2 * kvN));
    // bf16 bits of values in [-0.5, 0.5) (sign, exponent 0x3e/0x3f…): what a cache holds, not denormals or zeros.
    for (size_t i = 0; i < kvN; i++) {
      K[c][i] = static_cast<uint16_t>(0x3c00 + (i * 7919) % 0x300 + ((i * 31) % 2 ? 0x8000 : 0));
      V[c][i] = static_cast<uint16_t>(0x3c00 + (i * 104729) % 0x300 + ((i * 17) % 2 ? 0x8000 : 0));
    }
  }
  const size_t qStride = static_cast<size_t>(H + 2 * KVH) * D;
  auto* q = static_cast<float*>(zeroed(sizeof(float) * B * qStride));
  for (size_t i = 0; i < B * qStride; i++) q[i] = static_cast<float>((i * 31) % 97) / 97.f - 0.5f;
  auto* mask = static_cast<float*>(zeroed(sizeof(float) * B * (P + 1)));
  auto* out = static_cast<float*>(zeroed(sizeof(float) * B * H * D));
  std::vector<uint16_t> baseOut(static_cast<size_t>(B) * H * D), curOut(baseOut.size());
  const size_t streamBytes = size_t{512} << 20;
  void* big = zeroed(streamBytes);
  // Bytes one call reads: the past and new keys and values of every (batch, kv head), as stored.
  const double bytes = 2.0 * 2 * B * KVH * (P + 1) * D;
  std::vector<double> base, cur, stream;
  for (int r = 0; r < rounds; r++) {
    for (int i = 0; i < repeats; i++) {
      const int c = (2 * i) % kCopies;
      auto t0 = std::chrono::steady_clock::now();
      flexbase::runDecode(B, P, H, KVH, D, cap, q, K[c], V[c], mask, out, baseOut.data());
      base.push_back(msSince(t0));
      t0 = std::chrono::steady_clock::now();
      flexhelm::runDecode(B, P, H, KVH, D, cap, q, K[c + 1], V[c + 1], mask, out, curOut.data());
      cur.push_back(msSince(t0));
    }
    auto t0 = std::chrono::steady_clock::now();
    volatile uint64_t sink = flexhelm::streamRead(big, streamBytes);
    (void)sink;
    stream.push_back(msSince(t0) * bytes / static_cast<double>(streamBytes));
  }
  // Both builds once more on the same cache, to compare their outputs (bf16 bits) as floats.
  flexbase::runDecode(B, P, H, KVH, D, cap, q, K[0], V[0], mask, out, baseOut.data());
  flexhelm::runDecode(B, P, H, KVH, D, cap, q, K[0], V[0], mask, out, curOut.data());
  double maxDiff = 0, maxAbs = 0;
  for (size_t i = 0; i < curOut.size(); i++) {
    const uint32_t a = static_cast<uint32_t>(baseOut[i]) << 16, b = static_cast<uint32_t>(curOut[i]) << 16;
    float fa, fb;
    std::memcpy(&fa, &a, 4);
    std::memcpy(&fb, &b, 4);
    maxDiff = std::max(maxDiff, static_cast<double>(std::fabs(fa - fb)));
    maxAbs = std::max(maxAbs, static_cast<double>(std::fabs(fa)));
  }
  std::printf(
      "{\"batch\":%d,\"past\":%d,\"heads\":%d,\"kvHeads\":%d,\"headDim\":%d,\"bytes\":%.0f,\"base_ms\":{\"min\":%.4f,\"median\":%.4f},\"cur_ms\":{\"min\":%.4f,\"median\":%.4f},"
      "\"stream_equiv_ms\":{\"min\":%.4f,\"median\":%.4f},\"max_abs_diff\":%.3g,\"max_abs\":%.3g}\n",
      B, P, H, KVH, D, bytes, *std::min_element(base.begin(), base.end()), median(base), *std::min_element(cur.begin(), cur.end()), median(cur),
      *std::min_element(stream.begin(), stream.end()), median(stream), maxDiff, maxAbs);
  return 0;
}
