// benanza harness, RAII for device memory, weight copies, events and CUDA graphs.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "benanza/common.h"

namespace bz {

// Milliseconds this thread spent in Buffer's cudaMalloc and cudaFree calls since the last take: the
// job's "alloc" phase (bz::run_jobs takes it on the GPU thread; other threads' are never read).
inline double& thread_alloc_ms() {
  thread_local double ms = 0;
  return ms;
}
inline double take_alloc_ms() { return std::exchange(thread_alloc_ms(), 0.0); }

// Adds the time of its scope to this thread's alloc phase (thread_alloc_ms).
class AllocClock {
 public:
  AllocClock() = default;
  AllocClock(const AllocClock&) = delete;
  AllocClock& operator=(const AllocClock&) = delete;
  ~AllocClock() { thread_alloc_ms() += ms_since(t0_); }

 private:
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

// Device memory a process keeps between its jobs (Buffer takes and gives back here), instead of a
// cudaMalloc and a synchronizing cudaFree per buffer: on 4 H200s the whole torchvision batch-1 campaign
// took 85.9 s with it and 88.8 s without, its allocations 2.1 against 3.7 GPU-s (docs/RESULTS.md §11).
// Off unless bz::main turns it on (BENANZA_BUFFER_CACHE=0 keeps it off, for an A/B); other programs
// built on these headers (replay) allocate as before.
//
// A block given back is reusable only after settle(), which bz::run_jobs calls after each job: by then
// the job's work on every stream is done (settle synchronizes the device when blocks are waiting), so no
// kernel of a finished job still touches memory a new job's buffers get. Sizes are rounded up to a step
// of a quarter of their power of two, 256 bytes at least (size_class); one over kMaxBlockBytes is
// allocated and freed as it is. At most kMaxKeptBytes stay kept; a failed cudaMalloc frees the kept blocks and tries
// once more; release() frees them all (a --serve process between job lists, so that an idle process
// holds no memory the others on its GPU may need).
class BufferCache {
 public:
  static constexpr size_t kMaxKeptBytes = size_t(1) << 30;
  static constexpr size_t kMaxBlockBytes = size_t(256) << 20;

  static BufferCache& instance() {
    static BufferCache* cache = new BufferCache;  // never destroyed: process exit frees device memory
    return *cache;
  }
  // A block of `bytes` rounded up to its class (returned in `rounded`); throws Error(OutOfMemory).
  void* take(size_t bytes, size_t& rounded) {
    std::lock_guard<std::mutex> lock(mu_);
    const bool cached = enabled_ && bytes <= kMaxBlockBytes;
    rounded = cached ? size_class(bytes) : bytes;
    if (cached) {
      auto it = free_.find(rounded);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        kept_bytes_ -= rounded;
        return p;
      }
    }
    void* p = nullptr;
    if (cudaMalloc(&p, rounded) != cudaSuccess) {
      cudaGetLastError();  // clear the failed allocation's error before trying again
      free_blocks();
      BZ_CHECK_CUDA(cudaMalloc(&p, rounded));
    }
    return p;
  }
  void give(void* p, size_t rounded) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!enabled_ || rounded > kMaxBlockBytes || kept_bytes_ + rounded > kMaxKeptBytes) {
      cudaFree(p);
      return;
    }
    retired_.emplace_back(p, rounded);
    kept_bytes_ += rounded;
  }
  // After a job: the blocks its buffers gave back become reusable (the device synchronized first; the
  // wait is the job's alloc phase).
  void settle() {
    AllocClock clock;
    std::lock_guard<std::mutex> lock(mu_);
    if (retired_.empty()) return;
    cudaDeviceSynchronize();
    for (auto& [p, rounded] : retired_) free_[rounded].push_back(p);
    retired_.clear();
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    free_blocks();
  }
  // On, unless BENANZA_BUFFER_CACHE is "0".
  void enable_from_env() {
    const char* v = std::getenv("BENANZA_BUFFER_CACHE");
    std::lock_guard<std::mutex> lock(mu_);
    enabled_ = !(v && std::strcmp(v, "0") == 0);
  }

  static size_t size_class(size_t bytes) {
    size_t top = 1;
    while (top <= bytes / 2) top *= 2;  // the largest power of two <= bytes
    const size_t step = std::max<size_t>(256, top / 4);
    return (bytes + step - 1) / step * step;
  }

 private:
  void free_blocks() {  // mu_ held
    if (free_.empty() && retired_.empty()) return;
    cudaDeviceSynchronize();
    for (auto& [rounded, blocks] : free_)
      for (void* p : blocks) cudaFree(p);
    for (auto& [p, rounded] : retired_) cudaFree(p);
    free_.clear();
    retired_.clear();
    kept_bytes_ = 0;
  }
  std::mutex mu_;
  bool enabled_ = false;
  std::map<size_t, std::vector<void*>> free_;           // class -> reusable blocks
  std::vector<std::pair<void*, size_t>> retired_;       // given back during the current job
  size_t kept_bytes_ = 0;                               // free_ and retired_ together
};

