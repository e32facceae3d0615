// benanza harness: the replay's own kernels (see replay_kernels.h). Built once per project into the
// harness library benanza_kernels, beside kernels.cu.
#include <cudnn.h>

#include <cstdint>
#include <type_traits>

#include "benanza/kernel_util.cuh"
#include "benanza/replay_kernels.h"

namespace bz {
namespace {

constexpr int kChainThreads = kKernelThreads;

// V values of T moved as one 16-byte access (V = 1: one value).
template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

__device__ __forceinline__ float apply(int op, float alpha, float beta, float a, float b, float c) {
  switch (ChainOp(op)) {
    case ChainOp::Add: return a + b;
    case ChainOp::Sub: return a - b;
    case ChainOp::Mul: return a * b;
    case ChainOp::Div: return __fdiv_rn(a, b);
    case ChainOp::Relu: return fmaxf(a, 0.f);
    case ChainOp::Sigmoid: return 1.f / (1.f + __expf(-a));
    case ChainOp::Tanh: return tanhf(a);
    case ChainOp::Clip: return fminf(fmaxf(a, alpha), beta);
    case ChainOp::Affine: return fmaf(a, b, c);
    case ChainOp::LeakyRelu: return a < 0.f ? alpha * a : a;
    case ChainOp::Elu: return a < 0.f ? alpha * expm1f(a) : a;
    case ChainOp::HardSigmoid: return __saturatef(fmaf(alpha, a, beta));
    case ChainOp::HardSwish: return a * __saturatef(fmaf(a, 1.f / 6.f, 0.5f));
  }
  return __int_as_float(0x7fc00000);  // an op this kernel does not know: NaN, which the check fails
}

// The value of operand `code` for the element whose registers are `reg` and whose channel is `ch`.
__device__ __forceinline__ float operand(const ChainProgram& p, const float* reg, int code, int ch) {
  if (code >= 0) return reg[code];
  if (code == kChainNone) return 0.f;
  const int k = -2 - code;
  return __ldg(p.konst[k] + (p.const_count[k] == 1 ? 0 : ch));
}

// One thread handles V consecutive elements per grid-stride step: each input read as one 16-byte
// access, the program run per element in fp32 registers, the output written as one access.
template <class T, int V>
__global__ void __launch_bounds__(kChainThreads) chain_kernel(const ChainProgram p, T* __restrict__ out,
                                                              size_t packs) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < packs; i += stride) {
    const size_t e0 = i * V;
    Pack<T, V> x[kMaxChainInputs];
    for (int k = 0; k < p.inputs; ++k) x[k] = static_cast<const Pack<T, V>*>(p.in[k])[i];
    long long pos = (long long)(e0 % size_t(p.inner));
    int ch = int((e0 / size_t(p.inner)) % size_t(p.channels));
    Pack<T, V> y;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      float reg[kMaxChainInputs + kMaxChainOps];
      for (int k = 0; k < p.inputs; ++k) reg[k] = to_f32(x[k].v[j]);
      for (int s = 0; s < p.ops; ++s)
        reg[p.inputs + s] = apply(p.op[s], p.alpha[s], p.beta[s], operand(p, reg, p.a[s], ch),
                                  operand(p, reg, p.b[s], ch), operand(p, reg, p.c[s], ch));
      y.v[j] = from_f32<T>(reg[p.inputs + p.ops - 1]);
      if (++pos == p.inner) {  // the next element's channel
        pos = 0;
        ch = ch + 1 == p.channels ? 0 : ch + 1;
      }
    }
    reinterpret_cast<Pack<T, V>*>(out)[i] = y;
  }
}

