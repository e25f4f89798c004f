// N-API surface: factories that pack weights off the main thread (createLinear, createDecoderLayer), objects whose run()
// returns a promise, layerNorm, and what oneDNN found on this CPU (features). All compute is serialised on one
// compute thread: oneDNN's OpenMP team already uses every core, and the shared scratch memory belongs to that thread.
#include <napi.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include "kernels.h"
#include "layer-profile.h"
#include "logits-math.h"
#include "activations.h"
#include "decoder-layer.h"
#include "norms.h"
#include "rope.h"
#include "gemm/amx-gemm.h"
#include "gemm/packed-linear.h"
#include "gemm/quant-gemv.h"

namespace flexhelm {
namespace {

// All compute runs on one long-lived thread. libgomp creates an OpenMP team per calling thread, and idle teams
// spin-wait; letting every libuv worker call oneDNN would leave several teams spinning against the working one.
class ComputeThread {
 public:
  ComputeThread() : thread_([this] { loop(); }) {}
  ~ComputeThread() {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  // Runs task on the compute thread and waits for it; exceptions come back to the caller.
  void run(const std::function<void()>& task) {
    std::packaged_task<void()> job(task);
    auto done = job.get_future();
    {
      std::lock_guard<std::mutex> guard(mutex_);
      queue_.push_back(std::move(job));
    }
    wake_.notify_one();
    done.get();
  }

 private:
  void loop() {
    for (;;) {
      std::packaged_task<void()> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      job();
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

ComputeThread& computeThread() {
  static ComputeThread* thread = new ComputeThread();  // never destroyed: it may outlive the module's static teardown
  return *thread;
}

Scratch& sharedScratch() {
  static Scratch scratch;
  return scratch;
}

struct FloatView {
  float* data;
  size_t length;
};

FloatView floats(const Napi::Value& value, const std::string& what, size_t expected) {
  if (!value.IsTypedArray() || value.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array) {
    throw Napi::TypeError::New(value.Env(), what + " must be a Float32Array");
  }
  auto array = value.As<Napi::Float32Array>();
  if (expected != SIZE_MAX && array.ElementLength() != expected) {
    throw Napi::RangeError::New(value.Env(), what + " has " + std::to_string(array.ElementLength()) + " elements, expected " + std::to_string(expected));
  }
  return {array.Data(), array.ElementLength()};
}

// A KV cache buffer: floats, or bf16 bits in a Uint16Array (a bf16 layer's cache).
struct KvView {
  void* data;
  bool bf16;
};

// `expected` floats, or as many bf16 bits in a Uint16Array; `kinds` ends the type error ("x must be …").
KvView floatsOrBf16(const Napi::Value& value, const std::string& what, size_t expected, const std::string& kinds) {
  if (value.IsTypedArray() && value.As<Napi::TypedArray>().TypedArrayType() == napi_uint16_array) {
    auto array = value.As<Napi::Uint16Array>();
    if (array.ElementLength() != expected) {
      throw Napi::RangeError::New(value.Env(), what + " has " + std::to_string(array.ElementLength()) + " elements, expected " + std::to_string(expected));
    }
    return {array.Data(), true};
  }
  if (!value.IsTypedArray() || value.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array) throw Napi::TypeError::New(value.Env(), what + " must be " + kinds);
  return {floats(value, what, expected).data, false};
}

KvView kvBuffer(const Napi::Value& value, const std::string& what, size_t expected) {
  return floatsOrBf16(value, what, expected, "a Float32Array (fp32 cache) or a Uint16Array (bf16 cache)");
}

// A weight matrix: floats, or IEEE half bits in a Uint16Array where f16 is allowed (a streamed layer's [in, out] f16
// copies, multiplied as they are).
struct WeightView {
  const float* f32 = nullptr;
  const uint16_t* f16 = nullptr;
};

WeightView weightMatrix(const Napi::Value& value, const std::string& what, size_t expected, bool allowF16) {
  if (value.IsTypedArray() && value.As<Napi::TypedArray>().TypedArrayType() == napi_uint16_array) {
    if (!allowF16) throw Napi::TypeError::New(value.Env(), what + " is a Uint16Array: f16 weights need options.transposed ([in, out] layout); pass a Float32Array otherwise");
    auto array = value.As<Napi::Uint16Array>();
    if (array.ElementLength() != expected) {
      throw Napi::RangeError::New(value.Env(), what + " has " + std::to_string(array.ElementLength()) + " f16 elements, expected " + std::to_string(expected));
    }
    return {nullptr, array.Data()};
  }
  if (!value.IsTypedArray() || value.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array) {
    throw Napi::TypeError::New(value.Env(), what + (allowF16 ? " must be a Float32Array or a Uint16Array of f16 bits" : " must be a Float32Array"));
  }
  return {floats(value, what, expected).data, nullptr};
}

int positiveInt(const Napi::Value& value, const std::string& what, bool allowZero = false) {
  if (!value.IsNumber()) throw Napi::TypeError::New(value.Env(), what + " must be a number");
  double d = value.As<Napi::Number>().DoubleValue();
  if (!(d == static_cast<int>(d)) || d < (allowZero ? 0 : 1) || d > 2147483647.0) {
    throw Napi::RangeError::New(value.Env(), what + " must be a " + (allowZero ? "non-negative" : "positive") + " integer, got " + value.ToString().Utf8Value());
  }
  return static_cast<int>(d);
}

LinearOptions linearOptions(const Napi::Value& value) {
  LinearOptions o;
  if (!value.IsObject()) return o;
  auto obj = value.As<Napi::Object>();
  try {
    if (obj.Has("dtype")) o.dtype = parseDtype(obj.Get("dtype").ToString().Utf8Value());
  } catch (const std::exception& e) {
    throw Napi::TypeError::New(value.Env(), e.what());
  }
  if (obj.Has("relu")) o.relu = obj.Get("relu").ToBoolean();
  if (obj.Has("transposed")) o.transposed = obj.Get("transposed").ToBoolean();
  if (obj.Has("recycle")) o.recycle = obj.Get("recycle").ToBoolean();
  if (obj.Has("skinnyGemm")) o.skinny = obj.Get("skinnyGemm").ToBoolean();
  if (obj.Has("packedGemv")) o.packedGemv = obj.Get("packedGemv").ToBoolean();
  if (obj.Has("compact")) o.compact = obj.Get("compact").ToBoolean();
  if (obj.Has("packAtRows")) o.packAtRows = positiveInt(obj.Get("packAtRows"), "options.packAtRows", true);
  if (obj.Has("chunkBytes")) o.chunkBytes = static_cast<size_t>(obj.Get("chunkBytes").ToNumber().DoubleValue());
  if (obj.Has("activationScale")) {
    std::string s = obj.Get("activationScale").ToString().Utf8Value();
    if (s != "token" && s != "tensor") throw Napi::TypeError::New(value.Env(), "activationScale must be 'token' or 'tensor', got '" + s + "'");
    o.perTokenScale = s == "token";
  }
  return o;
}

// Settles a promise from a libuv worker thread; JS buffers the work touches stay referenced until then.
class PromiseWorker : public Napi::AsyncWorker {
 public:
  explicit PromiseWorker(Napi::Env env) : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  void keep(const Napi::Value& value) {
    if (value.IsObject()) kept_.push_back(Napi::Persistent(value.As<Napi::Object>()));
  }
  void Execute() override {
    try {
      computeThread().run([this] { Work(); });
    } catch (const dnnl::error& e) {
      SetError(std::string("oneDNN: ") + e.what() + " (status " + std::to_string(static_cast<int>(e.status)) + ")");
    } catch (const std::bad_alloc&) {
      SetError("out of memory in the oneDNN backend");
    } catch (const std::exception& e) {
      SetError(e.what());
    }
  }

 protected:
  virtual void Work() = 0;
  virtual Napi::Value Result(Napi::Env env) { return env.Undefined(); }
  void OnOK() override { deferred_.Resolve(Result(Env())); }
  void OnError(const Napi::Error& error) override { deferred_.Reject(error.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  std::vector<Napi::ObjectReference> kept_;
};

template <class Body, class MakeResult>
class LambdaWorker : public PromiseWorker {
 public:
  LambdaWorker(Napi::Env env, Body body, MakeResult make) : PromiseWorker(env), body_(std::move(body)), make_(std::move(make)) {}

 protected:
  void Work() override { body_(); }
  Napi::Value Result(Napi::Env env) override { return make_(env); }

 private:
  Body body_;
  MakeResult make_;
};

template <class Body, class MakeResult>
Napi::Promise queue(Napi::Env env, const std::vector<Napi::Value>& keep, Body body, MakeResult make) {
  auto* worker = new LambdaWorker<Body, MakeResult>(env, std::move(body), std::move(make));
  for (const auto& v : keep) worker->keep(v);
  auto promise = worker->Promise();
  worker->Queue();
  return promise;
}

auto noResult = [](Napi::Env env) -> Napi::Value { return env.Undefined(); };

// ---- Linear ----------------------------------------------------------------------------------------------------

class Linear : public Napi::ObjectWrap<Linear> {
 public:
  static Napi::FunctionReference constructor;
  static void Define(Napi::Env env, Napi::Object exports) {
    auto cls = DefineClass(env, "Linear",
                           {InstanceMethod("run", &Linear::Run), InstanceAccessor("packedBytes", &Linear::PackedBytes, nullptr),
                            InstanceAccessor("chunks", &Linear::Chunks, nullptr), InstanceAccessor("compactChunks", &Linear::CompactChunks, nullptr),
                            InstanceAccessor("impl", &Linear::Impl, nullptr)});
    constructor = Napi::Persistent(cls);
    exports.Set("Linear", cls);
  }
  explicit Linear(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Linear>(info) {
    if (info.Length() != 1 || !info[0].IsExternal()) throw Napi::TypeError::New(info.Env(), "use createLinear() to build a Linear");
    impl_ = *info[0].As<Napi::External<std::shared_ptr<PackedLinear>>>().Data();
  }

 private:
  // run(x [M*K], M, y [M*N], accumulate) → Promise<void>
  Napi::Value Run(const Napi::CallbackInfo& info) {
    auto env = info.Env();
    int M = positiveInt(info[1], "rows");
    auto x = floats(info[0], "x", static_cast<size_t>(M) * impl_->K());
    auto y = floats(info[2], "y", static_cast<size_t>(M) * impl_->N());
    bool accumulate = info.Length() > 3 && info[3].ToBoolean();
    auto impl = impl_;
    return queue(env, {info[0], info[2]}, [impl, x, y, M, accumulate]() { impl->run(x.data, M, y.data, accumulate, sharedScratch()); }, noResult);
  }
  Napi::Value PackedBytes(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), static_cast<double>(impl_->packedBytes())); }
  Napi::Value Chunks(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), impl_->chunks()); }
  Napi::Value CompactChunks(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), impl_->compactChunks()); }
  Napi::Value Impl(const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), impl_->implName()); }
  std::shared_ptr<PackedLinear> impl_;

