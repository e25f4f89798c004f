// readFile / writeFile: chunked file I/O with O_DIRECT into page-aligned memory and several requests in flight.
// Requests are planned as a list of chunk operations, then run by one of two engines:
//  - pread/pwrite ('auto' and 'pread'): queueDepth threads each issuing blocking calls;
//  - io_uring (only when asked for by name, liburing present at build time): one thread, queueDepth in flight.
// O_DIRECT needs the file offset, memory address and length aligned to the block size. Aligned parts go straight
// into/out of the caller's buffer; an unaligned read goes through aligned bounce buffers; an unaligned write tail is
// written through a second, buffered descriptor. A filesystem without O_DIRECT (tmpfs) falls back to buffered I/O.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <system_error>

#ifdef FLEXHELM_HAVE_LIBURING
#include <liburing.h>
#endif

#include "common.h"
#include "exports.h"

namespace flexhelm {

bool ioUringCompiledIn() {
#ifdef FLEXHELM_HAVE_LIBURING
  return true;
#else
  return false;
#endif
}

namespace {

constexpr size_t kBlock = 4096;

#ifdef FLEXHELM_HAVE_LIBURING
// Hands every prepared entry to the kernel. io_uring_submit may take fewer than were prepared, or fail with EINTR or
// EAGAIN (a signal, a busy kernel). The entries it did not take would then stay in the ring unseen, and waiting for
// their completions would never end. So this retries until none is left: transient errors up to about a second apart
// in all, then the error. Returns 0 or -errno.
int submitAll(struct io_uring* ring) {
  for (int tries = 0; io_uring_sq_ready(ring) > 0; ++tries) {
    const int n = io_uring_submit(ring);
    if (n > 0) {
      tries = 0;
      continue;
    }
    if (n < 0 && n != -EINTR && n != -EAGAIN) return n;
    if (tries >= 1000) return n < 0 ? n : -EAGAIN;
    usleep(1000);
  }
  return 0;
}
#endif

enum class Engine { Auto = 0, Pread = 1, IoUring = 2 };

struct Failure {
  int err = 0;               // errno, or 0 for a short file
  std::string syscall;
  uint64_t offset = 0;
  uint64_t fileSize = 0;
};

struct Op {
  uint64_t fileOffset;
  size_t length;      // bytes the system call transfers (block-rounded for bounce reads)
  size_t needed;      // bytes that must arrive; fewer means the file is shorter than expected
  uint8_t* direct;    // caller memory to transfer into/from, or nullptr to use the slot's bounce buffer
  uint8_t* user;      // for bounce ops: caller memory to copy to (read) or from (write)
  size_t bounceSkip;  // offset inside the bounce buffer of the caller's bytes
  size_t userLength;  // bytes copied between bounce buffer and caller memory
  int fd;
};

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<uint8_t, AlignedFree>;

AlignedBuffer alignedBuffer(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, kBlock, std::max(bytes, kBlock)) != 0) return AlignedBuffer(nullptr);
  return AlignedBuffer(static_cast<uint8_t*>(p));
}

class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(FileDescriptor&& other) noexcept {
    reset();
    fd_ = other.fd_;
    other.fd_ = -1;
    return *this;
  }
  ~FileDescriptor() { reset(); }
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

int openFile(const std::string& path, int flags, mode_t mode = 0644) {
  int fd;
  do fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  while (fd < 0 && errno == EINTR);
  return fd;
}

class IoWorker : public PromiseWorker {
 public:
  IoWorker(Napi::Env env, std::string path, ByteView memory, uint64_t offset, bool direct, unsigned queueDepth,
           size_t chunkSize, Engine engine)
      : PromiseWorker(env), path_(std::move(path)), memory_(memory), offset_(offset), wantDirect_(direct),
        queueDepth_(std::max(1u, queueDepth)), chunkSize_(std::max(kBlock, chunkSize / kBlock * kBlock)), engine_(engine) {}

 protected:
  void fail(int err, const char* syscall, uint64_t offset) {
    std::lock_guard<std::mutex> lock(failureMutex_);
    if (failed_.exchange(true)) return;
    failure_.err = err;
    failure_.syscall = syscall;
    failure_.offset = offset;
  }
  bool failed() const { return failed_.load(); }

