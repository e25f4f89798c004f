#include "quant-gemv.h"

#include "amx-gemm.h"
#include "kquant-gemm.h"
#include "kquant-gemv.h"
#include "kquant-interleave.h"

#include "../bf16-bits.h"
#include "../cpu-features.h"
#include "../kernels.h"
#include "packed-linear.h"
#include "quant-gemm.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

namespace flexhelm {

QuantType parseQuantType(const std::string& name) {
  if (name == "Q8_0") return QuantType::q8_0;
  if (name == "Q4_0") return QuantType::q4_0;
  if (name == "Q4_K") return QuantType::q4_k;
  if (name == "Q5_K") return QuantType::q5_k;
  if (name == "Q6_K") return QuantType::q6_k;
  throw std::invalid_argument("quantized type '" + name + "': one of Q8_0, Q4_0, Q4_K, Q5_K, Q6_K");
}

const char* quantTypeName(QuantType t) {
  const char* names[] = {"Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K"};
  return names[static_cast<int>(t)];
}

QuantKernel parseQuantKernel(const std::string& name) {
  if (name == "best") return QuantKernel::best;
  if (name == "avx512vnni") return QuantKernel::avx512vnni;
  if (name == "avx2") return QuantKernel::avx2;
  if (name == "scalar") return QuantKernel::scalar;
  if (name == "bf16") return QuantKernel::bf16;
  if (name == "vnni-gemm") return QuantKernel::vnniGemm;
  if (name == "amx-bf16") return QuantKernel::amxBf16;
  throw std::invalid_argument("quantized kernel '" + name + "': one of best, avx512vnni, avx2, scalar, bf16, vnni-gemm, amx-bf16");
}

const char* quantKernelName(QuantKernel k) {
  switch (k) {
    case QuantKernel::avx512vnni: return "avx512vnni";
    case QuantKernel::avx2: return "avx2";
    case QuantKernel::scalar: return "scalar";
    case QuantKernel::bf16: return "bf16";
    case QuantKernel::vnniGemm: return "vnni-gemm";
    case QuantKernel::amxBf16: return "amx-bf16";
    default: return "best";
  }
}

bool quantKernelAvailable(QuantKernel k) {
  switch (k) {
    case QuantKernel::avx512vnni: return cpuAvx512Bw() && __builtin_cpu_supports("avx512vnni");
    case QuantKernel::avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") && !std::getenv("FLEXHELM_ONEDNN_PLAIN_KERNELS");
    // oneDNN 2.6 runs bf16 matmuls from AVX-512 (native with AVX512_BF16, emulated without).
    case QuantKernel::bf16: return cpuAvx512BwIsa();
    case QuantKernel::vnniGemm: return quantGemmAvailable();
    case QuantKernel::amxBf16: return amxBf16Available();
    default: return true;
  }
}

QuantKernel bestQuantKernel() {
  static const QuantKernel k = quantKernelAvailable(QuantKernel::avx512vnni) ? QuantKernel::avx512vnni
                               : quantKernelAvailable(QuantKernel::avx2)     ? QuantKernel::avx2
                                                                             : QuantKernel::scalar;
  return k;
}

namespace {

// IEEE half → float without F16C (the scalar reference runs anywhere).
float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) bits = sign | 0x7f800000 | (mant << 13);
  else if (exp != 0) bits = sign | ((exp + 112) << 23) | (mant << 13);
  else if (mant == 0) bits = sign;
  else {
    // Subnormal half: normalise.
    int e = -1;
    do {
      e++;
      mant <<= 1;
    } while ((mant & 0x400) == 0);
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t blockScaleBits(const uint8_t* block) { return static_cast<uint16_t>(block[0] | (block[1] << 8)); }

// The weight's integer offset: Q8_0 bytes are stored +128, Q4_0 nibbles are q with value q − 8.
inline int typeOffset(QuantType t) { return t == QuantType::q8_0 ? 128 : 8; }

// Scalar reference: per block the exact integer dot product of the weight's signed values with the activation's,
// times both scales, added in ascending block order.
void dotScalar(QuantType t, const uint8_t* wrow, int K, const int8_t* xq, const float* xd, float* out) {
  const size_t bb = quantBlockBytes(t);
  float acc = 0;
  for (int b = 0; b < K / kQuantBlock; b++) {
    const uint8_t* blk = wrow + b * bb;
    const int8_t* x = xq + b * kQuantBlock;
    int32_t dot = 0;
    if (t == QuantType::q8_0) {
      for (int i = 0; i < kQuantBlock; i++) dot += (static_cast<int>(blk[2 + i]) - 128) * x[i];
    } else {
      for (int j = 0; j < 16; j++) {
        dot += ((blk[2 + j] & 0xf) - 8) * x[j];
        dot += ((blk[2 + j] >> 4) - 8) * x[j + 16];
      }
    }
    acc += halfToFloat(blockScaleBits(blk)) * xd[b] * static_cast<float>(dot);
  }
  *out = acc;
}

#define QUANT_AVX2 __attribute__((target("avx2,fma,f16c")))
#define QUANT_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma")))

QUANT_AVX2 inline float scaleOf(const uint8_t* blk) { return _cvtsh_ss(blockScaleBits(blk)); }

QUANT_AVX2 inline __m256i q4Nibbles256(const uint8_t* qs) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), mask), _mm_and_si128(raw, mask));
}

