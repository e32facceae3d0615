// benanza harness: what the legacy cuDNN op benchmarks share (batch norm, activation,
// pooling, softmax, LRN, add tensor, op tensor) and the copy bound of non-library layers:
// 4-D packed tensors in either layout, random operands with their fp32 copies for the
// reference kernels, and the one-algorithm check-then-time step.
//
// Each of these APIs has one algorithm per job (its mode), so a job is one result:
// setup, a checked call into a NaN-filled output, then ctx.measure.  Any bz::Error on
// the way becomes that result's status.
#pragma once

#include <cudnn.h>

#include <string>

#include "benanza/bench.h"
#include "benanza/cudnn_util.h"
#include "benanza/kernels.h"  // Dims4, Packed4

namespace bz {

inline std::string to_json(const Dims4& d) {
  return "[" + std::to_string(d.n) + "," + std::to_string(d.c) + "," + std::to_string(d.h) + "," +
         std::to_string(d.w) + "]";
}

// A fully packed tensor of dims `d` in `format` (NCHW or NHWC).
inline void set_tensor(const TensorDesc& t, cudnnTensorFormat_t format, cudnnDataType_t type, const Dims4& d) {
  BZ_CHECK_CUDNN(cudnnSetTensor4dDescriptor(t, format, type, d.n, d.c, d.h, d.w));
}

constexpr int kOpThreads = 256;

inline unsigned grid_for(size_t count) {
  size_t b = (count + kOpThreads - 1) / kOpThreads;
  return unsigned(b == 0 ? 1 : (b < 65535u * 8 ? b : 65535u * 8));
}

// The fields every result of an op benchmark shares.  These ops have no math mode:
// math is benanza's Math.NONE, "n/a".
inline Result op_result(const std::string& key, const CudnnPrecision& p, const std::string& fusion,
                        const std::string& layout, const std::string& algorithm) {
  Result r;
  r.layer_key = key;
  r.algorithm = algorithm;
  r.dtype = p.dtype;
  r.math = "n/a";
  r.fusion = fusion;
  r.layout = layout;
  r.tolerance = p.tolerance;
  return r;
}

// A random device operand in the benchmark's storage type and its exact fp32 copy.
struct Operand {
  size_t count = 0;
  Buffer data, f32;

  Operand(Context& ctx, size_t n, DType dtype, uint64_t seed)
      : count(n), data(n * dtype_size(dtype)), f32(n * sizeof(float)) {
    ctx.fill(data, n, dtype, seed);
    to_float(data.get(), dtype, f32.as<float>(), n, ctx.stream);
  }
  const float* ref() const { return f32.as<float>(); }
};

// Fill a buffer with NaN bytes, so that a call that writes nothing fails the check.
inline void poison(Context& ctx, const Buffer& b) {
  BZ_CHECK_CUDA(cudaMemsetAsync(b.get(), 0xff, b.bytes(), ctx.stream));
}

inline void check_launch() { BZ_CHECK_CUDA(cudaGetLastError()); }

// One call into a NaN-filled `out`, checked against the fp32 `ref`, then timed.
template <class F>
void check_and_time(Context& ctx, Result& r, F&& call, const Buffer& out, DType dtype, const float* ref,
                    size_t count, double tolerance) {
  poison(ctx, out);
  call(ctx.stream);
  ctx.check(r, out.get(), dtype, ref, count, tolerance);
  Context::record(r, ctx.measure(call));
}

}  // namespace bz
