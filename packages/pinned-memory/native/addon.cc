#include "common.h"
#include "cpu-features.h"
#include "exports.h"

namespace flexhelm {

ByteView viewOf(const Napi::Value& value, const char* what) {
  // The C API's data pointers already include the view's offset and also work for SharedArrayBuffer-backed views.
  napi_env env = value.Env();
  ByteView view;
  void* data = nullptr;
  if (value.IsArrayBuffer()) {
    auto buffer = value.As<Napi::ArrayBuffer>();
    view.data = static_cast<uint8_t*>(buffer.Data());
    view.length = buffer.ByteLength();
  } else if (value.IsTypedArray()) {
    napi_typedarray_type type;
    size_t length = 0;
    NAPI_THROW_IF_FAILED(env, napi_get_typedarray_info(env, value, &type, &length, &data, nullptr, nullptr), view);
    view.data = static_cast<uint8_t*>(data);
    view.length = value.As<Napi::TypedArray>().ByteLength();
  } else if (value.IsDataView()) {
    size_t length = 0;
    NAPI_THROW_IF_FAILED(env, napi_get_dataview_info(env, value, &length, &data, nullptr, nullptr), view);
    view.data = static_cast<uint8_t*>(data);
    view.length = length;
  } else {
    throw Napi::TypeError::New(env, std::string(what) + " must be an ArrayBuffer, TypedArray, Buffer or DataView");
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
