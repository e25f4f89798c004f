#include "kquant-gemm.h"

#include "../cpu-features.h"
#include "kquant-decode.h"
#include "kquant-gemv.h"
#include "kquant-interleave.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace flexhelm {

using namespace kquant;

bool kquantGemmAvailable() {
  static const bool yes = cpuAvx512Bw() && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma");
  return yes;
}

namespace {

constexpr int kCols = 16;           // columns of a panel group: one zmm of int32 lanes
constexpr int kVecs = 2;            // groups per task: 32 columns
constexpr int kRows = 6;            // rows per register tile (2 · 6 sums + 2 · 6 totals + weights: 26 zmm)
constexpr int kWords = kSuper / 4;  // 4-value words per super-block and column
constexpr int kPairs = 4;           // Q4_K / Q5_K sub-block pairs per super-block (the mins' vpdpwssd unit)
#ifndef FLEXHELM_KQ_PANEL_PREFETCH
#define FLEXHELM_KQ_PANEL_PREFETCH 1
#endif
constexpr int kKQuantPanelPrefetch = FLEXHELM_KQ_PANEL_PREFETCH;  // super-blocks ahead

// The scale unit: Q4_K / Q5_K sub-blocks of 32 values, Q6_K groups of 16.
constexpr int unitValues(QuantType t) { return t == QuantType::q6_k ? 16 : 32; }
constexpr int unitsOf(QuantType t) { return kSuper / unitValues(t); }
// Q6_K's offset (value q − 32) is exact as a per-row seed (−32 · the group's activation sum), so it has no mins term.
constexpr bool hasMins(QuantType t) { return t != QuantType::q6_k; }
// Per row and super-block, what the tile reads beside the activations: Q6_K the 16 seeds, Q4_K / Q5_K the 4 int16
// pairs of sub-block sums.
constexpr int auxOf(QuantType t) { return hasMins(t) ? kPairs : kGroups; }

// One 16-column group decoded for a call, every array super-block-major (each a multiple of 64 bytes a super-block).
struct Panel {
  uint8_t* words;   // [supers][64 words][16 columns][4 values]: value 4j + i of column c at (j·16 + c)·4 + i
  int32_t* scales;  // [supers][units][16]
  int16_t* mins;    // [supers][4 pairs][16][2]: the mins of sub-blocks 2p, 2p + 1 (Q4_K / Q5_K)
  float* d;         // [supers][16]
  float* dm;        // [supers][16]
};

size_t panelBytes(QuantType t, int supers) {
  return static_cast<size_t>(supers) * 4 * kCols * (kWords + unitsOf(t) + kPairs + 2);
}

Panel panelAt(QuantType t, uint8_t* base, int supers) {
  Panel p;
  p.words = base;
  p.scales = reinterpret_cast<int32_t*>(base + static_cast<size_t>(supers) * kWords * kCols * 4);
  p.mins = reinterpret_cast<int16_t*>(p.scales + static_cast<size_t>(supers) * unitsOf(t) * kCols);
  p.d = reinterpret_cast<float*>(p.mins + static_cast<size_t>(supers) * kPairs * kCols * 2);
  p.dm = p.d + static_cast<size_t>(supers) * kCols;
  return p;
}

// Columns n0 … n0 + cols − 1 of the GGUF rows into one panel group (columns past `cols` zero: they multiply to 0),
// a super-block of the 16 columns at a time. (Column by column over chunks of 2–8 super-blocks, for longer runs of
// sequential reads, took 1.3–1.6× the time: the larger scratch leaves L1.)
template <QuantType T>
KQUANT_VNNI void buildPanel(const uint8_t* w, size_t rowBytes, int supers, int n0, int cols, const Panel& p) {
  constexpr size_t bb = quantBlockBytes(T);
  constexpr int units = unitsOf(T);
  constexpr int groupsPerUnit = unitValues(T) / 16;
  const LaneGroups& lanes = laneGroups();
  alignas(64) uint8_t values[4][kCols][64];  // values 64q … 64q + 63 of column c
  alignas(32) int16_t sc[kCols][kGroups];
  alignas(32) int16_t mn[kCols][kGroups];
  for (int b = 0; b < supers; b++) {
    float* d = p.d + static_cast<size_t>(b) * kCols;
    float* dm = p.dm + static_cast<size_t>(b) * kCols;
    for (int c = 0; c < kCols; c++) {
      if (c >= cols) {
        for (int q = 0; q < 4; q++) std::memset(values[q][c], 0, 64);
        std::memset(sc[c], 0, sizeof sc[c]);
        std::memset(mn[c], 0, sizeof mn[c]);
        d[c] = dm[c] = 0;
        continue;
      }
      const uint8_t* block = w + static_cast<size_t>(n0 + c) * rowBytes + b * bb;
      if (kKQuantPanelPrefetch > 0 && b + 1 < supers)
        for (size_t line = 0; line < bb; line += 64) _mm_prefetch(reinterpret_cast<const char*>(block) + kKQuantPanelPrefetch * bb + line, _MM_HINT_T0);
      Decoded512 s;
      decode512<T, false>(block, lanes, s);
      for (int q = 0; q < 4; q++) _mm512_store_si512(values[q][c], s.w[q]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(sc[c]), s.sc16);
      _mm256_store_si256(reinterpret_cast<__m256i*>(mn[c]), s.mn);
      d[c] = s.d;
      dm[c] = s.dm;
    }
    // A column's 64 values are 16 words: transposing 16 columns' gives 16 vectors of one word for every column.
    for (int q = 0; q < 4; q++) {
      __m512i r[kCols];
      for (int c = 0; c < kCols; c++) r[c] = _mm512_load_si512(values[q][c]);
      transpose16(r);
      uint8_t* dst = p.words + (static_cast<size_t>(b) * kWords + 16 * q) * kCols * 4;
      for (int j = 0; j < 16; j++) _mm512_store_si512(dst + j * 64, r[j]);
    }
    // The scales (and mins) the same way: column c's 16 group values widened to int32, transposed to one vector per
    // group.
    __m512i g[kGroups];
    for (int c = 0; c < kCols; c++) g[c] = _mm512_cvtepi16_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(sc[c])));
    transpose16(g);
    int32_t* scales = p.scales + static_cast<size_t>(b) * units * kCols;
    for (int u = 0; u < units; u++) _mm512_store_si512(scales + u * kCols, g[u * groupsPerUnit]);
    if constexpr (hasMins(T)) {
      // Sub-block s covers groups 2s, 2s + 1 (equal mins): pair p is sub-blocks 2p and 2p + 1, groups 4p and 4p + 2,
      // as the low and high int16 of each column's lane.
      for (int c = 0; c < kCols; c++) g[c] = _mm512_cvtepu16_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(mn[c])));
      transpose16(g);
      int16_t* mins = p.mins + static_cast<size_t>(b) * kPairs * kCols * 2;
      for (int pair = 0; pair < kPairs; pair++)
        _mm512_store_si512(mins + pair * kCols * 2, _mm512_or_si512(g[4 * pair], _mm512_slli_epi32(g[4 * pair + 2], 16)));
    }
  }
}

