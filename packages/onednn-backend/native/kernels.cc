#include "kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <omp.h>
#include <stdexcept>
#include <string>
#include <vector>

#include "bf16-bits.h"
#include "cpu-features.h"

namespace flexhelm {

namespace {
// Below this many elements a loop runs on the calling thread: waking the OpenMP team costs more than the work, and
// on a busy machine every parallel region risks waiting for a descheduled thread.
constexpr size_t kParallelMin = size_t{1} << 16;
}  // namespace

#define AVX512 __attribute__((target("avx512f")))

void writePresent(const AttentionShape& s, const float* past, const float* fresh, size_t freshStride, float* present) {
  const int B = s.batch, S = s.seq, H = s.kvHeadCount(), D = s.headDim, P = s.past;
  const size_t ld = s.tokenStride();
#pragma omp parallel for collapse(2) schedule(static) if (static_cast<size_t>(B) * H * (P + S) * D >= kParallelMin)
  for (int b = 0; b < B; b++) {
    for (int h = 0; h < H; h++) {
      float* dst = present + (static_cast<size_t>(b) * H + h) * ld * D;
      if (P > 0 && past) std::memcpy(dst, past + (static_cast<size_t>(b) * H + h) * P * D, sizeof(float) * P * D);
      for (int i = 0; fresh && i < S; i++)
        std::memcpy(dst + static_cast<size_t>(P + i) * D, fresh + (static_cast<size_t>(b) * S + i) * freshStride + static_cast<size_t>(h) * D, sizeof(float) * D);
    }
  }
}

namespace {
AVX512 void toBf16Vector(const float* x, uint16_t* y, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), bf16Bits16(_mm512_loadu_ps(x + i)));
  for (; i < n; i++) y[i] = bf16Bits(x[i]);
}
}  // namespace

void toBf16(const float* x, uint16_t* y, size_t n) {
  if (cpuAvx512()) {
    // Blocks of 4096 values: each thread converts whole vectors, the tail only at the very end.
    constexpr size_t kBlock = 4096;
    const long blocks = static_cast<long>((n + kBlock - 1) / kBlock);
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
    for (long j = 0; j < blocks; j++) {
      const size_t at = static_cast<size_t>(j) * kBlock;
      toBf16Vector(x + at, y + at, std::min(kBlock, n - at));
    }
    return;
  }
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (size_t i = 0; i < n; i++) y[i] = bf16Bits(x[i]);
}

void toBf16Serial(const float* x, uint16_t* y, size_t n) {
  if (cpuAvx512()) return toBf16Vector(x, y, n);
  for (size_t i = 0; i < n; i++) y[i] = bf16Bits(x[i]);
}

void fromBf16(const uint16_t* x, float* y, size_t n) {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (size_t i = 0; i < n; i++) {
    const uint32_t bits = static_cast<uint32_t>(x[i]) << 16;
    std::memcpy(y + i, &bits, sizeof bits);
  }
}

void quantizeRows(const float* x, int rows, int cols, bool perToken, int8_t* q, float* scale) {
  std::vector<float> amax(rows);
  const bool parallel = static_cast<size_t>(rows) * cols >= kParallelMin;
#pragma omp parallel for schedule(static) if (parallel)
  for (int r = 0; r < rows; r++) {
    float m = 0.f;
    const float* xr = x + static_cast<size_t>(r) * cols;
    for (int c = 0; c < cols; c++) m = std::max(m, std::fabs(xr[c]));
    amax[r] = m;
  }
  if (!perToken) {
    float m = 0.f;
    for (float a : amax) m = std::max(m, a);
    std::fill(amax.begin(), amax.end(), m);
  }
#pragma omp parallel for schedule(static) if (parallel)
  for (int r = 0; r < rows; r++) {
    const float s = amax[r] > 0.f ? amax[r] / 127.f : 1.f;
    scale[r] = s;
    const float inv = 1.f / s;
    const float* xr = x + static_cast<size_t>(r) * cols;
    int8_t* qr = q + static_cast<size_t>(r) * cols;
    for (int c = 0; c < cols; c++) qr[c] = static_cast<int8_t>(std::max(-127.f, std::min(127.f, std::nearbyint(xr[c] * inv))));
  }
}

namespace {
// One thread's share: four 64-byte loads a step into four independent XOR chains. (The plain 8-byte loop compiled for
// baseline x86-64 drew 22.5 GB/s where these loads draw 33–34 on the same two cores, Intel family 6 model 207: too few
// bytes in flight per load for the memory to be the limit.)
AVX512 uint64_t xorWide(const uint8_t* p, size_t n) {
  __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
  size_t i = 0;
  for (; i + 256 <= n; i += 256) {
    a = _mm512_xor_si512(a, _mm512_loadu_si512(p + i));
    b = _mm512_xor_si512(b, _mm512_loadu_si512(p + i + 64));
    c = _mm512_xor_si512(c, _mm512_loadu_si512(p + i + 128));
    d = _mm512_xor_si512(d, _mm512_loadu_si512(p + i + 192));
  }
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, _mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d)));
  uint64_t acc = 0;
  for (uint64_t v : lanes) acc ^= v;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    acc ^= w;
  }
  return acc;
}
}  // namespace

