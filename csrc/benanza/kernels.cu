// benanza harness: device helpers (see kernels.h).  Built once per generated
// project as the static library benanza_kernels.
#include <cudnn.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "benanza/kernel_util.cuh"
#include "benanza/kernels.h"

namespace bz {
namespace {

constexpr int kThreads = kKernelThreads;

template <class T>
__device__ inline float load(const T* p, size_t i) { return to_f32(p[i]); }
template <class T>
__device__ inline void store(T* p, size_t i, float v) { p[i] = from_f32<T>(v); }

__device__ inline uint64_t mix(uint64_t z) {  // splitmix64 finalizer
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

template <class T>
__global__ void fill_kernel(T* data, size_t count, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t bits = mix(seed * 0x100000001b3ull ^ mix(i));
    float u = (float((bits >> 40) & 0xffffff) + 0.5f) * (2.0f / 16777216.0f) - 1.0f;  // (-1, 1), never 0
    store(data, i, u);
  }
}

template <class T>
__global__ void conv_kernel(ConvShape s, const T* x, const T* w, float* ref) {
  size_t total = size_t(s.n) * s.k * s.p * s.q;
  int cg = s.c / s.groups, kg = s.k / s.groups;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    int n, k, p, q;
    if (s.nhwc) {  // index order n, p, q, k
      k = int(i % s.k); size_t t = i / s.k; q = int(t % s.q); t /= s.q; p = int(t % s.p); n = int(t / s.p);
    } else {  // n, k, p, q
      q = int(i % s.q); size_t t = i / s.q; p = int(t % s.p); t /= s.p; k = int(t % s.k); n = int(t / s.k);
    }
    int g = k / kg;
    float acc = 0.f;
    for (int r = 0; r < s.r; ++r) {
      int h = p * s.stride_h - s.pad_h + r * s.dil_h;
      if (h < 0 || h >= s.h) continue;
      for (int t = 0; t < s.s; ++t) {
        int wi = q * s.stride_w - s.pad_w + t * s.dil_w;
        if (wi < 0 || wi >= s.w) continue;
        for (int c = 0; c < cg; ++c) {
          int cin = g * cg + c;
          size_t xi = s.nhwc ? ((size_t(n) * s.h + h) * s.w + wi) * s.c + cin
                             : ((size_t(n) * s.c + cin) * s.h + h) * s.w + wi;
          size_t fi = s.nhwc ? ((size_t(k) * s.r + r) * s.s + t) * cg + c
                             : ((size_t(k) * cg + c) * s.r + r) * s.s + t;
          acc += load(x, xi) * load(w, fi);
        }
      }
    }
    ref[i] = acc;
  }
}

__device__ inline float activate(float v, int act, float coef) {
  switch (act) {
    case CUDNN_ACTIVATION_SIGMOID: return 1.f / (1.f + expf(-v));
    case CUDNN_ACTIVATION_RELU: return v > 0.f ? v : 0.f;
    case CUDNN_ACTIVATION_TANH: return tanhf(v);
    case CUDNN_ACTIVATION_CLIPPED_RELU: return fminf(v > 0.f ? v : 0.f, coef);
    case CUDNN_ACTIVATION_ELU: return v > 0.f ? v : coef * (expf(v) - 1.f);
    case CUDNN_ACTIVATION_SWISH: return v / (1.f + expf(-coef * v));
    default: return v;  // CUDNN_ACTIVATION_IDENTITY
  }
}

template <class T>
__global__ void bias_act_kernel(ConvShape s, float* ref, const T* z, const T* bias, float alpha1, float alpha2,
                                int act, float coef) {
  size_t total = size_t(s.n) * s.k * s.p * s.q;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    int k = s.nhwc ? int(i % s.k) : int((i / (size_t(s.p) * s.q)) % s.k);
    float v = alpha1 * ref[i] + (bias ? load(bias, k) : 0.f);
    if (z && alpha2 != 0.f) v += alpha2 * load(z, i);
    ref[i] = activate(v, act, coef);
  }
}

