// benanza harness: benanza's own kernels for the layers the bound charges a roofline (docs/REPLAY.md).
//
// The execution bound charges an elementwise chain (BatchNormalization, Mul, Add, Relu ...) its bytes
// at the copy roofline: one pass that reads each distinct input once and writes the output once.
// `benanza replay` runs such a chain as exactly that pass (chain_forward) instead of one library
// call per member, and a pool the bound charges a roofline with a pooling kernel of its own
// (pool_forward: ceil-mode sizes, asymmetric pads, NCHW and NHWC, which cuDNN's pooling refuses in
// part). Built with nvcc into the harness library (replay_kernels.cu); the replay program, built by
// the host compiler, only calls these launchers. The steps that call them are replay_kernel_steps.h;
// their checks use the independent one-op-at-a-time references of kernels.h.
#pragma once

#include <cuda_runtime.h>

#include "benanza/common.h"
#include "benanza/kernels.h"

namespace bz {

// One fused pointwise pass: `ops` instructions over `count` elements, evaluated per element in fp32.
// Registers 0 .. inputs-1 hold the inputs (read once each), register inputs + i the result of
// instruction i; the last instruction's result is written (rounded once to the storage type). An
// operand >= 0 names a register, kChainNone none, and -2 - k the constant k: const_count[k] fp32
// values, 1 (a scalar) or `channels` (one per channel; the channel of element e is (e / inner) %
// channels: inner = h * w for NCHW, 1 for NHWC). Op codes: ChainOp (kernels.h).
constexpr int kMaxChainOps = 16, kMaxChainInputs = 8, kMaxChainConsts = 8, kChainNone = -1;
struct ChainProgram {
  int ops = 0, inputs = 0, consts = 0;
  int op[kMaxChainOps] = {};
  int a[kMaxChainOps] = {}, b[kMaxChainOps] = {}, c[kMaxChainOps] = {};
  float alpha[kMaxChainOps] = {}, beta[kMaxChainOps] = {};  // Clip's bounds, LeakyRelu's slope ...
  int const_count[kMaxChainConsts] = {};
  const void* in[kMaxChainInputs] = {};  // the storage type
  const float* konst[kMaxChainConsts] = {};
  long long count = 0;
  int channels = 1;
  long long inner = 1;
};

// Enqueue the pass: out[e] = program(in[.][e]) for every e < p.count; vectorized (16-byte loads and
// stores, a grid-stride loop) where every pointer allows it.
void chain_forward(const ChainProgram& p, DType dtype, void* out, cudaStream_t stream);

// 2-D max / average pooling as the model has it (`mode` a cudnnPoolingMode_t value; pads begin and
// end apart, output size given): y (n x c x p x q) from x (n x c x h x w), both NHWC when `nhwc`.
// An average that includes padding divides by the window's positions inside the padded input.
void pool_forward(const PoolDims& d, bool nhwc, int mode, DType dtype, const void* x, void* y, cudaStream_t stream);

// A window of `src` packed row-major into `dst`: `rank` dims (at most kMaxCopyDims), each dim's stride in
// source elements, the first element at `offset`; `count` the window's elements. A view the bound reads
// through strides, copied as a framework's copy kernel copies it (cuDNN's cudnnTransformTensor moved such
// N-d windows at about 55 GB/s on the H100: ViT-B/16's QKV selects, ShuffleNet's channel shuffles).
constexpr int kMaxCopyDims = 8;
struct StridedWindow {
  int rank = 0;
  long long dims[kMaxCopyDims] = {}, strides[kMaxCopyDims] = {};
  long long offset = 0, count = 0;
};

// Enqueue the copy; dims of one element are dropped and dims that are contiguous in the source merged first.
void strided_copy(const StridedWindow& w, DType dtype, const void* src, void* dst, cudaStream_t stream);

}  // namespace bz