// MR rows × the task's 2 groups over every super-block, into acc [MR][32] (zeroed by the caller).
template <QuantType T, int MR>
KQUANT_VNNI void tile(const Panel* panel, int supers, const int8_t* xq, size_t K, const float* xd, const int32_t* aux, float* acc) {
  constexpr int units = unitsOf(T);
  constexpr int words = unitValues(T) / 4;
  constexpr int auxPer = auxOf(T);
  for (int b = 0; b < supers; b++) {
    __m512i total[MR][kVecs];
    for (int m = 0; m < MR; m++)
      for (int v = 0; v < kVecs; v++) total[m][v] = _mm512_setzero_si512();
    for (int u = 0; u < units; u++) {
      __m512i sum[MR][kVecs];
      for (int m = 0; m < MR; m++) {
        const __m512i seed = hasMins(T) ? _mm512_setzero_si512() : _mm512_set1_epi32(aux[(static_cast<size_t>(m) * supers + b) * auxPer + u]);
        for (int v = 0; v < kVecs; v++) sum[m][v] = seed;
      }
      // Unrolled whole, so the sums stay in registers (GCC otherwise keeps Q4_K's 8-word loop and spills them).
#pragma GCC unroll 8
      for (int j = 0; j < words; j++) {
        const int word = u * words + j;
        __m512i wv[kVecs];
        for (int v = 0; v < kVecs; v++) wv[v] = _mm512_load_si512(panel[v].words + (static_cast<size_t>(b) * kWords + word) * kCols * 4);
        for (int m = 0; m < MR; m++) {
          int32_t four;
          std::memcpy(&four, xq + m * K + static_cast<size_t>(b) * kSuper + word * 4, 4);
          const __m512i xv = _mm512_set1_epi32(four);
          for (int v = 0; v < kVecs; v++) sum[m][v] = _mm512_dpbusd_epi32(sum[m][v], wv[v], xv);
        }
      }
      for (int v = 0; v < kVecs; v++) {
        const __m512i scale = _mm512_load_si512(panel[v].scales + (static_cast<size_t>(b) * units + u) * kCols);
        for (int m = 0; m < MR; m++) total[m][v] = _mm512_add_epi32(total[m][v], _mm512_mullo_epi32(sum[m][v], scale));
      }
    }
    __m512i offset[MR][kVecs];
    if constexpr (hasMins(T)) {
      for (int m = 0; m < MR; m++)
        for (int v = 0; v < kVecs; v++) offset[m][v] = _mm512_setzero_si512();
      for (int pair = 0; pair < kPairs; pair++)
        for (int v = 0; v < kVecs; v++) {
          const __m512i mins = _mm512_load_si512(panel[v].mins + (static_cast<size_t>(b) * kPairs + pair) * kCols * 2);
          for (int m = 0; m < MR; m++)
            offset[m][v] = _mm512_dpwssd_epi32(offset[m][v], mins, _mm512_set1_epi32(aux[(static_cast<size_t>(m) * supers + b) * auxPer + pair]));
        }
    }
    for (int v = 0; v < kVecs; v++) {
      const __m512 dw = _mm512_load_ps(panel[v].d + static_cast<size_t>(b) * kCols);
      const __m512 dmw = _mm512_load_ps(panel[v].dm + static_cast<size_t>(b) * kCols);
      for (int m = 0; m < MR; m++) {
        const __m512 dx = _mm512_set1_ps(xd[static_cast<size_t>(m) * supers + b]);
        float* at = acc + (m * kVecs + v) * kCols;
        __m512 a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total[m][v]), _mm512_mul_ps(dw, dx), _mm512_load_ps(at));
        if constexpr (hasMins(T)) a = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(offset[m][v]), _mm512_mul_ps(dmw, dx), a);
        _mm512_store_ps(at, a);
      }
    }
  }
}

