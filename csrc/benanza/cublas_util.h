// benanza harness, cuBLAS family: the GEMM problem shared by the cublasGemmEx,
// cublasLtMatmul, cublasSgemv and ceiling benchmarks.
//
// A job describes the ONNX operation (row-major, as the model has it):
//
//   Y[b] = alpha * op(A[b]) * op(B[b]) + beta * C + bias,  optionally ReLU'd
//
// with op(A) M x K, op(B) K x N, C broadcast from c_rows x c_cols to M x N, and
// bias a length-N vector (the cuBLASLt epilogue's bias).  It also carries the
// column-major cuBLAS call the planner derived from it (benanza/plan.py GemmShape:
// row-major Y = op(A) op(B) is column-major Y^T = op(B)^T op(A)^T, so cuBLAS's A is
// the model's B).  The fp32 reference is computed from the ONNX description on the
// same device buffers, so a wrong operand swap, transpose or leading dimension fails
// the output check.
#pragma once

#include <cublas_v2.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "benanza/bench.h"

namespace bz {

// Workspace handed to cuBLAS (cublasSetWorkspace) and offered to cuBLASLt heuristics.
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;

// One row of a generated precision table (benanza/library.py PRECISIONS, cuBLAS spellings).
struct CublasPrecision {
  const char* dtype;  // benanza Precision value
  const char* math;   // benanza Math value
  cudaDataType_t data;
  cublasComputeType_t compute;
  DType storage;
  double tolerance;
};

struct GemmDims {
  // ONNX side, row-major: op(A) is m x k, op(B) is k x n, Y is batch x m x n.
  int batch, m, n, k;
  int trans_a, trans_b;
  long long stride_a, stride_b;  // elements between consecutive batch entries of A, B (0: shared)
  int c_rows, c_cols;            // the shape C broadcasts from (0 x 0: no C)
  // column-major cuBLAS call: D (cm x cn, ldc) = op_a(A: the model's B) op_b(B: the model's A)
  int cm, cn, ck, lda, ldb, ldc;
};

inline std::string to_json(const GemmDims& d) {
  Json j;
  j.add("batch", d.batch).add("m", d.m).add("n", d.n).add("k", d.k).add("trans_a", d.trans_a);
  j.add("trans_b", d.trans_b).add("stride_a", d.stride_a).add("stride_b", d.stride_b).add("c_rows", d.c_rows);
  j.add("c_cols", d.c_cols).add("cublas_m", d.cm).add("cublas_n", d.cn).add("cublas_k", d.ck);
  j.add("lda", d.lda).add("ldb", d.ldb).add("ldc", d.ldc);
  return j.str();
}

namespace gemm_detail {

constexpr int kTile = 16;

__device__ inline float ld(const float* p, long long i) { return p[i]; }
__device__ inline float ld(const __half* p, long long i) { return __half2float(p[i]); }
__device__ inline float ld(const __nv_bfloat16* p, long long i) { return __bfloat162float(p[i]); }

// ref[b, i, j] = relu?(alpha * sum_k op(A)[i, k] op(B)[k, j] + beta * C[i, j] + bias[j]) in fp32,
// from the row-major ONNX operands (shared-memory tiles, grid-stride over row tiles and batches).
template <class T>
__global__ void reference_kernel(GemmDims d, float alpha, float beta, const T* a, const T* b, const T* c,
                                 const T* bias, int relu, float* ref) {
  __shared__ float ta[kTile][kTile + 1], tb[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int j = blockIdx.x * kTile + tx;
  const int row_tiles = (d.m + kTile - 1) / kTile;
  for (int bt = blockIdx.z; bt < d.batch; bt += gridDim.z) {
    const T* A = a + bt * d.stride_a;
    const T* B = b + bt * d.stride_b;
    for (int rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {
      const int i = rt * kTile + ty;
      float acc = 0.f;
      for (int k0 = 0; k0 < d.k; k0 += kTile) {
        const int ka = k0 + tx, kb = k0 + ty;
        ta[ty][tx] = i < d.m && ka < d.k ? ld(A, d.trans_a ? (long long)ka * d.m + i : (long long)i * d.k + ka) : 0.f;
        tb[ty][tx] = kb < d.k && j < d.n ? ld(B, d.trans_b ? (long long)j * d.k + kb : (long long)kb * d.n + j) : 0.f;
        __syncthreads();
        for (int kk = 0; kk < kTile; ++kk) acc += ta[ty][kk] * tb[kk][tx];
        __syncthreads();
      }
      if (i < d.m && j < d.n) {
        float v = alpha * acc;
        if (c) v += beta * ld(c, (long long)(d.c_rows == 1 ? 0 : i) * d.c_cols + (d.c_cols == 1 ? 0 : j));
        if (bias) v += ld(bias, j);
        if (relu) v = fmaxf(v, 0.f);
        ref[((long long)bt * d.m + i) * d.n + j] = v;
      }
    }
  }
}

// out[b, i, j] = C[i, j]: C materialized to the output's shape (the in-place beta * C of cuBLAS).
template <class T>
__global__ void broadcast_kernel(GemmDims d, const T* c, T* out) {
  const long long total = (long long)d.batch * d.m * d.n;
  for (long long x = blockIdx.x * (long long)blockDim.x + threadIdx.x; x < total;
       x += (long long)gridDim.x * blockDim.x) {
    const long long ij = x % ((long long)d.m * d.n);
    const int i = int(ij / d.n), j = int(ij % d.n);
    out[x] = c[(long long)(d.c_rows == 1 ? 0 : i) * d.c_cols + (d.c_cols == 1 ? 0 : j)];
  }
}

template <class F>
void dispatch(DType t, F&& f) {
  switch (t) {
    case DType::F32: f(static_cast<float*>(nullptr)); break;
    case DType::F16: f(static_cast<__half*>(nullptr)); break;
    case DType::BF16: f(static_cast<__nv_bfloat16*>(nullptr)); break;
  }
}

}  // namespace gemm_detail

// Operands, output and fp32 reference of one GEMM job, with random inputs in (-1, 1).
class GemmProblem {
 public:
  GemmDims d;
  DType storage;
  float alpha, beta;
  size_t a_count = 0, b_count = 0, c_count = 0, y_count = 0;
  Buffer a, b, c_src, c, y, bias, ref;  // c: C broadcast to y's shape; bias: n values (epilogue bias)

  GemmProblem(Context& ctx, const GemmDims& dims, DType t, float alpha_, float beta_, bool with_bias, bool relu,
              uint64_t seed)
      : d(dims), storage(t), alpha(alpha_), beta(beta_) {
    if (d.batch < 1 || d.m < 1 || d.n < 1 || d.k < 1)
      throw Error(Status::Failed, "empty GEMM (batch " + std::to_string(d.batch) + ", m " + std::to_string(d.m) +
                                      ", n " + std::to_string(d.n) + ", k " + std::to_string(d.k) + ")");
    const size_t e = dtype_size(t);
    a_count = size_t(d.stride_a ? d.batch : 1) * d.m * d.k;
    b_count = size_t(d.stride_b ? d.batch : 1) * d.k * d.n;
    c_count = size_t(d.c_rows) * d.c_cols;
    y_count = size_t(d.batch) * d.m * d.n;
    a = Buffer(a_count * e);
    b = Buffer(b_count * e);
    y = Buffer(y_count * e);
    ref = Buffer(y_count * sizeof(float));
    ctx.fill(a, a_count, t, seed * 16 + 1);
    ctx.fill(b, b_count, t, seed * 16 + 2);
    if (c_count) {
      c_src = Buffer(c_count * e);
      c = Buffer(y_count * e);
      ctx.fill(c_src, c_count, t, seed * 16 + 3);
      gemm_detail::dispatch(t, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        gemm_detail::broadcast_kernel<T><<<blocks(y_count), 256, 0, ctx.stream>>>(d, c_src.as<T>(), c.as<T>());
      });
      BZ_CHECK_CUDA(cudaGetLastError());
    }
    if (with_bias) {
      bias = Buffer(size_t(d.n) * e);
      ctx.fill(bias, size_t(d.n), t, seed * 16 + 4);
    }
    const dim3 block(gemm_detail::kTile, gemm_detail::kTile);
    const dim3 grid(unsigned((d.n + gemm_detail::kTile - 1) / gemm_detail::kTile),
                    unsigned(std::min((d.m + gemm_detail::kTile - 1) / gemm_detail::kTile, 65535)),
                    unsigned(std::min(d.batch, 65535)));
    gemm_detail::dispatch(t, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      gemm_detail::reference_kernel<T><<<grid, block, 0, ctx.stream>>>(
          d, alpha, beta, a.as<T>(), b.as<T>(), c_count ? c_src.as<T>() : nullptr, with_bias ? bias.as<T>() : nullptr,
          relu ? 1 : 0, ref.as<float>());
    });
    BZ_CHECK_CUDA(cudaGetLastError());
  }

