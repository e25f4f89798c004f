// One OPT decoder layer computed in a single native call: LayerNorms, fused QKV projection, attention with the KV
// cache, output projection with the residual added by oneDNN's sum post-op, fc1 with fused ReLU, fc2 + residual.
#pragma once

#include <cstdint>
#include <memory>

#include "gemm/packed-linear.h"

namespace flexhelm {

struct OptLayerShape {
  int hidden, heads, ffn;
  bool preLayerNorm;
  float eps;
};

struct OptLayerWeights {
  const float *qW, *qB, *kW, *kB, *vW, *vB, *oW, *oB, *ln1W, *ln1B, *fc1W, *fc1B, *fc2W, *fc2B, *ln2W, *ln2B;
  // A weight matrix given as IEEE half bits ([in, out], transposed options only) instead of its float pointer.
  const uint16_t *qW16 = nullptr, *kW16 = nullptr, *vW16 = nullptr, *oW16 = nullptr, *fc1W16 = nullptr, *fc2W16 = nullptr;
};

struct OptLayerStep {
  int batch, seq, past;
  const float* x;          // [B, S, E]
  const float* pastK;      // [B, H, P, D]
  const float* pastV;
  const float* maskBias;   // [B, S, P + S]
  float* y;                // [B, S, E]
  void* presentK;          // [B, H, P + S, D], or [B, H, kvTokens, D] with kvTokens set
  void* presentV;
  // 0: present is a fresh [B, H, P + S, D] filled from past. Otherwise present is a cache with room for kvTokens
  // tokens per (batch, head) already holding the past: only the new keys/values are written (pastK/pastV unused).
  size_t kvTokens = 0;
  // The cache (kvTokens > 0 only) holds bf16 bits instead of floats: a bf16 layer's decode step then reads half the
  // bytes of the past keys and values.
  bool kvBf16 = false;
};

// The parts a layer is built from. A streamed (offloaded) layer keeps its resident parts packed in a partial layer
// and, each time the rest arrives, builds the full layer on it: only the streamed parts are packed again.
enum OptLayerPart { kPartQkv = 1, kPartOut = 2, kPartFc1 = 4, kPartFc2 = 8, kPartLayerNorm = 16, kAllParts = 31 };

class OptLayer {
 public:
  // Packs the parts in `parts` from w (the other pointers of w may be null); the rest is shared with base, if given.
  OptLayer(const OptLayerShape& shape, const OptLayerWeights& w, const LinearOptions& options, int parts = kAllParts, const OptLayer* base = nullptr);
  void run(const OptLayerStep& step, Scratch& scratch);
  size_t packedBytes() const;
  // Packing done inside runs by lazily packed parts (streamed layers with packAtRows), in milliseconds.
  double lazyPackMs() const;
  int parts() const;

 private:
  OptLayerShape shape_;
  Dtype dtype_;
  std::vector<float> ln1W_, ln1B_, ln2W_, ln2B_;
  // Shared: a full streamed layer uses the same packed resident linears as the partial layer it was built on.
  std::shared_ptr<PackedLinear> qkv_, out_, fc1_, fc2_;
};

}  // namespace flexhelm