// A linear program's operand for the V elements of one pack: an input (selected with compile-time
// indices, so the inputs stay in registers), the previous instruction's results `acc`, none, or a
// constant (per element: its channel `ch`).
template <int V, int NIN>
__device__ __forceinline__ void linear_operand(const ChainProgram& p, const float (&in)[NIN][V], const float (&acc)[V],
                                               int code, const int (&ch)[V], float (&out)[V]) {
  if (code >= NIN) {
#pragma unroll
    for (int j = 0; j < V; ++j) out[j] = acc[j];
  } else if (code >= 0) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      float v = in[0][j];
#pragma unroll
      for (int k = 1; k < NIN; ++k)
        if (code == k) v = in[k][j];
      out[j] = v;
    }
  } else if (code == kChainNone) {
#pragma unroll
    for (int j = 0; j < V; ++j) out[j] = 0.f;
  } else {
    const int k = -2 - code;
    const float* konst = p.konst[k];
    const bool scalar = p.const_count[k] == 1;
#pragma unroll
    for (int j = 0; j < V; ++j) out[j] = __ldg(konst + (scalar ? 0 : ch[j]));
  }
}

// One instruction over a pack: the op decoded once per pack, not once per element.
template <int V>
__device__ __forceinline__ void apply_pack(int op, float alpha, float beta, const float (&a)[V], const float (&b)[V],
                                           const float (&c)[V], float (&r)[V]) {
#define BZ_EACH(expr)                                 \
  _Pragma("unroll") for (int j = 0; j < V; ++j) { \
    r[j] = (expr);                                    \
  }                                                   \
  return
  switch (ChainOp(op)) {
    case ChainOp::Add: BZ_EACH(a[j] + b[j]);
    case ChainOp::Sub: BZ_EACH(a[j] - b[j]);
    case ChainOp::Mul: BZ_EACH(a[j] * b[j]);
    case ChainOp::Div: BZ_EACH(__fdiv_rn(a[j], b[j]));
    case ChainOp::Relu: BZ_EACH(fmaxf(a[j], 0.f));
    case ChainOp::Affine: BZ_EACH(fmaf(a[j], b[j], c[j]));
    default: BZ_EACH(apply(op, alpha, beta, a[j], b[j], c[j]));  // the rarer ops, per element
  }
#undef BZ_EACH
}

// chain_kernel for a linear program (every register operand an input or the previous result: a BN ->
// Mul -> Add -> Relu chain, x * sigmoid(x)) with NIN inputs: no register file in local memory (the
// general kernel's), and each instruction decoded once per pack of V elements.
template <class T, int V, int NIN>
__global__ void __launch_bounds__(kChainThreads) chain_linear_kernel(const ChainProgram p, T* __restrict__ out,
                                                                     size_t packs) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < packs; i += stride) {
    const size_t e0 = i * V;
    float in[NIN][V];
#pragma unroll
    for (int k = 0; k < NIN; ++k) {
      const Pack<T, V> x = static_cast<const Pack<T, V>*>(p.in[k])[i];
#pragma unroll
      for (int j = 0; j < V; ++j) in[k][j] = to_f32(x.v[j]);
    }
    int ch[V];
    {
      long long pos = p.inner == 1 ? 0 : (long long)(e0 % size_t(p.inner));
      int c = int((p.inner == 1 ? e0 : e0 / size_t(p.inner)) % size_t(p.channels));
#pragma unroll
      for (int j = 0; j < V; ++j) {
        ch[j] = c;
        if (++pos >= p.inner) {  // the next element's channel
          pos = 0;
          c = c + 1 == p.channels ? 0 : c + 1;
        }
      }
    }
    float acc[V], a[V], b[V], c[V];
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] = in[0][j];
    for (int s = 0; s < p.ops; ++s) {
      linear_operand<V, NIN>(p, in, acc, p.a[s], ch, a);
      linear_operand<V, NIN>(p, in, acc, p.b[s], ch, b);
      linear_operand<V, NIN>(p, in, acc, p.c[s], ch, c);
      apply_pack<V>(p.op[s], p.alpha[s], p.beta[s], a, b, c, acc);
    }
    Pack<T, V> y;
#pragma unroll
    for (int j = 0; j < V; ++j) y.v[j] = from_f32<T>(acc[j]);
    reinterpret_cast<Pack<T, V>*>(out)[i] = y;
  }
}

