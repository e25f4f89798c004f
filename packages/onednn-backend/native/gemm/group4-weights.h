// A weight matrix in FlexLLMGen's 4-bit group-wise format, as the offloading tiers keep it (pinned-memory's
// quantize4 with groupDim 1 of the [in, out] = [K, N] layout): row k holds groups·G/2 bytes of codes (columns 2p and
// 2p + 1 in byte p's high and low nibble; the last group padded) and its scales [groups, 2] (f16 bits: scale, then
// min). Weight (k, n) is q / scale + min computed in fp32, exactly what dequantize4 writes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace flexhelm {

struct Group4Weights {
  const uint8_t* packed = nullptr;
  const uint16_t* scale = nullptr;
  int groupSize = 0;
  bool present() const { return packed != nullptr; }
  int groups(int N) const { return (N + groupSize - 1) / groupSize; }
  // Bytes of codes per weight row, and f16 values of scales per row, of an [K, N] matrix.
  size_t rowBytes(int N) const { return static_cast<size_t>(groups(N)) * groupSize / 2; }
  size_t scaleRow(int N) const { return static_cast<size_t>(groups(N)) * 2; }
};

// Columns [n0, n0 + n) of an [K, N] matrix w widened to floats: dst [K, n] dense, the values dequantize4 gives.
void group4Rows(const Group4Weights& w, int K, int N, int n0, int n, float* dst);

}  // namespace flexhelm
