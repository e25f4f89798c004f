#include "llama-layer.h"

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
    inNormW_ = base->inNormW_, postNormW_ = base->postNormW_, attnOutNormW_ = base->attnOutNormW_, mlpOutNormW_ = base->mlpOutNormW_;
    qNormW_ = base->qNormW_, kNormW_ = base->kNormW_, hasNorms_ = base->hasNorms_;
    qkv_ = base->qkv_, out_ = base->out_, gateUp_ = base->gateUp_, down_ = base->down_;
    routerW_ = base->routerW_, sharedExpertGateW_ = base->sharedExpertGateW_, expertGateUp_ = base->expertGateUp_, expertDown_ = base->expertDown_;
    sharedGateUp_ = base->sharedGateUp_, sharedDown_ = base->sharedDown_;
  }
  LinearOptions options = given;
  options.transposed = true;
  options.relu = false;
  if (parts & kLlamaNorm) {
    // The norms the placement and qkNorm use (the addon checked they are there).
    auto keep = [](std::vector<float>& to, const float* from, int n) {
      if (!from) throw std::invalid_argument("a norm weight the layer's kinds use is missing");
      to.assign(from, from + n);
    };
    if (shape.normIn()) keep(inNormW_, w.inNormW, H), keep(postNormW_, w.postNormW, H);
    if (shape.normOut()) keep(attnOutNormW_, w.attnOutNormW, H), keep(mlpOutNormW_, w.mlpOutNormW, H);
    if (shape.qkNorm) keep(qNormW_, w.qNormW, Q), keep(kNormW_, w.kNormW, KV);
    hasNorms_ = true;
  }
  // q, k and v share their input (one GEMM, N = Q + 2·KV), as do gate and up (N = 2·I).
  if (parts & kLlamaQkv) qkv_ = sideBySide(H, {{w.qW, w.qW16, w.qB}, {w.kW, w.kW16, w.kB}, {w.vW, w.vW16, w.vB}}, {Q, KV, KV}, options);
  if (parts & kLlamaOut) out_ = sideBySide(Q, {{w.oW, w.oW16, w.oB}}, {H}, options);
  if (shape.sparse()) {
    const int E = shape.experts, Ie = shape.expertFfn, Is = shape.sharedFfn;
    if (shape.topK < 1 || shape.topK > E || Ie < 1) throw std::invalid_argument("a sparse layer needs 1 ≤ topK ≤ experts and expertFfn ≥ 1");
    if (parts & kLlamaGateUp) {
      if (!w.routerW || w.expertGateW.size() != static_cast<size_t>(E) || w.expertUpW.size() != static_cast<size_t>(E)) throw std::invalid_argument("a sparse layer's router or expert gate/up weights are missing");
      routerW_.assign(w.routerW, w.routerW + static_cast<size_t>(H) * E);
      expertGateUp_.clear();
      for (int e = 0; e < E; e++) expertGateUp_.push_back(sideBySide(H, {{w.expertGateW[e], w.expertGateW16[e], nullptr}, {w.expertUpW[e], w.expertUpW16[e], nullptr}}, {Ie, Ie}, options));
      if (Is > 0) {
        if (!w.sharedExpertGateW) throw std::invalid_argument("a sparse layer's shared expert gate is missing");
        sharedExpertGateW_.assign(w.sharedExpertGateW, w.sharedExpertGateW + H);
        sharedGateUp_ = sideBySide(H, {{w.sharedGateW, w.sharedGateW16, nullptr}, {w.sharedUpW, w.sharedUpW16, nullptr}}, {Is, Is}, options);
      }
    }
    if (parts & kLlamaDown) {
      if (w.expertDownW.size() != static_cast<size_t>(E)) throw std::invalid_argument("a sparse layer's expert down weights are missing");
      expertDown_.clear();
      for (int e = 0; e < E; e++) expertDown_.push_back(sideBySide(Ie, {{w.expertDownW[e], w.expertDownW16[e], nullptr}}, {H}, options));
      if (Is > 0) sharedDown_ = sideBySide(Is, {{w.sharedDownW, w.sharedDownW16, nullptr}}, {H}, options);
    }
    return;
  }
  if (parts & kLlamaGateUp) gateUp_ = sideBySide(H, {{w.gateW, w.gateW16, w.gateB}, {w.upW, w.upW16, w.upB}}, {I, I}, options);
  if (parts & kLlamaDown) down_ = sideBySide(I, {{w.downW, w.downW16, w.downB}}, {H}, options);
}

