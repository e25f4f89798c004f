// Kernel-only micro-bench of the few-row decode GEMMs on f16 [K, N] weights (a streamed layer's decode step):
// skinnyGemmF16 (fp32 sums, the fp32 layers' kernel) against skinnyGemmBf16 (vdpbf16ps, the bf16 layers' kernel), in
// GB/s of f16 weights read, on every OpenMP thread. Weights rotate through enough copies to exceed the L3 cache, so
// every call reads from memory as a streamed layer does. Also checks that skinnyGemmBf16 equals skinnyGemm on the
// bf16-rounded weights bit for bit. Built and run by bench/skinny-kernel.mjs:
//   g++ -O3 -std=c++17 -fopenmp -Inative bench/skinny-kernel.cc native/kernels.cc -o /tmp/skinny-kernel
//   /tmp/skinny-kernel K N M repeats   → one JSON line
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

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: skinny-kernel K N M repeats\n");
    return 2;
  }
  const int K = std::atoi(argv[1]), N = std::atoi(argv[2]), M = std::atoi(argv[3]), repeats = std::atoi(argv[4]);
  if (K <= 0 || N <= 0 || M < 1 || M > kSkinnyRows || repeats < 1) {
    std::fprintf(stderr, "K, N > 0, 1 <= M <= %d, repeats >= 1\n", kSkinnyRows);
    return 2;
  }
  const size_t count = static_cast<size_t>(K) * N;
  // Copies enough for ≥ 128 MiB of f16 (4× this host's L3).
  const int copies = static_cast<int>(std::max<size_t>(2, (size_t{128} << 20) / (2 * count)));
  std::vector<std::vector<uint16_t>> w(copies, std::vector<uint16_t>(count));
  for (int c = 0; c < copies; c++)
    for (size_t i = 0; i < count; i++) w[c][i] = f16Of(0.5f * std::sin(0.001f * static_cast<float>(i) + c));
  std::vector<uint16_t> x16(static_cast<size_t>(M) * K);
  std::vector<float> x32(x16.size());
  for (size_t i = 0; i < x16.size(); i++) {
    x32[i] = bf16Round(std::cos(0.37f * static_cast<float>(i)));
    uint32_t u;
    std::memcpy(&u, &x32[i], 4);
    x16[i] = static_cast<uint16_t>(u >> 16);
  }
  std::vector<float> y(static_cast<size_t>(M) * N), ref(y.size());

  // Bit-exactness against skinnyGemm on the bf16-rounded weights (first copy).
  std::vector<float> wr(count);
  std::vector<float> wide(count);
  fromF16(w[0].data(), wide.data(), count);
  for (size_t i = 0; i < count; i++) wr[i] = bf16Round(wide[i]);
  bool exact = false;
  if (skinnyGemm(x32.data(), M, K, wr.data(), N, N, nullptr, false, false, ref.data(), nullptr, N)) {
    skinnyGemmBf16(x16.data(), M, K, w[0].data(), N, N, nullptr, false, false, y.data(), nullptr, N);
    exact = std::memcmp(y.data(), ref.data(), sizeof(float) * y.size()) == 0;
  }

  auto time = [&](auto&& fn) {
    std::vector<double> gbs;
    for (int r = 0; r < repeats; r++) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int c = 0; c < copies; c++) fn(w[c].data());
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      gbs.push_back(2.0 * count * copies / s / 1e9);
    }
    return median(gbs);
  };
  const double f16 = time([&](const uint16_t* wc) { skinnyGemmF16(x32.data(), M, K, wc, N, N, nullptr, false, false, y.data(), nullptr, N); });
  const double bf16 = time([&](const uint16_t* wc) { skinnyGemmBf16(x16.data(), M, K, wc, N, N, nullptr, false, false, y.data(), nullptr, N); });
  const double stream = time([&](const uint16_t* wc) { (void)streamRead(wc, 2 * count); });
  std::printf("{\"K\":%d,\"N\":%d,\"M\":%d,\"threads\":%d,\"streamGBs\":%.2f,\"f16Fp32SumsGBs\":%.2f,\"f16Bf16DotGBs\":%.2f,\"bf16ExactVsRounded\":%s,\"bf16Vectorised\":%s}\n", K, N, M,
              omp_get_max_threads(), stream, f16, bf16, exact ? "true" : "false", skinnyGemmBf16Vectorised() ? "true" : "false");
  return 0;
}