__global__ void activation_kernel(float* data, size_t count, int act, float coef) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    data[i] = activate(data[i], act, coef);
}

template <class T>
__global__ void to_float_kernel(const T* src, float* dst, size_t count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = load(src, i);
}

// out[0] = max |a - ref| bits, out[1] = max |ref| bits (non-negative floats order like unsigned ints).
template <class T>
__global__ void compare_kernel(const T* a, const float* ref, size_t count, unsigned* out) {
  float diff = 0.f, mag = 0.f;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    float v = load(a, i), r = ref[i];
    float d = fabsf(v - r);
    diff = isfinite(v) ? fmaxf(diff, d) : INFINITY;
    mag = fmaxf(mag, fabsf(r));
  }
  __shared__ float sd[kThreads], sm[kThreads];
  sd[threadIdx.x] = diff;
  sm[threadIdx.x] = mag;
  __syncthreads();
  for (int off = blockDim.x / 2; off > 0; off /= 2) {
    if (threadIdx.x < off) {
      sd[threadIdx.x] = fmaxf(sd[threadIdx.x], sd[threadIdx.x + off]);
      sm[threadIdx.x] = fmaxf(sm[threadIdx.x], sm[threadIdx.x + off]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    atomicMax(&out[0], __float_as_uint(sd[0]));
    atomicMax(&out[1], __float_as_uint(sm[0]));
  }
}

constexpr int kGemmTile = 16;

// The GEMM reference (see gemm_reference): shared-memory tiles, grid-stride over row tiles and batches.
template <class T>
__global__ void gemm_reference_kernel(GemmDims d, float alpha, float beta, const T* a, const T* b, const T* c,
                                      const T* bias, int relu, float* ref) {
  __shared__ float ta[kGemmTile][kGemmTile + 1], tb[kGemmTile][kGemmTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int j = blockIdx.x * kGemmTile + tx;
  const int row_tiles = (d.m + kGemmTile - 1) / kGemmTile;
  for (int bt = blockIdx.z; bt < d.batch; bt += gridDim.z) {
    const T* A = a + bt * d.stride_a;
    const T* B = b + bt * d.stride_b;
    for (int rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {
      const int i = rt * kGemmTile + ty;
      float acc = 0.f;
      for (int k0 = 0; k0 < d.k; k0 += kGemmTile) {
        const int ka = k0 + tx, kb = k0 + ty;
        ta[ty][tx] = i < d.m && ka < d.k ? load(A, d.trans_a ? size_t(ka) * d.m + i : size_t(i) * d.k + ka) : 0.f;
        tb[ty][tx] = kb < d.k && j < d.n ? load(B, d.trans_b ? size_t(j) * d.k + kb : size_t(kb) * d.n + j) : 0.f;
        __syncthreads();
        for (int kk = 0; kk < kGemmTile; ++kk) acc += ta[ty][kk] * tb[kk][tx];
        __syncthreads();
      }
      if (i < d.m && j < d.n) {
        float v = alpha * acc;
        if (c) v += beta * load(c, size_t(d.c_rows == 1 ? 0 : i) * d.c_cols + (d.c_cols == 1 ? 0 : j));
        if (bias) v += load(bias, j);
        if (relu) v = fmaxf(v, 0.f);
        ref[(size_t(bt) * d.m + i) * d.n + j] = v;
      }
    }
  }
}

template <class T>
__global__ void gemm_broadcast_kernel(GemmDims d, const T* c, T* out) {
  const size_t total = size_t(d.batch) * d.m * d.n;
  for (size_t x = blockIdx.x * size_t(blockDim.x) + threadIdx.x; x < total; x += size_t(gridDim.x) * blockDim.x) {
    const size_t ij = x % (size_t(d.m) * d.n);
    const int i = int(ij / d.n), j = int(ij % d.n);
    out[x] = c[size_t(d.c_rows == 1 ? 0 : i) * d.c_cols + (d.c_cols == 1 ? 0 : j)];
  }
}

// One thread per query row: an online softmax over the keys, the output row in registers.
template <class T>
__global__ void attention_kernel(AttentionDims d, float scale, bool causal, const int* kv_len, const T* q,
                                 const T* k, const T* v, float* ref) {
  const size_t rows = size_t(d.b) * d.h * d.s_q;
  for (size_t r = blockIdx.x * size_t(blockDim.x) + threadIdx.x; r < rows; r += size_t(gridDim.x) * blockDim.x) {
    const int i = int(r % d.s_q);
    const size_t bh = r / d.s_q;
    const int b = int(bh / d.h);
    int keys = kv_len ? kv_len[b] : d.s_kv;
    if (causal && i + 1 < keys) keys = i + 1;
    float acc[kMaxHeadDim];
    for (int c = 0; c < d.d_v; ++c) acc[c] = 0.f;
    float m = -INFINITY, sum = 0.f;
    const T* qi = q + r * d.d_qk;
    for (int j = 0; j < keys; ++j) {
      const T* kj = k + (bh * d.s_kv + j) * d.d_qk;
      float s = 0.f;
      for (int c = 0; c < d.d_qk; ++c) s += load(qi, c) * load(kj, c);
      s *= scale;
      const float m2 = fmaxf(m, s), old = expf(m - m2), p = expf(s - m2);
      sum = sum * old + p;
      const T* vj = v + (bh * d.s_kv + j) * d.d_v;
      for (int c = 0; c < d.d_v; ++c) acc[c] = acc[c] * old + p * load(vj, c);
      m = m2;
    }
    for (int c = 0; c < d.d_v; ++c) ref[r * d.d_v + c] = keys > 0 ? acc[c] / sum : 0.f;
  }
}

// One thread per row: two passes (mean, variance) in fp32.
template <class T>
__global__ void norm_kernel(int rows, int cols, bool rms, float eps, const T* x, const float* scale,
                            const float* bias, float* ref) {
  for (size_t r = blockIdx.x * size_t(blockDim.x) + threadIdx.x; r < size_t(rows);
       r += size_t(gridDim.x) * blockDim.x) {
    const T* xr = x + r * cols;
    float mean = 0.f;
    if (!rms) {
      for (int c = 0; c < cols; ++c) mean += load(xr, c);
      mean /= float(cols);
    }
    float var = 0.f;
    for (int c = 0; c < cols; ++c) {
      const float t = load(xr, c) - mean;
      var += t * t;
    }
    const float inv = rsqrtf(var / float(cols) + eps);
    for (int c = 0; c < cols; ++c)
      ref[r * cols + c] = (load(xr, c) - mean) * inv * scale[c] + (bias ? bias[c] : 0.f);
  }
}

__device__ float pw_operand(const PwProgram& p, const float* reg, int operand, size_t col) {
  if (operand >= 0) return reg[operand];
  const int k = -2 - operand;
  return p.const_data[k][p.const_cols[k] == 1 ? 0 : col];
}

// One thread per element: the program's steps in order, in fp32 registers.
template <class T>
__global__ void pointwise_kernel(PwProgram p, size_t count, int cols, const T* x, float* ref) {
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < count; e += size_t(gridDim.x) * blockDim.x) {
    float reg[kMaxPwSteps + 1];
    reg[0] = load(x, e);
    const size_t col = e % size_t(cols);
    for (int i = 0; i < p.steps; ++i) {
      const float a = pw_operand(p, reg, p.a[i], col);
      const float b = p.b[i] == kNoOperand ? 0.f : pw_operand(p, reg, p.b[i], col);
      float r = 0.f;
      switch (PwOp(p.op[i])) {
        case PwOp::Add: r = a + b; break;
        case PwOp::Sub: r = a - b; break;
        case PwOp::Mul: r = a * b; break;
        case PwOp::Div: r = a / b; break;
        case PwOp::Pow: r = powf(a, b); break;
        case PwOp::Erf: r = erff(a); break;
        case PwOp::Tanh: r = tanhf(a); break;
        case PwOp::Sigmoid: r = 1.f / (1.f + expf(-a)); break;
        case PwOp::Relu: r = fmaxf(a, 0.f); break;
        case PwOp::Sqrt: r = sqrtf(a); break;
        case PwOp::Exp: r = expf(a); break;
        case PwOp::Neg: r = -a; break;
        case PwOp::Reciprocal: r = 1.f / a; break;
      }
      reg[i + 1] = r;
    }
    ref[e] = reg[p.steps];
  }
}

void check_launch() { BZ_CHECK_CUDA(cudaGetLastError()); }

__global__ void pooling_kernel(PoolDims d, Packed4 in, Packed4 out, int mode, const float* x, float* y) {
  const size_t total = count_of(out.d);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    int n, c, p, q;
    out.coords(i, n, c, p, q);
    float best = -INFINITY, sum = 0.f;
    int valid = 0, padded = 0;
    for (int r = 0; r < d.window_h; ++r) {
      const int h = p * d.stride_h - d.pad_top + r;
      if (h >= -d.pad_top && h < d.h + d.pad_bottom) {
        for (int s = 0; s < d.window_w; ++s) {
          const int w = q * d.stride_w - d.pad_left + s;
          padded += w >= -d.pad_left && w < d.w + d.pad_right ? 1 : 0;
        }
      }
      if (h < 0 || h >= d.h) continue;
      for (int s = 0; s < d.window_w; ++s) {
        const int w = q * d.stride_w - d.pad_left + s;
        if (w < 0 || w >= d.w) continue;
        const float v = x[in.offset(n, c, h, w)];
        best = fmaxf(best, v);
        sum += v;
        ++valid;
      }
    }
    y[i] = mode == CUDNN_POOLING_MAX || mode == CUDNN_POOLING_MAX_DETERMINISTIC ? best
           : mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING              ? sum / float(padded > 0 ? padded : 1)
                                                                              : sum / float(valid > 0 ? valid : 1);
  }
}

__global__ void op_tensor_kernel(Packed4 ta, Packed4 tb, int op, const float* a, const float* b, float* y) {
  const size_t total = count_of(ta.d);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    int n, c, h, w;
    ta.coords(i, n, c, h, w);
    const float u = a[i], v = b[tb.offset(n, c, h, w)];
    y[i] = op == CUDNN_OP_TENSOR_MUL ? u * v : u + v;
  }
}