// A device allocation; a failing cudaMalloc throws Error(OutOfMemory). From the process's
// BufferCache while bz::run_jobs runs jobs, else a cudaMalloc and cudaFree of its own.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes) : bytes_(bytes) {
    if (!bytes) return;
    AllocClock clock;
    ptr_ = BufferCache::instance().take(bytes, rounded_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), rounded_(std::exchange(o.rounded_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    std::swap(rounded_, o.rounded_);
    return *this;
  }
  ~Buffer() {
    if (!ptr_) return;
    AllocClock clock;
    BufferCache::instance().give(ptr_, rounded_);
  }
  void* get() const { return ptr_; }
  template <class T> T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;    // asked for
  size_t rounded_ = 0;  // allocated (BufferCache::size_class when cached)
};

// Workspaces up to this size stay allocated between algorithms (Context::workspace).
constexpr size_t kKeptWorkspaceBytes = size_t(1) << 30;

// A workspace pointer: into the process's reused buffer, or into a buffer of its own.
class Workspace {
 public:
  explicit Workspace(void* shared) : ptr_(shared) {}
  explicit Workspace(Buffer own) : own_(std::move(own)), ptr_(own_.get()) {}
  void* get() const { return ptr_; }

 private:
  Buffer own_;
  void* ptr_ = nullptr;
};

// The copies of a layer's weights a cold-weights benchmark cycles through (made by
// Context::weight_ring).  With n copies and K, a multiple of n, calls per timed launch,
// every call reads a copy that none of the last n - 1 calls touched; their copies, 3x the
// L2 size together, have evicted it, while the activations stay warm: the state a
// framework's layer finds its weights in, last read one inference ago.
// Copy 0 is the buffer itself, copies 1..n-1 device copies of it (same values, so the
// output check holds for any copy).  Outside cold-weights, and for an operand that is no
// weight, the ring is the buffer alone and every call reads it, as before.
class WeightRing {
 public:
  WeightRing() = default;  // a call without weights
  WeightRing(const Buffer& w, int copies, bool is_weight, cudaStream_t stream) : bytes_(is_weight ? w.bytes() : 0) {
    ptrs_.push_back(w.get());
    if (copies < 2) return;
    const size_t stride = (w.bytes() + 255) / 256 * 256;  // each copy aligned as a cudaMalloc is
    copies_ = Buffer(stride * size_t(copies - 1));
    for (int i = 1; i < copies; ++i) {
      char* dst = copies_.as<char>() + stride * size_t(i - 1);
      BZ_CHECK_CUDA(cudaMemcpyAsync(dst, w.get(), w.bytes(), cudaMemcpyDeviceToDevice, stream));
      ptrs_.push_back(dst);
    }
  }

  void* first() const { return ptrs_.empty() ? nullptr : ptrs_.front(); }  // copy 0: for the checked call
  void* next() {  // the copy the next timed call reads
    if (ptrs_.empty()) return nullptr;
    void* p = ptrs_[next_];
    next_ = (next_ + 1) % ptrs_.size();
    return p;
  }
  int copies() const { return std::max(1, int(ptrs_.size())); }
  size_t weight_bytes() const { return bytes_; }  // of one copy; 0 for an operand that is no weight

 private:
  std::vector<void*> ptrs_;  // copy i
  Buffer copies_;            // copies 1..n-1, one allocation
  size_t bytes_ = 0;
  size_t next_ = 0;
};

class Event {
 public:
  Event() { BZ_CHECK_CUDA(cudaEventCreate(&e_)); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { cudaEventDestroy(e_); }
  operator cudaEvent_t() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

class GraphExec {
 public:
  GraphExec() = default;
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  ~GraphExec() {
    if (exec_) cudaGraphExecDestroy(exec_);
  }
  cudaGraphExec_t* out() { return &exec_; }
  explicit operator bool() const { return exec_ != nullptr; }
  cudaGraphExec_t get() const { return exec_; }
  void reset() {
    if (exec_) cudaGraphExecDestroy(exec_);
    exec_ = nullptr;
  }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

inline float elapsed_ms(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  BZ_CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

}  // namespace bz
