// One OPT decoder layer computed in a single native call: LayerNorms, fused QKV projection, attention with the KV
// cache, output projection with the residual added by oneDNN's sum post-op, fc1 with fused ReLU, fc2 + residual.
#pragma once

#include <memory>

#include "packed-linear.h"

namespace flexhelm {

struct OptLayerShape {
  int hidden, heads, ffn;
  bool preLayerNorm;
  float eps;
};

struct OptLayerWeights {
  const float *qW, *qB, *kW, *kB, *vW, *vB, *oW, *oB, *ln1W, *ln1B, *fc1W, *fc1B, *fc2W, *fc2B, *ln2W, *ln2B;
};

struct OptLayerStep {
  int batch, seq, past;
  const float* x;          // [B, S, E]
  const float* pastK;      // [B, H, P, D]
  const float* pastV;
  const float* maskBias;   // [B, S, P + S]
  float* y;                // [B, S, E]
  float* presentK;         // [B, H, P + S, D], or [B, H, kvTokens, D] with kvTokens set
  float* presentV;
  // 0: present is a fresh [B, H, P + S, D] filled from past. Otherwise present is a cache with room for kvTokens
  // tokens per (batch, head) already holding the past: only the new keys/values are written (pastK/pastV unused).
  size_t kvTokens = 0;
};

class OptLayer {
 public:
  OptLayer(const OptLayerShape& shape, const OptLayerWeights& w, const LinearOptions& options);
  void run(const OptLayerStep& step, Scratch& scratch);
  size_t packedBytes() const;

 private:
  OptLayerShape shape_;
  Dtype dtype_;
  std::vector<float> ln1W_, ln1B_, ln2W_, ln2B_;
  std::unique_ptr<PackedLinear> qkv_, out_, fc1_, fc2_;
};

}  // namespace flexhelm