__global__ void lrn_kernel(Packed4 t, int size, float alpha, float beta, float bias, const float* x, float* y) {
  const size_t total = count_of(t.d);
  const int behind = (size - 1) / 2, ahead = size - 1 - behind;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    int n, c, h, w;
    t.coords(i, n, c, h, w);
    float sum = 0.f;
    for (int k = max(0, c - behind); k <= min(t.d.c - 1, c + ahead); ++k) {
      const float v = x[t.offset(n, k, h, w)];
      sum += v * v;
    }
    y[i] = x[i] / powf(bias + alpha / float(size) * sum, beta);
  }
}

__device__ float chain_op(ChainOp op, float alpha, float beta, float a, float b, float c) {
  switch (op) {
    case ChainOp::Add: return a + b;
    case ChainOp::Sub: return a - b;
    case ChainOp::Mul: return a * b;
    case ChainOp::Div: return a / b;
    case ChainOp::Relu: return a > 0.f ? a : 0.f;
    case ChainOp::Sigmoid: return 1.f / (1.f + expf(-a));
    case ChainOp::Tanh: return tanhf(a);
    case ChainOp::Clip: return fminf(fmaxf(a, alpha), beta);
    case ChainOp::Affine: return a * b + c;
    case ChainOp::LeakyRelu: return a < 0.f ? alpha * a : a;
    case ChainOp::Elu: return a < 0.f ? alpha * (expf(a) - 1.f) : a;
    case ChainOp::HardSigmoid: return fmaxf(0.f, fminf(1.f, alpha * a + beta));
    case ChainOp::HardSwish: return a * fmaxf(0.f, fminf(1.f, a / 6.f + 0.5f));
  }
  return NAN;
}

