// quantize4 / dequantize4: FlexLLMGen's 4-bit asymmetric group-wise format (flexllmgen/compression.py, CPU path).
// The tensor is viewed as [outer, D, inner] with D the grouped dimension, padded with zeros to a multiple of G:
//   per group  mn = min, mx = max, scale = (1 / (mx - mn)) * 15   (torch evaluates `15 / t` as reciprocal * 15)
//   code       q = roundHalfEven(clamp((x - mn) * scale, 0, 15)), a NaN (constant group) clamping to 0
//   packed     [outer, NG*G/2, inner] uint8, even index in the high nibble, odd index in the low nibble
//   scale      [outer, NG, 2, inner] f16 bits holding (scale, mn)
//   dequantize x = q / scale + mn in f32, padding trimmed.
// Kernels work on tiles of up to 64 lanes (consecutive inner positions, or consecutive groups when inner == 1) so the
// same loops vectorise for both layouts; they are compiled for AVX-512, AVX2 and baseline x86-64 and picked at run time.
// -ffp-contract=off keeps every operation a separately rounded f32 op, matching torch and the JS fallback bit for bit.
#include <cstring>

#include "common.h"
#include "cpu-features.h"
#include "exports.h"
#include "half-kernels.h"

namespace flexhelm {
namespace {

constexpr size_t kLanes = 64;

struct Layout {
  size_t outer, dim, inner, group;
  size_t groups() const { return (dim + group - 1) / group; }
  size_t half() const { return group / 2; }
};

static inline __attribute__((always_inline)) void quantizeTileBody(const float* tile, size_t group, size_t lanes,
                                                                   float* scaleOut, float* minOut, uint8_t* codes) {
  float mn[kLanes], mx[kLanes], scale[kLanes];
  for (size_t j = 0; j < lanes; ++j) mn[j] = mx[j] = tile[j];
  for (size_t k = 1; k < group; ++k) {
    const float* row = tile + k * kLanes;
    for (size_t j = 0; j < lanes; ++j) {
      float v = row[j];
      mn[j] = v < mn[j] ? v : mn[j];
      mx[j] = v > mx[j] ? v : mx[j];
    }
  }
  for (size_t j = 0; j < lanes; ++j) {
    mn[j] = mn[j] + 0.0f;  // -0 becomes +0, so the result does not depend on the order of the min reduction
    mx[j] = mx[j] + 0.0f;
    scale[j] = (1.0f / (mx[j] - mn[j])) * 15.0f;
    scaleOut[j] = scale[j];
    minOut[j] = mn[j];
  }
  for (size_t k = 0; k < group; ++k) {
    const float* row = tile + k * kLanes;
    uint8_t* out = codes + k * kLanes;
    for (size_t j = 0; j < lanes; ++j) {
      float t = (row[j] - mn[j]) * scale[j];
      t = t > 0.0f ? t : 0.0f;
      t = t < 15.0f ? t : 15.0f;
      // nearbyint rounds half to even in the default rounding mode (nothing in Node changes it) and, unlike roundeven,
      // GCC vectorises it.
      out[j] = static_cast<uint8_t>(static_cast<int>(__builtin_nearbyintf(t)));
    }
  }
}

static inline __attribute__((always_inline)) void dequantizeTileBody(const uint8_t* codes, size_t group, size_t lanes,
                                                                     const float* scale, const float* mn, float* tile) {
  for (size_t k = 0; k < group; ++k) {
    const uint8_t* in = codes + k * kLanes;
    float* row = tile + k * kLanes;
    for (size_t j = 0; j < lanes; ++j) row[j] = static_cast<float>(in[j]) / scale[j] + mn[j];
  }
}

#if FLEXHELM_X86_SIMD
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) void quantizeTileAvx512(const float* t, size_t g, size_t l, float* s, float* m, uint8_t* c) {
  quantizeTileBody(t, g, l, s, m, c);
}
__attribute__((target("avx2"))) void quantizeTileAvx2(const float* t, size_t g, size_t l, float* s, float* m, uint8_t* c) {
  quantizeTileBody(t, g, l, s, m, c);
}
#endif
void quantizeTileBaseline(const float* t, size_t g, size_t l, float* s, float* m, uint8_t* c) { quantizeTileBody(t, g, l, s, m, c); }

#if FLEXHELM_X86_SIMD
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) void dequantizeTileAvx512(const uint8_t* c, size_t g, size_t l, const float* s, const float* m, float* t) {
  dequantizeTileBody(c, g, l, s, m, t);
}
__attribute__((target("avx2"))) void dequantizeTileAvx2(const uint8_t* c, size_t g, size_t l, const float* s, const float* m, float* t) {
  dequantizeTileBody(c, g, l, s, m, t);
}
#endif
void dequantizeTileBaseline(const uint8_t* c, size_t g, size_t l, const float* s, const float* m, float* t) { dequantizeTileBody(c, g, l, s, m, t); }

