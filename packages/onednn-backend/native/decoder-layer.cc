#include "decoder-layer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels.h"
#include "layer-profile.h"
#include "norms.h"
#include "rope.h"

namespace flexhelm {

LayerProfile& layerProfile() {
  static LayerProfile profile;
  return profile;
}

namespace {

// Column blocks from tensors side by side ([K, n_i] each, read in place) with their biases joined (absent ones as
// zeros; no bias at all when every one is absent).
// A part: its float weights, f16 ones or 4-bit ones (the others null), and its bias.
struct Part {
  const float* w;
  const uint16_t* w16;
  const float* bias;
  Group4Weights w4 = {};
};

std::shared_ptr<PackedLinear> sideBySide(int K, const std::vector<Part>& parts, const std::vector<int>& widths, const LinearOptions& options) {
  std::vector<ColumnSource> sources;
  std::vector<float> bias;
  bool anyBias = false;
  for (size_t i = 0; i < parts.size(); i++) {
    sources.push_back({parts[i].w, static_cast<size_t>(widths[i]), widths[i], parts[i].w16, parts[i].w4});
    anyBias = anyBias || parts[i].bias;
  }
  if (anyBias)
    for (size_t i = 0; i < parts.size(); i++) {
      if (parts[i].bias) bias.insert(bias.end(), parts[i].bias, parts[i].bias + widths[i]);
      else bias.insert(bias.end(), widths[i], 0.f);
    }
  return std::make_shared<PackedLinear>(sources, anyBias ? bias.data() : nullptr, K, options);
}

// Matrices [n_i, K] of ggml blocks stacked row-wise into one [Σn_i, K] QuantLinear (the fused GEMM's columns in the
// same order as sideBySide's), or, when their types differ, one QuantLinear each; the biases joined the same way.
QuantPartLinear quantStacked(int K, const std::vector<QuantBlocks>& blocks, const std::vector<const float*>& biases, const std::vector<int>& widths) {
  const QuantType type = blocks[0].type;
  int N = 0;
  bool oneType = true;
  for (size_t i = 0; i < blocks.size(); i++) {
    if (!blocks[i].data) throw std::invalid_argument("the matrices of one fused GEMM must all be ggml blocks");
    oneType = oneType && blocks[i].type == type;
    N += widths[i];
  }
  bool stored = false;
  for (const QuantBlocks& b : blocks) stored = stored || b.stored;
  // Stored forms are read where they lie, each matrix its own QuantLinear (joining them would copy the layer).
  auto make = [K](const QuantBlocks& b, int width) {
    return b.stored ? std::make_shared<QuantLinear>(b.type, b.data, K, width, QuantLinear::Borrow{}) : std::make_shared<QuantLinear>(b.type, b.data, K, width);
  };
  QuantPartLinear part;
  if (blocks.size() == 1) {
    part.linear = make(blocks[0], N);
  } else if (!oneType || stored) {
    for (size_t i = 0; i < blocks.size(); i++) part.pieces.push_back(make(blocks[i], widths[i]));
  } else {
    const size_t rowBytes = static_cast<size_t>(K / quantBlockValues(type)) * quantBlockBytes(type);
    std::vector<uint8_t> joined;
    joined.reserve(rowBytes * N);
    for (size_t i = 0; i < blocks.size(); i++) joined.insert(joined.end(), blocks[i].data, blocks[i].data + rowBytes * widths[i]);
    part.linear = std::make_shared<QuantLinear>(type, joined.data(), K, N);
  }
  bool anyBias = false;
  for (const float* b : biases) anyBias = anyBias || b;
  if (anyBias)
    for (size_t i = 0; i < biases.size(); i++) {
      if (biases[i]) part.bias.insert(part.bias.end(), biases[i], biases[i] + widths[i]);
      else part.bias.insert(part.bias.end(), widths[i], 0.f);
    }
  return part;
}

}  // namespace

int QuantPartLinear::width() const {
  if (linear) return linear->N();
  int n = 0;
  for (const auto& p : pieces) n += p->N();
  return n;
}

size_t QuantPartLinear::bytes() const {
  size_t n = linear ? linear->bytes() : 0;
  for (const auto& p : pieces) n += p->bytes();
  return n + bias.size() * sizeof(float);
}

void QuantPartLinear::run(const void* x, bool xBf16, int M, float* y, bool accumulate, Scratch& scratch) const {
  auto runOne = [&](QuantLinear& l, float* out, bool add) {
    if (xBf16) l.run(static_cast<const uint16_t*>(x), M, out, add);
    else l.run(static_cast<const float*>(x), M, out, add);
  };
  if (linear) return runOne(*linear, y, accumulate);
  // Each matrix into its own rows, then into its columns of y (a copy of M × width floats: small beside the GEMMs).
  const size_t width = static_cast<size_t>(this->width());
  size_t col = 0;
  for (const auto& p : pieces) {
    const size_t w = static_cast<size_t>(p->N());
    auto* part = static_cast<float*>(scratch.get(15, sizeof(float) * M * w));
    runOne(*p, part, false);
    for (int r = 0; r < M; r++) {
      float* dst = y + r * width + col;
      const float* src = part + r * w;
      if (accumulate)
        for (size_t c = 0; c < w; c++) dst[c] += src[c];
      else
        std::memcpy(dst, src, w * sizeof(float));
    }
    col += w;
  }
}

DecoderLayer::DecoderLayer(const DecoderLayerShape& shape, const DecoderLayerWeights& w, const LinearOptions& given, int parts, const DecoderLayer* base)
    : shape_(shape), dtype_(given.dtype) {
  const int H = shape.hidden, Q = shape.heads * shape.headDim, KV = shape.kvHeads * shape.headDim, I = shape.ffn;
  if (shape.kvHeads <= 0 || shape.heads % shape.kvHeads != 0) throw std::invalid_argument("heads must be a multiple of kvHeads");
  if (shape.rope && shape.headDim % 2 != 0) throw std::invalid_argument("headDim must be even (RoPE pairs dimension i with i + headDim/2)");
  // A branch's norm before its residual add is an RMSNorm kernel (rmsNormAddRows): no family puts a LayerNorm there.
  if (shape.norm == NormKind::layer && shape.normOut()) throw std::invalid_argument("a LayerNorm layer has no post-branch norms (placement pre or post only)");
  if (base) {
    if (base->dtype_ != given.dtype) throw std::invalid_argument("a layer built on another must use its dtype");
    inNormW_ = base->inNormW_, postNormW_ = base->postNormW_, attnOutNormW_ = base->attnOutNormW_, mlpOutNormW_ = base->mlpOutNormW_;
    qNormW_ = base->qNormW_, kNormW_ = base->kNormW_, inNormB_ = base->inNormB_, postNormB_ = base->postNormB_, hasNorms_ = base->hasNorms_;
    qkv_ = base->qkv_, out_ = base->out_, gateUp_ = base->gateUp_, down_ = base->down_;
    qkvQ_ = base->qkvQ_, outQ_ = base->outQ_, gateUpQ_ = base->gateUpQ_, downQ_ = base->downQ_;
  }
  LinearOptions options = given;
  options.transposed = true;
  options.relu = false;
  if (parts & kDecoderNorm) {
    // The norms the placement and qkNorm use (the addon checked they are there).
    auto keep = [](std::vector<float>& to, const float* from, int n) {
      if (!from) throw std::invalid_argument("a norm weight the layer's kinds use is missing");
      to.assign(from, from + n);
    };
    if (shape.normIn() || shape.normAfter()) keep(inNormW_, w.inNormW, H), keep(postNormW_, w.postNormW, H);
    if ((shape.normIn() || shape.normAfter()) && shape.norm == NormKind::layer) keep(inNormB_, w.inNormB, H), keep(postNormB_, w.postNormB, H);
    if (shape.normOut()) keep(attnOutNormW_, w.attnOutNormW, H), keep(mlpOutNormW_, w.mlpOutNormW, H);
    if (shape.qkNorm) keep(qNormW_, w.qNormW, Q), keep(kNormW_, w.kNormW, KV);
    hasNorms_ = true;
  }
  // q, k and v share their input (one GEMM, N = Q + 2·KV), as do gate and up (N = 2·I).
  // A part whose first matrix comes as ggml blocks is multiplied on its blocks (QuantLinear), else packed.
  if (parts & kDecoderQkv) {
    if (w.qQ.data) qkvQ_ = quantStacked(H, {w.qQ, w.kQ, w.vQ}, {w.qB, w.kB, w.vB}, {Q, KV, KV});
    else qkv_ = sideBySide(H, {{w.qW, w.qW16, w.qB, w.qG}, {w.kW, w.kW16, w.kB, w.kG}, {w.vW, w.vW16, w.vB, w.vG}}, {Q, KV, KV}, options);
  }
  if (parts & kDecoderOut) {
    if (w.oQ.data) outQ_ = quantStacked(Q, {w.oQ}, {w.oB}, {H});
    else out_ = sideBySide(Q, {{w.oW, w.oW16, w.oB, w.oG}}, {H}, options);
  }
  // A relu MLP's fc1 (up) has its ReLU fused into the GEMM (never ggml blocks); a gated one's gate and up are one GEMM.
  LinearOptions reluOptions = options;
  reluOptions.relu = true;
  if (parts & kDecoderGateUp) {
    if (shape.mlp == MlpKind::relu) gateUp_ = sideBySide(H, {{w.upW, w.upW16, w.upB, w.upG}}, {I}, reluOptions);
    else if (w.gateQ.data) gateUpQ_ = quantStacked(H, {w.gateQ, w.upQ}, {w.gateB, w.upB}, {I, I});
    else gateUp_ = sideBySide(H, {{w.gateW, w.gateW16, w.gateB, w.gateG}, {w.upW, w.upW16, w.upB, w.upG}}, {I, I}, options);
  }
  if (parts & kDecoderDown) {
    if (w.downQ.data) downQ_ = quantStacked(I, {w.downQ}, {w.downB}, {H});
    else down_ = sideBySide(I, {{w.downW, w.downW16, w.downB, w.downG}}, {H}, options);
  }
}

int DecoderLayer::parts() const {
  return (hasNorms_ ? kDecoderNorm : 0) | (qkv_ || qkvQ_.present() ? kDecoderQkv : 0) | (out_ || outQ_.present() ? kDecoderOut : 0) | (gateUp_ || gateUpQ_.present() ? kDecoderGateUp : 0) |
         (down_ || downQ_.present() ? kDecoderDown : 0);
}

double DecoderLayer::lazyPackMs() const {
  double ms = 0;
  for (const auto* l : {&qkv_, &out_, &gateUp_, &down_})
    if (*l) ms += (*l)->lazyPackMs();
  return ms;
}

size_t DecoderLayer::packedBytes() const {
  size_t n = 0;
  for (const auto* l : {&qkv_, &out_, &gateUp_, &down_})
    if (*l) n += (*l)->packedBytes();
  // Quantized parts hold their blocks (as stored: e.g. 18 bytes per 32 weights for Q4_0) and their bias.
  for (const auto* q : {&qkvQ_, &outQ_, &gateUpQ_, &downQ_})
    if (q->present()) n += q->bytes();
  return n;
}

void DecoderLayer::run(const DecoderLayerStep& st, Scratch& scratch) {
  if (parts() != kDecoderAllParts) throw std::logic_error("this layer holds only some of its parts (the resident ones of a streamed layer); build the full layer on it with createDecoderLayer(…, base)");
  if (st.kvBf16 && dtype_ != Dtype::bf16) throw std::invalid_argument(std::string("a bf16 KV cache (Uint16Array) needs a bf16 layer; this one computes in ") + dtypeName(dtype_) + ": pass a Float32Array cache");
  if (st.kvBf16 && st.kvTokens == 0) throw std::invalid_argument("a bf16 KV cache must be a cache that grows in place (runCached)");
  const int H = shape_.hidden, NH = shape_.heads, NKV = shape_.kvHeads, D = shape_.headDim, I = shape_.ffn;
  const int Q = NH * D, KV = NKV * D;
  const int N = st.batch * st.seq;
  const size_t qkvWidth = static_cast<size_t>(Q) + 2 * KV;
  const bool bf16 = dtype_ == Dtype::bf16;
  // Slots 0-2, 6, 10-12 and 16 belong to PackedLinear; layers use 3-5 and 7-9, QuantPartLinear 15.
  auto* qkv = static_cast<float*>(scratch.get(4, sizeof(float) * N * qkvWidth));
  // normed: the RMSNorm rows for q/k/v, then the attention's rows for o_proj (bf16 bits in a bf16 layer).
  const size_t normedRow = static_cast<size_t>(std::max(H, Q));
  void* normed = scratch.get(3, (bf16 ? 2 : 4) * N * normedRow);
  auto* normed16 = static_cast<uint16_t*>(normed);
  auto* normed32 = static_cast<float*>(normed);
  ProfileClock clock;
  const bool normIn = shape_.normIn(), normOut = shape_.normOut(), normAfter = shape_.normAfter();
  const bool layerNorm = shape_.norm == NormKind::layer;
  // normOut: a branch's GEMM writes here (not onto the residual), its norm then adds it to the residual.
  float* branch = normOut ? static_cast<float*>(scratch.get(9, sizeof(float) * N * static_cast<size_t>(H))) : nullptr;
  // The GEMM input of a branch: RMSNorm(h) (normIn), else h itself (rounded to bf16 bits in a bf16 layer).
  // residualCopy, if not null, receives h (the residual the branch's GEMM adds onto), from the norm's pass where it can.
  auto branchInput = [&](const float* h, const std::vector<float>& w, const std::vector<float>& b, float* residualCopy) {
    if (normIn && layerNorm) {
      if (bf16) layerNormRowsBf16(h, normed16, N, H, w.data(), b.data(), shape_.eps, residualCopy);
      else layerNormRows(h, normed32, N, H, w.data(), b.data(), shape_.eps);
    } else if (normIn) {
      if (bf16) rmsNormRowsBf16(h, normed16, N, H, w.data(), shape_.eps, residualCopy);
      else rmsNormRows(h, normed32, N, H, w.data(), shape_.eps, residualCopy);
    } else if (bf16) {
      toBf16(h, normed16, static_cast<size_t>(N) * H);
    }
    clock.mark(kProfLayerNorm);
    if (residualCopy && !(normIn && (bf16 || !layerNorm))) {
      std::memcpy(residualCopy, h, sizeof(float) * N * static_cast<size_t>(H));
      clock.mark(kProfResidualCopy);
    }
  };
  // placement post: the residual sum itself is normed, in place.
  auto normInPlace = [&](float* h, const std::vector<float>& w, const std::vector<float>& b) {
    if (layerNorm) layerNormRows(h, h, N, H, w.data(), b.data(), shape_.eps);
    else rmsNormRows(h, h, N, H, w.data(), shape_.eps);
    clock.mark(kProfLayerNorm);
  };
  auto runGemm = [&](const std::shared_ptr<PackedLinear>& l, QuantPartLinear& q, const float* x32, const uint16_t* x16, float* y, bool accumulate) {
    if (l) {
      if (bf16) l->run(x16, true, N, y, false, accumulate, scratch);
      else l->run(x32, N, y, accumulate, scratch);
      return;
    }
    // ggml blocks: a bf16 layer's rows as they are (QuantLinear quantizes them or widens them: exact); no bias.
    const int width = q.width();
    if (bf16) q.run(x16, true, N, y, accumulate, scratch);
    else q.run(x32, false, N, y, accumulate, scratch);
    if (!q.bias.empty())
      for (int r = 0; r < N; r++)
        for (int c = 0; c < width; c++) y[static_cast<size_t>(r) * width + c] += q.bias[c];
  };

  // Attention block: y = x + o_proj(attention(N_in(x))) (pre: x goes into y from the norm's pass and the GEMM adds
  // onto it), or y = x + N_attnOut(o_proj(…)) when the branch output is normed.
  branchInput(st.x, inNormW_, inNormB_, normOut ? nullptr : st.y);
  runGemm(qkv_, qkvQ_, normIn ? normed32 : st.x, normed16, qkv, false);
  clock.mark(kProfQkv);
  if (shape_.qkNorm) {
    // OLMo 2: q and k each normed over the whole projection (all heads), before RoPE.
    rmsNormStrided(qkv, N, qkvWidth, Q, qNormW_.data(), shape_.eps);
    rmsNormStrided(qkv + Q, N, qkvWidth, KV, kNormW_.data(), shape_.eps);
    clock.mark(kProfLayerNorm);
  }
  // RoPE on the q heads and the k heads: they sit side by side at the start of each fused row.
  if (shape_.rope) {
    ropeRows(qkv, N, qkvWidth, NH + NKV, D, st.positions, st.invFreq, shape_.ropeScale);
    clock.mark(kProfRope);
  }
  const float scale = shape_.attnScale > 0.f ? shape_.attnScale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  AttentionShape a{st.batch, st.seq, st.past, NH, D, qkvWidth, scale, st.kvTokens, bf16};
  a.kvHeads = NKV;
  a.kvBf16 = st.kvBf16;
  a.logitSoftcap = shape_.logitSoftcap;
  if (st.kvTokens == 0) {
    writePresent(a, st.pastK, nullptr, 0, static_cast<float*>(st.presentK));
    writePresent(a, st.pastV, nullptr, 0, static_cast<float*>(st.presentV));
  }
  clock.mark(kProfKvWrite);
  // The fp32 kernels write float rows: in a bf16 layer into scratch, then rounded into normed16.
  float* attnOut = bf16 ? static_cast<float*>(scratch.get(5, sizeof(float) * N * static_cast<size_t>(Q))) : normed32;
  attention(a, qkv, st.presentK, st.presentV, st.maskBias, attnOut, bf16 ? normed16 : nullptr, true);
  clock.mark(kProfAttention);
  if (normOut) {
    runGemm(out_, outQ_, normed32, normed16, branch, false);
    clock.mark(kProfOutProj);
    rmsNormAddRows(branch, st.x, st.y, N, H, attnOutNormW_.data(), shape_.eps);
    clock.mark(kProfLayerNorm);
  } else {
    runGemm(out_, outQ_, normed32, normed16, st.y, true);
    clock.mark(kProfOutProj);
    if (normAfter) normInPlace(st.y, inNormW_, inNormB_);
  }

  // MLP block: y += down(act(gate(x2)) · up(x2)), x2 = N_post(y) (or y itself); with normOut down's output is
  // normed before it is added.
  branchInput(st.y, postNormW_, postNormB_, nullptr);
  void* act = scratch.get(7, (bf16 ? sizeof(uint16_t) : sizeof(float)) * N * static_cast<size_t>(I));
  if (shape_.mlp == MlpKind::relu) {
    // fc1 + bias + ReLU in one GEMM, a bf16 layer's output written as the bf16 fc2 reads it.
    if (bf16) gateUp_->run(normed16, true, N, act, true, false, scratch);
    else gateUp_->run(normIn ? normed32 : st.y, N, static_cast<float*>(act), false, scratch);
    clock.mark(kProfFc1);
  } else {
    auto* gateUp = static_cast<float*>(scratch.get(8, sizeof(float) * N * 2 * static_cast<size_t>(I)));
    runGemm(gateUp_, gateUpQ_, normIn ? normed32 : st.y, normed16, gateUp, false);
    clock.mark(kProfFc1);
    if (bf16) gatedRowsBf16(shape_.activation, gateUp, N, I, static_cast<uint16_t*>(act));
    else gatedRows(shape_.activation, gateUp, N, I, static_cast<float*>(act));
    clock.mark(kProfActivation);
  }
  runGemm(down_, downQ_, static_cast<float*>(act), static_cast<uint16_t*>(act), normOut ? branch : st.y, !normOut);
  clock.mark(kProfFc2);
  if (normOut) {
    rmsNormAddRows(branch, st.y, st.y, N, H, mlpOutNormW_.data(), shape_.eps);
    clock.mark(kProfLayerNorm);
  }
  if (normAfter) normInPlace(st.y, postNormW_, postNormB_);
  if (layerProfile().enabled) layerProfile().calls++;
}

}  // namespace flexhelm
