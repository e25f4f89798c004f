// f16ToF32 / bf16ToF32 / f32ToF16 on typed arrays, SIMD where the CPU has it, split over threads for large arrays.
#include <cstring>

#include "common.h"
#include "cpu-features.h"

#if FLEXHELM_X86_SIMD
#include <immintrin.h>
#endif
#include "exports.h"
#include "half-kernels.h"

namespace flexhelm {
namespace {

void f16ToF32Scalar(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits = halfToFloatBits(src[i]);
    std::memcpy(dst + i, &bits, 4);
  }
}

void f32ToF16Scalar(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, src + i, 4);
    dst[i] = floatBitsToHalf(bits);
  }
}

#if FLEXHELM_X86_SIMD
__attribute__((target("avx,f16c"))) void f16ToF32F16c(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  f16ToF32Scalar(src + i, dst + i, n - i);
}

__attribute__((target("avx512f"))) void f16ToF32Avx512(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(h));
  }
  f16ToF32Scalar(src + i, dst + i, n - i);
}

__attribute__((target("avx,f16c"))) void f32ToF16F16c(const float* src, uint16_t* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  f32ToF16Scalar(src + i, dst + i, n - i);
}

__attribute__((target("avx512f"))) void f32ToF16Avx512(const float* src, uint16_t* dst, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), h);
  }
  f32ToF16Scalar(src + i, dst + i, n - i);
}

#endif

void bf16ToF32Scalar(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits = static_cast<uint32_t>(src[i]) << 16;
    std::memcpy(dst + i, &bits, 4);
  }
}

#if FLEXHELM_X86_SIMD
__attribute__((target("avx2"))) void bf16ToF32Avx2(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_slli_epi32(wide, 16));
  }
  bf16ToF32Scalar(src + i, dst + i, n - i);
}

__attribute__((target("avx512f,avx512bw"))) void bf16ToF32Avx512(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    _mm512_storeu_si512(dst + i, _mm512_slli_epi32(wide, 16));
  }
  bf16ToF32Scalar(src + i, dst + i, n - i);
}

#endif

enum class Conversion { F16ToF32, Bf16ToF32, F32ToF16 };

// Bytes per value on each side of a conversion.
constexpr size_t srcWidthOf(Conversion kind) { return kind == Conversion::F32ToF16 ? 4 : 2; }
constexpr size_t dstWidthOf(Conversion kind) { return kind == Conversion::F32ToF16 ? 2 : 4; }

// One run of `count` values from `src` to `dst` (byte pointers at the run's first value).
void convertRun(Conversion kind, const uint8_t* src, uint8_t* dst, size_t count) {
  switch (kind) {
    case Conversion::F16ToF32:
      convertF16ToF32(reinterpret_cast<const uint16_t*>(src), reinterpret_cast<float*>(dst), count);
      break;
    case Conversion::Bf16ToF32:
      convertBf16ToF32(reinterpret_cast<const uint16_t*>(src), reinterpret_cast<float*>(dst), count);
      break;
    case Conversion::F32ToF16:
      convertF32ToF16(reinterpret_cast<const float*>(src), reinterpret_cast<uint16_t*>(dst), count);
      break;
  }
}

// With `outer` > 0 the source is read as [outer, inner, block] and written as [inner, outer, block]: a KV cache's
// token-major rows become head-major in the same pass as the conversion (no transposed copy on the JS thread).
class ConvertWorker : public PromiseWorker {
 public:
  ConvertWorker(Napi::Env env, Conversion kind, ByteView src, ByteView dst, size_t n, unsigned threads, size_t outer, size_t inner)
      : PromiseWorker(env), kind_(kind), src_(src), dst_(dst), n_(n), threads_(threads), outer_(outer), inner_(inner) {}

