#include "compact-bf16.h"

#include "../cpu-features.h"
#include "packed-linear.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <numeric>

namespace flexhelm {

namespace {

// One pair row of a panel (4 groups of 16 columns × 2 rows): 3 vectors of 32 words, 12 bits a value.
constexpr size_t kPairRowBytes = 192;
// At most this share of a chunk's weights may fall outside the code table (each costs 8 bytes and a scalar product).
constexpr size_t kMaxEscapesPer = 1024;

// Element e of a packed pair row's group g: column j of the group (0–15), row parity r, at e = j · 2 + r.
inline int kOf(int kb, int p, int e) { return kb * 32 + 2 * p + (e & 1); }
inline int colOf(int g, int e) { return g * 16 + e / 2; }

#define COMPACT_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx512vbmi2")))

// (m & 0x7f) | table[index]
COMPACT_TARGET inline __m512i joinFields(__m512i m, __m512i index, __m512i lut) {
  return _mm512_ternarylogic_epi32(m, _mm512_set1_epi16(0x7f), _mm512_permutexvar_epi16(index, lut), 0xea);
}

// The 4 groups of the pair row at `at` as packed bf16 vectors (their 32 values each, bit for bit). Word e of the three
// stored vectors holds element e of every group: 48 bits, group j's 12 at bit 12j, each a 7-bit mantissa and a 5-bit
// table index (code | sign << 4) above it. vpermw reads only an index's low 5 bits, and the table's entries carry the
// sign and the exponent field (bits 15 and 7–14), so the bits above a field need no masking: two shifts a group at
// most (vpshrdw for the fields that straddle two words), then the lookup and one ternary op.
COMPACT_TARGET inline void decodePairRow(const uint8_t* at, __m512i lut, __m512i w[4]) {
  const __m512i v0 = _mm512_loadu_si512(at);
  const __m512i v1 = _mm512_loadu_si512(at + 64);
  const __m512i v2 = _mm512_loadu_si512(at + 128);
  w[0] = joinFields(v0, _mm512_srli_epi16(v0, 7), lut);
  w[1] = joinFields(_mm512_shrdi_epi16(v0, v1, 12), _mm512_srli_epi16(v1, 3), lut);
  w[2] = joinFields(_mm512_srli_epi16(v1, 8), _mm512_shrdi_epi16(v1, v2, 15), lut);
  w[3] = joinFields(_mm512_srli_epi16(v2, 4), _mm512_srli_epi16(v2, 11), lut);
}

// packedGemvBf16's panelSums on the compact pair rows: the same vdpbf16ps on the same bits in the same order.
template <int MR>
COMPACT_TARGET void compactPanelSums(const uint8_t* panel, int pairRows, const uint16_t* lut, const uint32_t* xPairs, size_t pairStride, float* out) {
  const __m512i table = _mm512_load_si512(lut);
  constexpr int G = 4;
  __m512 acc[MR][G];
  for (int m = 0; m < MR; m++)
    for (int g = 0; g < G; g++) acc[m][g] = _mm512_setzero_ps();
  // 2 KiB ahead, as packedGemvBf16 (the panel is one sequential run).
  constexpr int kPrefetch = 2048;
  const uint8_t* at = panel;
  for (int pr = 0; pr < pairRows; pr++, at += kPairRowBytes) {
    for (size_t line = 0; line < kPairRowBytes; line += 64) _mm_prefetch(reinterpret_cast<const char*>(at) + kPrefetch + line, _MM_HINT_T0);
    __m512i w[G];
    decodePairRow(at, table, w);
    for (int m = 0; m < MR; m++) {
      const __m512i xb = _mm512_set1_epi32(static_cast<int>(xPairs[m * pairStride + pr]));
      for (int g = 0; g < G; g++) acc[m][g] = _mm512_dpbf16_ps(acc[m][g], reinterpret_cast<__m512bh>(w[g]), reinterpret_cast<__m512bh>(xb));
    }
  }
  for (int m = 0; m < MR; m++)
    for (int g = 0; g < G; g++) _mm512_storeu_ps(out + (m * G + g) * 16, acc[m][g]);
}

using CompactSumsFn = void (*)(const uint8_t*, int, const uint16_t*, const uint32_t*, size_t, float*);

constexpr CompactSumsFn kCompactSums[4] = {compactPanelSums<1>, compactPanelSums<2>, compactPanelSums<3>, compactPanelSums<4>};

float bf16Value(uint32_t bits) {
  const uint32_t wide = bits << 16;
  float v;
  std::memcpy(&v, &wide, 4);
  return v;
}

void compactPanelSumsWithEscapes(const void* ctx, int panel, int rows, const uint32_t* xPairs, size_t pairStride, float* out) {
  const auto& c = *static_cast<const CompactBf16*>(ctx);
  const int nb = c.layout.nb;
  kCompactSums[rows - 1](c.bytes.get() + panel * c.panelBytes, c.layout.kPadded / 2, c.lut, xPairs, pairStride, out);
  // The escapes' products (stored as +0 in the pair rows), exact in fp32 as vdpbf16ps forms them.
  for (uint32_t i = c.panelStart[panel]; i < c.panelStart[panel + 1]; i++) {
    const CompactBf16::Escape& e = c.escapes[i];
    const float w = bf16Value(e.bits);
    for (int r = 0; r < rows; r++) out[r * nb + e.col] += w * bf16Value((xPairs[r * pairStride + e.k / 2] >> (16 * (e.k % 2))) & 0xffffu);
  }
}

COMPACT_TARGET void widenPanel(const CompactBf16& c, int panel, uint16_t* packed) {
  const __m512i table = _mm512_load_si512(c.lut);
  const PackedBf16Layout& L = c.layout;
  const uint8_t* at = c.bytes.get() + panel * c.panelBytes;
  uint16_t* base = packed + panel * L.nBlockStride;
  for (int kb = 0; kb < L.kPadded / 32; kb++) {
    for (int p = 0; p < 16; p++, at += kPairRowBytes) {
      __m512i w[4];
      decodePairRow(at, table, w);
      uint16_t* row = base + kb * L.kBlockStride + p * static_cast<size_t>(L.nb) * 2;
      for (int g = 0; g < 4; g++) _mm512_storeu_si512(row + g * 32, w[g]);
    }
  }
  for (uint32_t i = c.panelStart[panel]; i < c.panelStart[panel + 1]; i++) {
    const CompactBf16::Escape& e = c.escapes[i];
    base[(e.k / 32) * L.kBlockStride + ((e.k % 32) / 2) * static_cast<size_t>(L.nb) * 2 + e.col * 2 + e.k % 2] = e.bits;
  }
}

}  // namespace

bool compactBf16Available() {
  static const bool available = [] {
    return !envSwitchedOff("FLEXHELM_COMPACT_BF16") && packedGemvAvailable() && __builtin_cpu_supports("avx512vbmi2");
  }();
  return available;
}

std::unique_ptr<CompactBf16> makeCompactBf16(const PackedBf16Layout& L, const uint16_t* packed, int K, int n, size_t packedBytes) {
  const int panels = (n + L.nb - 1) / L.nb;
  const int kBlocks = L.kPadded / 32;
  // Panels of 64 columns and whole 32-row blocks back to back (BA16a64b2a), nothing between them: what widening restores.
  if (L.nb != 64 || L.kBlockStride != static_cast<size_t>(32) * L.nb || L.nBlockStride != static_cast<size_t>(L.kPadded) * L.nb ||
      packedBytes != static_cast<size_t>(panels) * L.nBlockStride * 2)
    return nullptr;
  const size_t values = static_cast<size_t>(panels) * L.nBlockStride;
  // Exponent counts (every value, padding zeros included: they take code 0 whatever the table).
  std::array<size_t, 256> count{};
#pragma omp parallel
  {
    std::array<size_t, 256> mine{};
#pragma omp for schedule(static)
    for (size_t i = 0; i < values; i++) mine[(packed[i] >> 7) & 0xff]++;
#pragma omp critical
    for (int e = 0; e < 256; e++) count[e] += mine[e];
  }
  // Codes 1–15: the 15 most frequent nonzero exponents. Table entry code | sign << 4 holds the sign and exponent bits.
  std::array<int, 255> order;
  std::iota(order.begin(), order.end(), 1);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return count[a] > count[b]; });
  std::array<int8_t, 256> codeOf;
  codeOf.fill(-1);
  codeOf[0] = 0;
  size_t covered = count[0];
  auto c = std::make_unique<CompactBf16>();
  c->lut[16] = 0x8000;
  for (int i = 0; i < 15; i++) {
    codeOf[order[i]] = static_cast<int8_t>(i + 1);
    c->lut[i + 1] = static_cast<uint16_t>(order[i] << 7);
    c->lut[i + 17] = static_cast<uint16_t>(0x8000 | order[i] << 7);
    covered += count[order[i]];
  }
  if ((values - covered) * kMaxEscapesPer > values) return nullptr;
  c->layout = L;
  c->K = K;
  c->n = n;
  c->panels = panels;
  c->panelBytes = static_cast<size_t>(kBlocks) * 16 * kPairRowBytes;
  c->bytes = {static_cast<uint8_t*>(allocPacked(c->panelBytes * panels)), std::free};
  std::vector<std::vector<CompactBf16::Escape>> escapes(panels);