__global__ void chain_op_kernel(ChainOp op, float alpha, float beta, Packed4 t, Packed4 ta, const float* a,
                                Packed4 tb, const float* b, Packed4 tc, const float* c, float* y) {
  const size_t total = count_of(t.d);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    int n, ch, h, w;
    t.coords(i, n, ch, h, w);
    y[i] = chain_op(op, alpha, beta, a[ta.offset(n, ch, h, w)], b ? b[tb.offset(n, ch, h, w)] : 0.f,
                    c ? c[tc.offset(n, ch, h, w)] : 0.f);
  }
}

__global__ void positive_kernel(float* v, size_t count) {  // var in [0.25, 1.25)
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    v[i] = 0.25f + fabsf(v[i]);
}

__global__ void batchnorm_kernel(Packed4 t, const float* x, const float* scale, const float* bias, const float* mean,
                                 const float* var, double epsilon, float* y) {
  const size_t total = count_of(t.d);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    int n, c, h, w;
    t.coords(i, n, c, h, w);
    y[i] = float(double(scale[c]) * (double(x[i]) - mean[c]) / sqrt(double(var[c]) + epsilon) + bias[c]);
  }
}

// One block per (outer, inner) row of `cols` values `inner` apart.
__global__ void softmax_kernel(int cols, int inner, const float* x, float* y) {
  __shared__ float part[kThreads];
  const size_t outer = blockIdx.x / unsigned(inner), in = blockIdx.x % unsigned(inner);
  const float* row = x + outer * cols * inner + in;  // value c at row[c * inner]
  float* out_base = y + outer * cols * inner + in;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[size_t(c) * inner]);
  part[threadIdx.x] = m;
  __syncthreads();
  for (int off = blockDim.x / 2; off > 0; off /= 2) {
    if (threadIdx.x < off) part[threadIdx.x] = fmaxf(part[threadIdx.x], part[threadIdx.x + off]);
    __syncthreads();
  }
  m = part[0];
  __syncthreads();
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += expf(row[size_t(c) * inner] - m);
  part[threadIdx.x] = s;
  __syncthreads();
  for (int off = blockDim.x / 2; off > 0; off /= 2) {
    if (threadIdx.x < off) part[threadIdx.x] += part[threadIdx.x + off];
    __syncthreads();
  }
  s = part[0];
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out_base[size_t(c) * inner] = expf(row[size_t(c) * inner] - m) / s;
}

}  // namespace

