#include "opt-layer.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "kernels.h"
#include "layer-profile.h"
#include "norms.h"

namespace flexhelm {

LayerProfile& layerProfile() {
  static LayerProfile profile;
  return profile;
}

namespace {
// A linear layer on float weights, or on f16 ones (always [in, out]: a single column source).
std::shared_ptr<PackedLinear> linear(const float* w, const uint16_t* w16, const float* bias, int K, int N, const LinearOptions& options) {
  if (!w16) return std::make_shared<PackedLinear>(w, bias, K, N, options);
  if (!options.transposed) throw std::invalid_argument("f16 weights must be given in the [in, out] layout (transposed)");
  return std::make_shared<PackedLinear>(std::vector<ColumnSource>{{nullptr, static_cast<size_t>(N), N, w16}}, bias, K, options);
}
}  // namespace

OptLayer::OptLayer(const OptLayerShape& shape, const OptLayerWeights& w, const LinearOptions& options, int parts, const OptLayer* base)
    : shape_(shape), dtype_(options.dtype) {
  const int E = shape.hidden, F = shape.ffn;
  if (base) {
    if (base->dtype_ != options.dtype) throw std::invalid_argument("a layer built on another must use its dtype");
    ln1W_ = base->ln1W_, ln1B_ = base->ln1B_, ln2W_ = base->ln2W_, ln2B_ = base->ln2B_;
    qkv_ = base->qkv_, out_ = base->out_, fc1_ = base->fc1_, fc2_ = base->fc2_;
  }
  if (parts & kPartLayerNorm) {
    ln1W_.assign(w.ln1W, w.ln1W + E);
    ln1B_.assign(w.ln1B, w.ln1B + E);
    ln2W_.assign(w.ln2W, w.ln2W + E);
    ln2B_.assign(w.ln2B, w.ln2B + E);
  }
  LinearOptions plain = options;
  plain.relu = false;
  LinearOptions relu = options;
  relu.relu = true;
  if (parts & kPartQkv) {
    // q, k and v share their input, so one GEMM with N = 3E computes all three.
    std::vector<float> qkvB(static_cast<size_t>(3) * E);
    std::memcpy(qkvB.data(), w.qB, sizeof(float) * E);
    std::memcpy(qkvB.data() + E, w.kB, sizeof(float) * E);
    std::memcpy(qkvB.data() + 2 * E, w.vB, sizeof(float) * E);
    if (options.transposed && (options.packAtRows > 0 || w.qW16 || w.kW16 || w.vW16)) {
      // Lazily packed (streamed) or f16: the three [E, E] tensors are read where they are, as three column blocks
      // (each float or f16: a layer may keep q resident as fp32 and stream k and v as f16).
      const size_t ld = E;
      const std::vector<ColumnSource> sources{{w.qW, ld, E, w.qW16}, {w.kW, ld, E, w.kW16}, {w.vW, ld, E, w.vW16}};
      qkv_ = std::make_shared<PackedLinear>(sources, qkvB.data(), E, plain);
    } else {
      // Kept per thread (packing runs on the compute thread): a streamed q/k/v is concatenated at every step, and
      // fresh memory is slow to touch.
      thread_local std::vector<float> qkvW;
      qkvW.resize(static_cast<size_t>(3) * E * E);
      if (options.transposed) {
        // [E, E] each (in × out) → [E, 3E]: row k is q's row k, then k's, then v's.
        for (int k = 0; k < E; k++) {
          float* row = qkvW.data() + static_cast<size_t>(k) * 3 * E;
          std::memcpy(row, w.qW + static_cast<size_t>(k) * E, sizeof(float) * E);
          std::memcpy(row + E, w.kW + static_cast<size_t>(k) * E, sizeof(float) * E);
          std::memcpy(row + 2 * E, w.vW + static_cast<size_t>(k) * E, sizeof(float) * E);
        }
      } else {
        std::memcpy(qkvW.data(), w.qW, sizeof(float) * E * E);
        std::memcpy(qkvW.data() + static_cast<size_t>(E) * E, w.kW, sizeof(float) * E * E);
        std::memcpy(qkvW.data() + static_cast<size_t>(2) * E * E, w.vW, sizeof(float) * E * E);
      }
      qkv_ = std::make_shared<PackedLinear>(qkvW.data(), qkvB.data(), E, 3 * E, plain);
    }
  }
  if (parts & kPartOut) out_ = linear(w.oW, w.oW16, w.oB, E, E, plain);
  if (parts & kPartFc1) fc1_ = linear(w.fc1W, w.fc1W16, w.fc1B, E, F, relu);
  if (parts & kPartFc2) fc2_ = linear(w.fc2W, w.fc2W16, w.fc2B, F, E, plain);
}

int OptLayer::parts() const {
  return (ln1W_.empty() ? 0 : kPartLayerNorm) | (qkv_ ? kPartQkv : 0) | (out_ ? kPartOut : 0) | (fc1_ ? kPartFc1 : 0) | (fc2_ ? kPartFc2 : 0);
}

double OptLayer::lazyPackMs() const {
  double ms = 0;
  for (const auto* l : {&qkv_, &out_, &fc1_, &fc2_})
    if (*l) ms += (*l)->lazyPackMs();
  return ms;
}

size_t OptLayer::packedBytes() const {
  size_t n = 0;
  for (const auto* l : {&qkv_, &out_, &fc1_, &fc2_})
    if (*l) n += (*l)->packedBytes();
  return n;
}

void OptLayer::run(const OptLayerStep& st, Scratch& scratch) {
  if (parts() != kAllParts) throw std::logic_error("this layer holds only some of its parts (the resident ones of a streamed layer); build the full layer on it with createLayer(…, base)");
  if (st.kvBf16 && dtype_ != Dtype::bf16) throw std::invalid_argument(std::string("a bf16 KV cache (Uint16Array) needs a bf16 layer; this one computes in ") + dtypeName(dtype_) + ": pass a Float32Array cache");
  if (st.kvBf16 && st.kvTokens == 0) throw std::invalid_argument("a bf16 KV cache must be a cache that grows in place (runCached)");
  const int E = shape_.hidden, H = shape_.heads, D = E / H, F = shape_.ffn;
  const int N = st.batch * st.seq;
  const size_t rowsE = static_cast<size_t>(N) * E;
  // Slots 0-2 belong to PackedLinear; the layer uses 3 and up.
  auto* normed = static_cast<float*>(scratch.get(3, sizeof(float) * rowsE));
  auto* qkv = static_cast<float*>(scratch.get(4, sizeof(float) * rowsE * 3));
  auto* ffn = dtype_ == Dtype::bf16 ? nullptr : static_cast<float*>(scratch.get(5, sizeof(float) * N * static_cast<size_t>(F)));
  const bool pre = shape_.preLayerNorm;
  ProfileClock clock;

  // bf16 GEMMs read bf16 activations: the pre-LayerNorms write bf16 and fc1 hands bf16 to fc2, so no separate
  // conversion pass runs over those (rounding is the same: to nearest even, from the same floats).
  const bool bf16 = dtype_ == Dtype::bf16;
  // normed16: the pre-LayerNorm's rows for q/k/v, then the attention's rows for out_proj.
  auto* normed16 = bf16 ? static_cast<uint16_t*>(scratch.get(7, sizeof(uint16_t) * rowsE)) : nullptr;

  // Attention block.
  // y = x + out_proj(attention): x goes into y first (here from the LayerNorm's pass over x), the GEMM adds onto it.
  const bool copied = pre && bf16;
  if (pre && bf16) {
    layerNormRowsBf16(st.x, normed16, N, E, ln1W_.data(), ln1B_.data(), shape_.eps, st.y);
    clock.mark(kProfLayerNorm);
    qkv_->run(normed16, true, N, qkv, false, false, scratch);
  } else if (pre) {
    layerNormRows(st.x, normed, N, E, ln1W_.data(), ln1B_.data(), shape_.eps);
    clock.mark(kProfLayerNorm);
    qkv_->run(normed, N, qkv, false, scratch);
  } else {
    qkv_->run(st.x, N, qkv, false, scratch);
  }
  clock.mark(kProfQkv);
  AttentionShape a{st.batch, st.seq, st.past, H, D, static_cast<size_t>(3) * E, static_cast<float>(std::pow(static_cast<double>(D), -0.5)), st.kvTokens, bf16};
  a.kvBf16 = st.kvBf16;
  const bool inPlace = st.kvTokens > 0;
  // The past goes into a fresh present here; the new keys and values are written by attention, head by head.
  if (!inPlace) {
    writePresent(a, st.pastK, nullptr, 0, static_cast<float*>(st.presentK));
    writePresent(a, st.pastV, nullptr, 0, static_cast<float*>(st.presentV));
  }
  clock.mark(kProfKvWrite);
  attention(a, qkv, st.presentK, st.presentV, st.maskBias, normed, normed16, true);
  clock.mark(kProfAttention);
  if (!copied) std::memcpy(st.y, st.x, sizeof(float) * rowsE);
  clock.mark(kProfResidualCopy);
  if (bf16) out_->run(normed16, true, N, st.y, false, true, scratch);
  else out_->run(normed, N, st.y, true, scratch);
  clock.mark(kProfOutProj);
  if (!pre) {
    layerNormRows(st.y, st.y, N, E, ln1W_.data(), ln1B_.data(), shape_.eps);
    clock.mark(kProfLayerNorm);
  }

  // MLP block.
  if (bf16) {
    auto* ffn16 = static_cast<uint16_t*>(scratch.get(8, sizeof(uint16_t) * N * static_cast<size_t>(F)));
    if (pre) {
      layerNormRowsBf16(st.y, normed16, N, E, ln2W_.data(), ln2B_.data(), shape_.eps);
      clock.mark(kProfLayerNorm);
      fc1_->run(normed16, true, N, ffn16, true, false, scratch);
    } else {
      fc1_->run(st.y, false, N, ffn16, true, false, scratch);
    }
    clock.mark(kProfFc1);
    fc2_->run(ffn16, true, N, st.y, false, true, scratch);
  } else {
    const float* mlpIn = st.y;
    if (pre) {
      layerNormRows(st.y, normed, N, E, ln2W_.data(), ln2B_.data(), shape_.eps);
      mlpIn = normed;
      clock.mark(kProfLayerNorm);
    }
    fc1_->run(mlpIn, N, ffn, false, scratch);
    clock.mark(kProfFc1);
    fc2_->run(ffn, N, st.y, true, scratch);
  }
  clock.mark(kProfFc2);
  if (!pre) {
    layerNormRows(st.y, st.y, N, E, ln2W_.data(), ln2B_.data(), shape_.eps);
    clock.mark(kProfLayerNorm);
  }
  if (layerProfile().enabled) layerProfile().calls++;
}

}  // namespace flexhelm
