// Shared helpers for the addon: byte views over JS buffers, a promise-returning AsyncWorker and a parallel-for.
#pragma once

#include <napi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace flexhelm {

// Raw bytes behind an ArrayBuffer, TypedArray, Buffer or DataView.
struct ByteView {
  uint8_t* data = nullptr;
  size_t length = 0;
};

ByteView viewOf(const Napi::Value& value, const char* what);

// An AsyncWorker that settles a promise. Subclasses do their work in Execute() (off the main thread) and may keep
// the JS buffers they touch alive through keepAlive(), so a collected buffer can never be written to.
class PromiseWorker : public Napi::AsyncWorker {
 public:
  explicit PromiseWorker(Napi::Env env) : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  void keepAlive(const Napi::Value& value) {
    if (value.IsObject()) kept_.push_back(Napi::Persistent(value.As<Napi::Object>()));
  }

 protected:
  virtual Napi::Value Result(Napi::Env env) { return env.Undefined(); }
  void OnOK() override { deferred_.Resolve(Result(Env())); }
  void OnError(const Napi::Error& error) override { deferred_.Reject(error.Value()); }
  Napi::Promise::Deferred deferred_;

 private:
  std::vector<Napi::ObjectReference> kept_;
};

// Runs body(begin, end) over `threads` contiguous slices of [0, n); slice starts are multiples of `grain`.
template <class Body>
void parallelFor(size_t n, unsigned threads, size_t grain, Body body) {
  if (grain == 0) grain = 1;
  size_t units = (n + grain - 1) / grain;
  unsigned workers = static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(threads, units)));
  if (workers <= 1) {
    if (n > 0) body(size_t{0}, n);
    return;
  }
  auto slice = [&](unsigned w) {
    size_t begin = std::min(n, units * w / workers * grain);
    size_t end = std::min(n, units * (w + 1) / workers * grain);
    if (begin < end) body(begin, end);
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (unsigned w = 1; w < workers; ++w) {
    try {
      pool.emplace_back(slice, w);
    } catch (const std::system_error&) {
      slice(w);  // no thread available (resource limits): do that slice here instead
    }
  }
  slice(0);
  for (auto& t : pool) t.join();
}

unsigned threadsArg(const Napi::Value& value);

}  // namespace flexhelm
