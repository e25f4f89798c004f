// One decoder layer of any registered family (OPT, Llama 2/3, Mistral, Qwen2, Phi-3, Gemma 2, OLMo 2) in a single
// native call, its kernels chosen by the shape's kinds: RMSNorm or LayerNorm with bias where the placement puts one,
// one GEMM for q/k/v (optional biases), the q/k projection norms (OLMo 2), RoPE on q and k (cos/sin scaled for
// longrope; none for OPT's learned positions, added at embedding), grouped-query attention with the KV cache (scale and
// logit soft-cap from the shape; the additive mask carries the causal, padding and sliding-window masks), o_proj (the
// residual added by oneDNN's sum post-op, or after the branch's norm), then the MLP: one GEMM for gate and up with
// SwiGLU or tanh GeGLU, or OPT's fc1 with its ReLU fused into the GEMM; down_proj / fc2 and its residual the same way.
// Weights come in the engine's [in, out] layout.
#pragma once

#include <memory>

#include "activations.h"
#include "gemm/packed-linear.h"
#include "gemm/quant-gemv.h"

namespace flexhelm {

// Where a layer's norms sit (ModelDescription's norm.placement). pre: before each branch (Llama, Phi-3).
// postBranch: on each branch's output before its residual add, the input not normed (OLMo 2). preAndPostBranch:
// both (Gemma 2's four norms). postResidual: after each residual add (OPT-350m's do_layer_norm_before = false; the
// input and post norms' weights are the two).
enum class NormPlacement { pre, postBranch, preAndPostBranch, postResidual };

// rms: RMSNorm (Gemma's (1 + w) is the weight the host hands in). layer: LayerNorm with bias (OPT).
enum class NormKind { rms, layer };

// gated: act(gate) · up from one GEMM (SwiGLU, GeGLU). relu: OPT's up (fc1, bias) with ReLU fused into its GEMM.
enum class MlpKind { gated, relu };

struct DecoderLayerShape {
  int hidden, heads, kvHeads, headDim, ffn;
  float eps;
  NormPlacement placement = NormPlacement::pre;
  NormKind norm = NormKind::rms;
  // false: positions were added at embedding (OPT's learned table); no RoPE, positions and invFreq unused.
  bool rope = true;
  MlpKind mlp = MlpKind::gated;
  // OLMo 2: RMSNorm over the whole q and k projections (weights qNormW, kNormW) before RoPE.
  bool qkNorm = false;
  GatedActivation activation = GatedActivation::silu;
  // Multiplier of q·kᵀ (0: headDim^-½); soft-cap of the scaled scores before the mask (0: none); RoPE cos/sin scale.
  float attnScale = 0.f, logitSoftcap = 0.f, ropeScale = 1.f;
  bool normIn() const { return placement == NormPlacement::pre || placement == NormPlacement::preAndPostBranch; }
  bool normOut() const { return placement == NormPlacement::postBranch || placement == NormPlacement::preAndPostBranch; }
  bool normAfter() const { return placement == NormPlacement::postResidual; }
};

// [in, out] weights; biases may be null (absent in the checkpoint), and so may the norms the shape does not use.
// One matrix's ggml blocks (data null: not quantized).
struct QuantBlocks {
  const uint8_t* data = nullptr;
  QuantType type = QuantType::q8_0;
  // `data` is QuantLinear::store's form, read where it lies (a streamed layer's home copy), not GGUF's rows.
  bool stored = false;
};

// A fused GEMM of the layer on ggml blocks: one QuantLinear when its matrices are blocks of one type, else one per
// matrix side by side in the output (`pieces`: llama.cpp's Q4_K_M files keep v_proj in Q6_K beside Q4_K q/k in some
// layers; and a streamed layer's stored forms, read where they lie), and the joined bias (empty: none; QuantLinear has
// none).
struct QuantPartLinear {
  std::shared_ptr<QuantLinear> linear;
  std::vector<std::shared_ptr<QuantLinear>> pieces;
  std::vector<float> bias;
  bool present() const { return linear || !pieces.empty(); }
  int K() const { return linear ? linear->K() : pieces.front()->K(); }
  int width() const;
  size_t bytes() const;
  // y [M, width()] = x · Wᵀ (+ y when accumulate), without the bias; x float rows, or bf16 bits when xBf16.
  void run(const void* x, bool xBf16, int M, float* y, bool accumulate, Scratch& scratch) const;
};

struct DecoderLayerWeights {
  const float *inNormW, *qW, *qB, *kW, *kB, *vW, *vB, *oW, *oB, *postNormW, *gateW, *gateB, *upW, *upB, *downW, *downB;
  const float *attnOutNormW = nullptr, *mlpOutNormW = nullptr, *qNormW = nullptr, *kNormW = nullptr;
  // LayerNorm biases of the input and post norms (NormKind::layer only).
  const float *inNormB = nullptr, *postNormB = nullptr;
  // A weight matrix given as IEEE half bits instead of its float pointer (a streamed layer's f16 copies).
  const uint16_t *qW16 = nullptr, *kW16 = nullptr, *vW16 = nullptr, *oW16 = nullptr, *gateW16 = nullptr, *upW16 = nullptr, *downW16 = nullptr;
  // A weight matrix given as ggml blocks instead (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K; [out, in] rows of blocks, as GGUF
  // stores it; its float pointer is then null): the layer multiplies the blocks through QuantLinear and never widens
  // them in memory. The matrices of one fused GEMM (q/k/v, gate/up) are all blocks or none (the addon checks).
  QuantBlocks qQ, kQ, vQ, oQ, gateQ, upQ, downQ;
  // A weight matrix given in FlexLLMGen's 4-bit format instead ([in, out], grouped along out: a streamed layer's
  // compressed copies); multiplied as it is by decode steps, widened only to be packed.
  Group4Weights qG, kG, vG, oG, gateG, upG, downG;
};

struct DecoderLayerStep {
  int batch, seq, past;
  const float* x;         // [B, S, hidden]
  const float* maskBias;  // [B, S, P + S]
  const int* positions;   // [B, S] RoPE positions (null without rope)
  const float* invFreq;   // [headDim / 2] (null without rope)
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
// builds the full one on it when the rest arrives. kDecoderGateUp is fc1 in a relu MLP, kDecoderDown fc2.
enum DecoderLayerPart { kDecoderQkv = 1, kDecoderOut = 2, kDecoderGateUp = 4, kDecoderDown = 8, kDecoderNorm = 16, kDecoderAllParts = 31 };

class DecoderLayer {
 public:
  // Packs the parts in `parts` from w (options.transposed is implied: weights are [in, out]); the rest is shared
  // with base, if given.
  DecoderLayer(const DecoderLayerShape& shape, const DecoderLayerWeights& w, const LinearOptions& options, int parts = kDecoderAllParts, const DecoderLayer* base = nullptr);
  void run(const DecoderLayerStep& step, Scratch& scratch);
  size_t packedBytes() const;
  double lazyPackMs() const;
  int parts() const;

 private:
  DecoderLayerShape shape_;
  Dtype dtype_;
  std::vector<float> inNormW_, postNormW_, attnOutNormW_, mlpOutNormW_, qNormW_, kNormW_, inNormB_, postNormB_;
  bool hasNorms_ = false;
  std::shared_ptr<PackedLinear> qkv_, out_, gateUp_, down_;
  // The same GEMMs on ggml blocks where the weights came quantized (then the packed one is null).
  QuantPartLinear qkvQ_, outQ_, gateUpQ_, downQ_;
};

}  // namespace flexhelm