#pragma omp parallel for schedule(static)
  for (int panel = 0; panel < panels; panel++) {
    const uint16_t* base = packed + panel * L.nBlockStride;
    uint8_t* at = c->bytes.get() + panel * c->panelBytes;
    for (int kb = 0; kb < kBlocks; kb++) {
      for (int p = 0; p < 16; p++, at += kPairRowBytes) {
        const uint16_t* row = base + kb * L.kBlockStride + p * static_cast<size_t>(L.nb) * 2;
        uint16_t words[3][32];
        for (int e = 0; e < 32; e++) {
          uint64_t fields = 0;  // group g's 12 bits at 12g
          for (int g = 0; g < 4; g++) {
            const uint16_t bits = row[g * 32 + e];
            const int code = codeOf[(bits >> 7) & 0xff];
            if (code < 0) {
              escapes[panel].push_back({static_cast<uint32_t>(kOf(kb, p, e)), static_cast<uint16_t>(colOf(g, e)), bits});
              continue;  // +0: mantissa 0, code 0, sign 0
            }
            const uint64_t field = (bits & 0x7fu) | static_cast<uint64_t>(code | (bits >> 15) << 4) << 7;
            fields |= field << (12 * g);
          }
          for (int v = 0; v < 3; v++) words[v][e] = static_cast<uint16_t>(fields >> (16 * v));
        }
        std::memcpy(at, words, sizeof words);
      }
    }
  }
  c->panelStart.push_back(0);
  for (auto& list : escapes) {
    c->escapes.insert(c->escapes.end(), list.begin(), list.end());
    c->panelStart.push_back(static_cast<uint32_t>(c->escapes.size()));
  }
  return c;
}

void compactGemvBf16(const CompactBf16& c, const uint16_t* x, size_t ldx, int M, const float* bias, bool relu, bool accumulate, float* y32,
                     uint16_t* y16, size_t ldy) {
  gemvOverPanels(c.layout.kPadded, c.layout.nb, c.K, c.n, x, ldx, M, bias, relu, accumulate, y32, y16, ldy, compactPanelSumsWithEscapes, &c);
}

void widenCompactBf16(const CompactBf16& c, uint16_t* packed) {
#pragma omp parallel for schedule(static)
  for (int panel = 0; panel < c.panels; panel++) {
    widenPanel(c, panel, packed);
  }
}

}  // namespace flexhelm