QUANT_AVX2 inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// AVX2: one block per 256-bit vector. `vpmaddubsw` saturates its 16-bit pair sums, so Q8_0 takes ggml's sign trick
// (|w| unsigned times x with w's sign; at most 2·128·127 < 32768) and Q4_0 multiplies its nibbles (≤ 15) directly
// and subtracts 8·Σx per block.
template <int MR>
QUANT_AVX2 void dotAvx2(QuantType t, const uint8_t* wrow, int K, const int8_t* const* xq, const float* const* xd, const int32_t* const* xs, float* out) {
  const size_t bb = quantBlockBytes(t);
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256 acc[MR];
  for (int m = 0; m < MR; m++) acc[m] = _mm256_setzero_ps();
  for (int b = 0; b < K / kQuantBlock; b++) {
    const uint8_t* blk = wrow + b * bb;
    const float wd = scaleOf(blk);
    if (t == QuantType::q8_0) {
      const __m256i ws = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2)), flip);
      const __m256i aw = _mm256_sign_epi8(ws, ws);
      for (int m = 0; m < MR; m++) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[m] + b * kQuantBlock));
        const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(x, ws)), ones);
        acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(wd * xd[m][b]), acc[m]);
      }
    } else {
      const __m256i wq = q4Nibbles256(blk + 2);
      for (int m = 0; m < MR; m++) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[m] + b * kQuantBlock));
        __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(wq, x), ones);
        // −8·Σx into one lane: the lanes are summed at the end anyway.
        dot = _mm256_add_epi32(dot, _mm256_setr_epi32(-8 * xs[m][b], 0, 0, 0, 0, 0, 0, 0));
        acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(wd * xd[m][b]), acc[m]);
      }
    }
  }
  for (int m = 0; m < MR; m++) out[m] = hsum256(acc[m]);
}

// AVX-512 VNNI: two blocks per 512-bit vector, `vpdpbusd` with the weight as the unsigned operand (Q8_0 stored +128,
// Q4_0's nibbles as they are); its accumulator starts at −offset·Σx in the first lane of each block, so the sum
// comes out signed without a per-row sign fix. An odd last block goes through the AVX2 path's arithmetic.
template <int MR>
QUANT_VNNI void dotVnni(QuantType t, const uint8_t* wrow, int K, const int8_t* const* xq, const float* const* xd, const int32_t* const* xs,
                        const float* const* xdPairs, const int32_t* const* seedPairs, float* out) {
  const size_t bb = quantBlockBytes(t);
  const int blocks = K / kQuantBlock;
  const __m128i mask4 = _mm_set1_epi8(0x0f);
  __m512 acc[MR];
  for (int m = 0; m < MR; m++) acc[m] = _mm512_setzero_ps();
  int b = 0;
  for (; b + 1 < blocks; b += 2) {
    const uint8_t* b0 = wrow + b * bb;
    const uint8_t* b1 = b0 + bb;
    __m512i w;
    if (t == QuantType::q8_0) {
      w = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + 2))),
                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b1 + 2)), 1);
    } else {
      const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + 2));
      const __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b1 + 2));
      const __m256i n0 = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(r0, 4), mask4), _mm_and_si128(r0, mask4));
      const __m256i n1 = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(r1, 4), mask4), _mm_and_si128(r1, mask4));
      w = _mm512_inserti64x4(_mm512_castsi256_si512(n0), n1, 1);
    }
    const __m512 wd = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(_cvtsh_ss(blockScaleBits(b0))), _mm512_set1_ps(_cvtsh_ss(blockScaleBits(b1))));
    const size_t pair = static_cast<size_t>(b / 2) * 16;
    for (int m = 0; m < MR; m++) {
      const __m512i x = _mm512_loadu_si512(xq[m] + b * kQuantBlock);
      const __m512i dot = _mm512_dpbusd_epi32(_mm512_load_si512(seedPairs[m] + pair), w, x);
      acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(wd, _mm512_load_ps(xdPairs[m] + pair)), acc[m]);
    }
  }
  for (int m = 0; m < MR; m++) out[m] = _mm512_reduce_add_ps(acc[m]);
  if (b < blocks) {
    // The odd last block, scalar (K = 32 · odd is rare: Llama widths are multiples of 64).
    for (int m = 0; m < MR; m++) {
      float tail;
      dotScalar(t, wrow + b * bb, kQuantBlock, xq[m] + b * kQuantBlock, xd[m] + b, &tail);
      out[m] += tail;
    }
  }
}

