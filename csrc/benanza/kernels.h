// benanza harness: device helpers shared by every benchmark.
//
// They live in one translation unit (kernels.cu, built once as the static library
// benanza_kernels) so that their device code compiles once per project, not once
// per benchmark executable.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "benanza/common.h"

namespace bz {

// A 4-D tensor as cuDNN sees it (n, c, h, w), whatever its memory layout.
struct Dims4 {
  int n, c, h, w;
};

__host__ __device__ inline size_t count_of(const Dims4& d) { return size_t(d.n) * d.c * d.h * d.w; }

// Index arithmetic of a packed 4-D tensor, for the reference kernels.
struct Packed4 {
  Dims4 d;
  bool nhwc;

  // Coordinates of the i-th element in memory order.
  __host__ __device__ void coords(size_t i, int& n, int& c, int& h, int& w) const {
    if (nhwc) {
      c = int(i % d.c); i /= d.c; w = int(i % d.w); i /= d.w; h = int(i % d.h); n = int(i / d.h);
    } else {
      w = int(i % d.w); i /= d.w; h = int(i % d.h); i /= d.h; c = int(i % d.c); n = int(i / d.c);
    }
  }
  // Memory offset of (n, c, h, w); a dimension of size 1 broadcasts (reads index 0).
  __host__ __device__ size_t offset(int n, int c, int h, int w) const {
    n = d.n == 1 ? 0 : n; c = d.c == 1 ? 0 : c; h = d.h == 1 ? 0 : h; w = d.w == 1 ? 0 : w;
    return nhwc ? ((size_t(n) * d.h + h) * d.w + w) * d.c + c : ((size_t(n) * d.c + c) * d.h + h) * d.w + w;
  }
};

// One 2-D pooling window as the model has it (ONNX pads: begin and end per axis).
struct PoolDims {
  int n, c, h, w;  // input
  int window_h, window_w;
  int pad_top, pad_left, pad_bottom, pad_right;
  int stride_h, stride_w;
  int p, q;  // output height, width (the model's)
};

// Naive pooling in fp32 (`mode` a cudnnPoolingMode_t value): y (n x c x p x q) from x (n x c x h x w),
// both packed in NHWC when `nhwc`, else NCHW. An average that includes padding divides by the window's
// positions inside the padded input (ONNX's count_include_pad; all of it where cuDNN can pool).
void pooling_reference(const PoolDims& d, bool nhwc, int mode, const float* x, float* y, cudaStream_t stream);

// Softmax in fp32 over `cols` values `inner` apart, for each of rows x inner rows (x and y packed as
// [rows, cols, inner]): max, then the sum of exp(x - max), then the quotient.
void softmax_reference(int rows, int cols, int inner, const float* x, float* y, cudaStream_t stream);

// y = a op b in fp32 (`op` CUDNN_OP_TENSOR_ADD or _MUL), b broadcast to a's dims (a dimension of 1).
void op_tensor_reference(const Packed4& a_dims, const Packed4& b_dims, int op, const float* a, const float* b,
                         float* y, cudaStream_t stream);

// Cross-channel LRN in fp32: y = x / (bias + alpha / size * sum of x^2 over the channel window)^beta.
void lrn_reference(const Packed4& dims, int size, float alpha, float beta, float bias, const float* x, float* y,
                   cudaStream_t stream);

// Random values in [-1, 1) made a variance in [0.25, 1.25) (fp32, in place).
void positive_variance(float* var, size_t count, cudaStream_t stream);

// Inference batch norm in fp32 (spatial: per channel): y = scale (x - mean) / sqrt(var + epsilon) + bias.
void batchnorm_reference(const Packed4& dims, const float* x, const float* scale, const float* bias, const float* mean,
                         const float* var, double epsilon, float* y, cudaStream_t stream);

// Uniform values in [-1, 1) from a counter-based hash of (seed, index): never zero,
// reproducible, independent of launch geometry.
void fill_uniform(void* data, size_t count, DType dtype, uint64_t seed, cudaStream_t stream);

// Shape of a 2-D convolution, with output size.  Layout NCHW (filters KCRS) or
// NHWC (filters KRSC), the cuDNN tensor formats; `c` is the input channel count,
// a filter holds c / groups channels.
struct ConvShape {
  int n, c, h, w;
  int k, r, s;
  int pad_h, pad_w;  // begin pads (the reference also honours asymmetric ends: outputs are given)
  int stride_h, stride_w;
  int dil_h, dil_w;
  int groups;
  int p, q;  // output height, width
  bool nhwc;
};

// Naive direct convolution in fp32 from inputs of the given storage type:
// ref[n,k,p,q] = sum_{c,r,s} x * w, written in the output layout of `shape`.
void conv_reference(const ConvShape& shape, const void* x, const void* w, DType dtype, float* ref,
                    cudaStream_t stream);

// In place on the reference: ref = act(alpha1 * ref + alpha2 * z + bias[k]).  `z` (may be
// null when alpha2 == 0) has the output's storage type and layout; `bias` holds k values
// of the storage type.  `act` is a cudnnActivationMode_t value, `coef` its coefficient.
void bias_act_reference(const ConvShape& shape, float* ref, DType dtype, const void* z, const void* bias,
                        float alpha1, float alpha2, int act, double coef, cudaStream_t stream);

// One GEMM job in the model's row-major terms, with the column-major cuBLAS call derived
// from it (benanza/generate/plan.py GemmShape; cublas_util.h describes both sides).
struct GemmDims {
  // ONNX side, row-major: op(A) is m x k, op(B) is k x n, Y is batch x m x n.
  int batch, m, n, k;
  int trans_a, trans_b;
  long long stride_a, stride_b;  // elements between consecutive batch entries of A, B (0: shared)
  int c_rows, c_cols;            // the shape C broadcasts from (0 x 0: no C)
  // column-major cuBLAS call: D (cm x cn, ldc) = op_a(A: the model's B) op_b(B: the model's A)
  int cm, cn, ck, lda, ldb, ldc;
};

// Naive GEMM in fp32 from row-major operands of the storage type `dtype`:
// ref[b, i, j] = relu?(alpha * sum_k op(A)[i, k] op(B)[k, j] + beta * C[i, j] + bias[j]), with C
// (c_rows x c_cols, may be null) broadcast and bias (n values, may be null) the epilogue's.
void gemm_reference(const GemmDims& d, float alpha, float beta, const void* a, const void* b, const void* c,
                    const void* bias, bool relu, DType dtype, float* ref, cudaStream_t stream);

// out[b, i, j] = C[i, j]: C (c_rows x c_cols of `dtype`) broadcast to batch x m x n.
void gemm_broadcast(const GemmDims& d, const void* c, DType dtype, void* out, cudaStream_t stream);

// Scaled-dot-product attention, naive, in fp32 from Q [b, h, s_q, d_qk], K [b, h, s_kv, d_qk],
// V [b, h, s_kv, d_v] (contiguous, storage type `dtype`): ref[b, h, i, :] = softmax_j(scale q_i . k_j
// over the keys the masks keep) V.  `causal`: key j <= query i (top-left diagonal); `kv_len`
// (b int32 values on the device, may be null): keys j < kv_len[b] only.  d_v <= kMaxHeadDim.
struct AttentionDims {
  int b, h, s_q, s_kv, d_qk, d_v;
};
constexpr int kMaxHeadDim = 256;
void attention_reference(const AttentionDims& d, float scale, bool causal, const int* kv_len, const void* q,
                         const void* k, const void* v, DType dtype, float* ref, cudaStream_t stream);

// Normalization of each of `rows` rows of `cols` values, fp32: LayerNorm
// y = (x - mean) / sqrt(var + eps) * scale + bias, or RMSNorm y = x / sqrt(mean(x^2) + eps) * scale
// (+ bias); x has the storage type `dtype`, scale and bias (may be null) hold cols fp32 values.
void norm_reference(int rows, int cols, bool rms, float eps, const void* x, const float* scale, const float* bias,
                    DType dtype, float* ref, cudaStream_t stream);

// A chain of elementwise ops over x (rows x cols, storage type `dtype`), evaluated per element in
// fp32 into ref: step i computes register i + 1 = op_i(a_i[, b_i]) (register 0 is x; the last
// register is the output).  An operand >= 0 names a register, kNoOperand none, and -2 - k the
// constant k: `const_cols[k]` fp32 values (1: a scalar, cols: one per column) at `consts[k]`.
enum class PwOp : int { Add, Sub, Mul, Div, Pow, Erf, Tanh, Sigmoid, Relu, Sqrt, Exp, Neg, Reciprocal };
constexpr int kMaxPwSteps = 16, kMaxPwConsts = 8, kNoOperand = -1;
struct PwProgram {
  int steps;
  int op[kMaxPwSteps];  // PwOp values
  int a[kMaxPwSteps], b[kMaxPwSteps];
  int consts;
  int const_cols[kMaxPwConsts];
  const float* const_data[kMaxPwConsts];
};
void pointwise_reference(const PwProgram& p, int rows, int cols, const void* x, DType dtype, float* ref,
                         cudaStream_t stream);

// The elementwise ops of benanza's fused pointwise kernel (replay_kernels.h ChainProgram; the names are
// benanza/generate/replay.py CHAIN_OP's words): y = op(a [, b [, c]]) with parameters alpha, beta.
enum class ChainOp : int { Add, Sub, Mul, Div, Relu, Sigmoid, Tanh, Clip, Affine, LeakyRelu, Elu, HardSigmoid, HardSwish };

// One ChainOp over whole fp32 tensors, one op at a time (the fused kernel's independent reference):
// y = op(a, b, c), y packed as `dims`; a, b and c (b, c may be null) broadcast from their own dims (a
// dimension of 1: a scalar is 1 x 1 x 1 x 1, a per-channel constant 1 x C x 1 x 1).
void chain_op_reference(ChainOp op, float alpha, float beta, const Packed4& dims, const Packed4& a_dims, const float* a,
                        const Packed4& b_dims, const float* b, const Packed4& c_dims, const float* c, float* y,
                        cudaStream_t stream);

// Elementwise activation on an fp32 buffer (a cudnnActivationMode_t value).
void activation_reference(float* data, size_t count, int act, double coef, cudaStream_t stream);

// Convert `count` values of `dtype` to fp32 (for references built from stored inputs).
void to_float(const void* src, DType dtype, float* dst, size_t count, cudaStream_t stream);

// A part of an output compared with its fp32 reference: `count` values from element `offset` of
// the output against `ref` (a convolution checks a few whole batch entries: ConvReference).
struct CheckedSpan {
  size_t offset;
  size_t count;
  const float* ref;
};

// max |out - ref| / max |ref| over the spans' values; +inf when `out` holds NaN or Inf there.
// Synchronizes the stream.
double max_rel_error(const void* out, DType dtype, const std::vector<CheckedSpan>& spans, cudaStream_t stream);
// max |ref| of this thread's max_rel_error calls since the last take (-1: none), then reset: the reference's
// magnitude tells a storage-type overflow of the data from a wrong result.
float take_reference_max_abs();

// The whole output, `count` values, against `ref`.
inline std::vector<CheckedSpan> whole_output(const float* ref, size_t count) { return {{0, count, ref}}; }

}  // namespace bz