  void OnError(const Napi::Error& error) override {
    Napi::Env env = Env();
    auto value = Napi::Error::New(env, failure_.syscall.empty() ? error.Message() : failure_.syscall).Value();
    value.Set("errno", failure_.err);
    value.Set("syscall", failure_.syscall);
    value.Set("offset", static_cast<double>(failure_.offset));
    value.Set("fileSize", static_cast<double>(failure_.fileSize));
    deferred_.Reject(value);
  }

  Napi::Value Result(Napi::Env env) override {
    auto result = Napi::Object::New(env);
    result.Set("bytes", static_cast<double>(bytes_));
    result.Set("direct", usedDirect_);
    result.Set("engine", usedUring_ ? "io_uring" : "pread");
    return result;
  }

  // Copies bounce data out after a read, or in before a write.
  virtual bool isRead() const = 0;

  void run(std::vector<Op>& ops) {
    if (ops.empty()) return;
    // Bounce buffers only as large as the largest op that needs one (often just a 4 KiB tail).
    size_t bounceSize = 0;
    for (const Op& op : ops) if (op.direct == nullptr) bounceSize = std::max(bounceSize, op.length);
#ifdef FLEXHELM_HAVE_LIBURING
    // io_uring only when asked for by name: 'auto' takes the thread pool. On this project's VMs (kernel 6.18) a
    // submitted read was seen never to complete (SQ head = tail = 1, CQ empty, no io-wq worker), which hung a whole run.
    if (engine_ == Engine::IoUring) {
      int err = runUring(ops, bounceSize);
      if (err == 0) {
        usedUring_ = true;
        return;
      }
      fail(err, "io_uring_queue_init", offset_);
      return;
    }
#endif
    runThreads(ops, bounceSize);
  }

  // One system call for op (from `done` bytes on); returns bytes moved, or -errno.
  ssize_t transfer(const Op& op, uint8_t* memory, size_t done) {
    ssize_t r;
    do {
      r = isRead() ? ::pread(op.fd, memory + done, op.length - done, static_cast<off_t>(op.fileOffset + done))
                   : ::pwrite(op.fd, memory + done, op.length - done, static_cast<off_t>(op.fileOffset + done));
    } while (r < 0 && errno == EINTR);
    return r < 0 ? -errno : r;
  }

  // Decides what a (possibly partial) completion means: 1 = op done, 0 = issue the rest, -1 = failed.
  int settle(const Op& op, uint8_t* memory, size_t& done, ssize_t result) {
    if (result < 0) {
      if (result == -EINTR || result == -EAGAIN) return 0;
      fail(static_cast<int>(-result), isRead() ? "read" : "write", op.fileOffset + done);
      return -1;
    }
    done += static_cast<size_t>(result);
    if (done >= op.needed) {
      if (isRead() && op.direct == nullptr) std::memcpy(op.user, memory + op.bounceSkip, op.userLength);
      return 1;
    }
    // Direct I/O can only continue from a block boundary; anything else means the file ended early.
    bool blocked = op.fd == directFd_ && (done % kBlock) != 0;
    if (result == 0 || blocked) {
      if (isRead()) {
        std::lock_guard<std::mutex> lock(failureMutex_);
        if (!failed_.exchange(true)) {
          failure_.err = 0;
          failure_.syscall = "read";
          failure_.offset = op.fileOffset + done;
          failure_.fileSize = op.fileOffset + done;
        }
      } else {
        fail(EIO, "write", op.fileOffset + done);
      }
      return -1;
    }
    return 0;
  }

  void prepare(const Op& op, uint8_t* memory) {
    if (!isRead() && op.direct == nullptr) std::memcpy(memory + op.bounceSkip, op.user, op.userLength);
  }

  void runThreads(std::vector<Op>& ops, size_t bounceSize) {
    std::atomic<size_t> next{0};
    auto worker = [&](unsigned) {
      AlignedBuffer bounce;
      if (bounceSize > 0) {
        bounce = alignedBuffer(bounceSize);
        if (!bounce) return fail(ENOMEM, "posix_memalign", offset_);
      }
      for (size_t i = next++; i < ops.size() && !failed(); i = next++) {
        const Op& op = ops[i];
        uint8_t* memory = op.direct != nullptr ? op.direct : bounce.get();
        prepare(op, memory);
        size_t done = 0;
        int state;
        do state = settle(op, memory, done, transfer(op, memory, done));
        while (state == 0);
        if (state < 0) return;
      }
    };
    unsigned threads = static_cast<unsigned>(std::min<size_t>(queueDepth_, ops.size()));
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t) {
      try {
        pool.emplace_back(worker, t);
      } catch (const std::system_error&) {
        break;  // fewer requests in flight; the running workers take all ops
      }
    }
    worker(0);
    for (auto& t : pool) t.join();
  }