int LlamaLayer::parts() const {
  return (hasNorms_ ? kLlamaNorm : 0) | (qkv_ ? kLlamaQkv : 0) | (out_ ? kLlamaOut : 0) | (hasGateUp() ? kLlamaGateUp : 0) | (hasDown() ? kLlamaDown : 0);
}

double LlamaLayer::lazyPackMs() const {
  double ms = 0;
  for (const auto* l : {&qkv_, &out_, &gateUp_, &down_, &sharedGateUp_, &sharedDown_})
    if (*l) ms += (*l)->lazyPackMs();
  for (const auto* list : {&expertGateUp_, &expertDown_})
    for (const auto& l : *list) ms += l->lazyPackMs();
  return ms;
}

size_t LlamaLayer::packedBytes() const {
  size_t n = 0;
  for (const auto* l : {&qkv_, &out_, &gateUp_, &down_, &sharedGateUp_, &sharedDown_})
    if (*l) n += (*l)->packedBytes();
  for (const auto* list : {&expertGateUp_, &expertDown_})
    for (const auto& l : *list) n += l->packedBytes();
  return n + sizeof(float) * (routerW_.size() + sharedExpertGateW_.size());
}

// Scratch slots of the sparse MLP (PackedLinear uses 0-2, 6, 10-12; the layer 3-5, 7-9).
enum MoeSlot { kMoeRows = 13, kMoeRows16 = 14, kMoeGateUp = 15, kMoeAct = 16, kMoeOut = 17, kMoeInput = 18 };