 public:
  const std::shared_ptr<PackedLinear>& impl() const { return impl_; }
};
Napi::FunctionReference Linear::constructor;

template <class T>
Napi::Value wrapShared(Napi::Env env, Napi::FunctionReference& ctor, std::shared_ptr<T> value) {
  auto external = Napi::External<std::shared_ptr<T>>::New(env, new std::shared_ptr<T>(std::move(value)),
                                                          [](Napi::Env, std::shared_ptr<T>* p) { delete p; });
  return ctor.New({external});
}

// createLinear(weight [N*K], bias [N] | null, K, N, options) → Promise<Linear>
Napi::Value CreateLinear(const Napi::CallbackInfo& info) {
  auto env = info.Env();
  int K = positiveInt(info[2], "K (input features)");
  int N = positiveInt(info[3], "N (output features)");
  LinearOptions options = linearOptions(info[4]);
  const WeightView w = weightMatrix(info[0], "weight", static_cast<size_t>(K) * N, options.transposed);
  const float* bias = nullptr;
  if (!info[1].IsNull() && !info[1].IsUndefined()) bias = floats(info[1], "bias", N).data;
  auto result = std::make_shared<std::shared_ptr<PackedLinear>>();
  return queue(
      env, {info[0], info[1]},
      [result, w, bias, K, N, options]() {
        if (w.f16) *result = std::make_shared<PackedLinear>(std::vector<ColumnSource>{{nullptr, static_cast<size_t>(N), N, w.f16}}, bias, K, options);
        else *result = std::make_shared<PackedLinear>(w.f32, bias, K, N, options);
      },
      [result](Napi::Env e) { return wrapShared(e, Linear::constructor, *result); });
}

// ---- QuantLinear (ggml Q8_0 / Q4_0 blocks, K-quants Q4_K / Q5_K / Q6_K) ----------------------------------------------------------------------

class QuantLinearJs : public Napi::ObjectWrap<QuantLinearJs> {
 public:
  static Napi::FunctionReference constructor;
  static void Define(Napi::Env env, Napi::Object exports) {
    auto cls = DefineClass(env, "QuantLinear", {InstanceMethod("run", &QuantLinearJs::Run), InstanceAccessor("bytes", &QuantLinearJs::Bytes, nullptr)});
    constructor = Napi::Persistent(cls);
    exports.Set("QuantLinear", cls);
  }
  explicit QuantLinearJs(const Napi::CallbackInfo& info) : Napi::ObjectWrap<QuantLinearJs>(info) {
    if (info.Length() != 1 || !info[0].IsExternal()) throw Napi::TypeError::New(info.Env(), "use createQuantLinear() to build a QuantLinear");
    impl_ = *info[0].As<Napi::External<std::shared_ptr<QuantLinear>>>().Data();
  }

 private:
  // run(x [M*K], M, y [M*N], accumulate, kernel?) → Promise<void>; x floats, or bf16 bits (Uint16Array) with the best kernel.
  Napi::Value Run(const Napi::CallbackInfo& info) {
    auto env = info.Env();
    int M = positiveInt(info[1], "rows");
    auto y = floats(info[2], "y", static_cast<size_t>(M) * impl_->N());
    const KvView x = floatsOrBf16(info[0], "x", static_cast<size_t>(M) * impl_->K(), "a Float32Array, or a Uint16Array of bf16 bits");
    bool accumulate = info.Length() > 3 && info[3].ToBoolean();
    if (x.bf16) {
      if (info.Length() > 4 && !info[4].IsUndefined()) throw Napi::TypeError::New(env, "bf16 rows (a Uint16Array x) run with the best kernel: leave kernel out, or pass Float32Array rows");
      const auto* x16 = static_cast<const uint16_t*>(x.data);
      auto impl = impl_;
      return queue(env, {info[0], info[2]}, [impl, x16, y, M, accumulate]() { impl->run(x16, M, y.data, accumulate); }, noResult);
    }
    QuantKernel kernel = QuantKernel::best;
    if (info.Length() > 4 && !info[4].IsUndefined()) {
      if (!info[4].IsString()) throw Napi::TypeError::New(env, "kernel: give 'best', 'avx512vnni', 'avx2', 'scalar', 'bf16' or 'vnni-gemm'");
      try {
        kernel = parseQuantKernel(info[4].As<Napi::String>().Utf8Value());
      } catch (const std::invalid_argument& e) {
        throw Napi::TypeError::New(env, e.what());
      }
      if (!quantKernelAvailable(kernel)) throw Napi::Error::New(env, std::string("quantized kernel ") + quantKernelName(kernel) + " is not available on this CPU");
    }
    auto impl = impl_;
    return queue(env, {info[0], info[2]}, [impl, x32 = static_cast<const float*>(x.data), y, M, accumulate, kernel]() { impl->run(x32, M, y.data, accumulate, kernel); }, noResult);
  }
  Napi::Value Bytes(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), static_cast<double>(impl_->bytes())); }
  std::shared_ptr<QuantLinear> impl_;

 public:
  const std::shared_ptr<QuantLinear>& impl() const { return impl_; }
};
Napi::FunctionReference QuantLinearJs::constructor;

// The arguments (type, blocks, K, N) of createQuantLinear and quantStore, checked: a known type, K a multiple of its
// block's values, and blocks a Uint8Array of exactly the bytes an [N, K] matrix of it has.
struct QuantArgs {
  QuantType type;
  int K, N;
  const uint8_t* data;
  size_t bytes;
};

QuantArgs quantArgs(const Napi::CallbackInfo& info, const std::string& call) {
  auto env = info.Env();
  if (info.Length() < 4 || !info[0].IsString()) throw Napi::TypeError::New(env, call + "(type, blocks, K, N): type is 'Q8_0', 'Q4_0', 'Q4_K', 'Q5_K' or 'Q6_K'");
  QuantArgs q;
  try {
    q.type = parseQuantType(info[0].As<Napi::String>().Utf8Value());
  } catch (const std::invalid_argument& e) {
    throw Napi::TypeError::New(env, e.what());
  }
  q.K = positiveInt(info[2], "K (input features)");
  q.N = positiveInt(info[3], "N (output features)");
  const int values = quantBlockValues(q.type);
  if (q.K % values != 0) throw Napi::RangeError::New(env, "K (input features) " + std::to_string(q.K) + " is not a multiple of " + std::to_string(values) + " (" + quantTypeName(q.type) + " blocks hold " + std::to_string(values) + " values)");
  if (!info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) throw Napi::TypeError::New(env, "blocks: give a Uint8Array of the GGUF tensor's bytes");
  auto blocks = info[1].As<Napi::Uint8Array>();
  q.bytes = static_cast<size_t>(q.K / values) * quantBlockBytes(q.type) * q.N;
  if (blocks.ByteLength() != q.bytes) {
    throw Napi::RangeError::New(env, std::string("blocks: a ") + quantTypeName(q.type) + " [" + std::to_string(q.N) + ", " + std::to_string(q.K) + "] weight is " + std::to_string(q.bytes) + " bytes, got " + std::to_string(blocks.ByteLength()));
  }
  q.data = blocks.Data();
  return q;
}