uint64_t streamRead(const void* data, size_t n) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  uint64_t acc = 0;
  if (cpuAvx512()) {
    // Each thread one contiguous share (whole 256-byte steps but the last), as a GEMV's static schedule reads.
#pragma omp parallel reduction(^ : acc)
    {
      const size_t threads = static_cast<size_t>(omp_get_num_threads()), t = static_cast<size_t>(omp_get_thread_num());
      const size_t share = (n / threads) / 256 * 256;
      const size_t begin = t * share, end = t + 1 == threads ? n / 8 * 8 : begin + share;
      acc ^= xorWide(bytes + begin, end - begin);
    }
    return acc;
  }
  const auto* words = static_cast<const uint64_t*>(data);
  const long count = static_cast<long>(n / 8);
#pragma omp parallel for schedule(static) reduction(^ : acc)
  for (long i = 0; i < count; i++) acc ^= words[i];
  return acc;
}

namespace {
AVX512 inline __mmask16 lanes(int n) { return n >= 16 ? static_cast<__mmask16>(0xffff) : n <= 0 ? 0 : static_cast<__mmask16>((1u << n) - 1); }

// Tuning of the few-row kernels. The FLEXHELM_SKINNY_* macros exist only so that a benchmark build can sweep them
// (bench/skinny-kernel.cc compiled with -D…); the addon uses the defaults.
// Rows of w read per pass over a block's column tiles: the sums of a tile stay in registers over these rows.
#ifndef FLEXHELM_SKINNY_K
#define FLEXHELM_SKINNY_K 16
#endif
#ifndef FLEXHELM_SKINNY_PREFETCH
#define FLEXHELM_SKINNY_PREFETCH 512
#endif
#ifndef FLEXHELM_SKINNY_WIDTH
#define FLEXHELM_SKINNY_WIDTH 4096
#endif
constexpr int kSkinnyK = FLEXHELM_SKINNY_K;
#ifndef FLEXHELM_SKINNY_K_FEW
#define FLEXHELM_SKINNY_K_FEW 8
#endif
#ifndef FLEXHELM_SKINNY_FEW_ROWS
#define FLEXHELM_SKINNY_FEW_ROWS 2
#endif
// The fp32 kernel's rows per pass at up to kSkinnyFewRows activation rows: 8 rows streamed side by side read f16 at
// 1–2 rows faster than 16 (bench/skinny-kernel.cc, 2026-12-02, e.g. 2048 × 8192 at 1 row 28 against 19 GB/s on 2
// cores), while at 8 rows 16 amortise the sums' loads and stores better.
constexpr int kSkinnyKFew = FLEXHELM_SKINNY_K_FEW;
constexpr int kSkinnyFewRows = FLEXHELM_SKINNY_FEW_ROWS;
// The bf16 kernel's weight-row pairs per pass (the same rows per pass as kSkinnyK).
constexpr int kSkinnyPairs = (kSkinnyK + 1) / 2;
constexpr size_t kPrefetchBytes = FLEXHELM_SKINNY_PREFETCH;
// Widest column block (each thread's share of N up to this).
constexpr int kSkinnyWidth = FLEXHELM_SKINNY_WIDTH;

// What to prefetch for row k's tile at column t of a block cols wide: kPrefetchBytes further along the same row, or,
// where that passes the block's last column, the same distance into the row the next pass reads in its place
// (k + rowsPerPass), so no line outside the block is fetched (at 1024-column blocks, a row's 2 KiB of f16, prefetching
// past the end wasted a fifth of the reads) and each row's stream runs on into the next. Null past the last row.
template <class W>
inline const char* aheadOf(const W* w, size_t ld, int k, int t, int cols, int K, int rowsPerPass) {
  constexpr int ahead = static_cast<int>(kPrefetchBytes / sizeof(W));
  if (t + ahead < cols) return reinterpret_cast<const char*>(w + static_cast<size_t>(k) * ld + t + ahead);
  const int next = k + rowsPerPass;
  return next < K ? reinterpret_cast<const char*>(w + static_cast<size_t>(next) * ld + std::min(t + ahead - cols, cols - 1)) : nullptr;
}
inline void prefetchLine(const char* p) {
  if (p) _mm_prefetch(p, _MM_HINT_T0);
}

// 16 weights of row wr (masked) as floats: fp32 as they are, IEEE half widened exactly (vcvtph2ps).
AVX512 inline __m512 loadWeights(__mmask16 m, const float* wr) { return _mm512_maskz_loadu_ps(m, wr); }
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512 loadWeights(__mmask16 m, const uint16_t* wr) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, wr));
}

