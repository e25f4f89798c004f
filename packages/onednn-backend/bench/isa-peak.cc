// Peak arithmetic rate of this CPU's fp32 FMA (vfmadd231ps), bf16 dot product (vdpbf16ps) and, where the CPU has
// AVX-512 VNNI, int8 dot product (vpdpbusd: what the Q8_0 / Q4_0 GEMMs run on), on 1 and on N threads,
// interleaved. Register-only loops: no memory traffic, so this is the ceiling a GEMM of each dtype can approach, and
// their ratio is the most a bf16 GEMM can gain over an fp32 one on this ISA. On AMX hosts also the tile unit's rate:
// tdpbf16ps (16×16 outputs, k 32: what the quantized prompt GEMM runs on), tdpbssd with k 64 (a full tile row of
// int8) and with k 32 (ggml's Q8_0 / Q4_0 block: an integer GEMM must rescale every 32 k, so this is the most AMX-INT8
// can do on those blocks). Built and run by isa-peak.mjs.
#include "../native/gemm/amx-gemm.h"

#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

constexpr int kChains = 12;  // independent accumulators: covers latency × issue width of either instruction

// One instruction's chains: K gives the accumulator and operand types, their start values, one step and the sum.
// run<K> is built for every ISA named here but only called where the CPU has K's; it emits no instruction of its own.
#define ISA_PEAK_TARGETS __attribute__((target("avx512f,avx512bf16,avx512vnni")))

// vfmadd231ps: 16 lanes of multiply + add.
struct Fp32 {
  using Acc = __m512;
  using In = __m512;
  ISA_PEAK_TARGETS static Acc start(int i) { return _mm512_set1_ps(static_cast<float>(i)); }
  ISA_PEAK_TARGETS static In x() { return _mm512_set1_ps(1.0001f); }
  ISA_PEAK_TARGETS static In y() { return _mm512_set1_ps(0.9999f); }
  ISA_PEAK_TARGETS static Acc step(Acc a, In x, In y) { return _mm512_fmadd_ps(x, y, a); }
  ISA_PEAK_TARGETS static double sum(Acc a) { return _mm512_reduce_add_ps(a); }
};

// vdpbf16ps: 32 bf16 products summed pairwise into 16 fp32 lanes; counted as 32 multiplies + 32 adds.
struct Bf16 {
  using Acc = __m512;
  using In = __m512bh;
  ISA_PEAK_TARGETS static Acc start(int i) { return _mm512_set1_ps(static_cast<float>(i)); }
  ISA_PEAK_TARGETS static In x() { return (__m512bh)_mm512_set1_epi16(0x3f80); }
  ISA_PEAK_TARGETS static In y() { return (__m512bh)_mm512_set1_epi16(0x3f80); }
  ISA_PEAK_TARGETS static Acc step(Acc a, In x, In y) { return _mm512_dpbf16_ps(a, x, y); }
  ISA_PEAK_TARGETS static double sum(Acc a) { return _mm512_reduce_add_ps(a); }
};

// vpdpbusd: 64 u8 × s8 products summed by fours into 16 int32 lanes; counted as 64 multiplies + 64 adds.
struct Int8 {
  using Acc = __m512i;
  using In = __m512i;
  ISA_PEAK_TARGETS static Acc start(int i) { return _mm512_set1_epi32(i); }
  ISA_PEAK_TARGETS static In x() { return _mm512_set1_epi8(3); }
  ISA_PEAK_TARGETS static In y() { return _mm512_set1_epi8(5); }
  ISA_PEAK_TARGETS static Acc step(Acc a, In x, In y) { return _mm512_dpbusd_epi32(a, x, y); }
  ISA_PEAK_TARGETS static double sum(Acc a) { return _mm512_reduce_add_epi32(a); }
};

// `iters` rounds of kChains independent steps; the sum only keeps the accumulators alive.
template <typename K>
ISA_PEAK_TARGETS double run(long iters) {
  typename K::Acc acc[kChains];
  typename K::In x = K::x(), y = K::y();
  for (int i = 0; i < kChains; i++) acc[i] = K::start(i);
  for (long n = 0; n < iters; n++) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; i++) acc[i] = K::step(acc[i], x, y);
    __asm__ volatile("" : "+v"(x));  // keeps the compiler from folding the loop
  }
  double sink = 0;
  for (int i = 0; i < kChains; i++) sink += K::sum(acc[i]);
  return sink;
}

