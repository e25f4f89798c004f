#include "amx-gemm.h"

#include "../cpu-features.h"
#include "../kernels.h"

#include <cpuid.h>
#include <immintrin.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "quant-gemv.h"  // AlignedAllocator

namespace flexhelm {

namespace {

// Linux's arch_prctl request for a dynamically enabled state component, and AMX's tile data component.
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureTileData = 18;

bool cpuHasAmxBf16() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (d & (1u << 22)) && (d & (1u << 24));  // AMX-BF16, AMX-TILE
}

// Tile shapes (AmxTileConfig): every tile 16 rows of 64 bytes. C tiles 0–3 hold 16×16 fp32 outputs, A tiles 4–5 16
// rows × 32 bf16 of x, B tiles 6–7 16 k-pairs × 16 columns of (k, k+1) bf16 pairs of W.

constexpr int kTile = 16;
// k values per tile multiply (a B tile's 16 rows of pairs).
constexpr int kTileK = 32;
// bf16 values in one B tile.
constexpr int kTileValues = kAmxTileValues;
// Columns of W widened at once are at most this many k long: 256 columns × 2048 k of bf16 is 1 MiB, in a core's L2
// with the x rows it meets.
constexpr int kMaxPanelK = 2048;

#define AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl")))

// The permutations of pairsToTile's stages: for distance d, lo[c] / hi[c] pick row i's and row i + d's dwords.
struct TransposeIndex {
  alignas(64) int32_t lo[4][16];
  alignas(64) int32_t hi[4][16];
  TransposeIndex() {
    for (int s = 0; s < 4; s++) {
      const int d = 8 >> s;
      for (int c = 0; c < 16; c++) {
        lo[s][c] = (c & d) ? 16 + c - d : c;
        hi[s][c] = (c & d) ? 16 + c : c + d;
      }
    }
  }
};
const TransposeIndex kTranspose;

// One stage: rows i and i + D (i without bit D) swap their off-diagonal D-wide blocks. Constant indices throughout,
// so that the 16 rows stay in registers.
template <int S>
AMX_TARGET inline void transposeStage(__m512i (&r)[16]) {
  constexpr int D = 8 >> S;
  const __m512i lo = _mm512_load_si512(kTranspose.lo[S]);
  const __m512i hi = _mm512_load_si512(kTranspose.hi[S]);
#pragma GCC unroll 16
  for (int i = 0; i < 16; i++) {
    if (i & D) continue;
    const __m512i a = r[i];
    const __m512i b = r[i + D];
    r[i] = _mm512_permutex2var_epi32(a, lo, b);
    r[i + D] = _mm512_permutex2var_epi32(a, hi, b);
  }
}

// 16 rows of 16 dwords (a row: 32 bf16 of one weight row, i.e. 16 (k, k+1) pairs) transposed, so that row p holds
// pair p of the 16 weight rows: a B tile. Four butterfly stages swap ever smaller off-diagonal blocks.
AMX_TARGET void pairsToTile(const uint16_t* rows, size_t ld, uint16_t* tile) {
  __m512i r[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_si512(rows + i * ld);
  transposeStage<0>(r);
  transposeStage<1>(r);
  transposeStage<2>(r);
  transposeStage<3>(r);
#pragma GCC unroll 16
  for (int i = 0; i < 16; i++) _mm512_store_si512(tile + i * 32, r[i]);
}

// x rows rounded to bf16, rows padded to a multiple of 32 with zeros, a row ld values apart (K + 32: rows K·2 bytes
// apart would share an L1 set when that is a multiple of 4 KiB).
void roundRows(const float* x, int M, int Mpad, int K, uint16_t* xb, size_t ld) {
#pragma omp parallel for schedule(static)
  for (int m = 0; m < Mpad; m++) {
    uint16_t* dst = xb + m * ld;
    if (m >= M) {
      std::memset(dst, 0, static_cast<size_t>(K) * 2);
      continue;
    }
    toBf16Serial(x + static_cast<size_t>(m) * K, dst, K);
  }
}

// Where one 16×16 output tile lives: straight in y, or (a tile over y's edge) in a bounce buffer copied in and out.
struct OutTile {
  float* at;
  size_t strideBytes;
  int row, col, rows, cols;  // the part inside y
  bool bounced;
};

OutTile outTile(float* y, int M, int N, int row, int col, float* bounce) {
  OutTile t{nullptr, 0, row, col, std::max(0, std::min(kTile, M - row)), std::max(0, std::min(kTile, N - col)), false};
  if (t.rows == kTile && t.cols == kTile) {
    t.at = y + static_cast<size_t>(row) * N + col;
    t.strideBytes = static_cast<size_t>(N) * 4;
  } else {
    t.at = bounce;
    t.strideBytes = kTile * 4;
    t.bounced = true;
  }
  return t;
}

void fillBounce(const OutTile& t, const float* y, int N) {
  std::memset(t.at, 0, kTile * kTile * 4);
  for (int r = 0; r < t.rows; r++) std::memcpy(t.at + r * kTile, y + static_cast<size_t>(t.row + r) * N + t.col, t.cols * 4);
}

void drainBounce(const OutTile& t, float* y, int N) {
  for (int r = 0; r < t.rows; r++) std::memcpy(y + static_cast<size_t>(t.row + r) * N + t.col, t.at + r * kTile, t.cols * 4);
}

// One task: columns of `groups` 16-wide groups from g0, every row, k in panels of kc.
struct Task {
  const uint16_t* xb;
  size_t ldx;
  int M, Mpad, K, N;
  float* y;
  bool accumulate;
  AmxDecodePanel decode;
  const void* ctx;
  int panelK;
};

AMX_TARGET void runTask(const Task& t, int g0, int groups, std::vector<uint16_t, AlignedAllocator<uint16_t>>& panel, float (*bounce)[kTile * kTile]) {
  const int groupsInN = (t.N + kTile - 1) / kTile;
  const int live = std::min(groups, groupsInN - g0);
  const int pairs = (live + 1) / 2;
  for (int pc = 0; pc < t.K; pc += t.panelK) {
    const int kc = std::min(t.panelK, t.K - pc);
    const int kTiles = kc / kTileK;
    const size_t groupValues = static_cast<size_t>(kTiles) * kTileValues;
    // Widen this panel into B tiles, group by group (groups past N as zeros, so that every pair is whole).
    for (int gl = 0; gl < pairs * 2; gl++) {
      uint16_t* tiles = panel.data() + gl * groupValues;
      if (gl >= live) {
        std::memset(tiles, 0, groupValues * 2);
        continue;
      }
      t.decode(t.ctx, g0 + gl, pc, kc, tiles);
    }
    const bool load = pc > 0 || t.accumulate;
    const int64_t strideX = static_cast<int64_t>(t.ldx) * 2;
    for (int m0 = 0; m0 < t.Mpad; m0 += 2 * kTile) {
      const uint16_t* a0 = t.xb + m0 * t.ldx + pc;
      const uint16_t* a1 = a0 + kTile * t.ldx;
      for (int p = 0; p < pairs; p++) {
        const uint16_t* b0 = panel.data() + (2 * p) * groupValues;
        const uint16_t* b1 = b0 + groupValues;
        OutTile c[4];
        for (int i = 0; i < 4; i++) {
          c[i] = outTile(t.y, t.M, t.N, m0 + kTile * (i / 2), (g0 + 2 * p + i % 2) * kTile, bounce[i]);
          if (c[i].bounced && load) fillBounce(c[i], t.y, t.N);
        }
        if (load) {
          _tile_loadd(0, c[0].at, c[0].strideBytes);
          _tile_loadd(1, c[1].at, c[1].strideBytes);
          _tile_loadd(2, c[2].at, c[2].strideBytes);
          _tile_loadd(3, c[3].at, c[3].strideBytes);
        } else {
          _tile_zero(0);
          _tile_zero(1);
          _tile_zero(2);
          _tile_zero(3);
        }
        for (int kt = 0; kt < kTiles; kt++) {
          _tile_loadd(4, a0 + kt * kTileK, strideX);
          _tile_loadd(5, a1 + kt * kTileK, strideX);
          _tile_loadd(6, b0 + kt * kTileValues, 64);
          _tile_loadd(7, b1 + kt * kTileValues, 64);
          _tile_dpbf16ps(0, 4, 6);
          _tile_dpbf16ps(1, 4, 7);
          _tile_dpbf16ps(2, 5, 6);
          _tile_dpbf16ps(3, 5, 7);
        }
        _tile_stored(0, c[0].at, c[0].strideBytes);
        _tile_stored(1, c[1].at, c[1].strideBytes);
        _tile_stored(2, c[2].at, c[2].strideBytes);
        _tile_stored(3, c[3].at, c[3].strideBytes);
        for (int i = 0; i < 4; i++)
          if (c[i].bounced) drainBounce(c[i], t.y, t.N);
      }
    }
  }
}

AMX_TARGET void configureTiles() {
  AmxTileConfig cfg;
  for (int i = 0; i < 8; i++) {
    cfg.rows[i] = kTile;
    cfg.colsb[i] = 64;
  }
  // GCC does not see ldtilecfg read the struct and drops the stores above without this.
  asm volatile("" : : "r"(&cfg) : "memory");
  _tile_loadconfig(&cfg);
}

AMX_TARGET void releaseTiles() { _tile_release(); }

}  // namespace

void amxRowsToTiles(const uint16_t* rows, size_t ld, int kc, uint16_t* tiles) {
  for (int kt = 0; kt < kc / kTileK; kt++) pairsToTile(rows + kt * kTileK, ld, tiles + kt * kTileValues);
}

bool amxBf16Available() {
  static const bool yes = [] {
    if (envSwitchedOff("FLEXHELM_QUANT_AMX")) return false;
    // The widening decoders convert with AVX512_BF16 (every AMX CPU so far has it).
    if (!cpuAvx512Bw() || !__builtin_cpu_supports("avx512bf16") || !cpuHasAmxBf16()) return false;
    // The tile data is off for a process until it asks (Linux 5.16+); oneDNN asks the same way.
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureTileData) == 0;
  }();
  return yes;
}