// acc[m, 0 .. cols) += Σ_k x[m, k] · w[k, c0 ..] for the block's columns, 32 at a time (M × 2 vectors in registers).
// W is float or uint16_t (f16 bits): the same sums in the same order, so f16 weights give exactly what their widened
// fp32 copy gives, from half the bytes.
template <int M, class W>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void skinnyBlock(const float* x, int K, const W* w, size_t ld, int cols, float* acc) {
  // Rows per pass: fewer streams side by side where there is little arithmetic per weight to hide them behind.
  constexpr int rowsPerPass = M <= kSkinnyFewRows ? kSkinnyKFew : kSkinnyK;
  for (int k0 = 0; k0 < K; k0 += rowsPerPass) {
    const int k1 = std::min(K, k0 + rowsPerPass);
    for (int t = 0; t < cols; t += 32) {
      const __mmask16 m0 = lanes(cols - t), m1 = lanes(cols - t - 16);
      __m512 a[M][2];
      for (int m = 0; m < M; m++) {
        a[m][0] = _mm512_maskz_loadu_ps(m0, acc + static_cast<size_t>(m) * cols + t);
        a[m][1] = _mm512_maskz_loadu_ps(m1, acc + static_cast<size_t>(m) * cols + t + 16);
      }
      for (int k = k0; k < k1; k++) {
        const W* wr = w + static_cast<size_t>(k) * ld + t;
        // The same row 512 bytes ahead (the tile after next): kSkinnyK rows stream side by side, each sequentially,
        // which measured faster than prefetching the next pass's rows (f16 24.6 → 34.6 GB/s on one core).
        prefetchLine(aheadOf(w, ld, k, t, cols, K, rowsPerPass));
        if (sizeof(W) == 4) prefetchLine(aheadOf(w, ld, k, t + 16, cols, K, rowsPerPass));
        const __m512 w0 = loadWeights(m0, wr), w1 = loadWeights(m1, wr + 16);
        for (int m = 0; m < M; m++) {
          const __m512 xm = _mm512_set1_ps(x[static_cast<size_t>(m) * K + k]);
          a[m][0] = _mm512_fmadd_ps(xm, w0, a[m][0]);
          a[m][1] = _mm512_fmadd_ps(xm, w1, a[m][1]);
        }
      }
      for (int m = 0; m < M; m++) {
        _mm512_mask_storeu_ps(acc + static_cast<size_t>(m) * cols + t, m0, a[m][0]);
        _mm512_mask_storeu_ps(acc + static_cast<size_t>(m) * cols + t + 16, m1, a[m][1]);
      }
    }
  }
}

