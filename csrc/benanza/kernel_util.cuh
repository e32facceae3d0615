// benanza harness: the pieces every CUDA source of the harness library shares (kernels.cu, the
// micro-benchmarks' reference kernels; replay_kernels.cu, the replay's own kernels): one grid size,
// one conversion per storage type, one switch over DType.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>

#include "benanza/common.h"

namespace bz {

constexpr int kKernelThreads = 256;

// Blocks for a grid-stride loop over `count` items of kKernelThreads threads (capped; at least one).
inline unsigned blocks_for(size_t count) {
  const size_t b = (count + kKernelThreads - 1) / kKernelThreads;
  return static_cast<unsigned>(b < 65535 * 8 ? (b ? b : 1) : 65535 * 8);
}

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// Call f with the typed pointer type matching dtype (the one place that switches on it).
template <class F>
void dispatch(DType dtype, F&& f) {
  switch (dtype) {
    case DType::F32: f(static_cast<float*>(nullptr)); break;
    case DType::F16: f(static_cast<__half*>(nullptr)); break;
    case DType::BF16: f(static_cast<__nv_bfloat16*>(nullptr)); break;
  }
}

}  // namespace bz
