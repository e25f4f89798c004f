// Causal attention over the engine's [B, H, T, D] KV layout: finds each query row's visible keys, writes the step's
// new keys and values into the cache, and hands every (batch, head) to its kernel: decode.cc for one query row where
// the head size allows, prefill.cc otherwise (query blocks in fp32 or bf16, one row in fp32, or the plain loop).
#include "attention-internal.h"

namespace flexhelm {

namespace {

using namespace attn;

// This (batch, head)'s new keys and values, from the fused QKV rows into its KV rows past..past+seq: written here,
// just before the head's kernel reads them, they are still in cache when it does.
// h is a kv head: keys start after the query heads' columns, values after the kv heads' keys. A bf16 layer stores
// them rounded to bf16 in a float cache too, so that it computes the same with either cache (`auto` fills its first
// batch's cache in fp32 and narrows it to bf16 afterwards).
void writeFreshKeys(const AttentionShape& s, const float* q, float* k, float* v, int b, int h) {
  const size_t D = s.headDim, keys = static_cast<size_t>(s.heads) * D, values = keys + static_cast<size_t>(s.kvHeadCount()) * D;
  for (int i = 0; i < s.seq; i++) {
    const float* row = q + (static_cast<size_t>(b) * s.seq + i) * s.qStride + h * D;
    float* kr = k + (static_cast<size_t>(s.past) + i) * D;
    float* vr = v + (static_cast<size_t>(s.past) + i) * D;
    if (s.bf16 && s.headDim % 16 == 0 && bf16Path()) {
      roundRowBf16(row + keys, kr, D);
      roundRowBf16(row + values, vr, D);
    } else if (s.bf16) {
      uint16_t bits[256];
      auto store = [&bits](const float* from, float* to, size_t n) {
        toBf16Serial(from, bits, n);
        for (size_t j = 0; j < n; j++) {
          const uint32_t wide = static_cast<uint32_t>(bits[j]) << 16;
          std::memcpy(to + j, &wide, sizeof wide);
        }
      };
      for (size_t d = 0; d < D; d += 256) {
        const size_t n = std::min<size_t>(256, D - d);
        store(row + keys + d, kr + d, n);
        store(row + values + d, vr + d, n);
      }
    } else {
      std::memcpy(kr, row + keys, sizeof(float) * D);
      std::memcpy(vr, row + values, sizeof(float) * D);
    }
  }
}

// The same into a bf16 cache: rounded to nearest even as they are stored.
void writeFreshKeys(const AttentionShape& s, const float* q, uint16_t* k, uint16_t* v, int b, int h) {
  const size_t D = s.headDim, keys = static_cast<size_t>(s.heads) * D, values = keys + static_cast<size_t>(s.kvHeadCount()) * D;
  for (int i = 0; i < s.seq; i++) {
    const float* row = q + (static_cast<size_t>(b) * s.seq + i) * s.qStride + h * D;
    uint16_t* kr = k + (static_cast<size_t>(s.past) + i) * D;
    uint16_t* vr = v + (static_cast<size_t>(s.past) + i) * D;
    if (D % 16 == 0 && bf16Path()) {
      roundRowBf16(row + keys, kr, D);
      roundRowBf16(row + values, vr, D);
    } else {
      toBf16Serial(row + keys, kr, D);
      toBf16Serial(row + values, vr, D);
    }
  }
}

// A (batch, head)'s first n bf16 rows widened into per-thread floats, for the kernels that read fp32 only (the plain
// loop, and CPUs without AVX512_BF16).
const float* widen(const uint16_t* x, size_t n, std::vector<float>& store) {
  float* y = sized(store, n);
  for (size_t i = 0; i < n; i++) {
    const uint32_t bits = static_cast<uint32_t>(x[i]) << 16;
    std::memcpy(y + i, &bits, sizeof bits);
  }
  return y;
}

}  // namespace

void attention(const AttentionShape& s, const float* q, void* kAny, void* vAny, const float* maskBias, float* out, uint16_t* out16, bool writeFresh) {
  const int B = s.batch, S = s.seq, H = s.heads, D = s.headDim;
  const size_t T = static_cast<size_t>(s.past) + S;
  const size_t ld = s.tokenStride();
  const size_t work = static_cast<size_t>(B) * H * S * T * D;
  const bool vec = vectorPath(D);
  // Blocks of queries on bf16 operands; one row (decode) stays on the fp32 kernels, converted at the end.
  const bool bf16 = vec && S > 1 && s.bf16 && out16 && bf16Path();
  const bool decode = S == 1 && decodePath(D);
  // Each query row's visible keys, found once for all heads.
  thread_local std::vector<int> limitsStore;
  thread_local std::vector<uint8_t> unbiasedStore;
  int* limits = sized(limitsStore, static_cast<size_t>(B) * S);
  uint8_t* unbiased = sized(unbiasedStore, static_cast<size_t>(B) * S);
#pragma omp parallel if (work >= kParallelMin)
  {
    // (Decode items find their row's visible keys themselves: one barrier less per call, and the scan from the end
    // stops at once when the newest key is visible.)
    if (!decode) {
#pragma omp for schedule(static)
      for (int r = 0; r < B * S; r++) {
        const float* mask = maskBias + static_cast<size_t>(r) * T;
        limits[r] = visibleKeys(mask, static_cast<int>(T));
        unbiased[r] = bf16 && zeroBias(mask, limits[r]);
      }
    }
    const int KVH = s.kvHeadCount(), group = H / KVH;
    if (decode) {
      // One work item per (batch, kv head): its new key and value, then every query head reading it. Dynamic: on
      // a busy host the threads run at uneven speeds. (Runs of neighbouring items per thread were no faster in a
      // fair side-by-side run, bench/decode-attention.mjs.)
#pragma omp for collapse(2) schedule(dynamic, 1)
      for (int b = 0; b < B; b++)
        for (int g = 0; g < KVH; g++) {
          const size_t at = (static_cast<size_t>(b) * KVH + g) * ld * D;
          const float* mask = maskBias + static_cast<size_t>(b) * T;
          const int L = visibleKeys(mask, static_cast<int>(T));
          if (s.kvBf16) {
            uint16_t* k = static_cast<uint16_t*>(kAny) + at;
            uint16_t* v = static_cast<uint16_t*>(vAny) + at;
            if (writeFresh) writeFreshKeys(s, q, k, v, b, g);
            decodeKvHead(s, q, k, v, mask, L, out, b, g);
          } else {
            float* k = static_cast<float*>(kAny) + at;
            float* v = static_cast<float*>(vAny) + at;
            if (writeFresh) writeFreshKeys(s, q, k, v, b, g);
            decodeKvHead(s, q, k, v, mask, L, out, b, g);
          }
        }
    }
    // Grouped-query attention: several query heads read one kv head, so its new keys are written first, once.
    if (writeFresh && group > 1 && !decode) {
#pragma omp for collapse(2) schedule(static)
      for (int b = 0; b < B; b++)
        for (int g = 0; g < KVH; g++) {
          const size_t at = (static_cast<size_t>(b) * KVH + g) * ld * D;
          if (s.kvBf16) writeFreshKeys(s, q, static_cast<uint16_t*>(kAny) + at, static_cast<uint16_t*>(vAny) + at, b, g);
          else writeFreshKeys(s, q, static_cast<float*>(kAny) + at, static_cast<float*>(vAny) + at, b, g);
        }
    }
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < (decode ? 0 : B); b++) {
      for (int h = 0; h < H; h++) {
        const size_t at = (static_cast<size_t>(b) * KVH + h / group) * ld * D;
        const bool fresh = writeFresh && group == 1;
        if (s.kvBf16) {
          uint16_t* kbh = static_cast<uint16_t*>(kAny) + at;
          uint16_t* vbh = static_cast<uint16_t*>(vAny) + at;
          if (fresh) writeFreshKeys(s, q, kbh, vbh, b, h);
          if (vec && S == 1) headSingleRow(s, q, kbh, vbh, maskBias, limits, out, b, h, 0);
          else if (bf16) headBlockedBf16(s, q, kbh, vbh, maskBias, limits, unbiased, out16, b, h);
          else {
            AttentionScratch& w = threadScratch();
            const float* kw = widen(kbh, T * D, w.kWide);
            const float* vw = widen(vbh, T * D, w.vWide);
            if (vec) headBlocked(s, q, kw, vw, maskBias, limits, out, b, h);
            else headScalar(s, q, kw, vw, maskBias, limits, out, b, h);
          }
          continue;
        }
        float* kbh = static_cast<float*>(kAny) + at;
        float* vbh = static_cast<float*>(vAny) + at;
        if (fresh) writeFreshKeys(s, q, kbh, vbh, b, h);
        if (!vec) headScalar(s, q, kbh, vbh, maskBias, limits, out, b, h);
        else if (S == 1) headSingleRow(s, q, kbh, vbh, maskBias, limits, out, b, h, 0);
        else if (bf16) headBlockedBf16(s, q, kbh, vbh, maskBias, limits, unbiased, out16, b, h);
        else headBlocked(s, q, kbh, vbh, maskBias, limits, out, b, h);
      }
    }
  }
  // The fp32 kernels' rows, rounded for the bf16 GEMM that reads them.
  if (out16 && !bf16) toBf16(out, out16, static_cast<size_t>(B) * S * H * D);
}

}  // namespace flexhelm

