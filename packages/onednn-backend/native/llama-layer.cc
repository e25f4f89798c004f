#include "llama-layer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels.h"
#include "layer-profile.h"
#include "llama-kernels.h"

namespace flexhelm {

namespace {

// Column blocks from tensors side by side ([K, n_i] each, read in place) with their biases joined (absent ones as
// zeros; no bias at all when every one is absent).
// A part: its float weights or f16 ones (the other null), and its bias.
struct Part {
  const float* w;
  const uint16_t* w16;
  const float* bias;
};

std::shared_ptr<PackedLinear> sideBySide(int K, const std::vector<Part>& parts, const std::vector<int>& widths, const LinearOptions& options) {
  std::vector<ColumnSource> sources;
  std::vector<float> bias;
  bool anyBias = false;
  for (size_t i = 0; i < parts.size(); i++) {
    sources.push_back({parts[i].w, static_cast<size_t>(widths[i]), widths[i], parts[i].w16});
    anyBias = anyBias || parts[i].bias;
  }
  if (anyBias)
    for (size_t i = 0; i < parts.size(); i++) {
      if (parts[i].bias) bias.insert(bias.end(), parts[i].bias, parts[i].bias + widths[i]);
      else bias.insert(bias.end(), widths[i], 0.f);
    }
  return std::make_shared<PackedLinear>(sources, anyBias ? bias.data() : nullptr, K, options);
}

}  // namespace

LlamaLayer::LlamaLayer(const LlamaLayerShape& shape, const LlamaLayerWeights& w, const LinearOptions& given, int parts, const LlamaLayer* base)
    : shape_(shape), dtype_(given.dtype) {
  const int H = shape.hidden, Q = shape.heads * shape.headDim, KV = shape.kvHeads * shape.headDim, I = shape.ffn;
  if (shape.kvHeads <= 0 || shape.heads % shape.kvHeads != 0) throw std::invalid_argument("heads must be a multiple of kvHeads");
  if (shape.headDim % 2 != 0) throw std::invalid_argument("headDim must be even (RoPE pairs dimension i with i + headDim/2)");
  if (base) {
    if (base->dtype_ != given.dtype) throw std::invalid_argument("a layer built on another must use its dtype");
    inNormW_ = base->inNormW_, postNormW_ = base->postNormW_;
    qkv_ = base->qkv_, out_ = base->out_, gateUp_ = base->gateUp_, down_ = base->down_;
  }
  LinearOptions options = given;
  options.transposed = true;
  options.relu = false;
  if (parts & kLlamaNorm) {
    inNormW_.assign(w.inNormW, w.inNormW + H);
    postNormW_.assign(w.postNormW, w.postNormW + H);
  }
  // q, k and v share their input (one GEMM, N = Q + 2·KV), as do gate and up (N = 2·I).
  if (parts & kLlamaQkv) qkv_ = sideBySide(H, {{w.qW, w.qW16, w.qB}, {w.kW, w.kW16, w.kB}, {w.vW, w.vW16, w.vB}}, {Q, KV, KV}, options);
  if (parts & kLlamaOut) out_ = sideBySide(Q, {{w.oW, w.oW16, w.oB}}, {H}, options);
  if (parts & kLlamaGateUp) gateUp_ = sideBySide(H, {{w.gateW, w.gateW16, w.gateB}, {w.upW, w.upW16, w.upB}}, {I, I}, options);
  if (parts & kLlamaDown) down_ = sideBySide(I, {{w.downW, w.downW16, w.downB}}, {H}, options);
}

int LlamaLayer::parts() const {
  return (inNormW_.empty() ? 0 : kLlamaNorm) | (qkv_ ? kLlamaQkv : 0) | (out_ ? kLlamaOut : 0) | (gateUp_ ? kLlamaGateUp : 0) | (down_ ? kLlamaDown : 0);
}

double LlamaLayer::lazyPackMs() const {
  double ms = 0;
  for (const auto* l : {&qkv_, &out_, &gateUp_, &down_})
    if (*l) ms += (*l)->lazyPackMs();
  return ms;
}

size_t LlamaLayer::packedBytes() const {
  size_t n = 0;
  for (const auto* l : {&qkv_, &out_, &gateUp_, &down_})
    if (*l) n += (*l)->packedBytes();
  return n;
}

void LlamaLayer::run(const LlamaLayerStep& st, Scratch& scratch) {
  if (parts() != kLlamaAllParts) throw std::logic_error("this layer holds only some of its parts (the resident ones of a streamed layer); build the full layer on it with createLlamaLayer(…, base)");
  if (st.kvBf16 && dtype_ != Dtype::bf16) throw std::invalid_argument(std::string("a bf16 KV cache (Uint16Array) needs a bf16 layer; this one computes in ") + dtypeName(dtype_) + ": pass a Float32Array cache");
  if (st.kvBf16 && st.kvTokens == 0) throw std::invalid_argument("a bf16 KV cache must be a cache that grows in place (runCached)");
  const int H = shape_.hidden, NH = shape_.heads, NKV = shape_.kvHeads, D = shape_.headDim, I = shape_.ffn;
  const int Q = NH * D, KV = NKV * D;
  const int N = st.batch * st.seq;
  const size_t qkvWidth = static_cast<size_t>(Q) + 2 * KV;
  const bool bf16 = dtype_ == Dtype::bf16;
  // Slots 0-2, 6, 10, 11 belong to PackedLinear; layers use 3 and up.
  auto* qkv = static_cast<float*>(scratch.get(4, sizeof(float) * N * qkvWidth));
  // normed: the RMSNorm rows for q/k/v, then the attention's rows for o_proj (bf16 bits in a bf16 layer).
  const size_t normedRow = static_cast<size_t>(std::max(H, Q));
  void* normed = scratch.get(3, (bf16 ? 2 : 4) * N * normedRow);
  auto* normed16 = static_cast<uint16_t*>(normed);
  auto* normed32 = static_cast<float*>(normed);
  ProfileClock clock;

  // Attention block: y = x + o_proj(attention(RMSNorm(x))); x goes into y from the norm's pass, the GEMM adds onto it.
  if (bf16) {
    rmsNormRowsBf16(st.x, normed16, N, H, inNormW_.data(), shape_.eps, st.y);
    clock.mark(kProfLayerNorm);
    qkv_->run(normed16, true, N, qkv, false, false, scratch);
  } else {
    rmsNormRows(st.x, normed32, N, H, inNormW_.data(), shape_.eps, st.y);
    clock.mark(kProfLayerNorm);
    qkv_->run(normed32, N, qkv, false, scratch);
  }
  clock.mark(kProfQkv);
  // RoPE on the q heads and the k heads: they sit side by side at the start of each fused row.
  ropeRows(qkv, N, qkvWidth, NH + NKV, D, st.positions, st.invFreq);
  clock.mark(kProfRope);
  AttentionShape a{st.batch, st.seq, st.past, NH, D, qkvWidth, static_cast<float>(1.0 / std::sqrt(static_cast<double>(D))), st.kvTokens, bf16};
  a.kvHeads = NKV;
  a.kvBf16 = st.kvBf16;
  if (st.kvTokens == 0) {
    writePresent(a, st.pastK, nullptr, 0, static_cast<float*>(st.presentK));
    writePresent(a, st.pastV, nullptr, 0, static_cast<float*>(st.presentV));
  }
  clock.mark(kProfKvWrite);
  // The fp32 kernels write float rows: in a bf16 layer into scratch, then rounded into normed16.
  float* attnOut = bf16 ? static_cast<float*>(scratch.get(5, sizeof(float) * N * static_cast<size_t>(Q))) : normed32;
  attention(a, qkv, st.presentK, st.presentV, st.maskBias, attnOut, bf16 ? normed16 : nullptr, true);
  clock.mark(kProfAttention);
  if (bf16) out_->run(normed16, true, N, st.y, false, true, scratch);
  else out_->run(normed32, N, st.y, true, scratch);
  clock.mark(kProfOutProj);

  // MLP block: y += down(silu(gate(x2)) · up(x2)), x2 = RMSNorm(y).
  auto* gateUp = static_cast<float*>(scratch.get(8, sizeof(float) * N * 2 * static_cast<size_t>(I)));
  if (bf16) {
    rmsNormRowsBf16(st.y, normed16, N, H, postNormW_.data(), shape_.eps);
    clock.mark(kProfLayerNorm);
    gateUp_->run(normed16, true, N, gateUp, false, false, scratch);
    clock.mark(kProfFc1);
    auto* act16 = static_cast<uint16_t*>(scratch.get(7, sizeof(uint16_t) * N * static_cast<size_t>(I)));
    swigluRowsBf16(gateUp, N, I, act16);
    clock.mark(kProfActivation);
    down_->run(act16, true, N, st.y, false, true, scratch);
  } else {
    rmsNormRows(st.y, normed32, N, H, postNormW_.data(), shape_.eps);
    clock.mark(kProfLayerNorm);
    gateUp_->run(normed32, N, gateUp, false, scratch);
    clock.mark(kProfFc1);
    auto* act = static_cast<float*>(scratch.get(7, sizeof(float) * N * static_cast<size_t>(I)));
    swigluRows(gateUp, N, I, act);
    clock.mark(kProfActivation);
    down_->run(act, N, st.y, true, scratch);
  }
  clock.mark(kProfFc2);
  if (layerProfile().enabled) layerProfile().calls++;
}

}  // namespace flexhelm
