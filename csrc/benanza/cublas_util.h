// benanza harness, cuBLAS family: the GEMM problem shared by the cublasGemmEx,
// cublasLtMatmul, cublasSgemv and ceiling benchmarks.
//
// A job describes the ONNX operation (row-major, as the model has it):
//
//   Y[b] = alpha * op(A[b]) * op(B[b]) + beta * C + bias,  optionally ReLU'd
//
// with op(A) M x K, op(B) K x N, C broadcast from c_rows x c_cols to M x N, and
// bias a length-N vector (the cuBLASLt epilogue's bias).  It also carries the
// column-major cuBLAS call the planner derived from it (benanza/generate/plan.py GemmShape:
// row-major Y = op(A) op(B) is column-major Y^T = op(B)^T op(A)^T, so cuBLAS's A is
// the model's B).  The fp32 reference is computed from the ONNX description on the
// same device buffers (gemm_reference, kernels.cu), so a wrong operand swap, transpose
// or leading dimension fails the output check.  No device code here: the sources that
// include this header are built by the host compiler.
#pragma once

#include <cublas_v2.h>

#include <string>

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

// GemmDims (the job) is declared in kernels.h, next to the reference it feeds.
inline std::string to_json(const GemmDims& d) {
  Json j;
  j.add("batch", d.batch).add("m", d.m).add("n", d.n).add("k", d.k).add("trans_a", d.trans_a);
  j.add("trans_b", d.trans_b).add("stride_a", d.stride_a).add("stride_b", d.stride_b).add("c_rows", d.c_rows);
  j.add("c_cols", d.c_cols).add("cublas_m", d.cm).add("cublas_n", d.cn).add("cublas_k", d.ck);
  j.add("lda", d.lda).add("ldb", d.ldb).add("ldc", d.ldc);
  return j.str();
}

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
      gemm_broadcast(d, c_src.get(), t, c.get(), ctx.stream);
    }
    if (with_bias) {
      bias = Buffer(size_t(d.n) * e);
      ctx.fill(bias, size_t(d.n), t, seed * 16 + 4);
    }
    gemm_reference(d, alpha, beta, a.get(), b.get(), c_count ? c_src.get() : nullptr,
                   with_bias ? bias.get() : nullptr, relu, t, ref.as<float>(), ctx.stream);
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
};

// The weight ring of a GEMM job (Context::weight_ring): the model's B when it is a constant,
// the layer's weights (cuBLAS's A).  A job whose constant operand is A (MatMul(W, x)) keeps B
// alone, and under --l2 cold-weights refuses: its weights would be read warm, not cold.
inline WeightRing gemm_weight_ring(Context& ctx, const GemmProblem& prob, bool a_constant, bool b_constant) {
  if (ctx.opt.l2 == L2Mode::ColdWeights && a_constant && !b_constant)
    throw Error(Status::NotSupported, "--l2 cold-weights rotates the model's B; this layer's weights are its A");
  return ctx.weight_ring(prob.b, b_constant);
}

// Use kCublasWorkspaceBytes of `work` as the handle's workspace (so graph capture never
// allocates) and the default math mode (the compute type alone decides TF32 and Tensor Cores).
inline void prepare_cublas(Context& ctx, const Buffer& work) {
  BZ_CHECK_CUBLAS(cublasSetWorkspace(ctx.cublas(), work.get(), work.bytes()));
  BZ_CHECK_CUBLAS(cublasSetMathMode(ctx.cublas(), CUBLAS_DEFAULT_MATH));
}

}  // namespace bz