using QuantizeTile = void (*)(const float*, size_t, size_t, float*, float*, uint8_t*);
using DequantizeTile = void (*)(const uint8_t*, size_t, size_t, const float*, const float*, float*);

QuantizeTile pickQuantize() {
#if FLEXHELM_X86_SIMD
  const CpuFeatures& cpu = cpuFeatures();
  if (cpu.avx512f && cpu.avx512bw) return quantizeTileAvx512;
  if (cpu.avx2) return quantizeTileAvx2;
#endif
  return quantizeTileBaseline;
}

DequantizeTile pickDequantize() {
#if FLEXHELM_X86_SIMD
  const CpuFeatures& cpu = cpuFeatures();
  if (cpu.avx512f && cpu.avx512bw) return dequantizeTileAvx512;
  if (cpu.avx2) return dequantizeTileAvx2;
#endif
  return dequantizeTileBaseline;
}

// Loads `count` source elements (f32, or f16 bits) as f32.
void loadRow(const uint8_t* base, bool f16, size_t index, size_t count, float* out) {
  if (f16) {
    convertF16ToF32(reinterpret_cast<const uint16_t*>(base) + index, out, count);
  } else {
    std::memcpy(out, reinterpret_cast<const float*>(base) + index, count * sizeof(float));
  }
}

uint16_t toHalf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return floatBitsToHalf(bits);
}