template <int MR>
void dotRows(QuantKernel k, QuantType t, const uint8_t* wrow, int K, const int8_t* const* xq, const float* const* xd, const int32_t* const* xs,
             const float* const* xdPairs, const int32_t* const* seedPairs, float* out) {
  if (k == QuantKernel::avx512vnni) dotVnni<MR>(t, wrow, K, xq, xd, xs, xdPairs, seedPairs, out);
  else if (k == QuantKernel::avx2) dotAvx2<MR>(t, wrow, K, xq, xd, xs, out);
  else
    for (int m = 0; m < MR; m++) dotScalar(t, wrow, K, xq[m], xd[m], out + m);
}

// Columns per task: enough work per thread, and the weight rows one task reads stay in L2 while its row groups
// (4 activation rows at a time) pass over them.
constexpr int kColumnTile = 16;
constexpr int kRowGroup = 4;

#define QUANT_AVX512 __attribute__((target("avx512f,avx512bw,f16c")))

// 32 values of one block (stored form) to float: Q8_0 bytes are q + 128, Q4_0 nibbles q with value q − 8.
QUANT_AVX512 void blockToBf16Avx512(QuantType t, const uint8_t* blk, uint16_t* out) {
  const __m512 d = _mm512_set1_ps(_cvtsh_ss(blockScaleBits(blk)));
  __m512i lo, hi;
  if (t == QuantType::q8_0) {
    const __m128i flip = _mm_set1_epi8(static_cast<char>(0x80));
    lo = _mm512_cvtepi8_epi32(_mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2)), flip));
    hi = _mm512_cvtepi8_epi32(_mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 18)), flip));
  } else {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
    const __m512i eight = _mm512_set1_epi32(8);
    lo = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_and_si128(raw, _mm_set1_epi8(0x0f))), eight);
    hi = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0f))), eight);
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), bf16Bits16(_mm512_mul_ps(_mm512_cvtepi32_ps(lo), d)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16), bf16Bits16(_mm512_mul_ps(_mm512_cvtepi32_ps(hi), d)));
}

void blockToBf16Scalar(QuantType t, const uint8_t* blk, uint16_t* out) {
  const float d = halfToFloat(blockScaleBits(blk));
  for (int j = 0; j < 16; j++) {
    int a, b;
    if (t == QuantType::q8_0) {
      a = static_cast<int>(blk[2 + j]) - 128;
      b = static_cast<int>(blk[18 + j]) - 128;
    } else {
      a = (blk[2 + j] & 0xf) - 8;
      b = (blk[2 + j] >> 4) - 8;
    }
    out[j] = bf16Bits(d * static_cast<float>(a));
    out[j + 16] = bf16Bits(d * static_cast<float>(b));
  }
}

}  // namespace

// Blocks [b0, b1) of column n of a Q8_0 / Q4_0 weight widened to bf16 at dst (on the calling thread): from GGUF's rows,
// or from the tiled GEMM's interleaved layout one block reassembled at a time (no row-order copy of the layer).
static void widenBlocksBf16(QuantType type, const uint8_t* blocks, bool interleaved, int K, int N, int n, int b0, int b1, uint16_t* dst) {
  static const bool simd = cpuAvx512Bw() && __builtin_cpu_supports("f16c");
  const size_t bb = quantBlockBytes(type);
  const uint8_t* row = blocks + static_cast<size_t>(n) * (K / kQuantBlock) * bb;
  uint8_t gathered[40];
  for (int b = b0; b < b1; b++) {
    const uint8_t* blk = row + b * bb;
    if (interleaved) {
      quantGatherBlock(type, blocks, K, N, n, b, gathered);
      blk = gathered;
    }
    if (simd) blockToBf16Avx512(type, blk, dst + (b - b0) * kQuantBlock);
    else blockToBf16Scalar(type, blk, dst + (b - b0) * kQuantBlock);
  }
}