// createQuantLinear(type 'Q8_0' | 'Q4_0' | 'Q4_K' | 'Q5_K' | 'Q6_K', blocks Uint8Array ([N, K] as GGUF stores it), K, N, stored?) → Promise<QuantLinear>
Napi::Value CreateQuantLinear(const Napi::CallbackInfo& info) {
  auto env = info.Env();
  const QuantArgs q = quantArgs(info, "createQuantLinear");
  // stored (5th argument): quantStore's form, read where it lies; the QuantLinear keeps the array alive (`stored`).
  const bool stored = info.Length() > 4 && info[4].ToBoolean();
  auto result = std::make_shared<std::shared_ptr<QuantLinear>>();
  auto held = stored ? std::make_shared<Napi::ObjectReference>(Napi::Persistent(info[1].As<Napi::Object>())) : nullptr;
  return queue(
      env, {info[1]},
      [result, q, stored]() { *result = stored ? std::make_shared<QuantLinear>(q.type, q.data, q.K, q.N, QuantLinear::Borrow{}) : std::make_shared<QuantLinear>(q.type, q.data, q.K, q.N); },
      [result, held](Napi::Env e) -> Napi::Value {
        Napi::Value object = wrapShared(e, QuantLinearJs::constructor, *result);
        if (held) {
          object.As<Napi::Object>().Set("stored", held->Value());
          held->Reset();
        }
        return object;
      });
}

// quantStore(type, blocks, K, N) → Promise<Uint8Array>: the [N, K] blocks in the form QuantLinear keeps them on this
// host (QuantLinear::store), in 64-byte-aligned memory, for a layer whose matrices stream in from the offloading tiers
// and are read there ({ type, blocks: these bytes, stored: true }).
Napi::Value QuantStore(const Napi::CallbackInfo& info) {
  auto env = info.Env();
  const QuantArgs q = quantArgs(info, "quantStore");
  const size_t bytes = q.bytes;
  auto* out = static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
  if (!out) throw Napi::RangeError::New(env, "cannot allocate " + std::to_string(bytes) + " bytes");
  auto owner = std::shared_ptr<uint8_t>(out, [](uint8_t* p) { std::free(p); });
  return queue(
      env, {info[1]}, [owner, q]() { QuantLinear::store(q.type, q.data, q.K, q.N, owner.get()); },
      [owner, bytes](Napi::Env e) -> Napi::Value {
        // The ArrayBuffer takes the memory over: it frees it when collected.
        auto* keep = new std::shared_ptr<uint8_t>(owner);
        Napi::MemoryManagement::AdjustExternalMemory(e, static_cast<int64_t>(bytes));
        auto buffer = Napi::ArrayBuffer::New(e, owner.get(), bytes, [bytes](Napi::Env env2, void*, std::shared_ptr<uint8_t>* k) {
          delete k;
          Napi::MemoryManagement::AdjustExternalMemory(env2, -static_cast<int64_t>(bytes));
        }, keep);
        return Napi::Uint8Array::New(e, bytes, buffer, 0);
      });
}

// layerNorm(x, rows, dim, w, b, eps, y) → Promise<void>
Napi::Value LayerNorm(const Napi::CallbackInfo& info) {
  auto env = info.Env();
  int rows = positiveInt(info[1], "rows"), dim = positiveInt(info[2], "dim");
  auto x = floats(info[0], "x", static_cast<size_t>(rows) * dim);
  auto w = floats(info[3], "weight", dim);
  auto b = floats(info[4], "bias", dim);
  float eps = static_cast<float>(info[5].ToNumber().DoubleValue());
  auto y = floats(info[6], "y", static_cast<size_t>(rows) * dim);
  return queue(env, {info[0], info[3], info[4], info[6]}, [=]() { layerNormRows(x.data, y.data, rows, dim, w.data, b.data, eps); }, noResult);
}

// ---- DecoderLayer (the Llama family: Llama 2/3, Mistral, Qwen2) --------------------------------------------------

Napi::Int32Array int32s(const Napi::Value& value, const std::string& what, size_t expected) {
  if (!value.IsTypedArray() || value.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) throw Napi::TypeError::New(value.Env(), what + " must be an Int32Array");
  auto array = value.As<Napi::Int32Array>();
  if (array.ElementLength() != expected) throw Napi::RangeError::New(value.Env(), what + " has " + std::to_string(array.ElementLength()) + " elements, expected " + std::to_string(expected));
  return array;
}

class DecoderLayerJs : public Napi::ObjectWrap<DecoderLayerJs> {
 public:
  static Napi::FunctionReference constructor;
  static void Define(Napi::Env env, Napi::Object exports) {
    auto cls = DefineClass(env, "DecoderLayer", {InstanceMethod("run", &DecoderLayerJs::Run), InstanceMethod("runCached", &DecoderLayerJs::RunCached), InstanceMethod("release", &DecoderLayerJs::Release),
                                               InstanceAccessor("packedBytes", &DecoderLayerJs::PackedBytes, nullptr), InstanceAccessor("lazyPackMs", &DecoderLayerJs::LazyPackMs, nullptr)});
    constructor = Napi::Persistent(cls);
    exports.Set("DecoderLayer", cls);
  }
  explicit DecoderLayerJs(const Napi::CallbackInfo& info) : Napi::ObjectWrap<DecoderLayerJs>(info) {
    if (info.Length() != 2 || !info[0].IsExternal()) throw Napi::TypeError::New(info.Env(), "use createDecoderLayer() to build a DecoderLayer");
    impl_ = std::move(*info[0].As<Napi::External<std::shared_ptr<DecoderLayer>>>().Data());
    shape_ = *info[1].As<Napi::External<DecoderLayerShape>>().Data();
  }
  DecoderLayerShape shape_{};
  const std::shared_ptr<DecoderLayer>& impl() const { return impl_; }
  void holdWeights(const std::vector<Napi::Value>& weights) {
    for (const auto& w : weights)
      if (w.IsObject()) weights_.push_back(Napi::Persistent(w.As<Napi::Object>()));
  }
  // The step's common arguments (x, maskBias, positions, invFreq, y) and the sizes.
  DecoderLayerStep step(const Napi::Value& x, const Napi::Value& mask, const Napi::Value& positions, const Napi::Value& invFreq, int B, int S, int P, const Napi::Value& y) const {
    const size_t H = shape_.hidden, T = static_cast<size_t>(P) + S, rows = static_cast<size_t>(B) * S;
    DecoderLayerStep st{};
    st.batch = B, st.seq = S, st.past = P;
    st.x = floats(x, "hidden", rows * H).data;
    st.maskBias = floats(mask, "maskBias", rows * T).data;
    // Without rope (positions added at embedding) they are not read: null is fine.
    const bool unused = !shape_.rope && (positions.IsNull() || positions.IsUndefined());
    st.positions = unused ? nullptr : int32s(positions, "positions", rows).Data();
    st.invFreq = !shape_.rope && (invFreq.IsNull() || invFreq.IsUndefined()) ? nullptr : floats(invFreq, "invFreq", static_cast<size_t>(shape_.headDim / 2)).data;
    st.y = floats(y, "output hidden", rows * H).data;
    return st;
  }
  // A step over an in-place cache [batch, kvHeads, capacity, headDim] (floats, or bf16 bits for a bf16 layer).
  DecoderLayerStep cachedStep(const Napi::Value& x, const Napi::Value& mask, const Napi::Value& positions, const Napi::Value& invFreq, int B, int S, int P, const Napi::Value& y,
                              const Napi::Value& cacheK, const Napi::Value& cacheV, int capacity, const std::string& where) const {
    auto env = x.Env();
    if (capacity < P + S) throw Napi::RangeError::New(env, "cache capacity " + std::to_string(capacity) + " is below pastLen + seq = " + std::to_string(P + S) + "; grow the cache first");
    const size_t kv = static_cast<size_t>(shape_.kvHeads) * shape_.headDim * B * capacity;
    DecoderLayerStep st = step(x, mask, positions, invFreq, B, S, P, y);
    const KvView k = kvBuffer(cacheK, where + "cache.k", kv), v = kvBuffer(cacheV, where + "cache.v", kv);
    if (k.bf16 != v.bf16) throw Napi::TypeError::New(env, where + "cache.k and cache.v must both be Float32Array (fp32 cache) or both Uint16Array (bf16 cache)");
    st.presentK = k.data;
    st.presentV = v.data;
    st.kvBf16 = k.bf16;
    st.kvTokens = static_cast<size_t>(capacity);
    return st;
  }
  void checkLive(Napi::Env env) const {
    if (!impl_) throw Napi::Error::New(env, "this DecoderLayer was released; create it again with createDecoderLayer()");
  }
  // The layer's weight arrays beside `values`: kept alive until a queued run settles.
  std::vector<Napi::Value> withWeights(std::vector<Napi::Value> values) const {
    for (const auto& w : weights_) values.push_back(w.Value());
    return values;
  }