float fromHalf(uint16_t half) {
  uint32_t bits = halfToFloatBits(half);
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

// A tile is either `lanes` consecutive inner positions of one (outer, group), or, when inner == 1, `lanes`
// consecutive groups (rows of the [outer*groups, G] view).
struct Tile {
  size_t outer, group, innerStart, firstRow, lanes;
};

size_t tileCount(const Layout& l) {
  if (l.inner > 1) return l.outer * l.groups() * ((l.inner + kLanes - 1) / kLanes);
  return (l.outer * l.groups() + kLanes - 1) / kLanes;
}

Tile tileAt(const Layout& l, size_t index) {
  if (l.inner > 1) {
    size_t perRow = (l.inner + kLanes - 1) / kLanes;
    size_t row = index / perRow;
    size_t innerStart = (index % perRow) * kLanes;
    return Tile{row / l.groups(), row % l.groups(), innerStart, row, std::min(kLanes, l.inner - innerStart)};
  }
  size_t rows = l.outer * l.groups();
  size_t first = index * kLanes;
  return Tile{0, 0, 0, first, std::min(kLanes, rows - first)};
}

class QuantizeWorker : public PromiseWorker {
 public:
  QuantizeWorker(Napi::Env env, Layout layout, ByteView src, bool f16, ByteView packed, ByteView scale, unsigned threads)
      : PromiseWorker(env), l_(layout), src_(src), f16_(f16), packed_(packed), scale_(scale), threads_(threads) {}

  void Execute() override {
    QuantizeTile kernel = pickQuantize();
    const size_t G = l_.group, half = l_.half(), NG = l_.groups(), I = l_.inner, D = l_.dim;
    uint8_t* packed = packed_.data;
    uint16_t* scaleOut = reinterpret_cast<uint16_t*>(scale_.data);
    parallelFor(tileCount(l_), threads_, 1, [&](size_t begin, size_t end) {
      std::vector<float> tile(G * kLanes), column(G);
      std::vector<uint8_t> codes(G * kLanes);
      float scale[kLanes], mn[kLanes];
      for (size_t index = begin; index < end; ++index) {
        Tile t = tileAt(l_, index);
        if (I > 1) {
          for (size_t k = 0; k < G; ++k) {
            size_t d = t.group * G + k;
            if (d < D) loadRow(src_.data, f16_, (t.outer * D + d) * I + t.innerStart, t.lanes, &tile[k * kLanes]);
            else std::fill_n(&tile[k * kLanes], t.lanes, 0.0f);
          }
        } else {
          for (size_t j = 0; j < t.lanes; ++j) {
            size_t row = t.firstRow + j, outer = row / NG, group = row % NG;
            size_t valid = std::min(G, D - group * G);
            loadRow(src_.data, f16_, outer * D + group * G, valid, column.data());
            for (size_t k = 0; k < G; ++k) tile[k * kLanes + j] = k < valid ? column[k] : 0.0f;
          }
        }
        kernel(tile.data(), G, t.lanes, scale, mn, codes.data());
        for (size_t j = 0; j < t.lanes; ++j) {
          // (outer, group, inner) -> offsets; with inner == 1 the lane is the row and inner offset is 0.
          size_t row = I > 1 ? t.firstRow : t.firstRow + j;
          size_t innerPos = I > 1 ? t.innerStart + j : 0;
          scaleOut[(row * 2) * I + innerPos] = toHalf(scale[j]);
          scaleOut[(row * 2 + 1) * I + innerPos] = toHalf(mn[j]);
          for (size_t p = 0; p < half; ++p) {
            uint8_t hi = codes[(2 * p) * kLanes + j], lo = codes[(2 * p + 1) * kLanes + j];
            packed[(row * half + p) * I + innerPos] = static_cast<uint8_t>((hi << 4) | lo);
          }
        }
      }
    });
  }

 private:
  Layout l_;
  ByteView src_;
  bool f16_;
  ByteView packed_;
  ByteView scale_;
  unsigned threads_;
};

class DequantizeWorker : public PromiseWorker {
 public:
  DequantizeWorker(Napi::Env env, Layout layout, ByteView packed, ByteView scale, ByteView dst, unsigned threads)
      : PromiseWorker(env), l_(layout), packed_(packed), scale_(scale), dst_(dst), threads_(threads) {}

  void Execute() override {
    DequantizeTile kernel = pickDequantize();
    const size_t G = l_.group, half = l_.half(), NG = l_.groups(), I = l_.inner, D = l_.dim;
    const uint8_t* packed = packed_.data;
    const uint16_t* scaleIn = reinterpret_cast<const uint16_t*>(scale_.data);
    float* out = reinterpret_cast<float*>(dst_.data);
    parallelFor(tileCount(l_), threads_, 1, [&](size_t begin, size_t end) {
      std::vector<float> tile(G * kLanes);
      std::vector<uint8_t> codes(G * kLanes);
      float scale[kLanes], mn[kLanes];
      for (size_t index = begin; index < end; ++index) {
        Tile t = tileAt(l_, index);
        for (size_t j = 0; j < t.lanes; ++j) {
          size_t row = I > 1 ? t.firstRow : t.firstRow + j;
          size_t innerPos = I > 1 ? t.innerStart + j : 0;
          scale[j] = fromHalf(scaleIn[(row * 2) * I + innerPos]);
          mn[j] = fromHalf(scaleIn[(row * 2 + 1) * I + innerPos]);
          for (size_t p = 0; p < half; ++p) {
            uint8_t byte = packed[(row * half + p) * I + innerPos];
            codes[(2 * p) * kLanes + j] = byte >> 4;
            codes[(2 * p + 1) * kLanes + j] = byte & 0xf;
          }
        }
        kernel(codes.data(), G, t.lanes, scale, mn, tile.data());
        if (I > 1) {
          for (size_t k = 0; k < G && t.group * G + k < D; ++k) {
            std::memcpy(out + (t.outer * D + t.group * G + k) * I + t.innerStart, &tile[k * kLanes], t.lanes * sizeof(float));
          }
        } else {
          for (size_t j = 0; j < t.lanes; ++j) {
            size_t row = t.firstRow + j, outer = row / NG, group = row % NG;
            size_t valid = std::min(G, D - group * G);
            for (size_t k = 0; k < valid; ++k) out[outer * D + group * G + k] = tile[k * kLanes + j];
          }
        }
      }
    });
  }

 private:
  Layout l_;
  ByteView packed_;
  ByteView scale_;
  ByteView dst_;
  unsigned threads_;
};

size_t sizeArg(const Napi::Value& value) { return static_cast<size_t>(value.As<Napi::Number>().DoubleValue()); }

Layout layoutArg(const Napi::Object& spec) {
  Layout l{sizeArg(spec.Get("outer")), sizeArg(spec.Get("dim")), sizeArg(spec.Get("inner")), sizeArg(spec.Get("group"))};
  if (l.group == 0 || l.group % 2 != 0 || l.inner == 0 || l.dim == 0) throw Napi::RangeError::New(spec.Env(), "invalid 4-bit layout");
  return l;
}

void checkLength(Napi::Env env, const ByteView& view, size_t needed, const char* what) {
  if (view.length < needed) throw Napi::RangeError::New(env, std::string(what) + " is too small for this layout");
}

}  // namespace