// One column of the interleaved layout widened (dequantizeInterleavedBf16Vnni's last partial group).
static void widenInterleavedColumn(QuantType type, const uint8_t* packed, int K, int N, int n, uint16_t* dst) {
  widenBlocksBf16(type, packed, true, K, N, n, 0, K / kQuantBlock, dst);
}

// The layout exists only where the tiled GEMM runs (VNNI): whole groups are widened 16 columns at a time.
static void dequantizeInterleavedBf16(QuantType type, const uint8_t* packed, int K, int N, uint16_t* out) {
  dequantizeInterleavedBf16Vnni(type, packed, K, N, out, widenInterleavedColumn);
}

void dequantizeRowsBf16(QuantType type, const uint8_t* blocks, int K, int n0, int n1, uint16_t* out) {
  if (isKQuant(type)) return dequantizeKRowsBf16(type, blocks, K, n0, n1, out);
#pragma omp parallel for schedule(static)
  for (int n = n0; n < n1; n++) widenBlocksBf16(type, blocks, false, K, /* N: read for the interleaved layout only */ 0, n, 0, K / kQuantBlock, out + static_cast<size_t>(n - n0) * K);
}

namespace {

// What the AMX GEMM widens from: the blocks as a QuantLinear keeps them.
struct AmxSource {
  QuantType type;
  const uint8_t* w;
  int K, N;
  bool interleaved;
};

// AmxDecodePanel over a layer's blocks: a whole interleaved group straight into tiles, otherwise row by row (GGUF's
// row order, or the last partial group of an interleaved layer; zeros past N), then transposed to tiles.
void widenForAmx(const void* ctx, int g, int k0, int kc, uint16_t* tiles) {
  const AmxSource& s = *static_cast<const AmxSource*>(ctx);
  const int n0 = g * 16;
  if (s.interleaved && !isKQuant(s.type) && n0 + 16 <= s.N) return widenInterleavedGroupTiles(s.type, s.w, s.K, g, k0 / kQuantBlock, (k0 + kc) / kQuantBlock, tiles);
  thread_local std::vector<uint16_t, AlignedAllocator<uint16_t>> scratch;
  const size_t ld = static_cast<size_t>(kc) + 32;
  if (scratch.size() < 16 * ld) scratch.resize(16 * ld);
  uint16_t* rows = scratch.data();
  // An interleaved K-quant group's blocks for this panel back in row form first (16 × kc/256 blocks, in L1/L2).
  const bool kquantGroup = s.interleaved && isKQuant(s.type);
  const uint8_t* groupRows = kquantGroup ? kquantGroupRows(s.type, s.w, s.K, s.N, g, k0 / 256, (k0 + kc) / 256) : nullptr;
  for (int r = 0; r < 16; r++) {
    uint16_t* dst = rows + static_cast<size_t>(r) * ld;
    const int n = n0 + r;
    if (n >= s.N) std::memset(dst, 0, static_cast<size_t>(kc) * 2);
    else if (kquantGroup) widenKRowBf16Ne(s.type, groupRows, kc, r, 0, kc, dst);
    else if (isKQuant(s.type)) widenKRowBf16Ne(s.type, s.w, s.K, n, k0, k0 + kc, dst);
    else widenBlocksBf16(s.type, s.w, s.interleaved, s.K, s.N, n, k0 / kQuantBlock, (k0 + kc) / kQuantBlock, dst);
  }
  amxRowsToTiles(rows, ld, kc, tiles);
}

}  // namespace

void quantizeRowQ8(const float* x, int K, int8_t* q, float* d, int32_t* sum) {
  for (int b = 0; b < K / kQuantBlock; b++) {
    const float* v = x + b * kQuantBlock;
    float amax = 0;
    for (int i = 0; i < kQuantBlock; i++) amax = std::max(amax, std::fabs(v[i]));
    const float scale = amax / 127.0f;
    const float inv = scale != 0 ? 1.0f / scale : 0.0f;
    int32_t s = 0;
    for (int i = 0; i < kQuantBlock; i++) {
      const int qi = static_cast<int>(std::nearbyint(v[i] * inv));
      q[b * kQuantBlock + i] = static_cast<int8_t>(std::clamp(qi, -127, 127));
      s += q[b * kQuantBlock + i];
    }
    d[b] = scale;
    sum[b] = s;
  }
}