#ifdef FLEXHELM_HAVE_LIBURING
  // Returns 0 when the ops ran (even if one failed: that is recorded), or -errno when io_uring is unavailable.
  int runUring(std::vector<Op>& ops, size_t bounceSize) {
    unsigned depth = static_cast<unsigned>(std::min<size_t>(queueDepth_, ops.size()));
    struct io_uring ring;
    int err = io_uring_queue_init(std::max(depth, 1u), &ring, 0);
    if (err < 0) return -err;
    struct Slot {
      size_t op = 0;
      size_t done = 0;
      AlignedBuffer bounce;
    };
    std::vector<Slot> slots(depth);
    for (auto& slot : slots) {
      if (bounceSize > 0) {
        slot.bounce = alignedBuffer(bounceSize);
        if (!slot.bounce) {
          io_uring_queue_exit(&ring);
          fail(ENOMEM, "posix_memalign", offset_);
          return 0;
        }
      }
    }
    auto memoryOf = [&](Slot& slot) { return ops[slot.op].direct != nullptr ? ops[slot.op].direct : slot.bounce.get(); };
    auto submit = [&](size_t index) {
      Slot& slot = slots[index];
      const Op& op = ops[slot.op];
      struct io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      uint8_t* memory = memoryOf(slot);
      if (isRead()) io_uring_prep_read(sqe, op.fd, memory + slot.done, static_cast<unsigned>(op.length - slot.done), op.fileOffset + slot.done);
      else io_uring_prep_write(sqe, op.fd, memory + slot.done, static_cast<unsigned>(op.length - slot.done), op.fileOffset + slot.done);
      io_uring_sqe_set_data64(sqe, index);
    };
    size_t nextOp = 0, inFlight = 0;
    for (size_t s = 0; s < depth && nextOp < ops.size(); ++s) {
      slots[s].op = nextOp++;
      slots[s].done = 0;
      prepare(ops[slots[s].op], memoryOf(slots[s]));
      submit(s);
      ++inFlight;
    }
    if (int submitted = submitAll(&ring); submitted < 0) {
      // Entries the kernel never took complete never: wait only for those it did (the loop drains them).
      inFlight -= io_uring_sq_ready(&ring);
      fail(-submitted, "io_uring_submit", offset_);
    }
    while (inFlight > 0) {
      struct io_uring_cqe* cqe;
      int waited = io_uring_wait_cqe(&ring, &cqe);
      if (waited == -EINTR) continue;
      if (waited < 0) {
        fail(-waited, "io_uring_wait_cqe", offset_);
        break;
      }
      size_t index = static_cast<size_t>(io_uring_cqe_get_data64(cqe));
      int res = cqe->res;
      io_uring_cqe_seen(&ring, cqe);
      --inFlight;
      Slot& slot = slots[index];
      if (failed()) continue;  // drain what is in flight, start nothing new
      int state = settle(ops[slot.op], memoryOf(slot), slot.done, res);
      if (state < 0) continue;
      if (state == 1) {
        if (nextOp >= ops.size()) continue;
        slot.op = nextOp++;
        slot.done = 0;
        prepare(ops[slot.op], memoryOf(slot));
      }
      submit(index);
      ++inFlight;
      if (int submitted = submitAll(&ring); submitted < 0) {
        inFlight -= io_uring_sq_ready(&ring);  // never handed over: no completion will come for it
        fail(-submitted, "io_uring_submit", offset_);
      }
    }
    io_uring_queue_exit(&ring);
    return 0;
  }
#endif

  std::string path_;
  ByteView memory_;
  uint64_t offset_;
  bool wantDirect_;
  unsigned queueDepth_;
  size_t chunkSize_;
  Engine engine_;
  int directFd_ = -1;
  bool usedDirect_ = false;
  bool usedUring_ = false;
  size_t bytes_ = 0;
  Failure failure_;

 private:
  std::atomic<bool> failed_{false};
  std::mutex failureMutex_;
};