void fill_uniform(void* data, size_t count, DType dtype, uint64_t seed, cudaStream_t stream) {
  dispatch(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    fill_kernel<T><<<blocks_for(count), kThreads, 0, stream>>>(static_cast<T*>(data), count, seed);
  });
  check_launch();
}

void conv_reference(const ConvShape& shape, const void* x, const void* w, DType dtype, float* ref,
                    cudaStream_t stream) {
  size_t total = size_t(shape.n) * shape.k * shape.p * shape.q;
  dispatch(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    conv_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(shape, static_cast<const T*>(x),
                                                                static_cast<const T*>(w), ref);
  });
  check_launch();
}

void bias_act_reference(const ConvShape& shape, float* ref, DType dtype, const void* z, const void* bias,
                        float alpha1, float alpha2, int act, double coef, cudaStream_t stream) {
  size_t total = size_t(shape.n) * shape.k * shape.p * shape.q;
  dispatch(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    bias_act_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(
        shape, ref, static_cast<const T*>(z), static_cast<const T*>(bias), alpha1, alpha2, act, float(coef));
  });
  check_launch();
}

void gemm_reference(const GemmDims& d, float alpha, float beta, const void* a, const void* b, const void* c,
                    const void* bias, bool relu, DType dtype, float* ref, cudaStream_t stream) {
  const dim3 block(kGemmTile, kGemmTile);
  const int row_tiles = (d.m + kGemmTile - 1) / kGemmTile;
  const dim3 grid(unsigned((d.n + kGemmTile - 1) / kGemmTile), unsigned(row_tiles < 65535 ? row_tiles : 65535),
                  unsigned(d.batch < 65535 ? d.batch : 65535));
  dispatch(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    gemm_reference_kernel<T><<<grid, block, 0, stream>>>(d, alpha, beta, static_cast<const T*>(a),
                                                         static_cast<const T*>(b), static_cast<const T*>(c),
                                                         static_cast<const T*>(bias), relu ? 1 : 0, ref);
  });
  check_launch();
}