namespace {

// K a positive multiple of the block's values and N positive; the bytes of the [N, K] blocks.
size_t checkedQuantBytes(QuantType type, int K, int N) {
  if (K <= 0 || N <= 0 || K % quantBlockValues(type) != 0) throw std::invalid_argument("QuantLinear: K must be a positive multiple of the block's values (32; 256 for K-quants) and N positive");
  return static_cast<size_t>(K / quantBlockValues(type)) * quantBlockBytes(type) * N;
}

// With VNNI, Q8_0 / Q4_0 blocks are reordered for the tiled GEMM (same bytes; quant-gemm.h), which then runs decode
// rows: on a quiet host it is as fast as the row kernel at 1 row and 2.5× at 8 (RESULTS.md, 2026-12-05), and prompt
// rows widen from this layout as fast as from GGUF's. FLEXHELM_QUANT_GEMM=0 keeps GGUF's row order (the row kernels).
// Q4_K / Q6_K are interleaved for their decode-row kernel the same way (kquant-interleave.h: 16 columns a word).
bool storesInterleaved(QuantType type) {
  const bool tiled = type == QuantType::q8_0 || type == QuantType::q4_0;
  const bool keepRows = envSwitchedOff("FLEXHELM_QUANT_GEMM");
  return !keepRows && ((tiled && quantGemmAvailable()) || (kquantInterleavable(type) && kquantGemmAvailable()));
}

// allocPacked's buffers: 64-byte aligned, and a large layer's blocks on transparent huge pages as the bf16 packed
// weights are (a decode step streams them; the hardware prefetchers stop at every 4 KiB page). Freed with free().
uint8_t* alignedBytes(size_t bytes) { return static_cast<uint8_t*>(allocPacked(bytes)); }

}  // namespace

void QuantLinear::store(QuantType type, const uint8_t* blocks, int K, int N, uint8_t* out) {
  const size_t bytes = checkedQuantBytes(type, K, N);
  const bool interleave = storesInterleaved(type);
  const uint8_t* rows = blocks;
  std::unique_ptr<uint8_t, decltype(&std::free)> flipped(nullptr, &std::free);
  if (type == QuantType::q8_0) {
    // +128 on every quant byte (not the f16 scales): the unsigned operand of vpdpbusd. Done in row form, before any
    // reordering moves the scales.
    uint8_t* w = interleave ? alignedBytes(bytes) : out;
    if (interleave) flipped.reset(w);
    std::memcpy(w, blocks, bytes);
    const size_t bb = quantBlockBytes(type);
    for (size_t at = 0; at < bytes; at += bb)
      for (int i = 0; i < kQuantBlock; i++) w[at + 2 + i] ^= 0x80;
    if (!interleave) return;
    rows = w;
  }
  if (!interleave) {
    std::memcpy(out, blocks, bytes);
    return;
  }
  if (type == QuantType::q8_0 || type == QuantType::q4_0) quantInterleave(type, rows, K, N, out);
  else kquantInterleave(type, rows, K, N, out);
}

QuantLinear::QuantLinear(QuantType type, const uint8_t* blocks, int K, int N) : type_(type), K_(K), N_(N) {
  bytes_ = checkedQuantBytes(type, K, N);
  rowBytes_ = bytes_ / N;
  w_ = alignedBytes(bytes_);
  try {
    store(type, blocks, K, N, w_);
  } catch (...) {
    std::free(w_);
    throw;
  }
  interleaved_ = storesInterleaved(type);
}

QuantLinear::QuantLinear(QuantType type, const uint8_t* stored, int K, int N, Borrow) : type_(type), K_(K), N_(N) {
  bytes_ = checkedQuantBytes(type, K, N);
  rowBytes_ = bytes_ / N;
  interleaved_ = storesInterleaved(type);
  if (reinterpret_cast<uintptr_t>(stored) % 64 == 0) {
    w_ = const_cast<uint8_t*>(stored);
    owned_ = false;
  } else {
    w_ = alignedBytes(bytes_);
    std::memcpy(w_, stored, bytes_);
  }
}

QuantLinear::~QuantLinear() {
  if (owned_) std::free(w_);
}