  void Execute() override {
    const size_t srcWidth = srcWidthOf(kind_);
    const size_t dstWidth = dstWidthOf(kind_);
    if (outer_ == 0) {
      parallelFor(n_, threads_, 1 << 14, [&](size_t begin, size_t end) {
        convertRun(kind_, src_.data + begin * srcWidth, dst_.data + begin * dstWidth, end - begin);
      });
      return;
    }
    const size_t block = n_ / (outer_ * inner_);
    // Split over destination rows (one `inner` index each), so each thread writes one contiguous range.
    const size_t grain = std::max<size_t>(1, (size_t{1} << 14) / std::max<size_t>(1, outer_ * block));
    parallelFor(inner_, threads_, grain, [&](size_t begin, size_t end) {
      for (size_t r = begin; r < end; ++r)
        for (size_t t = 0; t < outer_; ++t)
          convertRun(kind_, src_.data + (t * inner_ + r) * block * srcWidth, dst_.data + (r * outer_ + t) * block * dstWidth, block);
    });
  }

 private:
  Conversion kind_;
  ByteView src_;
  ByteView dst_;
  size_t n_;
  unsigned threads_;
  size_t outer_;
  size_t inner_;
};

// (src, dst, threads[, outer, inner]): see ConvertWorker for the optional swap of the two leading axes.
Napi::Value startConversion(const Napi::CallbackInfo& info, Conversion kind) {
  ByteView src = viewOf(info[0], "src");
  ByteView dst = viewOf(info[1], "dst");
  size_t n = src.length / srcWidthOf(kind);
  if (dst.length / dstWidthOf(kind) < n) throw Napi::RangeError::New(info.Env(), "dst has fewer elements than src");
  size_t outer = 0;
  size_t inner = 0;
  if (info.Length() > 4 && info[3].IsNumber() && info[4].IsNumber()) {
    const int64_t o = info[3].As<Napi::Number>().Int64Value();
    const int64_t i = info[4].As<Napi::Number>().Int64Value();
    if (o < 1 || i < 1 || n % (static_cast<size_t>(o) * static_cast<size_t>(i)) != 0) {
      throw Napi::RangeError::New(info.Env(), "swap: outer and inner must be positive and their product must divide the element count");
    }
    outer = static_cast<size_t>(o);
    inner = static_cast<size_t>(i);
  }
  auto* worker = new ConvertWorker(info.Env(), kind, src, dst, n, threadsArg(info[2]), outer, inner);
  worker->keepAlive(info[0]);
  worker->keepAlive(info[1]);
  auto promise = worker->Promise();
  worker->Queue();
  return promise;
}
}  // namespace

void convertF16ToF32(const uint16_t* src, float* dst, size_t n) {
#if FLEXHELM_X86_SIMD
  const CpuFeatures& cpu = cpuFeatures();
  if (cpu.avx512f) return f16ToF32Avx512(src, dst, n);
  if (cpu.f16c) return f16ToF32F16c(src, dst, n);
#endif
  f16ToF32Scalar(src, dst, n);
}

void convertBf16ToF32(const uint16_t* src, float* dst, size_t n) {
#if FLEXHELM_X86_SIMD
  const CpuFeatures& cpu = cpuFeatures();
  if (cpu.avx512f && cpu.avx512bw) return bf16ToF32Avx512(src, dst, n);
  if (cpu.avx2) return bf16ToF32Avx2(src, dst, n);
#endif
  bf16ToF32Scalar(src, dst, n);
}

void convertF32ToF16(const float* src, uint16_t* dst, size_t n) {
#if FLEXHELM_X86_SIMD
  const CpuFeatures& cpu = cpuFeatures();
  if (cpu.avx512f) return f32ToF16Avx512(src, dst, n);
  if (cpu.f16c) return f32ToF16F16c(src, dst, n);
#endif
  f32ToF16Scalar(src, dst, n);
}

Napi::Value F16ToF32(const Napi::CallbackInfo& info) { return startConversion(info, Conversion::F16ToF32); }
Napi::Value Bf16ToF32(const Napi::CallbackInfo& info) { return startConversion(info, Conversion::Bf16ToF32); }
Napi::Value F32ToF16(const Napi::CallbackInfo& info) { return startConversion(info, Conversion::F32ToF16); }

}  // namespace flexhelm
