// Kernel-only micro-bench of the few-row decode GEMMs on f16 [K, N] weights (a streamed layer's decode step):
// skinnyGemmF16 (fp32 sums, the fp32 layers' kernel) against skinnyGemmBf16 (vdpbf16ps, the bf16 layers' kernel), in
// GB/s of f16 weights read, on every OpenMP thread. Weights rotate through enough copies to exceed the L3 cache, so
// every call reads from memory as a streamed layer does. Also checks that skinnyGemmBf16 equals skinnyGemm on the
// bf16-rounded weights bit for bit. Built and run by bench/skinny-kernel.mjs:
//   g++ -O3 -std=c++17 -fopenmp -Inative bench/skinny-kernel.cc native/kernels.cc -o /tmp/skinny-kernel
//   /tmp/skinny-kernel rounds repeats 2048x8192,8192x2048 1,8   → one JSON line per round, shape and M
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels.h"

using namespace flexhelm;

namespace {
uint16_t f16Of(float f) {
  // Normal range only (the values below are in [-0.5, 0.5] and not tiny): truncation to 10 mantissa bits is enough here.
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) < 0x38800000u) return static_cast<uint16_t>((u >> 16) & 0x8000u);
  return static_cast<uint16_t>(((u >> 16) & 0x8000u) | ((((u >> 23) & 0xffu) - 112) << 10) | ((u >> 13) & 0x3ffu));
}
float bf16Round(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  std::memcpy(&f, &u, 4);
  return f;
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

// One JSON line per (round, shape, M): the stream rate and both kernels' rates, the three measured back to back.
int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: skinny-kernel rounds repeats KxN[,KxN…] M[,M…] [copies]\n");
    return 2;
  }
  const int rounds = std::atoi(argv[1]), repeats = std::atoi(argv[2]);
  std::vector<std::pair<int, int>> shapes;
  for (char* tok = std::strtok(argv[3], ","); tok; tok = std::strtok(nullptr, ",")) {
    int K = 0, N = 0;
    if (std::sscanf(tok, "%dx%d", &K, &N) != 2 || K <= 0 || N <= 0) {
      std::fprintf(stderr, "shape '%s' is not KxN with K, N > 0\n", tok);
      return 2;
    }
    shapes.emplace_back(K, N);
  }
  std::vector<int> rows;
  for (char* tok = std::strtok(argv[4], ","); tok; tok = std::strtok(nullptr, ",")) {
    const int M = std::atoi(tok);
    if (M < 1 || M > kSkinnyBf16Rows) {
      std::fprintf(stderr, "rows must be 1 to %d, got '%s'\n", kSkinnyBf16Rows, tok);
      return 2;
    }
    rows.push_back(M);
  }
  if (rounds < 1 || repeats < 1) {
    std::fprintf(stderr, "rounds and repeats must be >= 1\n");
    return 2;
  }
  size_t count = 0;
  for (auto [K, N] : shapes) count = std::max(count, static_cast<size_t>(K) * N);
  // Copies enough for ≥ 128 MiB of f16 (4× this host's L3) and at least 4, filled once for every shape.
  // A 5th argument sets the copies instead (1: the weights stay in cache, the kernels' arithmetic bound).
  const int copies = argc > 5 ? std::max(1, std::atoi(argv[5])) : static_cast<int>(std::max<size_t>(4, (size_t{128} << 20) / (2 * count)));
  std::vector<std::vector<uint16_t>> w(copies, std::vector<uint16_t>(count));
#pragma omp parallel for schedule(static)
  for (int c = 0; c < copies; c++)
    for (size_t i = 0; i < count; i++) w[c][i] = f16Of(0.5f * std::sin(0.001f * static_cast<float>(i % 100003) + c));
  for (int round = 0; round < rounds; round++) {
    for (auto [K, N] : shapes) {
      const size_t n = static_cast<size_t>(K) * N;
      for (int M : rows) {
        std::vector<uint16_t> x16(static_cast<size_t>(M) * K);
        std::vector<float> x32(x16.size());
        for (size_t i = 0; i < x16.size(); i++) {
          x32[i] = bf16Round(std::cos(0.37f * static_cast<float>(i)));
          uint32_t u;
          std::memcpy(&u, &x32[i], 4);
          x16[i] = static_cast<uint16_t>(u >> 16);
        }
        std::vector<float> y(static_cast<size_t>(M) * N), ref(y.size());
        // Bit-exactness against skinnyGemm on the bf16-rounded weights (first copy; fp32 kernel rows only).
        bool exact = false;
        if (round == 0 && M <= kSkinnyRows) {
          std::vector<float> wr(n);
          fromF16(w[0].data(), wr.data(), n);
          for (float& v : wr) v = bf16Round(v);
          if (skinnyGemm(x32.data(), M, K, wr.data(), N, N, nullptr, false, false, ref.data(), nullptr, N)) {
            skinnyGemmBf16(x16.data(), M, K, w[0].data(), N, N, nullptr, false, false, y.data(), nullptr, N);
            exact = std::memcmp(y.data(), ref.data(), sizeof(float) * y.size()) == 0;
          }
        }
        // Calls interleaved one by one (stream, fp32 sums, bf16 products, …) so the host's other load hits all three
        // alike, each on the next copy: a copy comes back after the other copies (≥ 96 MiB) were read. Median and best
        // of the per-call rates.
        const int kernels = M > kSkinnyRows ? 2 : 3;
        std::vector<double> gbs[3];
        for (int i = 0; i < repeats * copies * kernels; i++) {
          const int kernel = i % kernels;
          const uint16_t* wc = w[i % copies].data();
          const auto t0 = std::chrono::steady_clock::now();
          if (kernel == 0) (void)streamRead(wc, 2 * n);
          else if (kernel == 1) skinnyGemmBf16(x16.data(), M, K, wc, N, N, nullptr, false, false, y.data(), nullptr, N);
          else skinnyGemmF16(x32.data(), M, K, wc, N, N, nullptr, false, false, y.data(), nullptr, N);
          gbs[kernel].push_back(2.0 * n / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1e9);
        }
        auto best = [](const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); };
        auto mid = [](const std::vector<double>& v) { return v.empty() ? 0.0 : median(v); };
        std::printf("{\"round\":%d,\"K\":%d,\"N\":%d,\"M\":%d,\"threads\":%d,\"calls\":%d,\"streamGBs\":%.2f,\"fp32SumsGBs\":%.2f,\"bf16DotGBs\":%.2f,\"streamBestGBs\":%.2f,\"fp32SumsBestGBs\":%.2f,\"bf16DotBestGBs\":%.2f,\"bf16Exact\":%s,\"bf16Vectorised\":%s}\n", round, K, N, M,
                    omp_get_max_threads(), repeats * copies, mid(gbs[0]), mid(gbs[2]), mid(gbs[1]), best(gbs[0]), best(gbs[2]), best(gbs[1]), round > 0 || M > kSkinnyRows ? "null" : exact ? "true" : "false", skinnyGemmBf16Vectorised() ? "true" : "false");
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