// What `best` runs for M rows (kQuantIntRows in quant-blocks.h says why).
QuantKernel QuantLinear::bestKernel(int M) const {
  // Above kQuantIntRows rows vnni-gemm is the fastest path too (RESULTS.md: 0.55–0.66× the widened bf16 matmul's time
  // at 512 rows), on q8_0-rounded activations as llama.cpp computes every row. That about doubles the made model's
  // logit error against the dequantized weights (quantized-gguf.test.ts), so these types have their own documented
  // gate (INT8_ACTIVATION_GATE in logit-error.ts). FLEXHELM_QUANT_INT8_PREFILL=0 keeps prompt rows on the widened bf16
  // matmul (half the error, the bf16 path's speed).
  static const bool int8Prefill = !envSwitchedOff("FLEXHELM_QUANT_INT8_PREFILL");
  // On an AMX host prompt rows go to the tile GEMM on weights widened in cache: bf16 products (the bf16 path's error),
  // faster than the integer GEMM from kAmxRows rows (kAmxKQuantRows for K-quants, whose widening goes row by row).
  if (amxBf16Available() && M >= (isKQuant(type_) || !interleaved_ ? kAmxKQuantRows : kAmxRows)) return QuantKernel::amxBf16;
  // Integer arithmetic for these rows: decode rows always, prompt rows unless FLEXHELM_QUANT_INT8_PREFILL=0.
  const bool integerRows = M <= kQuantIntRows || int8Prefill || !quantKernelAvailable(QuantKernel::bf16);
  if (interleaved_ && integerRows && !isKQuant(type_)) return QuantKernel::vnniGemm;
  // K-quants: the row kernels below kKQuantGemmRows (an interleaved Q4_K / Q6_K layer's kernel below
  // kquantInterleavedRows, kquant-interleave.h), the panel-decoding tiled GEMM (kquant-gemm.h) from there.
  if (isKQuant(type_) && integerRows && kquantGemmAvailable()) {
    if (M >= (interleaved_ ? kquantInterleavedRows(type_) : kKQuantGemmRows)) return QuantKernel::vnniGemm;
    if (interleaved_) return QuantKernel::avx512vnni;
  }
  const QuantKernel rowKernel = isKQuant(type_) ? bestKQuantKernel() : bestQuantKernel();
  if (M <= kQuantIntRows) return rowKernel;
  return quantKernelAvailable(QuantKernel::bf16) ? QuantKernel::bf16 : rowKernel;
}

const uint8_t* QuantLinear::rowBlocks() {
  if (!interleaved_) return w_;
  // A row kernel asked for on purpose (tests, benchmarks): the blocks back in row order, for this call.
  static std::vector<uint8_t, AlignedAllocator<uint8_t>> rows;
  if (rows.size() < bytes_ + 64) rows.resize(bytes_ + 64);
  if (isKQuant(type_)) kquantDeinterleave(type_, w_, K_, N_, rows.data());
  else quantDeinterleave(type_, w_, K_, N_, rows.data());
  return rows.data();
}