// Whether every register operand of instruction s is an input or instruction s - 1's result.
bool linear(const ChainProgram& p) {
  for (int s = 0; s < p.ops; ++s)
    for (int code : {p.a[s], p.b[s], p.c[s]})
      if (code >= p.inputs && code != p.inputs + s - 1) return false;
  return true;
}

constexpr int kMaxLinearInputs = 4;

template <class T, int V, int NIN>
void launch_linear(const ChainProgram& p, T* out, size_t packs, cudaStream_t stream) {
  if constexpr (NIN > kMaxLinearInputs) {
    chain_kernel<T, V><<<blocks_for(packs), kChainThreads, 0, stream>>>(p, out, packs);
  } else if (p.inputs == NIN) {
    chain_linear_kernel<T, V, NIN><<<blocks_for(packs), kChainThreads, 0, stream>>>(p, out, packs);
  } else {
    launch_linear<T, V, NIN + 1>(p, out, packs, stream);
  }
}

template <class T, int V>
void launch_chain_v(const ChainProgram& p, T* out, size_t packs, cudaStream_t stream) {
  if (p.inputs >= 1 && p.inputs <= kMaxLinearInputs && linear(p))
    launch_linear<T, V, 1>(p, out, packs, stream);
  else
    chain_kernel<T, V><<<blocks_for(packs), kChainThreads, 0, stream>>>(p, out, packs);
}

template <class T>
void launch_chain(const ChainProgram& p, void* out, cudaStream_t stream) {
  constexpr int kVec = int(16 / sizeof(T));
  bool aligned = reinterpret_cast<uintptr_t>(out) % 16 == 0 && p.count % kVec == 0;
  for (int k = 0; k < p.inputs; ++k) aligned = aligned && reinterpret_cast<uintptr_t>(p.in[k]) % 16 == 0;
  const size_t count = size_t(p.count);
  if (aligned)
    launch_chain_v<T, kVec>(p, static_cast<T*>(out), count / kVec, stream);
  else
    launch_chain_v<T, 1>(p, static_cast<T*>(out), count, stream);
}

// One thread per output element, in memory order (channels fastest in NHWC: neighbouring threads
// read neighbouring channels of one window position).
template <class T>
__global__ void pool_kernel(PoolDims d, bool nhwc, int mode, const T* __restrict__ x, T* __restrict__ y) {
  const size_t total = size_t(d.n) * d.c * d.p * d.q;
  const bool max_pool = mode == CUDNN_POOLING_MAX || mode == CUDNN_POOLING_MAX_DETERMINISTIC;
  const bool include_pad = mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    size_t t = i;
    int n, c, p, q;
    if (nhwc) {
      c = int(t % d.c), t /= d.c, q = int(t % d.q), t /= d.q, p = int(t % d.p), n = int(t / d.p);
    } else {
      q = int(t % d.q), t /= d.q, p = int(t % d.p), t /= d.p, c = int(t % d.c), n = int(t / d.c);
    }
    const int h0 = p * d.stride_h - d.pad_top, w0 = q * d.stride_w - d.pad_left;
    const int h_lo = max(h0, 0), h_hi = min(h0 + d.window_h, d.h);
    const int w_lo = max(w0, 0), w_hi = min(w0 + d.window_w, d.w);
    const size_t plane = nhwc ? size_t(n) * d.h * d.w * d.c + c : (size_t(n) * d.c + c) * d.h * d.w;
    const size_t step_w = nhwc ? size_t(d.c) : 1, step_h = size_t(d.w) * step_w;
    float best = -INFINITY, sum = 0.f;
    for (int h = h_lo; h < h_hi; ++h)
      for (int w = w_lo; w < w_hi; ++w) {
        const float v = to_f32(x[plane + size_t(h) * step_h + size_t(w) * step_w]);
        best = fmaxf(best, v);
        sum += v;
      }
    float out = best;
    if (!max_pool) {
      // include padding: the window's positions inside the padded input; exclude: inside the input
      const int rows = include_pad ? min(h0 + d.window_h, d.h + d.pad_bottom) - h0 : h_hi - h_lo;
      const int cols = include_pad ? min(w0 + d.window_w, d.w + d.pad_right) - w0 : w_hi - w_lo;
      out = sum / float(max(max(rows, 0) * max(cols, 0), 1));
    }
    y[i] = from_f32<T>(out);
  }
}