void amxGemmBf16(const float* x, int M, int K, int N, float* y, bool accumulate, AmxDecodePanel decode, const void* ctx, int kBlock) {
  if (M <= 0 || N <= 0) return;
  // One compute thread runs every layer (addon.cc), so one x scratch serves them all.
  static std::vector<uint16_t, AlignedAllocator<uint16_t>> xb;
  const int Mpad = (M + 2 * kTile - 1) / (2 * kTile) * (2 * kTile);
  const size_t ldx = static_cast<size_t>(K) + kTileK;
  if (xb.size() < Mpad * ldx) xb.resize(Mpad * ldx);
  roundRows(x, M, Mpad, K, xb.data(), ldx);
  const int panelK = std::max(kBlock, kMaxPanelK / kBlock * kBlock);
  // 16 groups (256 columns) a task, fewer where that leaves a thread idle.
  const int threads = omp_get_max_threads();
  const int groupsInN = (N + kTile - 1) / kTile;
  int taskGroups = 16;
  while (taskGroups > 2 && (groupsInN + taskGroups - 1) / taskGroups < 2 * threads) taskGroups /= 2;
  const int tasks = (groupsInN + taskGroups - 1) / taskGroups;
  const Task task{xb.data(), ldx, M, Mpad, K, N, y, accumulate, decode, ctx, std::min(panelK, K)};
#pragma omp parallel
  {
    thread_local std::vector<uint16_t, AlignedAllocator<uint16_t>> panel;
    if (panel.size() < static_cast<size_t>(taskGroups) * task.panelK * kTile) panel.resize(static_cast<size_t>(taskGroups) * task.panelK * kTile);
    alignas(64) float bounce[4][kTile * kTile];
    configureTiles();
#pragma omp for schedule(static)
    for (int i = 0; i < tasks; i++) runTask(task, i * taskGroups, taskGroups, panel, bounce);
    releaseTiles();
  }
}

}  // namespace flexhelm