// IEEE half bits -> float (exact), for CPUs without AVX-512.
float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
  if (exp == 0x1f) bits = sign | 0x7f800000u | (mant << 13);  // inf, NaN
  else if (exp != 0) bits = sign | ((exp + 112) << 23) | (mant << 13);
  else if (mant == 0) bits = sign;
  else {
    // Subnormal: shift the mantissa up to its leading 1.
    exp = 113;
    while (!(mant & 0x400u)) mant <<= 1, exp--;
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline float weightValue(float v) { return v; }
inline float weightValue(uint16_t v) { return halfToFloat(v); }

// The plain C++ block (no AVX-512): the same sums, k ascending per column.
template <class W>
void skinnyBlockPlain(const float* x, int M, int K, const W* w, size_t ld, int cols, float* acc) {
  for (int k = 0; k < K; k++) {
    const W* wr = w + static_cast<size_t>(k) * ld;
    for (int m = 0; m < M; m++) {
      const float xm = x[static_cast<size_t>(m) * K + k];
      float* am = acc + static_cast<size_t>(m) * cols;
      for (int j = 0; j < cols; j++) am[j] += xm * weightValue(wr[j]);
    }
  }
}


template <class W>
using SkinnyBlockFn = void (*)(const float*, int, const W*, size_t, int, float*);
template <class W>
constexpr SkinnyBlockFn<W> kSkinnyBlocks[kSkinnyRows] = {skinnyBlock<1, W>, skinnyBlock<2, W>, skinnyBlock<3, W>, skinnyBlock<4, W>,
                                                         skinnyBlock<5, W>, skinnyBlock<6, W>, skinnyBlock<7, W>, skinnyBlock<8, W>};

// Column blocks over the threads, then bias, the residual (oneDNN's sum post-op) and ReLU, in the packed path's order,
// and the store (fp32, or bf16 rounded to nearest even). block(c0, cols, acc) writes the sums acc [M, cols] of the
// columns [c0, c0 + cols).
template <class Block>
void skinnyColumns(int M, int n, const float* bias, bool relu, bool accumulate, float* y32, uint16_t* y16, size_t ldy, const Block& block) {
  // Column blocks: one per thread up to 4096 columns (long runs along each row keep the prefetchers streaming: 512 wide
  // read f16 weights at 22, 4096 wide at 33 GB/s on one core; the M × width sums stay in L2).
  const int threads = std::max(1, omp_get_max_threads());
  const int width = std::max(64, std::min(kSkinnyWidth, ((n + threads - 1) / threads + 31) / 32 * 32));
  const int blocks = (n + width - 1) / width;
#pragma omp parallel for schedule(static)
  for (int b = 0; b < blocks; b++) {
    thread_local std::vector<float> store;
    const int c0 = b * width, cols = std::min(width, n - c0);
    if (store.size() < static_cast<size_t>(M) * cols) store.resize(static_cast<size_t>(M) * cols);
    float* acc = store.data();
    std::fill(acc, acc + static_cast<size_t>(M) * cols, 0.f);
    block(c0, cols, acc);
    for (int m = 0; m < M; m++) {
      float* row = acc + static_cast<size_t>(m) * cols;
      const size_t at = static_cast<size_t>(m) * ldy + c0;
      for (int j = 0; j < cols; j++) {
        float v = row[j];
        if (bias) v += bias[c0 + j];
        if (accumulate) v += y32[at + j];
        row[j] = relu && v < 0.f ? 0.f : v;
      }
      if (y16) toBf16Serial(row, y16 + at, cols);
      else std::memcpy(y32 + at, row, sizeof(float) * cols);
    }
  }
}

template <class W>
void skinnyGemmImpl(const float* x, int M, int K, const W* w, size_t ld, int n, const float* bias, bool relu, bool accumulate, float* y32, uint16_t* y16, size_t ldy, bool vector) {
  const SkinnyBlockFn<W> block = kSkinnyBlocks<W>[M - 1];
  skinnyColumns(M, n, bias, relu, accumulate, y32, y16, ldy, [&](int c0, int cols, float* acc) {
    if (vector) block(x, K, w + c0, ld, cols, acc);
    else skinnyBlockPlain(x, M, K, w + c0, ld, cols, acc);
  });
}

// ---- bf16 layers: the same few-row GEMM with vdpbf16ps on f16 weights --------------------------------------------
//
// Numerics: every weight is rounded f16 → bf16 (nearest even, as packing a bf16 layer rounds it), the activations are
// bf16 already, and each (m, j) sum runs k ascending with one fp32 rounding per product added: vdpbf16ps adds the
// product of the high halves of a 32-bit lane first, then the low one (Intel's definition), so weight rows k and k + 1
// go to the high and low halves. The products of two bf16 values are exact in fp32, so the result is bit for bit what
// skinnyGemm gives on the bf16-rounded weights and activations (fma(x, w, acc) = round(acc + x·w)), away from fp32
// denormals (vdpbf16ps flushes them).

#define AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// 16 weights of row wr as floats; Full: all 16 there (an unmasked load the conversion can take as its operand).
template <bool Full>
AVX512BF16 inline __m512 rowWeights(__mmask16 m, const uint16_t* wr) {
  return Full ? _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr))) : _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, wr));
}
template <bool Full>
AVX512BF16 inline __m512 rowWeights(__mmask16 m, const float* wr) { return Full ? _mm512_loadu_ps(wr) : _mm512_maskz_loadu_ps(m, wr); }

// Lane j of the result: (w[k][j] in the high half, w[k + 1][j] in the low half), both rounded to bf16 (nearest even).
AVX512BF16 inline __m512i weightPairs(__m512 row0, __m512 row1, __m512i interleave) {
  // _mm512_cvtne2ps_pbh(hi, lo): bf16 lanes 0–15 = lo (row k + 1), 16–31 = hi (row k); the permutation pairs lane j of
  // each half.
  return _mm512_permutexvar_epi16(interleave, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(row0, row1)));
}

// a[m][v] += the products of one row pair: activation pair xpp[m] (broadcast) with weight pairs wv[v].
template <int M, int V>
AVX512BF16 inline void bf16Step(__m512 (&a)[M][V], const uint32_t* xpp, const __m512bh* wv) {
#pragma GCC unroll 16
  for (int m = 0; m < M; m++) {
    const __m512bh xm = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(xpp[m])));
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) a[m][v] = _mm512_dpbf16_ps(a[m][v], wv[v], xm);
  }
}