class ReadWorker : public IoWorker {
 public:
  ReadWorker(Napi::Env env, std::string path, ByteView dst, uint64_t offset, bool direct, bool allowShort,
             unsigned queueDepth, size_t chunkSize, Engine engine)
      : IoWorker(env, std::move(path), dst, offset, direct, queueDepth, chunkSize, engine), allowShort_(allowShort) {}

  bool isRead() const override { return true; }

  void Execute() override {
    FileDescriptor fd;
    if (wantDirect_) {
      fd = FileDescriptor(openFile(path_, O_RDONLY | O_DIRECT));
      usedDirect_ = fd.get() >= 0;
      if (fd.get() < 0 && errno != EINVAL) return fail(errno, "open", offset_), SetError("open");
    }
    if (fd.get() < 0) fd = FileDescriptor(openFile(path_, O_RDONLY));
    if (fd.get() < 0) return fail(errno, "open", offset_), SetError("open");
    struct stat info;
    if (::fstat(fd.get(), &info) != 0) return fail(errno, "fstat", offset_), SetError("fstat");
    if (!S_ISREG(info.st_mode) && !S_ISBLK(info.st_mode)) return fail(EISDIR, "open", offset_), SetError("open");
    uint64_t size = static_cast<uint64_t>(info.st_size);
    uint64_t available = size > offset_ ? size - offset_ : 0;
    size_t n = static_cast<size_t>(std::min<uint64_t>(memory_.length, available));
    if (n < memory_.length && !allowShort_) {
      failure_ = Failure{0, "read", offset_, size};
      return SetError("short");
    }
    if (usedDirect_) directFd_ = fd.get();
    std::vector<Op> ops = plan(fd.get(), n);
    run(ops);
    if (failed()) return SetError("read");
    bytes_ = n;
  }

 private:
  std::vector<Op> plan(int fd, size_t n) {
    std::vector<Op> ops;
    uint8_t* dst = memory_.data;
    bool aligned = offset_ % kBlock == 0 && reinterpret_cast<uintptr_t>(dst) % kBlock == 0;
    if (!usedDirect_ || aligned) {
      size_t body = usedDirect_ ? n - n % kBlock : n;
      for (size_t c = 0; c < body; c += chunkSize_) {
        size_t len = std::min(chunkSize_, body - c);
        ops.push_back(Op{offset_ + c, len, len, dst + c, nullptr, 0, 0, fd});
      }
      if (body < n) ops.push_back(Op{offset_ + body, kBlock, n - body, nullptr, dst + body, 0, n - body, fd});
      return ops;
    }
    // Unaligned direct read: whole blocks into bounce buffers, the requested bytes copied out.
    uint64_t start = offset_ / kBlock * kBlock, end = offset_ + n;
    for (uint64_t chunk = start; chunk < end; chunk += chunkSize_) {
      uint64_t chunkEnd = std::min<uint64_t>(chunk + chunkSize_, (end + kBlock - 1) / kBlock * kBlock);
      uint64_t from = std::max<uint64_t>(chunk, offset_), to = std::min<uint64_t>(chunkEnd, end);
      ops.push_back(Op{chunk, static_cast<size_t>(chunkEnd - chunk), static_cast<size_t>(to - chunk), nullptr,
                       dst + (from - offset_), static_cast<size_t>(from - chunk), static_cast<size_t>(to - from), fd});
    }
    return ops;
  }

  bool allowShort_;
};

class WriteWorker : public IoWorker {
 public:
  // offset < 0: replace the whole file atomically (temp file, fsync, rename).
  WriteWorker(Napi::Env env, std::string path, ByteView src, int64_t offset, bool direct, unsigned queueDepth,
              size_t chunkSize, Engine engine)
      : IoWorker(env, std::move(path), src, offset < 0 ? 0 : static_cast<uint64_t>(offset), direct, queueDepth, chunkSize, engine),
        replace_(offset < 0) {}

  bool isRead() const override { return false; }