namespace {

// One call's activations quantized to q8_0 rows: scratch of the calling thread, shared by every QuantLinear. As a
// member of each matrix it kept M × K bytes per matrix after the largest step (a 1B model's batch-8 prefill: 448 MB).
struct Q8Scratch {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> sum;
  // The VNNI row kernel's per-row scale and seed vectors (16 lanes per pair of blocks), 64-byte aligned.
  std::vector<float, AlignedAllocator<float>> pairD;
  std::vector<int32_t, AlignedAllocator<int32_t>> pairSeed;
};

template <typename V>
auto* atLeast(V& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

Q8Scratch& q8Scratch() {
  thread_local Q8Scratch scratch;
  return scratch;
}

// The calling thread's q8_0 rows for M × K activations: int8 values, block scales and block sums.
struct Q8Rows {
  int8_t* q;
  float* d;
  int32_t* sum;
};

Q8Rows q8Rows(int M, int K) {
  Q8Scratch& s = q8Scratch();
  const size_t blocks = static_cast<size_t>(M) * (K / kQuantBlock);
  return {atLeast(s.q, static_cast<size_t>(M) * K + 64), atLeast(s.d, blocks), atLeast(s.sum, blocks)};
}

}  // namespace

void QuantLinear::run(const uint16_t* x, int M, float* y, bool accumulate) {
  if (M <= 0) return;
  if (bestKernel(M) == QuantKernel::vnniGemm && !isKQuant(type_)) {
    const Q8Rows r = q8Rows(M, K_);
    quantizeRowsQ8VnniBf16(x, M, K_, r.q, r.d, r.sum);
    return quantGemmVnni(type_, w_, K_, N_, r.q, r.d, r.sum, M, y, accumulate);
  }
  thread_local std::vector<float> wide;
  float* const rows = atLeast(wide, static_cast<size_t>(M) * K_);
  fromBf16(x, rows, static_cast<size_t>(M) * K_);
  run(rows, M, y, accumulate);
}

void QuantLinear::run(const float* x, int M, float* y, bool accumulate, QuantKernel kernel) {
  if (M <= 0) return;
  if (kernel == QuantKernel::best) kernel = bestKernel(M);
  if (!quantKernelAvailable(kernel)) throw std::invalid_argument(std::string("quantized kernel ") + quantKernelName(kernel) + " is not available on this CPU");
  if (kernel == QuantKernel::vnniGemm && isKQuant(type_)) return kquantGemmVnni(type_, w_, K_, N_, x, M, y, accumulate, interleaved_);
  if (kernel == QuantKernel::vnniGemm && !interleaved_) throw std::invalid_argument("quantized kernel vnni-gemm: this layer keeps GGUF's row order (built with FLEXHELM_QUANT_GEMM=0, or without AVX-512 VNNI)");
  if (kernel == QuantKernel::bf16) return runBf16(x, M, y, accumulate);
  if (kernel == QuantKernel::amxBf16) {
    const AmxSource source{type_, w_, K_, N_, interleaved_};
    return amxGemmBf16(x, M, K_, N_, y, accumulate, widenForAmx, &source, quantBlockValues(type_));
  }
  if (isKQuant(type_)) {
    if (interleaved_ && kernel == QuantKernel::avx512vnni) return kquantGemvInterleaved(type_, w_, K_, N_, x, M, y, accumulate);
    return kquantGemv(type_, rowBlocks(), K_, N_, x, M, y, accumulate, kernel);
  }
  const int blocks = K_ / kQuantBlock;
  const Q8Rows rows = q8Rows(M, K_);
  int8_t* const xq = rows.q;
  float* const xd = rows.d;
  int32_t* const xs = rows.sum;
  Q8Scratch& scratch = q8Scratch();
  if (kernel == QuantKernel::vnniGemm) {
    quantizeRowsQ8Vnni(x, M, K_, xq, xd, xs);
    return quantGemmVnni(type_, w_, K_, N_, xq, xd, xs, M, y, accumulate);
  }
  // The VNNI kernel's per-row vectors, one 16-lane pair of blocks at a time (loaded, not built, in its inner loop):
  // each block's activation scale over its 8 lanes, and the accumulator seed −offset·Σq in each block's first lane.
  const int pairs = blocks / 2;
  const bool vnni = kernel == QuantKernel::avx512vnni;
  float* const pairD = vnni ? atLeast(scratch.pairD, static_cast<size_t>(M) * pairs * 16) : nullptr;
  int32_t* const pairSeed = vnni ? atLeast(scratch.pairSeed, static_cast<size_t>(M) * pairs * 16) : nullptr;
  const int off = typeOffset(type_);
// One row (a decode step) on the calling thread: waking the team costs more than quantizing its K values.
#pragma omp parallel for schedule(static) if (M > 1)
  for (int m = 0; m < M; m++) {
    float* d = xd + static_cast<size_t>(m) * blocks;
    int32_t* sum = xs + static_cast<size_t>(m) * blocks;
    quantizeRowQ8(x + static_cast<size_t>(m) * K_, K_, xq + static_cast<size_t>(m) * K_, d, sum);
    if (!vnni) continue;
    for (int p = 0; p < pairs; p++) {
      float* xv = pairD + (static_cast<size_t>(m) * pairs + p) * 16;
      int32_t* sv = pairSeed + (static_cast<size_t>(m) * pairs + p) * 16;
      for (int i = 0; i < 16; i++) {
        xv[i] = d[2 * p + i / 8];
        sv[i] = i % 8 == 0 ? -off * sum[2 * p + i / 8] : 0;
      }
    }
  }
  const int tiles = (N_ + kColumnTile - 1) / kColumnTile;
  const uint8_t* w = rowBlocks();
  const QuantType t = type_;
  const int K = K_;
  const int N = N_;
#pragma omp parallel for schedule(static)
  for (int tile = 0; tile < tiles; tile++) {
    const int n1 = std::min(N, (tile + 1) * kColumnTile);
    for (int m0 = 0; m0 < M; m0 += kRowGroup) {
      const int mr = std::min(kRowGroup, M - m0);
      const int8_t* rq[kRowGroup];
      const float* rd[kRowGroup];
      const int32_t* rs[kRowGroup];
      const float* xdPairs[kRowGroup] = {};
      const int32_t* seedPairs[kRowGroup] = {};
      for (int i = 0; i < mr; i++) {
        rq[i] = xq + static_cast<size_t>(m0 + i) * K;
        rd[i] = xd + static_cast<size_t>(m0 + i) * blocks;
        rs[i] = xs + static_cast<size_t>(m0 + i) * blocks;
        if (vnni) {
          xdPairs[i] = pairD + static_cast<size_t>(m0 + i) * pairs * 16;
          seedPairs[i] = pairSeed + static_cast<size_t>(m0 + i) * pairs * 16;
        }
      }
      for (int n = tile * kColumnTile; n < n1; n++) {
        const uint8_t* wrow = w + static_cast<size_t>(n) * rowBytes_;
        float out[kRowGroup];
        switch (mr) {
          case 4: dotRows<4>(kernel, t, wrow, K, rq, rd, rs, xdPairs, seedPairs, out); break;
          case 3: dotRows<3>(kernel, t, wrow, K, rq, rd, rs, xdPairs, seedPairs, out); break;
          case 2: dotRows<2>(kernel, t, wrow, K, rq, rd, rs, xdPairs, seedPairs, out); break;
          default: dotRows<1>(kernel, t, wrow, K, rq, rd, rs, xdPairs, seedPairs, out); break;
        }
        for (int i = 0; i < mr; i++) {
          float& dst = y[static_cast<size_t>(m0 + i) * N + n];
          dst = accumulate ? dst + out[i] : out[i];
        }
      }
    }
  }
}

// An interleaved K-quant layer widened to bf16 rows a group at a time (each group's blocks back in row form in a
// thread's scratch first, 16 × K/256 blocks), the same bits as from GGUF's rows.
void QuantLinear::dequantizeInterleavedKQuantBf16(uint16_t* out) const {
  const int groups = (N_ + 15) / 16;
#pragma omp parallel for schedule(static)
  for (int g = 0; g < groups; g++) {
    const uint8_t* rows = kquantGroupRows(type_, w_, K_, N_, g, 0, K_ / 256);
    for (int c = 0; c < std::min(16, N_ - 16 * g); c++) widenKRowBf16(type_, rows, K_, c, 0, K_, out + static_cast<size_t>(16 * g + c) * K_);
  }
}

// Many rows: the arithmetic dominates, and oneDNN's bf16 GEMM does twice the multiply-adds per instruction of the
// integer kernels' (which spend a convert and two float ops per block pair on the scales). The weight is widened to a
// process-wide bf16 scratch for this call only (the layer keeps its blocks); at 512 rows the widening is a few percent
// of the GEMM.
void QuantLinear::runBf16(const float* x, int M, float* y, bool accumulate) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  // One compute thread runs every layer (addon.cc), so one scratch serves them all.
  static std::vector<uint16_t, AlignedAllocator<uint16_t>> wScratch;
  static std::vector<uint16_t, AlignedAllocator<uint16_t>> xScratch;
  const size_t wCount = static_cast<size_t>(N_) * K_;
  if (wScratch.size() < wCount) wScratch.resize(wCount);
  if (xScratch.size() < static_cast<size_t>(M) * K_) xScratch.resize(static_cast<size_t>(M) * K_);
  if (interleaved_ && isKQuant(type_)) dequantizeInterleavedKQuantBf16(wScratch.data());
  else if (interleaved_) dequantizeInterleavedBf16(type_, w_, K_, N_, wScratch.data());
  else dequantizeRowsBf16(type_, w_, K_, 0, N_, wScratch.data());
  toBf16(x, xScratch.data(), static_cast<size_t>(M) * K_);
  auto& engine = cpuEngine();
  auto& stream = cpuStream();
  dnnl::memory::desc src({M, K_}, dt::bf16, dnnl::memory::format_tag::ab);
  // [N, K] row-major read as the [K, N] matrix: element (k, n) at n·K + k.
  dnnl::memory::desc wei({K_, N_}, dt::bf16, dims{1, K_});
  dnnl::memory::desc dst({M, N_}, dt::f32, dnnl::memory::format_tag::ab);
  const auto key = std::make_pair(M, accumulate);
  auto found = bf16ByShape_.find(key);
  if (found == bf16ByShape_.end()) {
    dnnl::primitive_attr attr;
    if (accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.f);
      attr.set_post_ops(ops);
    }
    if (bf16ByShape_.size() >= 32) bf16ByShape_.clear();
    found = bf16ByShape_.emplace(key, dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, dst), attr, engine))).first;
  }
  dnnl::memory srcMem(src, engine, xScratch.data());
  dnnl::memory weiMem(wei, engine, wScratch.data());
  dnnl::memory dstMem(dst, engine, y);
  found->second.execute(stream, {{DNNL_ARG_SRC, srcMem}, {DNNL_ARG_WEIGHTS, weiMem}, {DNNL_ARG_DST, dstMem}});
  stream.wait();
}

}  // namespace flexhelm