 private:
  // run(x, pastK, pastV, maskBias, positions, invFreq, batch, seq, pastLen, y, presentK, presentV) → Promise<void>
  Napi::Value Run(const Napi::CallbackInfo& info) {
    auto env = info.Env();
    checkLive(env);
    const int B = positiveInt(info[6], "batch"), S = positiveInt(info[7], "seq"), P = positiveInt(info[8], "pastLen", true);
    const size_t kv = static_cast<size_t>(shape_.kvHeads) * shape_.headDim * B;
    DecoderLayerStep st = step(info[0], info[3], info[4], info[5], B, S, P, info[9]);
    st.pastK = floats(info[1], "past.k", kv * P).data;
    st.pastV = floats(info[2], "past.v", kv * P).data;
    st.presentK = floats(info[10], "present.k", kv * (P + S)).data;
    st.presentV = floats(info[11], "present.v", kv * (P + S)).data;
    auto impl = impl_;
    return queue(env, withWeights({info[0], info[1], info[2], info[3], info[4], info[5], info[9], info[10], info[11]}), [impl, st]() { impl->run(st, sharedScratch()); }, noResult);
  }
  // runCached(x, maskBias, positions, invFreq, batch, seq, pastLen, y, cacheK, cacheV, capacity) → Promise<void>:
  // the cache holds [batch, kvHeads, capacity, headDim] with the first pastLen tokens filled; floats, or bf16 bits
  // (Uint16Array) for a bf16 layer.
  Napi::Value RunCached(const Napi::CallbackInfo& info) {
    auto env = info.Env();
    checkLive(env);
    const int B = positiveInt(info[4], "batch"), S = positiveInt(info[5], "seq"), P = positiveInt(info[6], "pastLen", true);
    const int capacity = positiveInt(info[10], "capacity");
    DecoderLayerStep st = cachedStep(info[0], info[1], info[2], info[3], B, S, P, info[7], info[8], info[9], capacity, "");
    auto impl = impl_;
    return queue(env, withWeights({info[0], info[1], info[2], info[3], info[7], info[8], info[9]}), [impl, st]() { impl->run(st, sharedScratch()); }, noResult);
  }
  Napi::Value PackedBytes(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), impl_ ? static_cast<double>(impl_->packedBytes()) : 0.0); }
  Napi::Value LazyPackMs(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), impl_ ? impl_->lazyPackMs() : 0.0); }
  Napi::Value Release(const Napi::CallbackInfo& info) {
    impl_.reset();
    weights_.clear();
    return info.Env().Undefined();
  }
  std::shared_ptr<DecoderLayer> impl_;
  std::vector<Napi::ObjectReference> weights_;
};
Napi::FunctionReference DecoderLayerJs::constructor;

// The elements of a JS array argument (exactly `expected` of them).
std::vector<Napi::Value> arrayItems(const Napi::Value& value, const std::string& what, size_t expected) {
  if (!value.IsArray()) throw Napi::TypeError::New(value.Env(), what + " must be an array");
  auto array = value.As<Napi::Array>();
  if (array.Length() != expected) throw Napi::RangeError::New(value.Env(), what + " has " + std::to_string(array.Length()) + " entries, expected " + std::to_string(expected));
  std::vector<Napi::Value> items;
  for (uint32_t i = 0; i < array.Length(); i++) items.push_back(array.Get(i));
  return items;
}

// runDecoderStack(layers, x, masks, positions, invFreq, batch, seq, pastLen, y, spare, cacheK, cacheV, capacity) →
// Promise<void>: every layer of a step with its in-place cache (as runCached), in one call on the compute thread. Layer
// by layer, a decode step crosses threads three times a layer (the promise's worker, the compute thread, back to the
// event loop): about 0.15 ms a layer, a tenth of a batch-1 decode step through 16 layers. Layer i reads layer i − 1's
// output; y and spare (both [batch, seq, hidden]; no two of x, y, spare share memory) take turns so that the last layer writes y.
// masks, cacheK and cacheV hold one entry per layer (masks may repeat one array).
Napi::Value RunDecoderStack(const Napi::CallbackInfo& info) {
  auto env = info.Env();
  if (!info[0].IsArray() || info[0].As<Napi::Array>().Length() == 0) throw Napi::TypeError::New(env, "layers must be a non-empty array of DecoderLayer");
  const size_t L = info[0].As<Napi::Array>().Length();
  const auto layers = arrayItems(info[0], "layers", L), masks = arrayItems(info[2], "masks", L), ks = arrayItems(info[10], "cacheK", L), vs = arrayItems(info[11], "cacheV", L);
  const int B = positiveInt(info[5], "batch"), S = positiveInt(info[6], "seq"), P = positiveInt(info[7], "pastLen", true);
  const int capacity = positiveInt(info[12], "capacity");
  // Layers write y and spare while later ones read them: no two of the three may share memory (views of one buffer
  // included).
  const FloatView x = floats(info[1], "hidden", SIZE_MAX), y = floats(info[8], "output hidden", SIZE_MAX), spare = floats(info[9], "spare hidden", SIZE_MAX);
  const auto overlap = [](const FloatView& a, const FloatView& b) {
    const auto a0 = reinterpret_cast<uintptr_t>(a.data), b0 = reinterpret_cast<uintptr_t>(b.data);
    return a0 < b0 + 4 * b.length && b0 < a0 + 4 * a.length;
  };
  if (overlap(x, y) || overlap(x, spare) || overlap(y, spare)) throw Napi::TypeError::New(env, "hidden, output hidden and spare hidden must be three arrays that share no memory");
  std::vector<std::pair<std::shared_ptr<DecoderLayer>, DecoderLayerStep>> runs;
  std::vector<Napi::Value> keep = {info[1], info[3], info[4], info[8], info[9]};
  for (size_t i = 0; i < L; i++) {
    if (!layers[i].IsObject() || !layers[i].As<Napi::Object>().InstanceOf(DecoderLayerJs::constructor.Value())) throw Napi::TypeError::New(env, "layers[" + std::to_string(i) + "] is not a DecoderLayer");
    const auto* layer = DecoderLayerJs::Unwrap(layers[i].As<Napi::Object>());
    layer->checkLive(env);
    // The last layer writes y, the one before it spare, and so on back to the first.
    const Napi::Value out = (L - 1 - i) % 2 == 0 ? info[8] : info[9];
    const Napi::Value in = i == 0 ? info[1] : ((L - i) % 2 == 0 ? info[8] : info[9]);
    runs.emplace_back(layer->impl(), layer->cachedStep(in, masks[i], info[3], info[4], B, S, P, out, ks[i], vs[i], capacity, "layer " + std::to_string(i) + "'s "));
    keep = layer->withWeights(std::move(keep));
    keep.insert(keep.end(), {masks[i], ks[i], vs[i]});
  }
  return queue(env, keep, [runs = std::move(runs)]() {
    for (const auto& [layer, st] : runs) layer->run(st, sharedScratch());
  }, noResult);
}

// The tensors by the description's keys, the part each belongs to, and whether a layer may lack it.
struct DecoderTensor {
  const char* key;
  int part;
  bool optional;
};
const DecoderTensor kDecoderTensors[] = {{"inNormW", kDecoderNorm, false}, {"qW", kDecoderQkv, false},    {"qB", kDecoderQkv, true},     {"kW", kDecoderQkv, false},
                                     {"kB", kDecoderQkv, true},        {"vW", kDecoderQkv, false},    {"vB", kDecoderQkv, true},     {"oW", kDecoderOut, false},
                                     {"oB", kDecoderOut, true},        {"postNormW", kDecoderNorm, false}, {"gateW", kDecoderGateUp, false}, {"gateB", kDecoderGateUp, true},
                                     {"upW", kDecoderGateUp, false},   {"upB", kDecoderGateUp, true}, {"downW", kDecoderDown, false}, {"downB", kDecoderDown, true},
                                     {"attnOutNormW", kDecoderNorm, false}, {"mlpOutNormW", kDecoderNorm, false}, {"qNormW", kDecoderNorm, false}, {"kNormW", kDecoderNorm, false},
                                     {"inNormB", kDecoderNorm, false}, {"postNormB", kDecoderNorm, false}};
constexpr int kDecoderTensorCount = sizeof(kDecoderTensors) / sizeof(kDecoderTensors[0]);

// Whether the shape's kinds use tensor `key` (norms, a gated MLP's gate; the others are neither required nor read).
bool usesTensor(const DecoderLayerShape& shape, const std::string& key) {
  if (key == "inNormW" || key == "postNormW") return shape.normIn() || shape.normAfter();
  if (key == "inNormB" || key == "postNormB") return (shape.normIn() || shape.normAfter()) && shape.norm == NormKind::layer;
  if (key == "gateW" || key == "gateB") return shape.mlp == MlpKind::gated;
  if (key == "attnOutNormW" || key == "mlpOutNormW") return shape.normOut();
  if (key == "qNormW" || key == "kNormW") return shape.qkNorm;
  return true;
}

// A finite number at least 0 from shape[key] (absent: fallback).
float shapeNumber(const Napi::Object& s, const char* key, float fallback) {
  const Napi::Value v = s.Get(key);
  if (v.IsUndefined()) return fallback;
  const double x = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : -1;
  if (!(x >= 0) || !std::isfinite(x)) throw Napi::RangeError::New(s.Env(), std::string("shape.") + key + " must be a finite number of at least 0");
  return static_cast<float>(x);
}

// shape.<key>: one of names (absent: the first).
int shapeChoice(const Napi::Object& s, const char* key, const std::vector<std::string>& names) {
  const Napi::Value v = s.Get(key);
  if (v.IsUndefined()) return 0;
  const std::string name = v.IsString() ? v.As<Napi::String>().Utf8Value() : "";
  for (size_t i = 0; i < names.size(); i++)
    if (name == names[i]) return static_cast<int>(i);
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "'" : ", '") + n + "'";
  throw Napi::TypeError::New(s.Env(), std::string("shape.") + key + " must be one of " + list);
}