// One tile of 16·V columns at t over the weight-row pairs [p0, p1) (pairs whose rows both exist; odd K's last row comes
// through lastRow, with a zero row beside it). xp: the activation pairs [P, M], lane (p, m) = (x[m][2p] high,
// x[m][2p + 1] low). Every loop over m and v is unrolled, so the M × V sums live in registers (GCC stops unrolling on
// its own past 8 rows).
template <int M, int V, bool Full, class W>
AVX512BF16 inline void bf16Tile(const uint32_t* xp, int K, int p0, int p1, const W* lastRow, int lastPair, const W* w, size_t ld, int t, int cols, float* acc, __m512i interleave) {
  __mmask16 mask[V];
  __m512 a[M][V];
#pragma GCC unroll 4
  for (int v = 0; v < V; v++) mask[v] = lanes(cols - t - 16 * v);
#pragma GCC unroll 16
  for (int m = 0; m < M; m++)
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) a[m][v] = _mm512_maskz_loadu_ps(mask[v], acc + static_cast<size_t>(m) * cols + t + 16 * v);
  for (int p = p0; p < p1; p++) {
    const W* w0 = w + static_cast<size_t>(2 * p) * ld + t;
    const W* w1 = w0 + ld;
    // Both rows kPrefetchBytes ahead, as skinnyBlock does (one line per row and tile for f16 at V = 2).
    prefetchLine(aheadOf(w, ld, 2 * p, t, cols, K, 2 * kSkinnyPairs));
    prefetchLine(aheadOf(w, ld, 2 * p + 1, t, cols, K, 2 * kSkinnyPairs));
    if (sizeof(W) * 16 * V > 64) {
      prefetchLine(aheadOf(w, ld, 2 * p, t + 64 / static_cast<int>(sizeof(W)), cols, K, 2 * kSkinnyPairs));
      prefetchLine(aheadOf(w, ld, 2 * p + 1, t + 64 / static_cast<int>(sizeof(W)), cols, K, 2 * kSkinnyPairs));
    }
    __m512bh wv[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) wv[v] = reinterpret_cast<__m512bh>(weightPairs(rowWeights<Full>(mask[v], w0 + 16 * v), rowWeights<Full>(mask[v], w1 + 16 * v), interleave));
    bf16Step<M, V>(a, xp + static_cast<size_t>(p) * M, wv);
  }
  if (lastRow) {
    __m512bh wv[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) wv[v] = reinterpret_cast<__m512bh>(weightPairs(rowWeights<false>(mask[v], lastRow + t + 16 * v), _mm512_setzero_ps(), interleave));
    bf16Step<M, V>(a, xp + static_cast<size_t>(lastPair) * M, wv);
  }
#pragma GCC unroll 16
  for (int m = 0; m < M; m++)
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) _mm512_mask_storeu_ps(acc + static_cast<size_t>(m) * cols + t + 16 * v, mask[v], a[m][v]);
}

// acc[m, 0 .. cols) += Σ_k x[m, k] · w[k, c0 ..] for a block's columns, 16·V at a time, kSkinnyPairs row pairs per
// pass (the sums of a tile stay in registers over them).
template <int M, int V, class W>
AVX512BF16 void skinnyBlockBf16(const uint32_t* xp, int K, const W* w, size_t ld, int cols, float* acc) {
  // Word 2j ← lane j of the low 16 (row k + 1), word 2j + 1 ← lane j of the high 16 (row k).
  alignas(64) static const uint16_t order[32] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i interleave = _mm512_load_si512(order);
  const int P = (K + 1) / 2, full = K / 2;
  for (int p0 = 0; p0 < P; p0 += kSkinnyPairs) {
    const int p1 = std::min(full, p0 + kSkinnyPairs);
    // Odd K: the last pass also takes the last row (pair P - 1, its second row zero).
    const W* lastRow = K % 2 && p0 + kSkinnyPairs >= P ? w + static_cast<size_t>(K - 1) * ld : nullptr;
    int t = 0;
    for (; t + 16 * V <= cols; t += 16 * V) bf16Tile<M, V, true>(xp, K, p0, p1, lastRow, P - 1, w, ld, t, cols, acc, interleave);
    if (t < cols) bf16Tile<M, V, false>(xp, K, p0, p1, lastRow, P - 1, w, ld, t, cols, acc, interleave);
  }
}

// The plain C++ equivalent (no AVX-512 bf16): the same rounded values, the same sums in the same order.
inline float bf16Value(float f) {
  const uint32_t bits = static_cast<uint32_t>(bf16Bits(f)) << 16;
  float r;
  std::memcpy(&r, &bits, 4);
  return r;
}
template <class W>
void skinnyBlockBf16Plain(const uint32_t* xp, int M, int K, const W* w, size_t ld, int cols, float* acc) {
  const int P = (K + 1) / 2;
  std::vector<float> wk(cols);
  for (int k = 0; k < K; k++) {
    const W* wr = w + static_cast<size_t>(k) * ld;
    for (int j = 0; j < cols; j++) wk[j] = bf16Value(weightValue(wr[j]));
    for (int m = 0; m < M; m++) {
      const uint32_t pair = xp[static_cast<size_t>(k / 2) * M + m];
      const uint32_t bits = (k % 2 == 0 ? pair >> 16 : pair & 0xffffu) << 16;
      float xm;
      std::memcpy(&xm, &bits, 4);
      float* am = acc + static_cast<size_t>(m) * cols;
      for (int j = 0; j < cols; j++) am[j] += xm * wk[j];
    }
  }
}