void LlamaLayer::runMoe(const float* x, const uint16_t* x16, int N, float* out, Scratch& scratch) {
  const int H = shape_.hidden, E = shape_.experts, K = shape_.topK, Ie = shape_.expertFfn, Is = shape_.sharedFfn;
  const bool bf16 = dtype_ == Dtype::bf16;
  const size_t h = static_cast<size_t>(H);
  // Routing per token, as transformers and moe-reference.ts: softmax of x · routerW (float32 values, accumulated in
  // double), the K largest (strictly larger wins: the lower expert on a tie), divided by their float32 sum with
  // renormalize. Tokens are then grouped by expert, in token order.
  std::vector<std::vector<int>> rows(E);
  std::vector<std::vector<float>> weights(E);
  std::vector<double> logits(E);
  std::vector<float> p(E);
  std::vector<int> chosen(K);
  for (int n = 0; n < N; n++) {
    const float* xr = x + n * h;
    for (int e = 0; e < E; e++) logits[e] = 0;
    for (int i = 0; i < H; i++) {
      const double xi = xr[i];
      const float* wr = routerW_.data() + static_cast<size_t>(i) * E;
      for (int e = 0; e < E; e++) logits[e] += xi * wr[e];
    }
    double max = -INFINITY, sum = 0;
    for (int e = 0; e < E; e++) max = std::max(max, static_cast<double>(static_cast<float>(logits[e])));
    for (int e = 0; e < E; e++) sum += std::exp(static_cast<double>(static_cast<float>(logits[e])) - max);
    for (int e = 0; e < E; e++) p[e] = static_cast<float>(std::exp(static_cast<double>(static_cast<float>(logits[e])) - max) / sum);
    float chosenSum = 0.f;
    for (int j = 0; j < K; j++) {
      int best = -1;
      for (int e = 0; e < E; e++) {
        bool taken = false;
        for (int t = 0; t < j; t++) taken = taken || chosen[t] == e;
        if (!taken && (best < 0 || p[e] > p[best])) best = e;
      }
      chosen[j] = best;
      chosenSum += p[best];
    }
    for (int j = 0; j < K; j++) {
      rows[chosen[j]].push_back(n);
      weights[chosen[j]].push_back(shape_.renormalize ? p[chosen[j]] / chosenSum : p[chosen[j]]);
    }
  }
  std::fill(out, out + N * h, 0.f);
  const int widest = std::max(Ie, Is);
  auto* gateUp = static_cast<float*>(scratch.get(kMoeGateUp, sizeof(float) * N * 2 * static_cast<size_t>(widest)));
  void* act = scratch.get(kMoeAct, (bf16 ? sizeof(uint16_t) : sizeof(float)) * N * static_cast<size_t>(widest));
  auto* ys = static_cast<float*>(scratch.get(kMoeRows, sizeof(float) * N * h));
  // A gated MLP of M rows (fp32 input xs, or bf16 bits xs16) into ys [M, H].
  auto mlp = [&](PackedLinear& up, PackedLinear& down, int I, const float* xs, const uint16_t* xs16, int M) {
    if (bf16) up.run(xs16, true, M, gateUp, false, false, scratch);
    else up.run(xs, M, gateUp, false, scratch);
    if (bf16) {
      gatedRowsBf16(shape_.activation, gateUp, M, I, static_cast<uint16_t*>(act));
      down.run(act, true, M, ys, false, false, scratch);
    } else {
      gatedRows(shape_.activation, gateUp, M, I, static_cast<float*>(act));
      down.run(static_cast<float*>(act), M, ys, false, scratch);
    }
  };
  // Each expert's rows gathered into one GEMM input (every row that chose it at once), its output scattered back,
  // each product rounded to float32 before the add, experts in index order (the reference's order).
  auto* gathered = static_cast<float*>(scratch.get(kMoeInput, sizeof(float) * N * h));
  auto* gathered16 = static_cast<uint16_t*>(scratch.get(kMoeRows16, sizeof(uint16_t) * N * h));
  for (int e = 0; e < E; e++) {
    const int M = static_cast<int>(rows[e].size());
    if (M == 0) continue;
    for (int r = 0; r < M; r++) {
      const size_t from = static_cast<size_t>(rows[e][r]) * h;
      if (bf16) std::memcpy(gathered16 + r * h, x16 + from, sizeof(uint16_t) * h);
      else std::memcpy(gathered + r * h, x + from, sizeof(float) * h);
    }
    mlp(*expertGateUp_[e], *expertDown_[e], Ie, gathered, gathered16, M);
    for (int r = 0; r < M; r++) {
      float* o = out + static_cast<size_t>(rows[e][r]) * h;
      const float* yr = ys + r * h;
      const float wt = weights[e][r];
      for (int i = 0; i < H; i++) o[i] += yr[i] * wt;
    }
  }
  if (Is > 0) {
    mlp(*sharedGateUp_, *sharedDown_, Is, x, x16, N);
    for (int n = 0; n < N; n++) {
      const float* xr = x + n * h;
      double z = 0;
      for (int i = 0; i < H; i++) z += static_cast<double>(xr[i]) * sharedExpertGateW_[i];
      const float g = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(static_cast<float>(z)))));
      float* o = out + n * h;
      const float* yr = ys + n * h;
      for (int i = 0; i < H; i++) o[i] += g * yr[i];
    }
  }
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
  // Slots 0-2, 6, 10-12 belong to PackedLinear; layers use 3-5, 7-9.
  auto* qkv = static_cast<float*>(scratch.get(4, sizeof(float) * N * qkvWidth));
  // normed: the RMSNorm rows for q/k/v, then the attention's rows for o_proj (bf16 bits in a bf16 layer).
  const size_t normedRow = static_cast<size_t>(std::max(H, Q));
  void* normed = scratch.get(3, (bf16 ? 2 : 4) * N * normedRow);
  auto* normed16 = static_cast<uint16_t*>(normed);
  auto* normed32 = static_cast<float*>(normed);
  ProfileClock clock;
  const bool normIn = shape_.normIn(), normOut = shape_.normOut();
  // normOut: a branch's GEMM writes here (not onto the residual), its norm then adds it to the residual.
  float* branch = normOut ? static_cast<float*>(scratch.get(9, sizeof(float) * N * static_cast<size_t>(H))) : nullptr;
  // The GEMM input of a branch: RMSNorm(h) (normIn), else h itself (rounded to bf16 bits in a bf16 layer).
  auto branchInput = [&](const float* h, const std::vector<float>& w, float* residualCopy) {
    if (normIn) {
      if (bf16) rmsNormRowsBf16(h, normed16, N, H, w.data(), shape_.eps, residualCopy);
      else rmsNormRows(h, normed32, N, H, w.data(), shape_.eps, residualCopy);
    } else if (bf16) {
      toBf16(h, normed16, static_cast<size_t>(N) * H);
    }
    clock.mark(kProfLayerNorm);
  };
  auto runGemm = [&](PackedLinear& l, const float* x32, const uint16_t* x16, float* y, bool accumulate) {
    if (bf16) l.run(x16, true, N, y, false, accumulate, scratch);
    else l.run(x32, N, y, accumulate, scratch);
  };

  // Attention block: y = x + o_proj(attention(N_in(x))) (pre: x goes into y from the norm's pass and the GEMM adds
  // onto it), or y = x + N_attnOut(o_proj(…)) when the branch output is normed.
  branchInput(st.x, inNormW_, normOut ? nullptr : st.y);
  runGemm(*qkv_, normIn ? normed32 : st.x, normed16, qkv, false);
  clock.mark(kProfQkv);
  if (shape_.qkNorm) {
    // OLMo 2: q and k each normed over the whole projection (all heads), before RoPE.
    rmsNormStrided(qkv, N, qkvWidth, Q, qNormW_.data(), shape_.eps);
    rmsNormStrided(qkv + Q, N, qkvWidth, KV, kNormW_.data(), shape_.eps);
    clock.mark(kProfLayerNorm);
  }
  // RoPE on the q heads and the k heads: they sit side by side at the start of each fused row.
  ropeRows(qkv, N, qkvWidth, NH + NKV, D, st.positions, st.invFreq, shape_.ropeScale);
  clock.mark(kProfRope);
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
    runGemm(*out_, normed32, normed16, branch, false);
    clock.mark(kProfOutProj);
    rmsNormAddRows(branch, st.x, st.y, N, H, attnOutNormW_.data(), shape_.eps);
    clock.mark(kProfLayerNorm);
  } else {
    runGemm(*out_, normed32, normed16, st.y, true);
    clock.mark(kProfOutProj);
  }

  // MLP block: y += down(act(gate(x2)) · up(x2)), x2 = N_post(y) (or y itself); with normOut down's output is
  // normed before it is added.
  if (shape_.sparse()) {
    // The router reads float32 rows: the norm's (computed again in float32 in a bf16 layer, whose GEMMs read bf16).
    const float* x32 = st.y;
    if (normIn) {
      auto* rows32 = static_cast<float*>(scratch.get(kMoeInput + 1, sizeof(float) * N * static_cast<size_t>(H)));
      rmsNormRows(st.y, rows32, N, H, postNormW_.data(), shape_.eps);
      x32 = rows32;
      if (bf16) rmsNormRowsBf16(st.y, normed16, N, H, postNormW_.data(), shape_.eps);
    } else if (bf16) {
      toBf16(st.y, normed16, static_cast<size_t>(N) * H);
    }
    clock.mark(kProfLayerNorm);
    float* moeOut = static_cast<float*>(scratch.get(kMoeOut, sizeof(float) * N * static_cast<size_t>(H)));
    runMoe(x32, normed16, N, moeOut, scratch);
    clock.mark(kProfFc2);
    if (normOut) rmsNormAddRows(moeOut, st.y, st.y, N, H, mlpOutNormW_.data(), shape_.eps);
    else
      for (size_t i = 0; i < static_cast<size_t>(N) * H; i++) st.y[i] += moeOut[i];
    clock.mark(kProfLayerNorm);
    if (layerProfile().enabled) layerProfile().calls++;
    return;
  }
  auto* gateUp = static_cast<float*>(scratch.get(8, sizeof(float) * N * 2 * static_cast<size_t>(I)));
  branchInput(st.y, postNormW_, nullptr);
  runGemm(*gateUp_, normIn ? normed32 : st.y, normed16, gateUp, false);
  clock.mark(kProfFc1);
  void* act = scratch.get(7, (bf16 ? sizeof(uint16_t) : sizeof(float)) * N * static_cast<size_t>(I));
  if (bf16) gatedRowsBf16(shape_.activation, gateUp, N, I, static_cast<uint16_t*>(act));
  else gatedRows(shape_.activation, gateUp, N, I, static_cast<float*>(act));
  clock.mark(kProfActivation);
  runGemm(*down_, static_cast<float*>(act), static_cast<uint16_t*>(act), normOut ? branch : st.y, !normOut);
  clock.mark(kProfFc2);
  if (normOut) {
    rmsNormAddRows(branch, st.y, st.y, N, H, mlpOutNormW_.data(), shape_.eps);
    clock.mark(kProfLayerNorm);
  }
  if (layerProfile().enabled) layerProfile().calls++;
}

}  // namespace flexhelm
