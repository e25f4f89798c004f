// One rotary decoder layer (Llama 2/3, Mistral, Qwen2, Phi-3, Gemma 2, OLMo 2) in a single native call, its kernels
// chosen by the shape's kinds: RMSNorm where the placement puts one, one GEMM for q/k/v (optional biases), the q/k
// projection norms (OLMo 2), RoPE on q and k (cos/sin scaled for longrope), grouped-query attention with the KV cache
// (scale and logit soft-cap from the shape; the additive mask carries the causal, padding and sliding-window masks),
// o_proj (the residual added by oneDNN's sum post-op, or after the branch's norm), one GEMM for gate and up, SwiGLU or
// tanh GeGLU, down_proj and its residual the same way. Weights come in the engine's [in, out] layout.
#pragma once

#include <memory>
#include <vector>

#include "activations.h"
#include "gemm/packed-linear.h"

namespace flexhelm {

// Where a layer's norms sit (ModelDescription's norm.placement). pre: before each branch (Llama, Phi-3).
// postBranch: on each branch's output before its residual add, the input not normed (OLMo 2). preAndPostBranch:
// both (Gemma 2's four norms).
enum class NormPlacement { pre, postBranch, preAndPostBranch };

struct LlamaLayerShape {
  int hidden, heads, kvHeads, headDim, ffn;
  float eps;
  NormPlacement placement = NormPlacement::pre;
  // OLMo 2: RMSNorm over the whole q and k projections (weights qNormW, kNormW) before RoPE.
  bool qkNorm = false;
  GatedActivation activation = GatedActivation::silu;
  // Multiplier of q·kᵀ (0: headDim^-½); soft-cap of the scaled scores before the mask (0: none); RoPE cos/sin scale.
  float attnScale = 0.f, logitSoftcap = 0.f, ropeScale = 1.f;
  // A sparse (mixture-of-experts) layer when experts > 0 (Mixtral, Qwen2-MoE): the MLP is the router [hidden, experts]
  // (fp32), the topK experts per token (their softmax weights divided by their sum with renormalize), each a gated MLP
  // of expertFfn; with sharedFfn > 0 a shared expert of that size times sigmoid(x · sharedExpertGateW). ffn unused.
  int experts = 0, topK = 0, expertFfn = 0, sharedFfn = 0;
  bool renormalize = false;
  bool sparse() const { return experts > 0; }
  bool normIn() const { return placement != NormPlacement::postBranch; }
  bool normOut() const { return placement != NormPlacement::pre; }
};

// [in, out] weights; biases may be null (absent in the checkpoint), and so may the norms the shape does not use.
struct LlamaLayerWeights {
  const float *inNormW, *qW, *qB, *kW, *kB, *vW, *vB, *oW, *oB, *postNormW, *gateW, *gateB, *upW, *upB, *downW, *downB;
  const float *attnOutNormW = nullptr, *mlpOutNormW = nullptr, *qNormW = nullptr, *kNormW = nullptr;
  // A weight matrix given as IEEE half bits instead of its float pointer (a streamed layer's f16 copies).
  const uint16_t *qW16 = nullptr, *kW16 = nullptr, *vW16 = nullptr, *oW16 = nullptr, *gateW16 = nullptr, *upW16 = nullptr, *downW16 = nullptr;
  // A sparse layer's (shape.sparse()): the router [H, E] (float only), expert e's gate/up [H, Ie] and down [Ie, H]
  // (float or f16 bits, one of each pair set), the shared expert's and its gate [H].
  const float* routerW = nullptr;
  std::vector<const float*> expertGateW, expertUpW, expertDownW;
  std::vector<const uint16_t*> expertGateW16, expertUpW16, expertDownW16;
  const float *sharedGateW = nullptr, *sharedUpW = nullptr, *sharedDownW = nullptr, *sharedExpertGateW = nullptr;
  const uint16_t *sharedGateW16 = nullptr, *sharedUpW16 = nullptr, *sharedDownW16 = nullptr;
};

struct LlamaLayerStep {
  int batch, seq, past;
  const float* x;         // [B, S, hidden]
  const float* maskBias;  // [B, S, P + S]
  const int* positions;   // [B, S] RoPE positions
  const float* invFreq;   // [headDim / 2]
  float* y;               // [B, S, hidden]
  // kvTokens 0: present [B, kvHeads, P + S, D] is fresh and pastK/pastV [B, kvHeads, P, D] are copied into it.
  // Otherwise present is a cache with room for kvTokens tokens already holding the past; only the new ones are written.
  const float* pastK;
  const float* pastV;
  void* presentK;  // floats, or bf16 bits with kvBf16
  void* presentV;
  size_t kvTokens = 0;
  // The cache (kvTokens > 0, bf16 layers only) holds bf16 bits: a decode step reads half the bytes of the past.
  bool kvBf16 = false;
};

// Parts a layer is packed from: a streamed (offloaded) layer keeps its resident parts packed in a partial layer and
// builds the full one on it when the rest arrives (as OptLayer does). A sparse layer's gateUp part is its router, every
// expert's gate/up and the shared expert's gate/up and gate; its down part every down projection.
enum LlamaLayerPart { kLlamaQkv = 1, kLlamaOut = 2, kLlamaGateUp = 4, kLlamaDown = 8, kLlamaNorm = 16, kLlamaAllParts = 31 };

class LlamaLayer {
 public:
  // Packs the parts in `parts` from w (options.transposed is implied: weights are [in, out]); the rest is shared
  // with base, if given.
  LlamaLayer(const LlamaLayerShape& shape, const LlamaLayerWeights& w, const LinearOptions& options, int parts = kLlamaAllParts, const LlamaLayer* base = nullptr);
  void run(const LlamaLayerStep& step, Scratch& scratch);
  size_t packedBytes() const;
  double lazyPackMs() const;
  int parts() const;

 private:
  LlamaLayerShape shape_;
  Dtype dtype_;
  std::vector<float> inNormW_, postNormW_, attnOutNormW_, mlpOutNormW_, qNormW_, kNormW_;
  bool hasNorms_ = false;
  std::shared_ptr<PackedLinear> qkv_, out_, gateUp_, down_;
  // Sparse layers: the router [H, E] and the shared expert's gate [H] (fp32 dot products), the experts' packed GEMMs.
  std::vector<float> routerW_, sharedExpertGateW_;
  std::vector<std::shared_ptr<PackedLinear>> expertGateUp_, expertDown_;
  std::shared_ptr<PackedLinear> sharedGateUp_, sharedDown_;
  bool hasGateUp() const { return shape_.sparse() ? !routerW_.empty() : static_cast<bool>(gateUp_); }
  bool hasDown() const { return shape_.sparse() ? !expertDown_.empty() : static_cast<bool>(down_); }
  // The sparse MLP of the N rows x (fp32: the router's input and, in an fp32 layer, the GEMMs'), x16 (a bf16 layer's
  // GEMM input) into out [N, H] (overwritten).
  void runMoe(const float* x, const uint16_t* x16, int N, float* out, Scratch& scratch);
};

}  // namespace flexhelm