int llamaParts(const Napi::Value& options) {
  if (!options.IsObject() || !options.As<Napi::Object>().Has("parts")) return kDecoderAllParts;
  auto list = options.As<Napi::Object>().Get("parts");
  const char* names = "'qkv', 'out', 'gateUp', 'down', 'norm'";
  if (!list.IsArray()) throw Napi::TypeError::New(options.Env(), std::string("options.parts must be an array of ") + names);
  auto array = list.As<Napi::Array>();
  int parts = 0;
  for (uint32_t i = 0; i < array.Length(); i++) {
    std::string name = array.Get(i).ToString().Utf8Value();
    const int part = name == "qkv" ? kDecoderQkv : name == "out" ? kDecoderOut : name == "gateUp" ? kDecoderGateUp : name == "down" ? kDecoderDown : name == "norm" ? kDecoderNorm : 0;
    if (!part) throw Napi::TypeError::New(options.Env(), "options.parts: unknown part '" + name + "' (use " + names + ")");
    parts |= part;
  }
  return parts;
}

// A weight given as ggml blocks: an object { type: 'Q8_0' | 'Q4_0' | 'Q4_K' | 'Q5_K' | 'Q6_K', blocks: Uint8Array }.
bool isQuantWeight(const Napi::Value& v) { return v.IsObject() && !v.IsTypedArray() && !v.IsArray(); }

// { packed, scale, shape, groupSize, groupDim }: a matrix in FlexLLMGen's 4-bit format (pinned-memory's quantize4 of the
// [in, out] tensor, grouped along out), as the offloading tiers hand over compressed weights.
bool isGroup4Weight(const Napi::Value& v) { return isQuantWeight(v) && v.As<Napi::Object>().Has("packed"); }

Group4Weights group4Weight(const Napi::Value& value, const std::string& what, std::pair<size_t, size_t> inOut) {
  auto env = value.Env();
  auto o = value.As<Napi::Object>();
  const auto [in, out] = inOut;
  const Napi::Value packed = o.Get("packed"), scale = o.Get("scale"), shape = o.Get("shape"), groupSize = o.Get("groupSize"), groupDim = o.Get("groupDim");
  const std::string form = " (a 4-bit weight is quantize4's { packed, scale, shape, groupSize, groupDim } of the [in, out] matrix, groupDim 1)";
  if (!packed.IsTypedArray() || packed.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) throw Napi::TypeError::New(env, what + ".packed must be a Uint8Array" + form);
  if (!scale.IsTypedArray() || scale.As<Napi::TypedArray>().TypedArrayType() != napi_uint16_array) throw Napi::TypeError::New(env, what + ".scale must be a Uint16Array of f16 bits" + form);
  const bool shapeOk = shape.IsArray() && shape.As<Napi::Array>().Length() == 2 && shape.As<Napi::Array>().Get(0u).ToNumber().DoubleValue() == static_cast<double>(in) &&
                       shape.As<Napi::Array>().Get(1u).ToNumber().DoubleValue() == static_cast<double>(out);
  if (!shapeOk) throw Napi::RangeError::New(env, what + ".shape must be [" + std::to_string(in) + ", " + std::to_string(out) + "]" + form);
  const double dim = groupDim.IsNumber() ? groupDim.As<Napi::Number>().DoubleValue() : 0;
  if (dim != 1 && dim != -1) throw Napi::RangeError::New(env, what + ".groupDim must be 1 (groups along the output features)" + form);
  const double g = groupSize.IsNumber() ? groupSize.As<Napi::Number>().DoubleValue() : 0;
  if (!(g >= 2 && g <= 65536 && g == static_cast<int>(g) && static_cast<int>(g) % 2 == 0)) throw Napi::RangeError::New(env, what + ".groupSize must be an even integer from 2 to 65536" + form);
  Group4Weights w;
  w.groupSize = static_cast<int>(g);
  const size_t expectPacked = in * w.rowBytes(static_cast<int>(out)), expectScale = in * w.scaleRow(static_cast<int>(out));
  if (packed.As<Napi::Uint8Array>().ByteLength() != expectPacked) throw Napi::RangeError::New(env, what + ".packed holds " + std::to_string(packed.As<Napi::Uint8Array>().ByteLength()) + " bytes, expected " + std::to_string(expectPacked));
  if (scale.As<Napi::Uint16Array>().ElementLength() != expectScale) throw Napi::RangeError::New(env, what + ".scale holds " + std::to_string(scale.As<Napi::Uint16Array>().ElementLength()) + " values, expected " + std::to_string(expectScale));
  w.packed = packed.As<Napi::Uint8Array>().Data();
  w.scale = scale.As<Napi::Uint16Array>().Data();
  return w;
}

// A Llama matrix's (in, out) features.
std::pair<size_t, size_t> llamaMatrixDims(const std::string& key, size_t H, size_t Q, size_t KV, size_t I) {
  if (key == "qW") return {H, Q};
  if (key == "kW" || key == "vW") return {H, KV};
  if (key == "oW") return {Q, H};
  if (key == "gateW" || key == "upW") return {H, I};
  return {I, H};  // downW
}

// { type, blocks } checked: a known type, in features a multiple of 32, and the bytes an [out, in] matrix of it has.
QuantBlocks quantWeight(const Napi::Value& value, const std::string& what, std::pair<size_t, size_t> inOut) {
  auto env = value.Env();
  auto o = value.As<Napi::Object>();
  const Napi::Value typeValue = o.Get("type"), blocksValue = o.Get("blocks");
  if (!typeValue.IsString()) throw Napi::TypeError::New(env, what + ": a quantized weight is { type: 'Q8_0' | 'Q4_0' | 'Q4_K' | 'Q5_K' | 'Q6_K', blocks: Uint8Array }");
  QuantBlocks q;
  try {
    q.type = parseQuantType(typeValue.As<Napi::String>().Utf8Value());
  } catch (const std::invalid_argument& e) {
    throw Napi::TypeError::New(env, what + ": " + e.what());
  }
  if (!blocksValue.IsTypedArray() || blocksValue.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) throw Napi::TypeError::New(env, what + ".blocks: give a Uint8Array of the GGUF tensor's bytes");
  const auto [in, out] = inOut;
  const size_t values = quantBlockValues(q.type);
  if (in % values != 0) throw Napi::RangeError::New(env, what + ": " + std::to_string(in) + " input features are not a multiple of " + std::to_string(values) + " (" + quantTypeName(q.type) + " blocks hold " + std::to_string(values) + " values)");
  auto blocks = blocksValue.As<Napi::Uint8Array>();
  const size_t expected = in / values * quantBlockBytes(q.type) * out;
  if (blocks.ByteLength() != expected) {
    throw Napi::RangeError::New(env, what + ": a " + quantTypeName(q.type) + " [" + std::to_string(out) + ", " + std::to_string(in) + "] weight is " + std::to_string(expected) + " bytes, got " + std::to_string(blocks.ByteLength()));
  }
  q.data = blocks.Data();
  // { …, stored: true }: quantStore's form of the blocks (a streamed layer's home copy), read where it lies.
  q.stored = o.Get("stored").ToBoolean();
  return q;
}