template <class W>
using SkinnyBf16Fn = void (*)(const uint32_t*, int, const W*, size_t, int, float*);
// 32 columns a tile up to 8 rows (2·M sums in registers), 16 beyond.
template <class W>
constexpr SkinnyBf16Fn<W> kSkinnyBf16Blocks[kSkinnyBf16Rows] = {
    skinnyBlockBf16<1, 2, W>,  skinnyBlockBf16<2, 2, W>,  skinnyBlockBf16<3, 2, W>,  skinnyBlockBf16<4, 2, W>,  skinnyBlockBf16<5, 2, W>,  skinnyBlockBf16<6, 2, W>,
    skinnyBlockBf16<7, 2, W>,  skinnyBlockBf16<8, 2, W>,  skinnyBlockBf16<9, 1, W>,  skinnyBlockBf16<10, 1, W>, skinnyBlockBf16<11, 1, W>, skinnyBlockBf16<12, 1, W>,
    skinnyBlockBf16<13, 1, W>, skinnyBlockBf16<14, 1, W>, skinnyBlockBf16<15, 1, W>, skinnyBlockBf16<16, 1, W>};

template <class W>
void skinnyGemmBf16Impl(const uint16_t* x, int M, int K, const W* w, size_t ld, int n, const float* bias, bool relu, bool accumulate, float* y32, uint16_t* y16, size_t ldy) {
  if (M < 1 || M > kSkinnyBf16Rows) throw std::invalid_argument("skinnyGemmBf16 takes 1 to " + std::to_string(kSkinnyBf16Rows) + " rows");
  // The activations as pairs [P, M] (x[m][2p] high, x[m][2p + 1] low; zero past K): the M words a step of the kernel
  // broadcasts lie side by side. M·K/2 words, built once per call.
  const int P = (K + 1) / 2;
  thread_local std::vector<uint32_t> pairs;
  pairs.resize(static_cast<size_t>(M) * P);
  for (int m = 0; m < M; m++) {
    const uint16_t* xm = x + static_cast<size_t>(m) * K;
    for (int p = 0; p < P; p++) pairs[static_cast<size_t>(p) * M + m] = static_cast<uint32_t>(xm[2 * p]) << 16 | (2 * p + 1 < K ? xm[2 * p + 1] : 0u);
  }
  const uint32_t* xp = pairs.data();
  const bool vector = cpuAvx512Bf16();
  const SkinnyBf16Fn<W> block = kSkinnyBf16Blocks<W>[M - 1];
  skinnyColumns(M, n, bias, relu, accumulate, y32, y16, ldy, [&](int c0, int cols, float* acc) {
    if (vector) block(xp, K, w + c0, ld, cols, acc);
    else skinnyBlockBf16Plain(xp, M, K, w + c0, ld, cols, acc);
  });
}
}  // namespace

bool skinnyGemmVectorised() { return cpuAvx512Bw(); }

bool skinnyGemm(const float* x, int M, int K, const float* w, size_t ld, int n, const float* bias, bool relu, bool accumulate, float* y32, uint16_t* y16, size_t ldy) {
  if (M < 1 || M > kSkinnyRows || !cpuAvx512Bw()) return false;
  skinnyGemmImpl(x, M, K, w, ld, n, bias, relu, accumulate, y32, y16, ldy, true);
  return true;
}

void skinnyGemmF16(const float* x, int M, int K, const uint16_t* w, size_t ld, int n, const float* bias, bool relu, bool accumulate, float* y32, uint16_t* y16, size_t ldy) {
  if (M < 1 || M > kSkinnyRows) throw std::invalid_argument("skinnyGemmF16 takes 1 to " + std::to_string(kSkinnyRows) + " rows");
  skinnyGemmImpl(x, M, K, w, ld, n, bias, relu, accumulate, y32, y16, ldy, cpuAvx512Bw());
}

void skinnyGemmBf16(const uint16_t* x, int M, int K, const uint16_t* w, size_t ld, int n, const float* bias, bool relu, bool accumulate, float* y32, uint16_t* y16, size_t ldy) {
  skinnyGemmBf16Impl(x, M, K, w, ld, n, bias, relu, accumulate, y32, y16, ldy);
}

bool skinnyGemmBf16Vectorised() { return cpuAvx512Bf16(); }

// ---- FlexLLMGen's 4-bit group-wise weights (group4-weights.h) -------------------------------------------------------
//
// Each weight is looked up in its group's table of the 16 values its code stands for, q / scale + min computed in fp32
// (one division per code, as dequantize4 divides), so a weight read here is bit for bit the one dequantize4 writes.

