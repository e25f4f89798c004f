// Packed bf16 weights held losslessly in 12 bits a weight instead of 16, for decode steps that read every weight once
// and so run at the memory's rate: a quarter fewer bytes is a quarter less time.
//
// A bf16 value is a sign, an 8-bit exponent and a 7-bit mantissa. A linear layer's weights use few exponents (a
// trained or a random matrix alike: |w| spans a few powers of two), so each weight keeps its 7-bit mantissa and a
// 5-bit index: its sign and a 4-bit code into a table of the block's 15 most frequent exponents. Code 0 is exponent 0
// itself (zeros and subnormals, exact). A weight whose exponent is not in the table (an "escape": rare; a block with
// more than 1 in 1024 stays at 16 bits) is stored as +0 and listed with its bits; its products are added after the
// panel's sums. Decoding restores the very bits the packed layout held, so a GEMV multiplies the same products as
// packedGemvBf16 (escapes aside, summed in the same order) and a widened block is the packed block again.
//
// Layout, per panel of 64 columns (oneDNN's BA16a64b2a; other panel widths stay at 16 bits), per pair row of K (down
// all of K's 32-row blocks): three vectors of 32 words, word e holding element e (the packed pair row's order: column
// j of a 16-column group and row parity r at e = 2j + r) of the 4 groups, group g's 12 bits at bit 12g of the 48.
// Needs AVX-512 bf16 and VBMI2 (vpshrdw takes the fields that straddle two words).
#pragma once

#include "packed-gemv.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace flexhelm {

struct CompactBf16 {
  PackedBf16Layout layout;  // of the packed chunk it was made from (and widens back to)
  int K = 0, n = 0;
  int panels = 0;
  size_t panelBytes = 0;  // kPadded / 2 pair rows × 192 bytes
  // lut[code | sign << 4] = the sign and the code's exponent in place (sign << 15 | e << 7): vpermw's 32 words.
  alignas(64) uint16_t lut[32] = {};
  std::unique_ptr<uint8_t, void (*)(void*)> bytes{nullptr, nullptr};
  struct Escape {
    uint32_t k;
    uint16_t col;   // within the panel
    uint16_t bits;  // the weight's bf16 bits
  };
  std::vector<Escape> escapes;       // by panel, then position
  std::vector<uint32_t> panelStart;  // escapes of panel p: [panelStart[p], panelStart[p + 1])
  size_t compactBytes() const { return panelBytes * panels + escapes.size() * sizeof(Escape); }
};

// Whether chunks are made compact: AVX-512 bf16 (as packedGemvBf16) with VBMI2, and FLEXHELM_COMPACT_BF16 not 0.
bool compactBf16Available();

// The compact form of a packed bf16 [K, n] chunk (layout from packedBf16Layout), or null where it does not apply or
// pay: panels other than 64 columns, a layout with gaps, or more than 1 in 1024 weights outside the code table.
std::unique_ptr<CompactBf16> makeCompactBf16(const PackedBf16Layout& layout, const uint16_t* packed, int K, int n, size_t packedBytes);

// packedGemvBf16's computation (same arguments, up to kPackedGemvRows rows) on the compact form.
void compactGemvBf16(const CompactBf16& c, const uint16_t* x, size_t ldx, int M, const float* bias, bool relu, bool accumulate, float* y32,
                     uint16_t* y16, size_t ldy);

// The packed chunk back, bit for bit, at `packed` (packedBytes of the chunk it was made from).
void widenCompactBf16(const CompactBf16& c, uint16_t* packed);

}  // namespace flexhelm