  // Before an in-place call (cublasGemmEx, cublasSgemv: C is the output): y = broadcast C,
  // or NaN when there is no C, so that a call that writes nothing fails the check.
  void reset_output(Context& ctx) const {
    if (c_count)
      BZ_CHECK_CUDA(cudaMemcpyAsync(y.get(), c.get(), y.bytes(), cudaMemcpyDeviceToDevice, ctx.stream));
    else
      poison_output(ctx);
  }
  void poison_output(Context& ctx) const { BZ_CHECK_CUDA(cudaMemsetAsync(y.get(), 0xff, y.bytes(), ctx.stream)); }

  void check(Context& ctx, Result& r, double tolerance) const {
    ctx.check(r, y.get(), storage, ref.as<float>(), y_count, tolerance);
  }

  double flops() const { return 2.0 * d.batch * double(d.m) * d.n * d.k; }

 private:
  static unsigned blocks(size_t count) { return unsigned(std::clamp<size_t>((count + 255) / 256, 1, 65535 * 8)); }
};

// Use kCublasWorkspaceBytes of `work` as the handle's workspace (so graph capture never
// allocates) and the default math mode (the compute type alone decides TF32 and Tensor Cores).
inline void prepare_cublas(Context& ctx, const Buffer& work) {
  BZ_CHECK_CUBLAS(cublasSetWorkspace(ctx.cublas(), work.get(), work.bytes()));
  BZ_CHECK_CUBLAS(cublasSetMathMode(ctx.cublas(), CUBLAS_DEFAULT_MATH));
}

}  // namespace bz
