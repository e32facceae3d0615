// benanza harness, RAII for device memory, weight copies, events and CUDA graphs.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "benanza/common.h"

namespace bz {

// A device allocation; a failing cudaMalloc throws Error(OutOfMemory).
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes) : bytes_(bytes) {
    if (bytes) BZ_CHECK_CUDA(cudaMalloc(&ptr_, bytes));
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~Buffer() {
    if (ptr_) cudaFree(ptr_);
  }
  void* get() const { return ptr_; }
  template <class T> T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
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