// createDecoderLayer({hidden, heads, kvHeads, headDim, ffn, eps, placement?, norm?, rope?, activation?, …}, weights
// {inNormW, qW, …} ([in, out]), options, base?) → Promise<DecoderLayer>: the decoder layer of every family (OPT too:
// norm 'layernorm' with inNormB/postNormB, rope false, activation 'relu' with upW/upB as fc1, downW/downB as fc2).
// Biases (qB, kB, vB, oB, gateB, upB, downB) may be absent. options.parts (default all) names the parts packed from
// weights (only their tensors are needed); with base (a layer of the same shape and dtype) the others are shared.
Napi::Value CreateDecoderLayer(const Napi::CallbackInfo& info) {
  auto env = info.Env();
  if (!info[0].IsObject() || !info[1].IsObject()) throw Napi::TypeError::New(env, "createDecoderLayer(shape, weights, options): shape and weights must be objects");
  auto s = info[0].As<Napi::Object>();
  DecoderLayerShape shape{positiveInt(s.Get("hidden"), "hidden"), positiveInt(s.Get("heads"), "heads"), positiveInt(s.Get("kvHeads"), "kvHeads"),
                        positiveInt(s.Get("headDim"), "headDim"), positiveInt(s.Get("ffn"), "ffn"), static_cast<float>(s.Get("eps").ToNumber().DoubleValue())};
  if (shape.heads % shape.kvHeads != 0) throw Napi::RangeError::New(env, "heads (" + std::to_string(shape.heads) + ") must be a multiple of kvHeads (" + std::to_string(shape.kvHeads) + ")");
  if (!(shape.eps > 0.f)) throw Napi::RangeError::New(env, "eps must be a number above 0");
  shape.placement = static_cast<NormPlacement>(shapeChoice(s, "placement", {"pre", "post-branch", "pre-and-post-branch", "post"}));
  shape.norm = shapeChoice(s, "norm", {"rmsnorm", "layernorm"}) == 1 ? NormKind::layer : NormKind::rms;
  shape.rope = s.Get("rope").IsUndefined() || s.Get("rope").ToBoolean();
  if (shape.rope && shape.headDim % 2 != 0) throw Napi::RangeError::New(env, "headDim must be even (RoPE pairs dimension i with i + headDim/2)");
  if (shape.norm == NormKind::layer && shape.normOut()) throw Napi::RangeError::New(env, "shape.placement: a layernorm layer's norms are 'pre' or 'post' (no post-branch LayerNorm)");
  const int activation = shapeChoice(s, "activation", {"silu", "gelu-tanh", "relu"});
  shape.activation = activation == 1 ? GatedActivation::geluTanh : GatedActivation::silu;
  shape.mlp = activation == 2 ? MlpKind::relu : MlpKind::gated;
  shape.qkNorm = s.Get("qkNorm").ToBoolean();
  shape.attnScale = shapeNumber(s, "attnScale", 0.f);
  shape.logitSoftcap = shapeNumber(s, "logitSoftcap", 0.f);
  shape.ropeScale = shapeNumber(s, "ropeScale", 1.f);
  const size_t H = shape.hidden, Q = static_cast<size_t>(shape.heads) * shape.headDim, KV = static_cast<size_t>(shape.kvHeads) * shape.headDim, I = shape.ffn;
  const int wanted = llamaParts(info[2]);
  std::shared_ptr<DecoderLayer> base;
  if (info.Length() > 3 && !info[3].IsUndefined() && !info[3].IsNull()) {
    if (!info[3].IsObject() || !info[3].As<Napi::Object>().InstanceOf(DecoderLayerJs::constructor.Value())) throw Napi::TypeError::New(env, "createDecoderLayer: base must be a DecoderLayer");
    DecoderLayerJs* b = DecoderLayerJs::Unwrap(info[3].As<Napi::Object>());
    base = b->impl();
    if (!base) throw Napi::Error::New(env, "createDecoderLayer: the base layer was released");
    const auto& o = b->shape_;
    if (o.hidden != shape.hidden || o.heads != shape.heads || o.kvHeads != shape.kvHeads || o.headDim != shape.headDim || o.ffn != shape.ffn || o.placement != shape.placement || o.qkNorm != shape.qkNorm || o.norm != shape.norm || o.rope != shape.rope || o.mlp != shape.mlp) throw Napi::RangeError::New(env, "createDecoderLayer: the base layer has another shape");
  }
  auto expected = [&](const std::string& key) -> size_t {
    if (key == "inNormW" || key == "postNormW" || key == "inNormB" || key == "postNormB" || key == "attnOutNormW" || key == "mlpOutNormW" || key == "oB" || key == "downB") return H;
    if (key == "qNormW") return Q;
    if (key == "kNormW") return KV;
    if (key == "qW") return H * Q;
    if (key == "kW" || key == "vW") return H * KV;
    if (key == "qB") return Q;
    if (key == "kB" || key == "vB") return KV;
    if (key == "oW") return Q * H;
    if (key == "gateW" || key == "upW") return H * I;
    if (key == "gateB" || key == "upB") return I;
    return I * H;  // downW
  };
  auto w = info[1].As<Napi::Object>();
  LinearOptions options = linearOptions(info[2]);
  std::vector<Napi::Value> keep;
  const float* tensors[kDecoderTensorCount] = {};
  const uint16_t* halves[kDecoderTensorCount] = {};
  QuantBlocks quants[kDecoderTensorCount] = {};
  Group4Weights fours[kDecoderTensorCount] = {};
  for (int i = 0; i < kDecoderTensorCount; i++) {
    const DecoderTensor& t = kDecoderTensors[i];
    if (!(wanted & t.part) || !usesTensor(shape, t.key)) continue;
    Napi::Value v = w.Get(t.key);
    if (t.optional && (v.IsUndefined() || v.IsNull())) continue;
    const std::string key = t.key;
    if (key.back() == 'W' && key.find("Norm") == std::string::npos && isGroup4Weight(v)) {
      fours[i] = group4Weight(v, "weights." + key, llamaMatrixDims(key, H, Q, KV, I));
    } else if (key.back() == 'W' && key.find("Norm") == std::string::npos && isQuantWeight(v)) {
      quants[i] = quantWeight(v, "weights." + key, llamaMatrixDims(key, H, Q, KV, I));
    } else if (key.back() == 'W' && key.find("Norm") == std::string::npos) {
      // The Llama layer always takes [in, out] weights, so f16 is allowed for every matrix.
      const WeightView view = weightMatrix(v, "weights." + key, expected(key), true);
      tensors[i] = view.f32;
      halves[i] = view.f16;
    } else {
      tensors[i] = floats(v, "weights." + key, expected(key)).data;
    }
    keep.push_back(v);
  }
  DecoderLayerWeights lw{tensors[0], tensors[1], tensors[2], tensors[3], tensors[4], tensors[5], tensors[6], tensors[7],
                       tensors[8], tensors[9], tensors[10], tensors[11], tensors[12], tensors[13], tensors[14], tensors[15]};
  lw.attnOutNormW = tensors[16], lw.mlpOutNormW = tensors[17], lw.qNormW = tensors[18], lw.kNormW = tensors[19];
  lw.inNormB = tensors[20], lw.postNormB = tensors[21];
  lw.qW16 = halves[1], lw.kW16 = halves[3], lw.vW16 = halves[5], lw.oW16 = halves[7], lw.gateW16 = halves[10], lw.upW16 = halves[12], lw.downW16 = halves[14];
  lw.qG = fours[1], lw.kG = fours[3], lw.vG = fours[5], lw.oG = fours[7], lw.gateG = fours[10], lw.upG = fours[12], lw.downG = fours[14];
  lw.qQ = quants[1], lw.kQ = quants[3], lw.vQ = quants[5], lw.oQ = quants[7], lw.gateQ = quants[10], lw.upQ = quants[12], lw.downQ = quants[14];
  // One fused GEMM runs on one kind of weight: q/k/v (and gate/up) all blocks (of one type, or each its own), or none.
  auto sameKind = [&](std::initializer_list<int> group, const char* names) {
    const QuantBlocks& first = quants[*group.begin()];
    for (int i : group)
      if ((quants[i].data == nullptr) != (first.data == nullptr))
        throw Napi::TypeError::New(env, std::string("createDecoderLayer: ") + names + " are multiplied in one GEMM: give them all as ggml blocks ({ type, blocks }) or all as arrays");
  };
  if (wanted & kDecoderQkv) sameKind({1, 3, 5}, "qW, kW and vW");
  if (wanted & kDecoderGateUp) sameKind({10, 12}, "gateW and upW");
  auto result = std::make_shared<std::shared_ptr<DecoderLayer>>();
  auto held = std::make_shared<std::vector<Napi::ObjectReference>>();
  // Lazily packed, or stored blocks read where they lie: the layer keeps reading the arrays after this call, so it
  // holds them (until released).
  bool borrows = false;
  for (const QuantBlocks& q : quants) borrows = borrows || q.stored;
  if (options.packAtRows > 0 || borrows)
    for (const auto& v : keep)
      if (v.IsObject()) held->push_back(Napi::Persistent(v.As<Napi::Object>()));
  return queue(
      env, keep, [result, shape, lw, options, wanted, base]() { *result = std::make_shared<DecoderLayer>(shape, lw, options, wanted, base.get()); },
      [result, shape, held](Napi::Env e) {
        auto external = Napi::External<std::shared_ptr<DecoderLayer>>::New(e, new std::shared_ptr<DecoderLayer>(*result), [](Napi::Env, std::shared_ptr<DecoderLayer>* p) { delete p; });
        auto shapeExt = Napi::External<DecoderLayerShape>::New(e, new DecoderLayerShape(shape), [](Napi::Env, DecoderLayerShape* p) { delete p; });
        auto object = DecoderLayerJs::constructor.New({external, shapeExt});
        std::vector<Napi::Value> weights;
        for (auto& ref : *held) weights.push_back(ref.Value());
        DecoderLayerJs::Unwrap(object)->holdWeights(weights);
        held->clear();
        return object;
      });
}

// rmsNorm(x, rows, dim, w, eps, y, bf16?) → Promise<void>; with bf16 y holds the rounded values (widened back).
Napi::Value RmsNorm(const Napi::CallbackInfo& info) {
  auto env = info.Env();
  const int rows = positiveInt(info[1], "rows"), dim = positiveInt(info[2], "dim");
  auto x = floats(info[0], "x", static_cast<size_t>(rows) * dim);
  auto w = floats(info[3], "weight", dim);
  const float eps = static_cast<float>(info[4].ToNumber().DoubleValue());
  auto y = floats(info[5], "y", static_cast<size_t>(rows) * dim);
  const bool bf16 = info.Length() > 6 && info[6].ToBoolean();
  return queue(env, {info[0], info[3], info[5]}, [=]() {
    if (!bf16) return rmsNormRows(x.data, y.data, rows, dim, w.data, eps);
    std::vector<uint16_t> bits(y.length);
    rmsNormRowsBf16(x.data, bits.data(), rows, dim, w.data, eps);
    fromBf16(bits.data(), y.data, y.length);
  }, noResult);
}