namespace {
#define AVX512BW __attribute__((target("avx512f,avx512bw,avx512vl,f16c")))

// Weight (k, n) as dequantize4 computes it (plain C++).
inline float group4Value(const Group4Weights& w, size_t rowBytes, size_t scaleRow, int k, int n) {
  const uint8_t byte = w.packed[static_cast<size_t>(k) * rowBytes + n / 2];
  const float q = static_cast<float>(n % 2 == 0 ? byte >> 4 : byte & 15);
  const uint16_t* sm = w.scale + static_cast<size_t>(k) * scaleRow + static_cast<size_t>(n / w.groupSize) * 2;
  return q / halfToFloat(sm[0]) + halfToFloat(sm[1]);
}

// The 16 values of one group's codes: lane q = q / scale + min (scaleMin: the group's two f16 values).
AVX512BW inline __m512 group4Table(const uint16_t* scaleMin) {
  uint32_t bits;
  std::memcpy(&bits, scaleMin, 4);
  const __m128 sm = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(bits)));
  const __m512 codes = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  return _mm512_add_ps(_mm512_div_ps(codes, _mm512_broadcastss_ps(sm)), _mm512_broadcastss_ps(_mm_movehdup_ps(sm)));
}

// The 32 weights of 32 consecutive columns of one group (16 bytes of codes), in column order: byte i's high nibble is
// column 2i, its low nibble column 2i + 1.
AVX512BW inline void group4Weights32(const uint8_t* bytes, __m512 table, __m512& w0, __m512& w1) {
  const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
  // 16-bit lane i: column 2i's code in its low byte, column 2i + 1's in its high byte, so the bytes run in column order.
  const __m256i ordered = _mm256_or_si256(_mm256_srli_epi16(v, 4), _mm256_slli_epi16(_mm256_and_si256(v, _mm256_set1_epi16(15)), 8));
  w0 = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(ordered)), table);
  w1 = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(ordered, 1)), table);
}

// skinnyBlock's loop on 4-bit weights: columns [c0, c0 + cols) (c0 a multiple of 32, groupSize too, so a tile of 32
// columns lies in one group and its 16 bytes of codes exist even past the last column: the last group is padded).
template <int M>
AVX512BW void skinnyBlockGroup4(const float* x, int K, const Group4Weights& w, size_t rowBytes, size_t scaleRow, int c0, int cols, float* acc) {
  constexpr int rowsPerPass = M <= kSkinnyFewRows ? kSkinnyKFew : kSkinnyK;
  for (int k0 = 0; k0 < K; k0 += rowsPerPass) {
    const int k1 = std::min(K, k0 + rowsPerPass);
    for (int t = 0; t < cols; t += 32) {
      const __mmask16 m0 = lanes(cols - t), m1 = lanes(cols - t - 16);
      __m512 a[M][2];
      for (int m = 0; m < M; m++) {
        a[m][0] = _mm512_maskz_loadu_ps(m0, acc + static_cast<size_t>(m) * cols + t);
        a[m][1] = _mm512_maskz_loadu_ps(m1, acc + static_cast<size_t>(m) * cols + t + 16);
      }
      const size_t codeAt = static_cast<size_t>(c0 + t) / 2, scaleAt = static_cast<size_t>((c0 + t) / w.groupSize) * 2;
      for (int k = k0; k < k1; k++) {
        const uint8_t* codes = w.packed + static_cast<size_t>(k) * rowBytes + codeAt;
        // The same row 256 bytes (512 columns) ahead, as skinnyBlock streams its rows (a prefetch never faults).
        _mm_prefetch(reinterpret_cast<const char*>(codes) + 256, _MM_HINT_T0);
        __m512 w0, w1;
        group4Weights32(codes, group4Table(w.scale + static_cast<size_t>(k) * scaleRow + scaleAt), w0, w1);
        for (int m = 0; m < M; m++) {
          const __m512 xm = _mm512_set1_ps(x[static_cast<size_t>(m) * K + k]);
          a[m][0] = _mm512_fmadd_ps(xm, w0, a[m][0]);
          a[m][1] = _mm512_fmadd_ps(xm, w1, a[m][1]);
        }
      }
      for (int m = 0; m < M; m++) {
        _mm512_mask_storeu_ps(acc + static_cast<size_t>(m) * cols + t, m0, a[m][0]);
        _mm512_mask_storeu_ps(acc + static_cast<size_t>(m) * cols + t + 16, m1, a[m][1]);
      }
    }
  }
}

// am[j] = fma(xm, row[j], am[j]) for j < cols: one step of skinnyBlock's sums (the same roundings as its FMAs).
AVX512BW void fmaRow(float xm, const float* row, float* am, int cols) {
  const __m512 x = _mm512_set1_ps(xm);
  for (int j = 0; j < cols; j += 16) {
    const __mmask16 m = lanes(cols - j);
    _mm512_mask_storeu_ps(am + j, m, _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(m, row + j), _mm512_maskz_loadu_ps(m, am + j)));
  }
}

using Group4BlockFn = void (*)(const float*, int, const Group4Weights&, size_t, size_t, int, int, float*);
constexpr Group4BlockFn kGroup4Blocks[kSkinnyRows] = {skinnyBlockGroup4<1>, skinnyBlockGroup4<2>, skinnyBlockGroup4<3>, skinnyBlockGroup4<4>,
                                                      skinnyBlockGroup4<5>, skinnyBlockGroup4<6>, skinnyBlockGroup4<7>, skinnyBlockGroup4<8>};