// One thread per window element in the destination's order: its source element from the window's dims and
// strides (I: 32-bit indices wherever the source allows, a division per dim being most of the work).
template <class U, class I>
__global__ void strided_copy_kernel(const StridedWindow w, const U* __restrict__ src, U* __restrict__ dst) {
  const I count = I(w.count), stride = I(gridDim.x) * blockDim.x;
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    I rest = i, at = I(w.offset);
    for (int d = w.rank - 1; d > 0; --d) {
      const I dim = I(w.dims[d]);
      at += (rest % dim) * I(w.strides[d]);
      rest /= dim;
    }
    dst[i] = src[at + rest * I(w.strides[0])];
  }
}

// The same window with its one-element dims dropped and each dim merged into the one before it where the
// source holds the pair contiguously (a Transpose of a 5-d view often copies as 2 or 3 dims).
StridedWindow simplified(const StridedWindow& w) {
  StridedWindow out;
  out.offset = w.offset, out.count = w.count;
  for (int d = 0; d < w.rank; ++d) {
    if (w.dims[d] == 1) continue;
    if (out.rank > 0 && out.strides[out.rank - 1] == w.strides[d] * w.dims[d]) {
      out.dims[out.rank - 1] *= w.dims[d];
      out.strides[out.rank - 1] = w.strides[d];
    } else {
      out.dims[out.rank] = w.dims[d], out.strides[out.rank] = w.strides[d];
      ++out.rank;
    }
  }
  if (out.rank == 0) out.dims[0] = 1, out.strides[0] = 1, out.rank = 1;
  return out;
}

template <class U>
void launch_strided_copy(const StridedWindow& w, const void* src, void* dst, cudaStream_t stream) {
  long long last = w.offset;  // the largest source index the window reads
  for (int d = 0; d < w.rank; ++d) last += (w.dims[d] - 1) * w.strides[d];
  const auto* s = static_cast<const U*>(src);
  auto* t = static_cast<U*>(dst);
  if (last < INT32_MAX && w.count < INT32_MAX)
    strided_copy_kernel<U, uint32_t><<<blocks_for(size_t(w.count)), kChainThreads, 0, stream>>>(w, s, t);
  else
    strided_copy_kernel<U, unsigned long long><<<blocks_for(size_t(w.count)), kChainThreads, 0, stream>>>(w, s, t);
}

}  // namespace

void strided_copy(const StridedWindow& w, DType dtype, const void* src, void* dst, cudaStream_t stream) {
  if (w.count < 1) return;
  const StridedWindow s = simplified(w);
  if (dtype_size(dtype) == 4)  // a copy moves bits: one unsigned type per element size
    launch_strided_copy<uint32_t>(s, src, dst, stream);
  else
    launch_strided_copy<uint16_t>(s, src, dst, stream);
}

void chain_forward(const ChainProgram& p, DType dtype, void* out, cudaStream_t stream) {
  if (p.count < 1 || p.ops < 1) return;
  dispatch(dtype, [&](auto* type) { launch_chain<std::remove_pointer_t<decltype(type)>>(p, out, stream); });
}

void pool_forward(const PoolDims& d, bool nhwc, int mode, DType dtype, const void* x, void* y, cudaStream_t stream) {
  const size_t total = size_t(d.n) * d.c * d.p * d.q;
  dispatch(dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    pool_kernel<T><<<blocks_for(total), kChainThreads, 0, stream>>>(d, nhwc, mode, static_cast<const T*>(x),
                                                                  static_cast<T*>(y));
  });
}

}  // namespace bz