// rope(x, rows, ld, heads, headDim, positions, invFreq, scale = 1) → Promise<void>: rotates x in place.
Napi::Value Rope(const Napi::CallbackInfo& info) {
  auto env = info.Env();
  const int rows = positiveInt(info[1], "rows"), ld = positiveInt(info[2], "ld"), heads = positiveInt(info[3], "heads"), hd = positiveInt(info[4], "headDim");
  if (hd % 2 != 0 || static_cast<size_t>(heads) * hd > static_cast<size_t>(ld)) throw Napi::RangeError::New(env, "rope: headDim must be even and heads · headDim at most ld");
  auto x = floats(info[0], "x", static_cast<size_t>(rows) * ld);
  const int* positions = int32s(info[5], "positions", rows).Data();
  auto inv = floats(info[6], "invFreq", hd / 2);
  const float scale = info.Length() > 7 && !info[7].IsUndefined() ? static_cast<float>(info[7].ToNumber().DoubleValue()) : 1.f;
  if (!std::isfinite(scale)) throw Napi::RangeError::New(env, "rope: scale must be a finite number");
  return queue(env, {info[0], info[5], info[6]}, [=]() { ropeRows(x.data, rows, ld, heads, hd, positions, inv.data, scale); }, noResult);
}

// gated(gateUp [rows, 2I], rows, I, out [rows, I], bf16?, activation 'silu' | 'gelu-tanh' = 'silu') → Promise<void>:
// out = act(gate) · up; swiglu is the same with silu.
GatedActivation gatedActivation(const Napi::Value& v) {
  if (v.IsUndefined() || v.IsNull()) return GatedActivation::silu;
  const std::string name = v.IsString() ? v.As<Napi::String>().Utf8Value() : "";
  if (name == "silu") return GatedActivation::silu;
  if (name == "gelu-tanh") return GatedActivation::geluTanh;
  throw Napi::TypeError::New(v.Env(), "activation must be 'silu' or 'gelu-tanh'");
}

Napi::Value Gated(const Napi::CallbackInfo& info) {
  auto env = info.Env();
  const int rows = positiveInt(info[1], "rows"), I = positiveInt(info[2], "I");
  auto gu = floats(info[0], "gateUp", static_cast<size_t>(rows) * 2 * I);
  auto out = floats(info[3], "out", static_cast<size_t>(rows) * I);
  const bool bf16 = info.Length() > 4 && info[4].ToBoolean();
  const GatedActivation act = gatedActivation(info[5]);
  return queue(env, {info[0], info[3]}, [=]() {
    if (!bf16) return gatedRows(act, gu.data, rows, I, out.data);
    std::vector<uint16_t> bits(out.length);
    gatedRowsBf16(act, gu.data, rows, I, bits.data());
    fromBf16(bits.data(), out.data, out.length);
  }, noResult);
}

// One GEMM of a routed expert: a Linear (float32 / bf16 weights) or a QuantLinear (ggml blocks), K → N.
struct ExpertGemm {
  std::shared_ptr<PackedLinear> packed;
  std::shared_ptr<QuantLinear> quant;
  int K = 0, N = 0;
  void run(const float* x, int M, float* y) const {
    if (quant) quant->run(x, M, y, false, QuantKernel::best);
    else packed->run(x, M, y, false, sharedScratch());
  }
};

ExpertGemm expertGemm(const Napi::Value& v, const std::string& what, int K, int N) {
  auto env = v.Env();
  ExpertGemm g;
  if (v.IsObject() && v.As<Napi::Object>().InstanceOf(Linear::constructor.Value())) {
    g.packed = Linear::Unwrap(v.As<Napi::Object>())->impl();
    g.K = g.packed->K(), g.N = g.packed->N();
  } else if (v.IsObject() && v.As<Napi::Object>().InstanceOf(QuantLinearJs::constructor.Value())) {
    g.quant = QuantLinearJs::Unwrap(v.As<Napi::Object>())->impl();
    g.K = g.quant->K(), g.N = g.quant->N();
  } else {
    throw Napi::TypeError::New(env, what + ": give a Linear or a QuantLinear");
  }
  if (g.K != K || g.N != N) throw Napi::RangeError::New(env, what + " is " + std::to_string(g.K) + " → " + std::to_string(g.N) + ", expected " + std::to_string(K) + " → " + std::to_string(N));
  return g;
}

struct RoutedExpert {
  ExpertGemm gate, up, down;
  std::vector<int> rows;
  std::vector<float> weights;
};

// moeExperts(x [N*H], H, I, experts [{ gate, up, down, rows Int32Array, weights Float32Array }], out [N*H]) → Promise<void>
// A mixture-of-experts layer's routed experts in one call (MoeMlp.apply's loop, one crossing instead of four a chosen
// expert): for each expert in the given order, its rows of x gathered, gate and up, silu(g) · u, down, and result row k
// added to out's row rows[k] times weights[k] (float product, then float sum: MoeMlp's scatter, the same bits).
Napi::Value MoeExperts(const Napi::CallbackInfo& info) {
  auto env = info.Env();
  const int H = positiveInt(info[1], "H (hidden size)"), I = positiveInt(info[2], "I (expert width)");
  auto x = floats(info[0], "x", SIZE_MAX);
  if (x.length % H != 0) throw Napi::RangeError::New(env, "x has " + std::to_string(x.length) + " values, not whole rows of H = " + std::to_string(H));
  const int N = static_cast<int>(x.length / H);
  auto out = floats(info[4], "out", x.length);
  if (!info[3].IsArray()) throw Napi::TypeError::New(env, "experts: give an array of { gate, up, down, rows, weights }");
  auto list = info[3].As<Napi::Array>();
  auto experts = std::make_shared<std::vector<RoutedExpert>>();
  std::vector<Napi::Value> keep{info[0], info[4]};
  for (uint32_t i = 0; i < list.Length(); i++) {
    const std::string at = "experts[" + std::to_string(i) + "]";
    if (!list.Get(i).IsObject()) throw Napi::TypeError::New(env, at + ": give { gate, up, down, rows, weights }");
    auto o = list.Get(i).As<Napi::Object>();
    RoutedExpert e{expertGemm(o.Get("gate"), at + ".gate", H, I), expertGemm(o.Get("up"), at + ".up", H, I), expertGemm(o.Get("down"), at + ".down", I, H), {}, {}};
    const Napi::Value rows = o.Get("rows"), weights = o.Get("weights");
    if (!rows.IsTypedArray() || rows.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) throw Napi::TypeError::New(env, at + ".rows: give an Int32Array of row indices");
    if (!weights.IsTypedArray() || weights.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array) throw Napi::TypeError::New(env, at + ".weights: give a Float32Array");
    auto r = rows.As<Napi::Int32Array>();
    auto w = weights.As<Napi::Float32Array>();
    if (w.ElementLength() != r.ElementLength() || r.ElementLength() == 0) throw Napi::RangeError::New(env, at + ": rows and weights must be equally long, not empty");
    for (size_t k = 0; k < r.ElementLength(); k++) {
      if (r[k] < 0 || r[k] >= N) throw Napi::RangeError::New(env, at + ".rows[" + std::to_string(k) + "] = " + std::to_string(r[k]) + " is not a row of x (0 … " + std::to_string(N - 1) + ")");
      e.rows.push_back(r[k]);
      e.weights.push_back(w[k]);
    }
    for (const char* key : {"gate", "up", "down"}) keep.push_back(o.Get(key));
    experts->push_back(std::move(e));
  }
  return queue(env, keep, [experts, x, out, H, I]() {
    thread_local std::vector<float> xs, gu, a, ys;
    for (const RoutedExpert& e : *experts) {
      const int n = static_cast<int>(e.rows.size());
      xs.resize(static_cast<size_t>(n) * H);
      gu.resize(static_cast<size_t>(2) * n * I);
      a.resize(static_cast<size_t>(n) * I);
      ys.resize(static_cast<size_t>(n) * H);
      for (int k = 0; k < n; k++) std::memcpy(xs.data() + static_cast<size_t>(k) * H, x.data + static_cast<size_t>(e.rows[k]) * H, sizeof(float) * H);
      // [g | u], each [n, I], as one row of 2·n·I for the gated kernel.
      e.gate.run(xs.data(), n, gu.data());
      e.up.run(xs.data(), n, gu.data() + static_cast<size_t>(n) * I);
      gatedRows(GatedActivation::silu, gu.data(), 1, n * I, a.data());
      e.down.run(a.data(), n, ys.data());
      for (int k = 0; k < n; k++) {
        float* row = out.data + static_cast<size_t>(e.rows[k]) * H;
        const float* y = ys.data() + static_cast<size_t>(k) * H;
        const float w = e.weights[k];
        // Rounded product, then rounded sum (this file builds for baseline x86-64: no FMA to contract them into).
        for (int i = 0; i < H; i++) row[i] += y[i] * w;
      }
    }
  }, noResult);
}

// narrowBf16(x Float32Array, y Uint16Array) → Promise<void>: y = x rounded to bf16 (a KV cache becoming bf16).
Napi::Value NarrowBf16(const Napi::CallbackInfo& info) {
  auto env = info.Env();
  auto x = floats(info[0], "x", SIZE_MAX);
  if (!info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_uint16_array) throw Napi::TypeError::New(env, "y must be a Uint16Array");
  auto y = info[1].As<Napi::Uint16Array>();
  if (y.ElementLength() != x.length) throw Napi::RangeError::New(env, "y has " + std::to_string(y.ElementLength()) + " elements, expected " + std::to_string(x.length));
  uint16_t* out = y.Data();
  return queue(env, {info[0], info[1]}, [x, out]() { toBf16(x.data, out, x.length); }, noResult);
}