// One row's columns [n0, n0 + n) widened (n0 and groupSize multiples of 32); returns how many columns it wrote.
AVX512BW int group4RowVector(const Group4Weights& w, size_t rowBytes, size_t scaleRow, int k, int n0, int n, float* out) {
  int j = 0;
  for (; j + 32 <= n; j += 32) {
    const int col = n0 + j;
    __m512 w0, w1;
    group4Weights32(w.packed + static_cast<size_t>(k) * rowBytes + col / 2, group4Table(w.scale + static_cast<size_t>(k) * scaleRow + static_cast<size_t>(col / w.groupSize) * 2), w0, w1);
    _mm512_storeu_ps(out + j, w0);
    _mm512_storeu_ps(out + j + 16, w1);
  }
  return j;
}
}  // namespace

void skinnyGemmGroup4(const float* x, int M, int K, const Group4Weights& w, int n, const float* bias, bool relu, bool accumulate, float* y32, uint16_t* y16, size_t ldy) {
  if (M < 1 || M > kSkinnyRows) throw std::invalid_argument("skinnyGemmGroup4 takes 1 to " + std::to_string(kSkinnyRows) + " rows");
  const size_t rowBytes = w.rowBytes(n), scaleRow = w.scaleRow(n);
  const bool vector = cpuAvx512Bw() && w.groupSize % 32 == 0;
  skinnyColumns(M, n, bias, relu, accumulate, y32, y16, ldy, [&](int c0, int cols, float* acc) {
    if (vector) return kGroup4Blocks[M - 1](x, K, w, rowBytes, scaleRow, c0, cols, acc);
    // Otherwise each weight row's columns widened, then added into every activation row's sums (k ascending; with
    // skinnyBlock's FMAs where the CPU has AVX-512, so a group size that is no multiple of 32 gives the same sums).
    thread_local std::vector<float> row;
    if (row.size() < static_cast<size_t>(cols)) row.resize(cols);
    const bool fma = cpuAvx512Bw();
    for (int k = 0; k < K; k++) {
      for (int j = 0; j < cols; j++) row[j] = group4Value(w, rowBytes, scaleRow, k, c0 + j);
      for (int m = 0; m < M; m++) {
        const float xm = x[static_cast<size_t>(m) * K + k];
        float* am = acc + static_cast<size_t>(m) * cols;
        if (fma) fmaRow(xm, row.data(), am, cols);
        else
          for (int j = 0; j < cols; j++) am[j] += xm * row[j];
      }
    }
  });
}

void group4Rows(const Group4Weights& w, int K, int N, int n0, int n, float* dst) {
  const size_t rowBytes = w.rowBytes(N), scaleRow = w.scaleRow(N);
  const bool vector = cpuAvx512Bw() && w.groupSize % 32 == 0 && n0 % 32 == 0;
#pragma omp parallel for schedule(static) if (static_cast<size_t>(K) * n >= kParallelMin)
  for (int k = 0; k < K; k++) {
    float* out = dst + static_cast<size_t>(k) * n;
    int j = vector ? group4RowVector(w, rowBytes, scaleRow, k, n0, n, out) : 0;
    for (; j < n; j++) out[j] = group4Value(w, rowBytes, scaleRow, k, n0 + j);
  }
}

namespace {
__attribute__((target("avx512f"))) void fromF16Vector(const uint16_t* x, float* y, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i))));
  for (; i < n; i++) y[i] = halfToFloat(x[i]);
}
}  // namespace

void fromF16Rows(const uint16_t* x, size_t ld, float* y, int rows, int cols) {
  const bool vector = cpuAvx512();
#pragma omp parallel for schedule(static) if (static_cast<size_t>(rows) * cols >= kParallelMin)
  for (int r = 0; r < rows; r++) {
    const uint16_t* src = x + static_cast<size_t>(r) * ld;
    float* dst = y + static_cast<size_t>(r) * cols;
    if (vector) fromF16Vector(src, dst, cols);
    else
      for (int j = 0; j < cols; j++) dst[j] = halfToFloat(src[j]);
  }
}

void fromF16(const uint16_t* x, float* y, size_t n) {
  constexpr size_t kBlock = 4096;
  const long blocks = static_cast<long>((n + kBlock - 1) / kBlock);
  const bool vector = cpuAvx512();
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (long j = 0; j < blocks; j++) {
    const size_t at = static_cast<size_t>(j) * kBlock, count = std::min(kBlock, n - at);
    if (vector) fromF16Vector(x + at, y + at, count);
    else
      for (size_t i = 0; i < count; i++) y[at + i] = halfToFloat(x[at + i]);
  }
}

}  // namespace flexhelm

