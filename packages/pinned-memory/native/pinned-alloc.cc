// allocPinned: page-aligned anonymous memory (zeroed, like any ArrayBuffer), locked with mlock so the kernel never
// swaps it out, handed to JS as an external ArrayBuffer that unlocks and unmaps it when collected.
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "common.h"
#include "exports.h"

namespace flexhelm {
namespace {

constexpr size_t kPage = 4096;

struct Mapping {
  void* address = nullptr;
  size_t mappedBytes = 0;
  bool locked = false;
};

void releaseMapping(Napi::Env env, void* /*data*/, Mapping* mapping) {
  if (mapping->locked) munlock(mapping->address, mapping->mappedBytes);
  munmap(mapping->address, mapping->mappedBytes);
  Napi::MemoryManagement::AdjustExternalMemory(env, -static_cast<int64_t>(mapping->mappedBytes));
  delete mapping;
}

class AllocWorker : public PromiseWorker {
 public:
  AllocWorker(Napi::Env env, size_t bytes) : PromiseWorker(env), bytes_(bytes) {}

  void Execute() override {
    size_t mapped = (std::max<size_t>(bytes_, 1) + kPage - 1) / kPage * kPage;
    void* address = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (address == MAP_FAILED) {
      SetError("allocPinned: cannot map " + std::to_string(bytes_) + " bytes: " + std::strerror(errno));
      return;
    }
    mapping_ = new Mapping{address, mapped, false};
    if (mlock(address, mapped) == 0) {
      mapping_->locked = true;
    } else {
      lockErrno_ = errno;
    }
  }

  Napi::Value Result(Napi::Env env) override {
    Mapping* mapping = mapping_;
    mapping_ = nullptr;
    auto buffer = Napi::ArrayBuffer::New(env, mapping->address, bytes_, releaseMapping, mapping);
    Napi::MemoryManagement::AdjustExternalMemory(env, static_cast<int64_t>(mapping->mappedBytes));
    auto result = Napi::Object::New(env);
    result.Set("buffer", buffer);
    result.Set("locked", mapping->locked);
    result.Set("lockErrno", lockErrno_);
    return result;
  }

  ~AllocWorker() override {
    // Only reached with a live mapping when the promise was never resolved (environment teardown).
    if (mapping_ != nullptr) {
      if (mapping_->locked) munlock(mapping_->address, mapping_->mappedBytes);
      munmap(mapping_->address, mapping_->mappedBytes);
      delete mapping_;
    }
  }

 private:
  size_t bytes_;
  Mapping* mapping_ = nullptr;
  int lockErrno_ = 0;
};

}  // namespace

Napi::Value AllocPinned(const Napi::CallbackInfo& info) {
  double bytes = info[0].As<Napi::Number>().DoubleValue();
  auto* worker = new AllocWorker(info.Env(), static_cast<size_t>(bytes));
  auto promise = worker->Promise();
  worker->Queue();
  return promise;
}

}  // namespace flexhelm