// streamRead(array) → Promise<number>: reads the array's bytes once on every core (the bandwidth benchmarks divide by).
Napi::Value StreamReadJs(const Napi::CallbackInfo& info) {
  auto env = info.Env();
  if (!info[0].IsTypedArray()) throw Napi::TypeError::New(env, "streamRead takes a typed array");
  auto array = info[0].As<Napi::TypedArray>();
  const auto* data = static_cast<const uint8_t*>(array.ArrayBuffer().Data()) + array.ByteOffset();
  const size_t bytes = array.ByteLength() / 8 * 8;
  auto result = std::make_shared<uint64_t>(0);
  return queue(env, {info[0]}, [data, bytes, result]() { *result = streamRead(data, bytes); },
               [result](Napi::Env e) { return Napi::Number::New(e, static_cast<double>(*result & 0xffff)); });
}

// The logits arithmetic of generation (logits-math.h), synchronous on the caller's thread between forward calls
// (0.02–0.3 ms for 128k logits); null where the JavaScript must run. scalar: the plain loops on AVX-512 hosts too
// (tests).
bool scalarFlag(const Napi::CallbackInfo& info, size_t at) { return info.Length() > at && info[at].ToBoolean().Value(); }

// logSumExpParts(row, scalar?) → [max, Σ exp(row − max)] or null.
Napi::Value LogSumExpParts(const Napi::CallbackInfo& info) {
  auto env = info.Env();
  auto row = floats(info[0], "row", SIZE_MAX);
  double max = 0, sum = 0;
  if (!expSumBelowMax(row.data, row.length, &max, &sum, scalarFlag(info, 1))) return env.Null();
  auto out = Napi::Array::New(env, 2);
  out.Set(0u, Napi::Number::New(env, max));
  out.Set(1u, Napi::Number::New(env, sum));
  return out;
}

// logitsArgmax(row, scalar?) → index or null.
Napi::Value LogitsArgmax(const Napi::CallbackInfo& info) {
  auto env = info.Env();
  auto row = floats(info[0], "row", SIZE_MAX);
  const int64_t at = argmaxRow(row.data, row.length, scalarFlag(info, 1));
  return at < 0 ? env.Null() : Napi::Number::New(env, static_cast<double>(at));
}

// logitsAllFinite(row, scalar?) → boolean.
Napi::Value LogitsAllFinite(const Napi::CallbackInfo& info) {
  auto row = floats(info[0], "row", SIZE_MAX);
  return Napi::Boolean::New(info.Env(), allFiniteRow(row.data, row.length, scalarFlag(info, 1)));
}

// logitsTopK(row, k, scalar?) → [id0, value0, id1, value1, …] or null.
Napi::Value LogitsTopK(const Napi::CallbackInfo& info) {
  auto env = info.Env();
  auto row = floats(info[0], "row", SIZE_MAX);
  if (!info[1].IsNumber()) throw Napi::TypeError::New(env, "k must be a number");
  const double k = info[1].As<Napi::Number>().DoubleValue();
  if (!(k >= 0 && k <= kTopKMax) || k != static_cast<int>(k)) return env.Null();
  int32_t ids[kTopKMax];
  float values[kTopKMax];
  const int count = topKRow(row.data, row.length, static_cast<int>(k), ids, values, scalarFlag(info, 2));
  if (count < 0) return env.Null();
  auto out = Napi::Array::New(env, 2 * static_cast<size_t>(count));
  for (int i = 0; i < count; i++) {
    out.Set(static_cast<uint32_t>(2 * i), Napi::Number::New(env, ids[i]));
    out.Set(static_cast<uint32_t>(2 * i + 1), Napi::Number::New(env, values[i]));
  }
  return out;
}

const char* isaName(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::sse41: return "sse41";
    default: return "other";
  }
}

// What oneDNN dispatches to: the ISA and the implementation it picks for a bf16 and an int8 GEMM.
Napi::Value Features(const Napi::CallbackInfo& info) {
  auto env = info.Env();
  auto out = Napi::Object::New(env);
  const dnnl_version_t* v = dnnl_version();
  out.Set("version", std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch));
  out.Set("isa", isaName(dnnl::get_effective_cpu_isa()));
  out.Set("threads", omp_get_max_threads());
  out.Set("quantKernel", quantKernelName(bestQuantKernel()));
  out.Set("amxBf16", amxBf16Available());
  auto probe = [](dnnl::memory::data_type src, dnnl::memory::data_type wei) -> std::string {
    try {
      using tag = dnnl::memory::format_tag;
      dnnl::memory::desc a({64, 256}, src, tag::ab), w({256, 256}, wei, tag::any), c({64, 256}, dnnl::memory::data_type::f32, tag::ab);
      return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, w, c), cpuEngine()).impl_info_str();
    } catch (const std::exception& e) {
      return std::string("unavailable: ") + e.what();
    }
  };
  out.Set("bf16Impl", probe(dnnl::memory::data_type::bf16, dnnl::memory::data_type::bf16));
  out.Set("int8Impl", probe(dnnl::memory::data_type::s8, dnnl::memory::data_type::s8));
  out.Set("f32Impl", probe(dnnl::memory::data_type::f32, dnnl::memory::data_type::f32));
  return out;
}

// allocFloat32(n) → Float32Array over 64-byte-aligned memory (oneDNN's kernels are faster on aligned rows; V8's own
// buffers start at 16 mod 64).
Napi::Value AllocFloat32(const Napi::CallbackInfo& info) {
  auto env = info.Env();
  const int n = positiveInt(info[0], "length", true);
  const size_t bytes = std::max<size_t>(64, (static_cast<size_t>(n) * 4 + 63) / 64 * 64);
  void* data = std::aligned_alloc(64, bytes);
  if (!data) throw Napi::RangeError::New(env, "cannot allocate " + std::to_string(bytes) + " bytes");
  std::memset(data, 0, bytes);
  Napi::MemoryManagement::AdjustExternalMemory(env, static_cast<int64_t>(bytes));
  auto buffer = Napi::ArrayBuffer::New(env, data, static_cast<size_t>(n) * 4, [bytes](Napi::Env e, void* p) {
    std::free(p);
    Napi::MemoryManagement::AdjustExternalMemory(e, -static_cast<int64_t>(bytes));
  });
  return Napi::Float32Array::New(env, n, buffer, 0);
}

// layerProfile(enable?) → { calls, ms: { layerNorm, qkv, … } } summed since the last call, which resets the sums;
// enable (boolean) switches timing on or off for the following layer runs.
Napi::Value LayerProfileJs(const Napi::CallbackInfo& info) {
  auto env = info.Env();
  const bool change = info.Length() > 0 && info[0].IsBoolean();
  const bool enable = change && info[0].As<Napi::Boolean>().Value();
  auto out = Napi::Object::New(env);
  auto ms = Napi::Object::New(env);
  // The sums belong to the compute thread: read and reset them there, between layer runs; N-API calls stay here.
  LayerProfile taken;
  computeThread().run([&] {
    LayerProfile& p = layerProfile();
    taken = p;
    const bool keep = change ? enable : p.enabled;
    p = LayerProfile{};
    p.enabled = keep;
  });
  out.Set("calls", static_cast<double>(taken.calls));
  for (int i = 0; i < kProfParts; i++) ms.Set(kProfileNames[i], taken.ms[i]);
  out.Set("ms", ms);
  return out;
}

}  // namespace

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  Linear::Define(env, exports);
  QuantLinearJs::Define(env, exports);
  exports.Set("createLinear", Napi::Function::New(env, CreateLinear));
  exports.Set("createQuantLinear", Napi::Function::New(env, CreateQuantLinear));
  exports.Set("quantStore", Napi::Function::New(env, QuantStore));

  exports.Set("layerNorm", Napi::Function::New(env, LayerNorm));
  exports.Set("narrowBf16", Napi::Function::New(env, NarrowBf16));
  exports.Set("streamRead", Napi::Function::New(env, StreamReadJs));
  exports.Set("features", Napi::Function::New(env, Features));
  exports.Set("logSumExpParts", Napi::Function::New(env, LogSumExpParts));
  exports.Set("logitsArgmax", Napi::Function::New(env, LogitsArgmax));
  exports.Set("logitsTopK", Napi::Function::New(env, LogitsTopK));
  exports.Set("logitsAllFinite", Napi::Function::New(env, LogitsAllFinite));
  exports.Set("allocFloat32", Napi::Function::New(env, AllocFloat32));
  exports.Set("layerProfile", Napi::Function::New(env, LayerProfileJs));
  DecoderLayerJs::Define(env, exports);
  exports.Set("createDecoderLayer", Napi::Function::New(env, CreateDecoderLayer));
  exports.Set("runDecoderStack", Napi::Function::New(env, RunDecoderStack));
  exports.Set("rmsNorm", Napi::Function::New(env, RmsNorm));
  exports.Set("rope", Napi::Function::New(env, Rope));
  exports.Set("swiglu", Napi::Function::New(env, Gated));
  exports.Set("gated", Napi::Function::New(env, Gated));
  exports.Set("moeExperts", Napi::Function::New(env, MoeExperts));
  return exports;
}

}  // namespace flexhelm

static Napi::Object InitOneDnn(Napi::Env env, Napi::Object exports) { return flexhelm::Init(env, exports); }

NODE_API_MODULE(onednn_backend, InitOneDnn)