// Zeros the A and B tiles are loaded from once.
alignas(64) const uint8_t kTileData[1024] = {};

// AMX: four independent C tiles (0–3) fed by two A (4–5) and two B (6–7) tiles, as a 2×2 GEMM micro-kernel, without
// loads. Kind 0: tdpbf16ps; 1: tdpbssd. ABytes: an A row's bytes (64, or 32 for k 32; B then has ABytes / 4 rows).
template <int Kind, int ABytes>
__attribute__((target("amx-tile,amx-bf16,amx-int8"))) double amxRun(long iters) {
  flexhelm::AmxTileConfig cfg;
  for (int i = 0; i < 8; i++) {
    cfg.rows[i] = 16;
    cfg.colsb[i] = 64;
  }
  cfg.colsb[4] = cfg.colsb[5] = ABytes;
  cfg.rows[6] = cfg.rows[7] = ABytes / 4;
  __asm__ volatile("" : : "r"(&cfg) : "memory");
  _tile_loadconfig(&cfg);
  // Tile numbers are immediates: one load each.
  _tile_loadd(4, kTileData, 64);
  _tile_loadd(5, kTileData, 64);
  _tile_loadd(6, kTileData, 64);
  _tile_loadd(7, kTileData, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (long n = 0; n < iters; n++) {
    if (Kind == 0) {
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    } else {
      _tile_dpbssd(0, 4, 6);
      _tile_dpbssd(1, 4, 7);
      _tile_dpbssd(2, 5, 6);
      _tile_dpbssd(3, 5, 7);
    }
  }
  alignas(64) int32_t out[256];
  _tile_stored(0, out, 64);
  _tile_release();
  return out[0];
}

bool amxUsable() {
  unsigned a, b, c, d;
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
  const bool tiles = (d & (1u << 22)) && (d & (1u << 24)) && (d & (1u << 25));  // AMX-BF16, AMX-TILE, AMX-INT8
  // Linux gives a process the tile state only when it asks (ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA).
  return tiles && syscall(SYS_arch_prctl, 0x1023, 18) == 0;
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
    double f1 = rate(run<Fp32>, iters, 1, kChains * 16 * 2), b1 = rate(run<Bf16>, iters, 1, kChains * 32 * 2);
    double fn = rate(run<Fp32>, iters, threads, kChains * 16 * 2), bn = rate(run<Bf16>, iters, threads, kChains * 32 * 2);
    const bool vnni = __builtin_cpu_supports("avx512vnni");
    double i1 = vnni ? rate(run<Int8>, iters, 1, kChains * 64 * 2) : 0, in = vnni ? rate(run<Int8>, iters, threads, kChains * 64 * 2) : 0;
    // Per iteration 4 tile products of 16×16 outputs, k 32 or 64: 2·256·k operations each.
    const bool amx = amxUsable();
    const long tileIters = iters / 40;
    double abf = amx ? rate(amxRun<0, 64>, tileIters, threads, 4 * 2 * 256 * 32) : 0;
    double a64 = amx ? rate(amxRun<1, 64>, tileIters, threads, 4 * 2 * 256 * 64) : 0;
    double a32 = amx ? rate(amxRun<1, 32>, tileIters, threads, 4 * 2 * 256 * 32) : 0;
    std::printf("{\"round\":%d,\"fp32_1t\":%.1f,\"bf16_1t\":%.1f,\"fp32_nt\":%.1f,\"bf16_nt\":%.1f,\"int8_1t\":%.1f,\"int8_nt\":%.1f,\"amx_bf16_nt\":%.1f,\"amx_int8_k64_nt\":%.1f,\"amx_int8_k32_nt\":%.1f,\"threads\":%d}\n", r, f1, b1, fn, bn, i1, in, abf, a64, a32, threads);
  }
}
