// Peak arithmetic rate of this CPU's fp32 FMA (vfmadd231ps) and bf16 dot product (vdpbf16ps), on 1 and on N threads,
// interleaved. Register-only loops: no memory traffic, so this is the ceiling a GEMM of each dtype can approach, and
// their ratio is the most a bf16 GEMM can gain over an fp32 one on this ISA. Built and run by isa-peak.mjs.
#include <immintrin.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

constexpr int kChains = 12;  // independent accumulators: covers latency × issue width of either instruction

// GFLOP of one call: iters × chains × lanes × (multiply + add).
__attribute__((target("avx512f"))) double runFp32(long iters) {
  __m512 acc[kChains];
  __m512 x = _mm512_set1_ps(1.0001f), y = _mm512_set1_ps(0.9999f);
  for (int i = 0; i < kChains; i++) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  for (long n = 0; n < iters; n++) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; i++) acc[i] = _mm512_fmadd_ps(x, y, acc[i]);
    __asm__ volatile("" : "+v"(x));  // keeps the compiler from folding the loop
  }
  float sink = 0;
  for (int i = 0; i < kChains; i++) sink += _mm512_reduce_add_ps(acc[i]);
  return sink;
}

// vdpbf16ps: 32 bf16 products summed pairwise into 16 fp32 lanes; counted as 32 multiplies + 32 adds.
__attribute__((target("avx512f,avx512bf16"))) double runBf16(long iters) {
  __m512 acc[kChains];
  __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3f80);
  for (int i = 0; i < kChains; i++) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  for (long n = 0; n < iters; n++) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; i++) acc[i] = _mm512_dpbf16_ps(acc[i], x, y);
    __asm__ volatile("" : "+v"(x));
  }
  float sink = 0;
  for (int i = 0; i < kChains; i++) sink += _mm512_reduce_add_ps(acc[i]);
  return sink;
}

// GFLOP/s of `fn` run on `threads` threads at once, each `iters` iterations.
double rate(double (*fn)(long), long iters, int threads, double flopPerIter) {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  std::vector<double> sinks(threads);
  for (int t = 0; t < threads; t++) pool.emplace_back([&, t] { sinks[t] = fn(iters); });
  for (auto& th : pool) th.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (sinks[0] == 1234.5) std::puts("");
  return iters * flopPerIter * threads / s / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  long iters = argc > 3 ? std::atol(argv[3]) : 50000000;
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bf16")) {
    std::printf("{\"error\":\"this CPU lacks AVX-512 F or BF16\"}\n");
    return 0;
  }
  // One JSON line per round: fp32 then bf16, on 1 thread and on `threads`.
  for (int r = 0; r < rounds; r++) {
    double f1 = rate(runFp32, iters, 1, kChains * 16 * 2), b1 = rate(runBf16, iters, 1, kChains * 32 * 2);
    double fn = rate(runFp32, iters, threads, kChains * 16 * 2), bn = rate(runBf16, iters, threads, kChains * 32 * 2);
    std::printf("{\"round\":%d,\"fp32_1t\":%.1f,\"bf16_1t\":%.1f,\"fp32_nt\":%.1f,\"bf16_nt\":%.1f,\"threads\":%d}\n", r, f1, b1, fn, bn, threads);
  }
}