  void Execute() override {
    std::string target = path_;
    if (replace_) {
      static std::atomic<unsigned> counter{0};
      size_t slash = path_.find_last_of('/');
      std::string dir = slash == std::string::npos ? "" : path_.substr(0, slash + 1);
      std::string base = slash == std::string::npos ? path_ : path_.substr(slash + 1);
      target = dir + "." + base + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    }
    int flags = O_WRONLY | O_CREAT | (replace_ ? O_EXCL | O_TRUNC : 0);
    FileDescriptor buffered(openFile(target, flags));
    if (buffered.get() < 0) return fail(errno, "open", offset_), SetError("open");
    FileDescriptor direct;
    if (wantDirect_ && offset_ % kBlock == 0 && memory_.length >= kBlock) {
      direct = FileDescriptor(openFile(target, O_WRONLY | O_DIRECT));
      usedDirect_ = direct.get() >= 0;
      directFd_ = direct.get();
    }
    std::vector<Op> ops = plan(buffered.get(), direct.get());
    run(ops);
    if (!failed() && replace_ && ::fsync(buffered.get()) != 0) fail(errno, "fsync", offset_);
    direct.reset();
    if (!failed() && ::close(buffered.release()) != 0) fail(errno, "close", offset_);
    if (!failed() && replace_ && ::rename(target.c_str(), path_.c_str()) != 0) fail(errno, "rename", offset_);
    if (failed()) {
      if (replace_) ::unlink(target.c_str());
      return SetError("write");
    }
    bytes_ = memory_.length;
  }

 private:
  std::vector<Op> plan(int bufferedFd, int directFd) {
    std::vector<Op> ops;
    uint8_t* src = memory_.data;
    size_t n = memory_.length;
    size_t body = usedDirect_ ? n - n % kBlock : 0;
    bool aligned = reinterpret_cast<uintptr_t>(src) % kBlock == 0;
    for (size_t c = 0; c < body; c += chunkSize_) {
      size_t len = std::min(chunkSize_, body - c);
      if (aligned) ops.push_back(Op{offset_ + c, len, len, src + c, nullptr, 0, 0, directFd});
      else ops.push_back(Op{offset_ + c, len, len, nullptr, src + c, 0, len, directFd});
    }
    for (size_t c = body; c < n; c += chunkSize_) {
      size_t len = std::min(chunkSize_, n - c);
      ops.push_back(Op{offset_ + c, len, len, src + c, nullptr, 0, 0, bufferedFd});
    }
    return ops;
  }

  bool replace_;
};

struct IoOptions {
  bool direct;
  unsigned queueDepth;
  size_t chunkSize;
  Engine engine;
};

IoOptions ioOptions(const Napi::Object& options) {
  return IoOptions{options.Get("direct").ToBoolean().Value(), threadsArg(options.Get("queueDepth")),
                   static_cast<size_t>(options.Get("chunkSize").As<Napi::Number>().DoubleValue()),
                   static_cast<Engine>(options.Get("engine").As<Napi::Number>().Int32Value())};
}

}  // namespace

// readFile(path, dst, offset, {direct, allowShort, queueDepth, chunkSize, engine})
Napi::Value ReadFile(const Napi::CallbackInfo& info) {
  std::string path = info[0].As<Napi::String>().Utf8Value();
  ByteView dst = viewOf(info[1], "dst");
  auto offset = static_cast<uint64_t>(info[2].As<Napi::Number>().DoubleValue());
  auto options = info[3].As<Napi::Object>();
  IoOptions o = ioOptions(options);
  auto* worker = new ReadWorker(info.Env(), path, dst, offset, o.direct, options.Get("allowShort").ToBoolean().Value(),
                                o.queueDepth, o.chunkSize, o.engine);
  worker->keepAlive(info[1]);
  auto promise = worker->Promise();
  worker->Queue();
  return promise;
}

// writeFile(path, src, offset (-1 = replace the file), {direct, queueDepth, chunkSize, engine})
Napi::Value WriteFile(const Napi::CallbackInfo& info) {
  std::string path = info[0].As<Napi::String>().Utf8Value();
  ByteView src = viewOf(info[1], "src");
  auto offset = static_cast<int64_t>(info[2].As<Napi::Number>().DoubleValue());
  IoOptions o = ioOptions(info[3].As<Napi::Object>());
  auto* worker = new WriteWorker(info.Env(), path, src, offset, o.direct, o.queueDepth, o.chunkSize, o.engine);
  worker->keepAlive(info[1]);
  auto promise = worker->Promise();
  worker->Queue();
  return promise;
}

}  // namespace flexhelm
