// benanza harness: status codes, the error type and the CHECK macros.
//
// Every CUDA / cuDNN / cuBLAS call in a benchmark goes through a CHECK macro.  A
// failing call throws bz::Error carrying a benanza Status (benanza/library.py:
// Status); the job loop catches it and records it as that benchmark's outcome,
// so an unsupported algorithm or an out-of-memory workspace never crashes a run.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace bz {

// Milliseconds since `t0` on the host's steady clock.
inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

enum class Status { Ok, NotSupported, OutOfMemory, CheckFailed, Failed };

inline const char* status_name(Status s) {
  switch (s) {
    case Status::Ok: return "ok";
    case Status::NotSupported: return "not_supported";
    case Status::OutOfMemory: return "out_of_memory";
    case Status::CheckFailed: return "check_failed";
    case Status::Failed: return "failed";
  }
  return "failed";
}

// Thrown by the CHECK macros (and by benchmarks for their own refusals).
class Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  Status status() const { return status_; }

 private:
  Status status_;
};

// Storage types the harness's device helpers (fill, reference, compare) handle.
enum class DType { F32, F16, BF16 };

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::F32; }
template <> constexpr DType dtype_of<__half>() { return DType::F16; }
template <> constexpr DType dtype_of<__nv_bfloat16>() { return DType::BF16; }

inline size_t dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }

inline std::string where(const char* expr, const char* file, int line) {
  std::string f(file);
  size_t slash = f.find_last_of('/');
  if (slash != std::string::npos) f = f.substr(slash + 1);
  return std::string(expr) + " at " + f + ":" + std::to_string(line);
}

inline Status status_of(cudaError_t e) {
  return e == cudaErrorMemoryAllocation ? Status::OutOfMemory
         : e == cudaErrorNotSupported  ? Status::NotSupported
                                        : Status::Failed;
}

inline Status status_of(cudnnStatus_t s) {
  switch (CUDNN_STATUS_CATEGORY(s)) {
    case CUDNN_STATUS_NOT_SUPPORTED: return Status::NotSupported;
    default: break;
  }
  if (s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
      s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
    return Status::OutOfMemory;
  return Status::Failed;
}

inline Status status_of(cublasStatus_t s) {
  return s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_ARCH_MISMATCH ? Status::NotSupported
         : s == CUBLAS_STATUS_ALLOC_FAILED                                     ? Status::OutOfMemory
                                                                               : Status::Failed;
}

inline const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

[[noreturn]] inline void raise(cudaError_t e, const char* expr, const char* file, int line) {
  cudaGetLastError();  // clear a non-sticky error so the next benchmark starts clean
  throw Error(status_of(e), std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e) + " in " +
                                where(expr, file, line));
}
[[noreturn]] inline void raise(cudnnStatus_t s, const char* expr, const char* file, int line) {
  throw Error(status_of(s), std::string(cudnnGetErrorString(s)) + " in " + where(expr, file, line));
}
[[noreturn]] inline void raise(cublasStatus_t s, const char* expr, const char* file, int line) {
  throw Error(status_of(s), std::string(cublas_status_name(s)) + " in " + where(expr, file, line));
}

// Lets this thread's CUDA calls ignore other threads' stream captures (capture interaction mode
// ThreadLocal). Under the default (global) mode, a capture that a library begins in global mode on
// another thread (cuDNN building a plan on a BuildPool thread) makes this thread's potentially
// unsafe calls (cudaMalloc, cudaFree, a device-wide synchronize) fail with
// cudaErrorStreamCaptureUnsupported: on the H100 that ended a graph-API executable between two
// jobs as "CUDA context lost". A capture of this thread's own (Context::capture, begun ThreadLocal)
// still refuses its unsafe calls, so a library that cannot be captured is still seen. Every thread
// of the harness calls it first.
inline void ignore_other_threads_captures() {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal;
  cudaThreadExchangeStreamCaptureMode(&mode);
}

}  // namespace bz

#define BZ_CHECK_CUDA(expr)                                                   \
  do {                                                                        \
    cudaError_t bz_e_ = (expr);                                               \
    if (bz_e_ != cudaSuccess) ::bz::raise(bz_e_, #expr, __FILE__, __LINE__);  \
  } while (0)

#define BZ_CHECK_CUDNN(expr)                                                           \
  do {                                                                                 \
    cudnnStatus_t bz_s_ = (expr);                                                      \
    if (bz_s_ != CUDNN_STATUS_SUCCESS) ::bz::raise(bz_s_, #expr, __FILE__, __LINE__);  \
  } while (0)

#define BZ_CHECK_CUBLAS(expr)                                                           \
  do {                                                                                  \
    cublasStatus_t bz_s_ = (expr);                                                      \
    if (bz_s_ != CUBLAS_STATUS_SUCCESS) ::bz::raise(bz_s_, #expr, __FILE__, __LINE__);  \
  } while (0)

// Short spellings for benchmark bodies.
#define CHECK_CUDA BZ_CHECK_CUDA
#define CHECK_CUDNN BZ_CHECK_CUDNN
#define CHECK_CUBLAS BZ_CHECK_CUBLAS
