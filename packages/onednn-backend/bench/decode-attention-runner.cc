// One decode attention call (seq 1, bf16 layer, bf16 cache in place) through attention.cc's entry point; compiled
// once per build by decode-attention.mjs (the base build with -Dflexhelm=flexbase).
#include <cmath>

#include "kernels.h"

namespace flexhelm {
void runDecode(int B, int P, int H, int KVH, int D, size_t cap, const float* q, void* k, void* v, const float* mask, float* out, uint16_t* out16) {
  AttentionShape s{B, 1, P, H, D, static_cast<size_t>(H + 2 * KVH) * D, static_cast<float>(1.0 / std::sqrt(static_cast<double>(D))), cap, true};
  s.kvHeads = KVH;
  s.kvBf16 = true;
  attention(s, q, k, v, mask, out, out16, true);
}
}  // namespace flexhelm