void gemm_broadcast(const GemmDims& d, const void* c, DType dtype, void* out, cudaStream_t stream) {
  const size_t total = size_t(d.batch) * d.m * d.n;
  dispatch(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    gemm_broadcast_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(d, static_cast<const T*>(c),
                                                                         static_cast<T*>(out));
  });
  check_launch();
}

void attention_reference(const AttentionDims& d, float scale, bool causal, const int* kv_len, const void* q,
                         const void* k, const void* v, DType dtype, float* ref, cudaStream_t stream) {
  if (d.d_v > kMaxHeadDim) throw Error(Status::NotSupported, "head dimension beyond the reference's 256");
  const size_t rows = size_t(d.b) * d.h * d.s_q;
  dispatch(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    attention_kernel<T><<<blocks_for(rows), 128, 0, stream>>>(d, scale, causal, kv_len, static_cast<const T*>(q),
                                                              static_cast<const T*>(k), static_cast<const T*>(v),
                                                              ref);
  });
  check_launch();
}

void norm_reference(int rows, int cols, bool rms, float eps, const void* x, const float* scale, const float* bias,
                    DType dtype, float* ref, cudaStream_t stream) {
  dispatch(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    norm_kernel<T><<<blocks_for(size_t(rows)), kThreads, 0, stream>>>(rows, cols, rms, eps, static_cast<const T*>(x),
                                                                      scale, bias, ref);
  });
  check_launch();
}

void pointwise_reference(const PwProgram& p, int rows, int cols, const void* x, DType dtype, float* ref,
                         cudaStream_t stream) {
  const size_t count = size_t(rows) * cols;
  dispatch(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    pointwise_kernel<T><<<blocks_for(count), kThreads, 0, stream>>>(p, count, cols, static_cast<const T*>(x), ref);
  });
  check_launch();
}

void activation_reference(float* data, size_t count, int act, double coef, cudaStream_t stream) {
  activation_kernel<<<blocks_for(count), kThreads, 0, stream>>>(data, count, act, float(coef));
  check_launch();
}

void to_float(const void* src, DType dtype, float* dst, size_t count, cudaStream_t stream) {
  dispatch(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    to_float_kernel<T><<<blocks_for(count), kThreads, 0, stream>>>(static_cast<const T*>(src), dst, count);
  });
  check_launch();
}

namespace {
thread_local float reference_max_abs = -1.f;
}  // namespace

float take_reference_max_abs() {
  const float m = reference_max_abs;
  reference_max_abs = -1.f;
  return m;
}

namespace {
// The two words a check folds its maxima into, on the device and in pinned host memory: allocated on a
// thread's first check and kept for the process's life. With an allocation per check (cudaMallocAsync,
// whose default pool hands the memory back to the driver at each synchronize) and a copy into pageable
// memory, the whole torchvision batch-1 campaign's checks took 23.4 GPU-s on one H200 and 36.3 on four;
// with these words 1.9 on one, two and four (docs/RESULTS.md §11, sessions 23 and 26).
struct CheckWords {
  unsigned* device = nullptr;
  unsigned* host = nullptr;
};

CheckWords& check_words() {
  thread_local CheckWords words;
  if (!words.device) {
    BZ_CHECK_CUDA(cudaMalloc(&words.device, 2 * sizeof(unsigned)));
    BZ_CHECK_CUDA(cudaMallocHost(&words.host, 2 * sizeof(unsigned)));
  }
  return words;
}
}  // namespace