using TileFn = void (*)(const Panel*, int, const int8_t*, size_t, const float*, const int32_t*, float*);

template <QuantType T>
TileFn pickTile(int mr) {
  switch (mr) {
    case 6: return &tile<T, 6>;
    case 5: return &tile<T, 5>;
    case 4: return &tile<T, 4>;
    case 3: return &tile<T, 3>;
    case 2: return &tile<T, 2>;
    default: return &tile<T, 1>;
  }
}

// The weight as QuantLinear keeps it: GGUF's rows, or interleaved (kquant-interleave.h).
struct Source {
  const uint8_t* w;
  bool interleaved;
};

template <QuantType T>
void runTasks(const Source& src, int K, int N, const int8_t* xq, const float* xd, const int32_t* aux, int M, float* y, bool accumulate) {
  const int supers = K / kSuper;
  const size_t rowBytes = static_cast<size_t>(supers) * quantBlockBytes(T);
  const size_t groupBytes = panelBytes(T, supers);
  const int tasks = (N + kVecs * kCols - 1) / (kVecs * kCols);
#pragma omp parallel
  {
    // Per OpenMP thread, kept between calls: K = 8192 makes a task's two groups 332 KB (Q4_K), in L2.
    // (Aligned by hand: the panel's vectors are loaded and stored 64-byte aligned.)
    thread_local std::vector<uint8_t> scratch;
    if (scratch.size() < kVecs * groupBytes + 64) scratch.resize(kVecs * groupBytes + 64);
    uint8_t* base = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
    Panel panel[kVecs];
    for (int v = 0; v < kVecs; v++) panel[v] = panelAt(T, base + v * groupBytes, supers);
#pragma omp for schedule(static)
    for (int task = 0; task < tasks; task++) {
      int cols[kVecs];
      for (int v = 0; v < kVecs; v++) {
        const int n0 = (task * kVecs + v) * kCols;
        cols[v] = std::clamp(N - n0, 0, kCols);
        if (src.interleaved && cols[v] > 0) {
          // An interleaved group's blocks back in row form first (L1/L2-sized: 16 columns × K/256 blocks).
          buildPanel<T>(kquantGroupRows(T, src.w, K, N, n0 / kCols, 0, supers), rowBytes, supers, 0, cols[v], panel[v]);
        } else {
          buildPanel<T>(src.w, rowBytes, supers, n0, cols[v], panel[v]);
        }
      }
      // Rows spread evenly over the tiles (8 rows: 4 + 4, not 6 + 2: a thin tile rereads the panel for little work).
      const int rowTiles = (M + kRows - 1) / kRows;
      const int rowsPerTile = (M + rowTiles - 1) / rowTiles;
      for (int m0 = 0; m0 < M; m0 += rowsPerTile) {
        const int mr = std::min(rowsPerTile, M - m0);
        alignas(64) float acc[kRows * kVecs * kCols] = {};
        pickTile<T>(mr)(panel, supers, xq + static_cast<size_t>(m0) * K, static_cast<size_t>(K), xd + static_cast<size_t>(m0) * supers, aux + static_cast<size_t>(m0) * supers * auxOf(T), acc);
        for (int m = 0; m < mr; m++)
          for (int v = 0; v < kVecs; v++)
            for (int c = 0; c < cols[v]; c++) {
              float& dst = y[static_cast<size_t>(m0 + m) * N + (task * kVecs + v) * kCols + c];
              const float r = acc[(m * kVecs + v) * kCols + c];
              dst = accumulate ? dst + r : r;
            }
      }
    }
  }
}

}  // namespace

