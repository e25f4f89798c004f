#include "common.h"
#include "cpu-features.h"
#include "exports.h"

namespace flexhelm {

ByteView viewOf(const Napi::Value& value, const char* what) {
  ByteView view;
  if (value.IsArrayBuffer()) {
    auto buffer = value.As<Napi::ArrayBuffer>();
    view.data = static_cast<uint8_t*>(buffer.Data());
    view.length = buffer.ByteLength();
  } else if (value.IsTypedArray()) {
    auto array = value.As<Napi::TypedArray>();
    view.data = static_cast<uint8_t*>(array.ArrayBuffer().Data()) + array.ByteOffset();
    view.length = array.ByteLength();
  } else if (value.IsDataView()) {
    auto dataView = value.As<Napi::DataView>();
    view.data = static_cast<uint8_t*>(dataView.ArrayBuffer().Data()) + dataView.ByteOffset();
    view.length = dataView.ByteLength();
  } else {
    throw Napi::TypeError::New(value.Env(), std::string(what) + " must be an ArrayBuffer, TypedArray, Buffer or DataView");
  }
  return view;
}

unsigned threadsArg(const Napi::Value& value) {
  if (!value.IsNumber()) return 1;
  double threads = value.As<Napi::Number>().DoubleValue();
  if (!(threads >= 1)) return 1;
  return static_cast<unsigned>(std::min(threads, 256.0));
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("allocPinned", Napi::Function::New(env, AllocPinned));
  exports.Set("copy", Napi::Function::New(env, Copy));
  exports.Set("readFile", Napi::Function::New(env, ReadFile));
  exports.Set("writeFile", Napi::Function::New(env, WriteFile));
  exports.Set("f16ToF32", Napi::Function::New(env, F16ToF32));
  exports.Set("bf16ToF32", Napi::Function::New(env, Bf16ToF32));
  exports.Set("f32ToF16", Napi::Function::New(env, F32ToF16));
  exports.Set("quantize4", Napi::Function::New(env, Quantize4));
  exports.Set("dequantize4", Napi::Function::New(env, Dequantize4));
  const CpuFeatures& cpu = cpuFeatures();
  auto features = Napi::Object::New(env);
  features.Set("ioUring", ioUringCompiledIn());
  features.Set("avx2", cpu.avx2);
  features.Set("f16c", cpu.f16c);
  features.Set("avx512", cpu.avx512f && cpu.avx512bw);
  features.Set("hardwareThreads", std::max(1u, std::thread::hardware_concurrency()));
  exports.Set("features", features);
  return exports;
}

}  // namespace flexhelm

static Napi::Object InitPinnedMemory(Napi::Env env, Napi::Object exports) { return flexhelm::Init(env, exports); }

NODE_API_MODULE(pinned_memory, InitPinnedMemory)