double max_rel_error(const void* out, DType dtype, const std::vector<CheckedSpan>& spans, cudaStream_t stream) {
  const CheckWords& words = check_words();
  unsigned* d = words.device;
  BZ_CHECK_CUDA(cudaMemsetAsync(d, 0, 2 * sizeof(unsigned), stream));
  dispatch(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    for (const CheckedSpan& span : spans)  // each kernel folds its maxima into the same two words
      if (span.count)
        compare_kernel<T><<<blocks_for(span.count), kThreads, 0, stream>>>(static_cast<const T*>(out) + span.offset,
                                                                           span.ref, span.count, d);
  });
  check_launch();
  BZ_CHECK_CUDA(cudaMemcpyAsync(words.host, d, 2 * sizeof(unsigned), cudaMemcpyDeviceToHost, stream));
  BZ_CHECK_CUDA(cudaStreamSynchronize(stream));
  float diff, mag;
  std::memcpy(&diff, &words.host[0], sizeof diff);
  std::memcpy(&mag, &words.host[1], sizeof mag);
  reference_max_abs = std::max(reference_max_abs, mag);
  if (!std::isfinite(diff)) return INFINITY;
  return mag > 0.f ? double(diff) / mag : (diff > 0.f ? INFINITY : 0.0);
}

void pooling_reference(const PoolDims& d, bool nhwc, int mode, const float* x, float* y, cudaStream_t stream) {
  const Dims4 x_dims{d.n, d.c, d.h, d.w}, y_dims{d.n, d.c, d.p, d.q};
  const size_t count = count_of(y_dims);
  pooling_kernel<<<blocks_for(count), kThreads, 0, stream>>>(d, Packed4{x_dims, nhwc}, Packed4{y_dims, nhwc}, mode, x,
                                                             y);
}

void softmax_reference(int rows, int cols, int inner, const float* x, float* y, cudaStream_t stream) {
  softmax_kernel<<<unsigned(rows * inner), kThreads, 0, stream>>>(cols, inner, x, y);
}

void op_tensor_reference(const Packed4& a_dims, const Packed4& b_dims, int op, const float* a, const float* b,
                         float* y, cudaStream_t stream) {
  op_tensor_kernel<<<blocks_for(count_of(a_dims.d)), kThreads, 0, stream>>>(a_dims, b_dims, op, a, b, y);
}

void lrn_reference(const Packed4& dims, int size, float alpha, float beta, float bias, const float* x, float* y,
                   cudaStream_t stream) {
  lrn_kernel<<<blocks_for(count_of(dims.d)), kThreads, 0, stream>>>(dims, size, alpha, beta, bias, x, y);
}

void chain_op_reference(ChainOp op, float alpha, float beta, const Packed4& dims, const Packed4& a_dims, const float* a,
                        const Packed4& b_dims, const float* b, const Packed4& c_dims, const float* c, float* y,
                        cudaStream_t stream) {
  chain_op_kernel<<<blocks_for(count_of(dims.d)), kThreads, 0, stream>>>(op, alpha, beta, dims, a_dims, a, b_dims, b,
                                                                         c_dims, c, y);
  check_launch();
}

void positive_variance(float* var, size_t count, cudaStream_t stream) {
  positive_kernel<<<blocks_for(count), kThreads, 0, stream>>>(var, count);
}

void batchnorm_reference(const Packed4& dims, const float* x, const float* scale, const float* bias, const float* mean,
                         const float* var, double epsilon, float* y, cudaStream_t stream) {
  batchnorm_kernel<<<blocks_for(count_of(dims.d)), kThreads, 0, stream>>>(dims, x, scale, bias, mean, var, epsilon, y);
}

}  // namespace bz