KQuantActivations kquantActivations(QuantType t, const float* x, int M, int K) {
  const int supers = K / kSuper;
  const Q8KRows rows = quantizeRowsQ8K(x, M, K, /* vectorized */ true);
  thread_local std::vector<int32_t> aux;  // per calling thread, as the activations
  const int per = auxOf(t);
  aux.resize(static_cast<size_t>(M) * supers * per);
  const int16_t* bs = rows.bsum;
  int32_t* ax = aux.data();
  const bool seeds = !hasMins(t);
// One row (a decode step) on the calling thread: waking the team costs more than these few sums.
#pragma omp parallel for schedule(static) if (M > 1)
  for (int m = 0; m < M; m++)
    for (int b = 0; b < supers; b++) {
      const int16_t* s = bs + (static_cast<size_t>(m) * supers + b) * kGroups;
      int32_t* a = ax + (static_cast<size_t>(m) * supers + b) * per;
      if (seeds) {
        for (int g = 0; g < kGroups; g++) a[g] = -32 * s[g];
        continue;
      }
      // Sub-block sums (|Σ| ≤ 32 · 127, an int16) in pairs: the low half sub-block 2p, the high half 2p + 1.
      for (int pair = 0; pair < kPairs; pair++) {
        const int lo = s[4 * pair] + s[4 * pair + 1];
        const int hi = s[4 * pair + 2] + s[4 * pair + 3];
        a[pair] = static_cast<int32_t>(static_cast<uint16_t>(lo) | (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
      }
    }
  return {rows, ax, per};
}

void kquantGemmVnni(QuantType t, const uint8_t* w, int K, int N, const float* x, int M, float* y, bool accumulate, bool interleaved) {
  if (!isKQuant(t)) throw std::invalid_argument("kquantGemmVnni: not a K-quant type");
  if (K % kSuper != 0) throw std::invalid_argument("kquantGemmVnni: K must be a multiple of 256");
  if (!kquantGemmAvailable()) throw std::invalid_argument("quantized kernel vnni-gemm is not available on this CPU");
  if (M <= 0 || N <= 0) return;
  const KQuantActivations a = kquantActivations(t, x, M, K);
  const Source src{w, interleaved};
  if (t == QuantType::q4_k) runTasks<QuantType::q4_k>(src, K, N, a.rows.q, a.rows.d, a.aux, M, y, accumulate);
  else if (t == QuantType::q5_k) runTasks<QuantType::q5_k>(src, K, N, a.rows.q, a.rows.d, a.aux, M, y, accumulate);
  else runTasks<QuantType::q6_k>(src, K, N, a.rows.q, a.rows.d, a.aux, M, y, accumulate);
}

}  // namespace flexhelm