// quantize4(src, isF16, {outer, dim, inner, group}, packed, scale, threads)
Napi::Value Quantize4(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ByteView src = viewOf(info[0], "src");
  bool f16 = info[1].As<Napi::Boolean>().Value();
  Layout l = layoutArg(info[2].As<Napi::Object>());
  ByteView packed = viewOf(info[3], "packed");
  ByteView scale = viewOf(info[4], "scale");
  checkLength(env, src, l.outer * l.dim * l.inner * (f16 ? 2 : 4), "src");
  checkLength(env, packed, l.outer * l.groups() * l.half() * l.inner, "packed");
  checkLength(env, scale, l.outer * l.groups() * 2 * l.inner * 2, "scale");
  auto* worker = new QuantizeWorker(env, l, src, f16, packed, scale, threadsArg(info[5]));
  for (size_t i : {0, 3, 4}) worker->keepAlive(info[i]);
  auto promise = worker->Promise();
  worker->Queue();
  return promise;
}

// dequantize4(packed, scale, {outer, dim, inner, group}, dst, threads)
Napi::Value Dequantize4(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ByteView packed = viewOf(info[0], "packed");
  ByteView scale = viewOf(info[1], "scale");
  Layout l = layoutArg(info[2].As<Napi::Object>());
  ByteView dst = viewOf(info[3], "dst");
  checkLength(env, packed, l.outer * l.groups() * l.half() * l.inner, "packed");
  checkLength(env, scale, l.outer * l.groups() * 2 * l.inner * 2, "scale");
  checkLength(env, dst, l.outer * l.dim * l.inner * 4, "dst");
  auto* worker = new DequantizeWorker(env, l, packed, scale, dst, threadsArg(info[4]));
  for (size_t i : {0, 1, 3}) worker->keepAlive(info[i]);
  auto promise = worker->Promise();
  worker->Queue();
  return promise;
}

}  // namespace flexhelm
