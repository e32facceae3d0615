// benanza harness: `benanza replay` (docs/REPLAY.md). A whole model's best equivalent execution run
// as one program on real device buffers: each step makes exactly the call its micro-benchmark timed
// (the same descriptors: ConvDescriptors, declare_conv_graph, GemmDims, the op descriptors), reading
// and writing the buffers of the tensors it passes; the whole sequence is captured as one CUDA graph
// and timed by Context::measure like every benchmark (warm L2, then cold L2 as a second figure); then
// every step's output is checked against the fp32 reference of the very inputs it read (the
// micro-benchmarks' reference kernels), so a replay that computes garbage cannot look fast.
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "benanza/bench.h"
#include "benanza/conv_reference.h"
#include "benanza/cublas_util.h"
#include "benanza/cublaslt.h"
#include "benanza/cudnn_conv.h"
#include "benanza/cudnn_graph.h"
#include "benanza/cudnn_ops.h"
#include "benanza/graph_conv.h"
#include "benanza/replay_kernels.h"

namespace bz {

// ------------------------------------------------------------------ buffers

// One device buffer per tensor the steps pass (a view shares its root's memory, from an element offset on:
// a contiguous window, a select of Q out of a packed QKV); the model's inputs random in [-1, 1).
class ReplayBuffers {
 public:
  struct Spec {
    long long elements;
    int alias;         // the buffer whose memory it shares, -1 for its own
    long long offset;  // an alias: the element of that buffer where it starts
    bool input;
    DType storage;
  };
  void add(const Spec& s) { specs_.push_back(s); }
  size_t size() const { return specs_.size(); }

  void allocate(Context& ctx) {
    owned_.resize(specs_.size());
    ptr_.assign(specs_.size(), nullptr);
    for (size_t i = 0; i < specs_.size(); ++i) {
      const Spec& s = specs_[i];
      if (s.elements < 1) throw Error(Status::Failed, "buffer " + std::to_string(i) + " holds no elements");
      if (s.alias < 0) {
        owned_[i] = Buffer(size_t(s.elements) * dtype_size(s.storage));
        ptr_[i] = owned_[i].get();
        if (s.input) ctx.fill(owned_[i], size_t(s.elements), s.storage, 1000003ull + i);
        continue;
      }
      if (size_t(s.alias) >= i || specs_[size_t(s.alias)].alias >= 0 || s.offset < 0 ||
          specs_[size_t(s.alias)].elements - s.offset < s.elements)
        throw Error(Status::Failed, "buffer " + std::to_string(i) + " is a view of no earlier buffer that holds it");
      ptr_[i] = static_cast<char*>(ptr_[size_t(s.alias)]) + size_t(s.offset) * dtype_size(s.storage);
    }
  }
  void* at(int id) const {
    if (id < 0 || size_t(id) >= ptr_.size()) throw Error(Status::Failed, "no buffer " + std::to_string(id));
    return ptr_[size_t(id)];
  }
  size_t elements(int id) const { return size_t(specs_.at(size_t(id)).elements); }

 private:
  std::vector<Spec> specs_;
  std::vector<Buffer> owned_;
  std::vector<void*> ptr_;
};

// What a step reads and writes: buffer pointers (reads in the order its kind takes them: x [, z]).
struct ReplayIo {
  std::vector<void*> reads;
  std::vector<size_t> read_elements;  // each read buffer's elements (a view's copy checks its window fits)
  void* write = nullptr;
  size_t write_elements = 0;
};

// ------------------------------------------------------------------ steps

class ReplayStep {
 public:
  virtual ~ReplayStep() = default;
  // Enqueue the step's call(s) on ctx.stream (captured into the replay's graph).
  virtual void enqueue(Context& ctx) = 0;
  // max |out - ref| / max |ref| of its output against the fp32 reference of the inputs it read (+inf or
  // NaN: garbage, a failure).
  virtual double check(Context& ctx) = 0;
  // Whether another step's check covers this one (a bias add in place: its convolution's).
  virtual bool checked_elsewhere() const { return false; }
  // A bias added in place after this step by the next one (cudnnAddTensor): its check includes it.
  virtual bool absorb_bias(const void* /*bias*/) { return false; }
  double tolerance = 0;
  long long workspace_bytes = 0;
};

// The weights' scale: w in [-scale, scale), scale sqrt(gain / fan_in). The driver passes the gain
// (--weight-gain; benanza.workflows.replay.WEIGHT_GAIN says why its value): 3 gives Var(w) = 1 / fan_in, which
// keeps a random model's activations in fp16's range through residual sums (He's 6 doubles the second moment
// at every layer that is not followed by a ReLU: ShuffleNet's last convs then overflow fp16).
inline double& weight_gain() {
  static double gain = 3.0;
  return gain;
}

inline void fill_weights(Context& ctx, const Buffer& w, size_t count, DType storage, cudnnDataType_t type,
                         uint64_t seed, long long fan_in) {
  ctx.fill(w, count, storage, seed);
  TensorDesc d;
  BZ_CHECK_CUDNN(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, type, 1, 1, 1, int(count)));
  const float scale = float(std::sqrt(weight_gain() / double(std::max(1LL, fan_in))));
  BZ_CHECK_CUDNN(cudnnScaleTensor(ctx.cudnn(), d, w.get(), &scale));
}

// max |out - ref| / max |ref| of `count` values of `out` against `ref`.
inline double whole_error(Context& ctx, const void* out, DType storage, const Buffer& ref, size_t count) {
  return max_rel_error(out, storage, whole_output(ref.as<float>(), count), ctx.stream);
}

// A storage-type tensor as fp32 (the reference kernels read fp32).
inline Buffer as_float(Context& ctx, const void* x, DType storage, size_t count) {
  Buffer f(count * sizeof(float));
  to_float(x, storage, f.as<float>(), count, ctx.stream);
  return f;
}

// cudnnConvolutionForward, and cudnnConvolutionBiasActivationForward when `fused`.
class ConvStep : public ReplayStep {
 public:
  struct Spec {
    ConvDims dims;
    const CudnnPrecision* p;
    cudnnConvolutionFwdAlgo_t algo;
    bool fused = false;
    cudnnActivationMode_t act = CUDNN_ACTIVATION_IDENTITY;
    double coef = 0;
    float alpha2 = 0;
  };

  ConvStep(Context& ctx, const Spec& s, const ReplayIo& io, uint64_t seed) : s_(s), desc_(s.dims, *s.p), io_(io) {
    const DType t = s.p->storage;
    const size_t e = dtype_size(t);
    if (io.write_elements != desc_.y_count) throw Error(Status::Failed, "output buffer of the wrong size");
    w_ = Buffer(desc_.w_count * e);
    fill_weights(ctx, w_, desc_.w_count, t, s.p->data, seed * 16 + 2,
                 (long long)(s.dims.c / s.dims.groups) * s.dims.r * s.dims.s);
    const size_t ws = desc_.workspace_size(ctx, s.algo);
    work_ = Buffer(ws);
    workspace_bytes = (long long)ws;
    if (s.fused) {
      BZ_CHECK_CUDNN(cudnnSetTensor4dDescriptor(bias_desc_, s.p->format, s.p->data, 1, s.dims.k, 1, 1));
      BZ_CHECK_CUDNN(cudnnSetActivationDescriptor(act_, s.act, CUDNN_NOT_PROPAGATE_NAN, s.coef));
      bias_ = Buffer(size_t(s.dims.k) * e);
      ctx.fill(bias_, size_t(s.dims.k), t, seed * 16 + 3);
      if (s.alpha2 == 0.f) {  // as its benchmark: a random z, never aliased to y (alpha2 0 reads it too)
        own_z_ = Buffer(desc_.y_count * e);
        ctx.fill(own_z_, desc_.y_count, t, seed * 16 + 4);
      } else if (io.reads.size() < 2) {
        throw Error(Status::Failed, "a residual fusion without its residual input");
      }
    }
  }

  void enqueue(Context& ctx) override {
    const float one = 1.f, zero = 0.f;
    if (!s_.fused) {
      BZ_CHECK_CUDNN(cudnnConvolutionForward(ctx.cudnn(), &one, desc_.x_desc, io_.reads[0], desc_.w_desc, w_.get(),
                                             desc_.conv, s_.algo, work_.get(), work_.bytes(), &zero, desc_.y_desc,
                                             io_.write));
      return;
    }
    BZ_CHECK_CUDNN(cudnnConvolutionBiasActivationForward(
        ctx.cudnn(), &one, desc_.x_desc, io_.reads[0], desc_.w_desc, w_.get(), desc_.conv, s_.algo, work_.get(),
        work_.bytes(), &s_.alpha2, desc_.y_desc, z(), bias_desc_, bias_.get(), act_, desc_.y_desc, io_.write));
  }

  double check(Context& ctx) override {
    ConvReference ref(desc_.shape);
    const DType t = s_.p->storage;
    ref.conv(io_.reads[0], w_.get(), t, ctx.stream);
    if (s_.fused)
      ref.bias_act(t, s_.alpha2 != 0.f ? z() : nullptr, bias_.get(), 1.f, s_.alpha2, int(s_.act), s_.coef, ctx.stream);
    else if (added_bias_)
      ref.bias_act(t, nullptr, added_bias_, 1.f, 0.f, int(CUDNN_ACTIVATION_IDENTITY), 0.0, ctx.stream);
    return max_rel_error(io_.write, t, ref.spans(), ctx.stream);
  }

  bool absorb_bias(const void* bias) override {
    if (s_.fused) return false;
    added_bias_ = bias;
    return true;
  }

 private:
  const void* z() const { return s_.alpha2 != 0.f ? io_.reads[1] : own_z_.get(); }

  Spec s_;
  ConvDescriptors desc_;
  ReplayIo io_;
  Buffer w_, work_, bias_, own_z_;
  TensorDesc bias_desc_;
  ActivationDesc act_;
  const void* added_bias_ = nullptr;
};

// An operation graph built for one named engine config, as a graph benchmark builds it for a job that
// names its config (validate, build_operation_graph, the config as the graph's plan, its workspace).
class NamedGraphPlan {
 public:
  template <class Declare>
  NamedGraphPlan(Context& ctx, const std::vector<NamedEngineConfig>& engines, Declare&& declare) {
    if (engines.size() != 1) throw Error(Status::Failed, "a graph step names exactly one engine config");
    declare(g_);
    check_fe(g_.validate(), Status::NotSupported, "validate");
    check_fe(g_.build_operation_graph(ctx.cudnn()), Status::NotSupported, "build_operation_graph");
    EngineList list = named_engine_configs(g_, 0, engines);
    if (list.configs.size() != 1) throw Error(Status::Failed, "the named engine config did not come back");
    const EngineConfig& c = list.configs[0];
    if (c.error) throw *c.error;
    index_ = c.index;
    check_fe(g_.build_plan_at_index(index_), Status::NotSupported, "build_plan_at_index");
    int64_t ws = 0;
    check_fe(g_.get_workspace_size_plan_at_index(index_, ws), Status::Failed, "get_workspace_size_plan_at_index");
    work_ = Buffer(size_t(ws));
  }
  void execute(Context& ctx, std::unordered_map<int64_t, void*>& pack) {
    check_fe(g_.execute_plan_at_index(ctx.cudnn(), pack, work_.get(), index_), Status::Failed,
             "execute_plan_at_index");
  }
  long long workspace_bytes() const { return (long long)work_.bytes(); }

 private:
  FeGraph g_;
  int64_t index_ = 0;
  Buffer work_;
};

// cudnn-frontend conv_fprop [-> bias] [-> z] [-> activation] with exactly one named engine config.
class GraphConvStep : public ReplayStep {
 public:
  struct Spec {
    GraphConvSpec graph;
    const CudnnPrecision* p;
    cudnnActivationMode_t act;  // the reference's activation
    double coef;
    std::vector<NamedEngineConfig> engines;  // the one config the analysis chose (job 0)
  };

  GraphConvStep(Context& ctx, const Spec& s, const ReplayIo& io, uint64_t seed)
      : s_(s), io_(io) {
    const ConvDims& d = s.graph.dims;
    const DType t = s.p->storage;
    const size_t e = dtype_size(t);
    if (d.groups < 1 || d.c % d.groups || d.k % d.groups) throw Error(Status::Failed, "inconsistent groups");
    shape_ = ConvShape{d.n, d.c, d.h, d.w, d.k, d.r, d.s, d.pad_top, d.pad_left, d.stride_h, d.stride_w,
                       d.dil_h, d.dil_w, d.groups, d.p, d.q, s.p->format == CUDNN_TENSOR_NHWC};
    const size_t w_count = size_t(d.k) * (d.c / d.groups) * d.r * d.s;
    if (io.write_elements != size_t(d.n) * d.k * d.p * d.q) throw Error(Status::Failed, "output buffer of the wrong size");
    w_ = Buffer(w_count * e);
    fill_weights(ctx, w_, w_count, t, s.p->data, seed * 16 + 2, (long long)(d.c / d.groups) * d.r * d.s);
    if (s.graph.bias) {
      bias_ = Buffer(size_t(d.k) * e);
      ctx.fill(bias_, size_t(d.k), t, seed * 16 + 3);
    }
    if (s.graph.alpha2 != 0.f && io.reads.size() < 2) throw Error(Status::Failed, "a residual fusion without its z");
    plan_.emplace(ctx, s.engines, [&](FeGraph& g) { declare_conv_graph(g, s.graph, *s.p); });
    workspace_bytes = plan_->workspace_bytes();
    pack_ = {{kConvX, io.reads[0]}, {kConvW, w_.get()}, {kConvY, io.write}};
    if (s.graph.bias) pack_[kConvBias] = bias_.get();
    if (s.graph.alpha2 != 0.f) pack_[kConvZ] = io.reads[1];
  }

  void enqueue(Context& ctx) override { plan_->execute(ctx, pack_); }

  double check(Context& ctx) override {
    ConvReference ref(shape_);
    const DType t = s_.p->storage;
    const GraphConvSpec& j = s_.graph;
    ref.conv(io_.reads[0], w_.get(), t, ctx.stream);
    const void* bias = j.bias ? bias_.get() : added_bias_;
    if (bias || j.alpha2 != 0.f || j.has_act)
      ref.bias_act(t, j.alpha2 != 0.f ? io_.reads[1] : nullptr, bias, 1.f, j.alpha2,
                   int(j.has_act ? s_.act : CUDNN_ACTIVATION_IDENTITY), s_.coef, ctx.stream);
    return max_rel_error(io_.write, t, ref.spans(), ctx.stream);
  }

  // A plain convolution's bias added after it in place (cudnnAddTensor): its check includes it.
  bool absorb_bias(const void* bias) override {
    const GraphConvSpec& j = s_.graph;
    if (j.bias || j.alpha2 != 0.f || j.has_act) return false;
    added_bias_ = bias;
    return true;
  }

 private:
  Spec s_;
  ReplayIo io_;
  ConvShape shape_{};  // the reference's (pads begin and end apart: the graph API takes asymmetric pads)
  std::optional<NamedGraphPlan> plan_;  // built once the weights are (as the conv benchmark orders it)
  Buffer w_, bias_;
  const void* added_bias_ = nullptr;
  std::unordered_map<int64_t, void*> pack_;
};

// A replayed GEMM's operands, as its benchmark made them: the model's A (the step's first read), its B (the
// weights, He-scaled, or an activation: the step's second read) and ONNX's C broadcast into the output's
// shape (copied into D before a GemmEx, read as C by cuBLASLt).
struct GemmOperands {
  size_t y_count = 0, c_count = 0;
  Buffer b, c_src, c;
  const void* b_data = nullptr;  // the model's B: `b`, or the step's second read

  GemmOperands(Context& ctx, const GemmDims& d, DType t, cudaDataType_t data, const ReplayIo& io, bool b_constant,
               uint64_t seed) {
    const size_t e = dtype_size(t);
    y_count = size_t(d.batch) * d.m * d.n;
    if (io.write_elements != y_count) throw Error(Status::Failed, "output buffer of the wrong size");
    if (io.reads.size() != (b_constant ? 1u : 2u)) throw Error(Status::Failed, "a GEMM reads A [and B]");
    const size_t b_count = size_t(d.stride_b ? d.batch : 1) * d.k * d.n;
    const cudnnDataType_t weights = data == CUDA_R_16F    ? CUDNN_DATA_HALF
                                    : data == CUDA_R_16BF ? CUDNN_DATA_BFLOAT16
                                                          : CUDNN_DATA_FLOAT;
    if (b_constant) {
      b = Buffer(b_count * e);
      fill_weights(ctx, b, b_count, t, weights, seed * 16 + 2, d.k);
    }
    b_data = b_constant ? b.get() : io.reads[1];
    c_count = size_t(d.c_rows) * d.c_cols;
    if (c_count) {
      c_src = Buffer(c_count * e);
      c = Buffer(y_count * e);
      ctx.fill(c_src, c_count, t, seed * 16 + 3);
      gemm_broadcast(d, c_src.get(), t, c.get(), ctx.stream);
    }
  }
};

// cublasGemmEx (strided batched for a batch) of an activation (the model's A) by constant weights or a
// second activation (its B); ONNX's beta * C broadcast into the output before the call, as its benchmark's checked call.
class GemmStep : public ReplayStep {
 public:
  struct Spec {
    GemmDims dims;
    const CublasPrecision* p;
    cublasOperation_t op_a, op_b;
    float alpha, beta;
    cublasGemmAlgo_t algo;
    bool b_constant;
  };

  GemmStep(Context& ctx, const Spec& s, const ReplayIo& io, uint64_t seed)
      : s_(s), io_(io), ops_(ctx, s.dims, s.p->storage, s.p->data, io, s.b_constant, seed) {}

  void enqueue(Context& ctx) override {
    const GemmDims& d = s_.dims;
    const CublasPrecision& p = *s_.p;
    if (ops_.c_count)
      BZ_CHECK_CUDA(cudaMemcpyAsync(io_.write, ops_.c.get(), ops_.c.bytes(), cudaMemcpyDeviceToDevice, ctx.stream));
    if (d.batch == 1)
      BZ_CHECK_CUBLAS(cublasGemmEx(ctx.cublas(), s_.op_a, s_.op_b, d.cm, d.cn, d.ck, &s_.alpha, ops_.b_data, p.data,
                                   d.lda, io_.reads[0], p.data, d.ldb, &s_.beta, io_.write, p.data, d.ldc, p.compute,
                                   s_.algo));
    else
      BZ_CHECK_CUBLAS(cublasGemmStridedBatchedEx(
          ctx.cublas(), s_.op_a, s_.op_b, d.cm, d.cn, d.ck, &s_.alpha, ops_.b_data, p.data, d.lda, d.stride_b,
          io_.reads[0], p.data, d.ldb, d.stride_a, &s_.beta, io_.write, p.data, d.ldc, (long long)d.cm * d.cn,
          d.batch, p.compute, s_.algo));
  }

  double check(Context& ctx) override {
    Buffer ref(ops_.y_count * sizeof(float));
    gemm_reference(s_.dims, s_.alpha, s_.beta, io_.reads[0], ops_.b_data, ops_.c_count ? ops_.c_src.get() : nullptr,
                   nullptr, false, s_.p->storage, ref.as<float>(), ctx.stream);
    return whole_error(ctx, io_.write, s_.p->storage, ref, ops_.y_count);
  }

 private:
  Spec s_;
  ReplayIo io_;
  GemmOperands ops_;
};

// A pool's output against pooling_reference of the very input it read: cuDNN's pooling (PoolingStep) and
// benanza's pooling kernel (PoolKernelStep) are checked alike.
inline double pool_error(Context& ctx, const ReplayIo& io, const PoolDims& d, bool nhwc, int mode, DType t) {
  Buffer x = as_float(ctx, io.reads[0], t, count_of(Dims4{d.n, d.c, d.h, d.w}));
  Buffer ref(io.write_elements * sizeof(float));
  pooling_reference(d, nhwc, mode, x.as<float>(), ref.as<float>(), ctx.stream);
  BZ_CHECK_CUDA(cudaGetLastError());
  return whole_error(ctx, io.write, t, ref, io.write_elements);
}

// cudnnPoolingForward.
class PoolingStep : public ReplayStep {
 public:
  struct Spec {
    PoolDims dims;
    const CudnnPrecision* p;
    cudnnPoolingMode_t mode;
    cudnnTensorFormat_t format;
  };

  PoolingStep(const Spec& s, const ReplayIo& io) : s_(s), io_(io) {
    const PoolDims& d = s.dims;
    if (d.pad_top != d.pad_bottom || d.pad_left != d.pad_right)
      throw Error(Status::NotSupported, "asymmetric pads are not supported by legacy cuDNN pooling");
    set_tensor(x_desc_, s.format, s.p->data, Dims4{d.n, d.c, d.h, d.w});
    set_tensor(y_desc_, s.format, s.p->data, Dims4{d.n, d.c, d.p, d.q});
    BZ_CHECK_CUDNN(cudnnSetPooling2dDescriptor(pool_, s.mode, CUDNN_NOT_PROPAGATE_NAN, d.window_h, d.window_w,
                                               d.pad_top, d.pad_left, d.stride_h, d.stride_w));
    if (io.write_elements != count_of(Dims4{d.n, d.c, d.p, d.q}))
      throw Error(Status::Failed, "output buffer of the wrong size");
  }

  void enqueue(Context& ctx) override {
    const float one = 1.f, zero = 0.f;
    BZ_CHECK_CUDNN(cudnnPoolingForward(ctx.cudnn(), pool_, &one, x_desc_, io_.reads[0], &zero, y_desc_, io_.write));
  }

  double check(Context& ctx) override {
    return pool_error(ctx, io_, s_.dims, s_.format == CUDNN_TENSOR_NHWC, int(s_.mode), s_.p->storage);
  }

 private:
  Spec s_;
  ReplayIo io_;
  TensorDesc x_desc_, y_desc_;
  PoolingDesc pool_;
};

// cudnnSoftmaxForward, ACCURATE.
class SoftmaxStep : public ReplayStep {
 public:
  struct Spec {
    Dims4 dims;
    const CudnnPrecision* p;
    cudnnSoftmaxMode_t mode;
    cudnnTensorFormat_t format;
  };

  SoftmaxStep(const Spec& s, const ReplayIo& io) : s_(s), io_(io) {
    set_tensor(desc_, s.format, s.p->data, s.dims);
    if (io.write_elements != count_of(s.dims)) throw Error(Status::Failed, "output buffer of the wrong size");
  }

  void enqueue(Context& ctx) override {
    const float one = 1.f, zero = 0.f;
    BZ_CHECK_CUDNN(cudnnSoftmaxForward(ctx.cudnn(), CUDNN_SOFTMAX_ACCURATE, s_.mode, &one, desc_, io_.reads[0], &zero,
                                       desc_, io_.write));
  }

  double check(Context& ctx) override {
    const Dims4& d = s_.dims;
    const DType t = s_.p->storage;
    Buffer x = as_float(ctx, io_.reads[0], t, count_of(d));
    Buffer ref(count_of(d) * sizeof(float));
    // rows x cols with h = w = 1: row-major in either layout; inner > 1 only in NCHW
    softmax_reference(d.n, d.c, d.h, x.as<float>(), ref.as<float>(), ctx.stream);
    BZ_CHECK_CUDA(cudaGetLastError());
    return whole_error(ctx, io_.write, t, ref, count_of(d));
  }

 private:
  Spec s_;
  ReplayIo io_;
  TensorDesc desc_;
};

// cudnnAddTensor: a conv's bias added in place on its output (checked with that convolution).
class AddTensorStep : public ReplayStep {
 public:
  struct Spec {
    Dims4 c, a;
    const CudnnPrecision* p;
    cudnnTensorFormat_t format;
  };

  AddTensorStep(Context& ctx, const Spec& s, const ReplayIo& io, uint64_t seed) : io_(io) {
    if (io.reads.empty() || io.reads[0] != io.write) throw Error(Status::Failed, "a bias add runs in place");
    set_tensor(c_desc_, s.format, s.p->data, s.c);
    set_tensor(a_desc_, s.format, s.p->data, s.a);
    bias_ = Buffer(count_of(s.a) * dtype_size(s.p->storage));
    ctx.fill(bias_, count_of(s.a), s.p->storage, seed * 16 + 3);
  }
  void enqueue(Context& ctx) override {
    const float one = 1.f;
    BZ_CHECK_CUDNN(cudnnAddTensor(ctx.cudnn(), &one, a_desc_, bias_.get(), &one, c_desc_, io_.write));
  }
  double check(Context&) override { return 0.0; }
  bool checked_elsewhere() const override { return true; }  // its convolution's check includes the bias
  const void* bias() const { return bias_.get(); }

 private:
  ReplayIo io_;
  TensorDesc c_desc_, a_desc_;
  Buffer bias_;
};

// cublasLtMatmul with the algorithm the analysis chose: the heuristic is asked as its benchmark asked it,
// and the configuration of that name taken from its list (refused when the list no longer has it).
class LtStep : public ReplayStep {
 public:
  struct Spec {
    GemmDims dims;
    const CublasPrecision* p;
    cublasOperation_t op_a, op_b;
    float alpha, beta;
    bool bias, relu;
    cublasLtEpilogue_t epilogue;
    std::string algorithm;
    bool b_constant;
  };

  LtStep(Context& ctx, const Spec& s, const ReplayIo& io, uint64_t seed)
      : s_(s), io_(io), ops_(ctx, s.dims, s.p->storage, s.p->data, io, s.b_constant, seed) {
    const GemmDims& d = s.dims;
    const DType t = s.p->storage;
    if (s.bias) {
      bias_ = Buffer(size_t(d.n) * dtype_size(t));
      ctx.fill(bias_, size_t(d.n), t, seed * 16 + 4);
    }
    work_ = Buffer(kCublasWorkspaceBytes);
    m_.emplace(d, *s.p, s.op_a, s.op_b, s.epilogue, s.bias ? bias_.get() : nullptr, work_.bytes());
    for (int rank = 0; rank < m_->returned; ++rank) {
      const cublasLtMatmulHeuristicResult_t& h = m_->results[rank];
      if (h.state == CUBLAS_STATUS_SUCCESS && lt_algo_name(h.algo) == s.algorithm) {
        algo_ = h.algo;
        ws_ = h.workspaceSize;
        workspace_bytes = (long long)ws_;
        return;
      }
    }
    throw Error(Status::NotSupported, "cublasLtMatmulAlgoGetHeuristic no longer returns " + s.algorithm);
  }

  void enqueue(Context& ctx) override {
    const void* c = ops_.c_count ? ops_.c.get() : io_.write;  // as its benchmark: D itself, unread (beta 0), without C
    BZ_CHECK_CUBLAS(cublasLtMatmul(m_->lt.h, m_->op.d, &s_.alpha, ops_.b_data, m_->a.l, io_.reads[0], m_->b.l, &s_.beta,
                                   c, m_->c.l, io_.write, m_->d.l, &algo_, work_.get(), ws_, ctx.stream));
  }

  double check(Context& ctx) override {
    Buffer ref(ops_.y_count * sizeof(float));
    gemm_reference(s_.dims, s_.alpha, s_.beta, io_.reads[0], ops_.b_data, ops_.c_count ? ops_.c_src.get() : nullptr,
                   s_.bias ? bias_.get() : nullptr, s_.relu, s_.p->storage, ref.as<float>(), ctx.stream);
    return whole_error(ctx, io_.write, s_.p->storage, ref, ops_.y_count);
  }

 private:
  Spec s_;
  ReplayIo io_;
  GemmOperands ops_;
  size_t ws_ = 0;
  Buffer bias_, work_;
  std::optional<LtMatmul> m_;
  cublasLtMatmulAlgo_t algo_{};
};

// cudnnOpTensor (ADD or MUL), out of place as its benchmark calls it: y = a op b, b broadcast; b is a
// second activation when the step reads two buffers, else a constant of the step's own.
class OpTensorStep : public ReplayStep {
 public:
  struct Spec {
    Dims4 a, b;
    const CudnnPrecision* p;
    cudnnOpTensorOp_t op;
    cudnnTensorFormat_t format;
  };

  OpTensorStep(Context& ctx, const Spec& s, const ReplayIo& io, uint64_t seed) : s_(s), io_(io) {
    if (s.op != CUDNN_OP_TENSOR_ADD && s.op != CUDNN_OP_TENSOR_MUL)
      throw Error(Status::NotSupported, "the reference covers CUDNN_OP_TENSOR_ADD and _MUL only");
    set_tensor(a_desc_, s.format, s.p->data, s.a);
    set_tensor(b_desc_, s.format, s.p->data, s.b);
    BZ_CHECK_CUDNN(cudnnSetOpTensorDescriptor(desc_, s.op, s.p->compute, CUDNN_NOT_PROPAGATE_NAN));
    if (io.write_elements != count_of(s.a)) throw Error(Status::Failed, "output buffer of the wrong size");
    if (io.reads.size() < 2) {
      own_b_ = Buffer(count_of(s.b) * dtype_size(s.p->storage));
      ctx.fill(own_b_, count_of(s.b), s.p->storage, seed * 16 + 3);
    }
  }
  void enqueue(Context& ctx) override {
    const float one = 1.f, zero = 0.f;
    BZ_CHECK_CUDNN(cudnnOpTensor(ctx.cudnn(), desc_, &one, a_desc_, io_.reads[0], &one, b_desc_, b(), &zero, a_desc_,
                                 io_.write));
  }
  double check(Context& ctx) override {
    const DType t = s_.p->storage;
    const bool nhwc = s_.format == CUDNN_TENSOR_NHWC;
    Buffer a = as_float(ctx, io_.reads[0], t, count_of(s_.a)), bf = as_float(ctx, b(), t, count_of(s_.b));
    Buffer ref(count_of(s_.a) * sizeof(float));
    op_tensor_reference(Packed4{s_.a, nhwc}, Packed4{s_.b, nhwc}, int(s_.op), a.as<float>(), bf.as<float>(),
                        ref.as<float>(), ctx.stream);
    BZ_CHECK_CUDA(cudaGetLastError());
    return whole_error(ctx, io_.write, t, ref, count_of(s_.a));
  }

 private:
  const void* b() const { return io_.reads.size() >= 2 ? io_.reads[1] : own_b_.get(); }

  Spec s_;
  ReplayIo io_;
  TensorDesc a_desc_, b_desc_;
  OpTensorDesc desc_;
  Buffer own_b_;
};

// cudnnActivationForward, out of place as its benchmark calls it.
class ActivationStep : public ReplayStep {
 public:
  struct Spec {
    Dims4 dims;
    const CudnnPrecision* p;
    cudnnActivationMode_t act;
    double coef;
    cudnnTensorFormat_t format;
  };

  ActivationStep(const Spec& s, const ReplayIo& io) : s_(s), io_(io) {
    set_tensor(desc_, s.format, s.p->data, s.dims);
    BZ_CHECK_CUDNN(cudnnSetActivationDescriptor(act_, s.act, CUDNN_NOT_PROPAGATE_NAN, s.coef));
    if (io.write_elements != count_of(s.dims)) throw Error(Status::Failed, "output buffer of the wrong size");
  }
  void enqueue(Context& ctx) override {
    const float one = 1.f, zero = 0.f;
    BZ_CHECK_CUDNN(cudnnActivationForward(ctx.cudnn(), act_, &one, desc_, io_.reads[0], &zero, desc_, io_.write));
  }
  // elementwise: the harness's activation applied to an fp32 copy of x, as its benchmark checks it
  double check(Context& ctx) override {
    const size_t n = count_of(s_.dims);
    Buffer ref = as_float(ctx, io_.reads[0], s_.p->storage, n);
    activation_reference(ref.as<float>(), n, int(s_.act), s_.coef, ctx.stream);
    return whole_error(ctx, io_.write, s_.p->storage, ref, n);
  }

 private:
  Spec s_;
  ReplayIo io_;
  TensorDesc desc_;
  ActivationDesc act_;
};

// cudnnLRNCrossChannelForward.
class LrnStep : public ReplayStep {
 public:
  struct Spec {
    Dims4 dims;
    const CudnnPrecision* p;
    unsigned size;
    double alpha, beta, bias;
    cudnnTensorFormat_t format;
  };

  LrnStep(const Spec& s, const ReplayIo& io) : s_(s), io_(io) {
    set_tensor(desc_, s.format, s.p->data, s.dims);
    BZ_CHECK_CUDNN(cudnnSetLRNDescriptor(lrn_, s.size, s.alpha, s.beta, s.bias));
    if (io.write_elements != count_of(s.dims)) throw Error(Status::Failed, "output buffer of the wrong size");
  }
  void enqueue(Context& ctx) override {
    const float one = 1.f, zero = 0.f;
    BZ_CHECK_CUDNN(cudnnLRNCrossChannelForward(ctx.cudnn(), lrn_, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, desc_,
                                               io_.reads[0], &zero, desc_, io_.write));
  }
  double check(Context& ctx) override {
    const size_t n = count_of(s_.dims);
    Buffer x = as_float(ctx, io_.reads[0], s_.p->storage, n), ref(n * sizeof(float));
    lrn_reference(Packed4{s_.dims, s_.format == CUDNN_TENSOR_NHWC}, int(s_.size), float(s_.alpha), float(s_.beta),
                  float(s_.bias), x.as<float>(), ref.as<float>(), ctx.stream);
    BZ_CHECK_CUDA(cudaGetLastError());
    return whole_error(ctx, io_.write, s_.p->storage, ref, n);
  }

 private:
  Spec s_;
  ReplayIo io_;
  TensorDesc desc_;
  LRNDesc lrn_;
};

// Concat: each input copied into its slice of the output with cudaMemcpy2DAsync, the copy the
// ceilings and the copy bound were measured with: `outer` rows of parts[i] x inner elements each.
class ConcatStep : public ReplayStep {
 public:
  struct Spec {
    const CudnnPrecision* p;
    std::vector<long long> parts;
    long long outer, inner;
  };

  ConcatStep(const Spec& s, const ReplayIo& io) : s_(s), io_(io) {
    long long total = 0;
    for (long long part : s.parts) total += part;
    if (s.parts.size() != io.reads.size()) throw Error(Status::Failed, "a concat reads one buffer per part");
    if (io.write_elements != size_t(s.outer * total * s.inner)) throw Error(Status::Failed, "output of the wrong size");
    total_ = total;
  }
  void enqueue(Context& ctx) override {
    const size_t e = dtype_size(s_.p->storage);
    long long at = 0;
    for (size_t i = 0; i < s_.parts.size(); ++i) {
      const size_t width = size_t(s_.parts[i] * s_.inner) * e;
      BZ_CHECK_CUDA(cudaMemcpy2DAsync(static_cast<char*>(io_.write) + size_t(at * s_.inner) * e,
                                      size_t(total_ * s_.inner) * e, io_.reads[i], width, width, size_t(s_.outer),
                                      cudaMemcpyDeviceToDevice, ctx.stream));
      at += s_.parts[i];
    }
  }
  // Each slice copied back out must give its input exactly.
  double check(Context& ctx) override {
    const DType t = s_.p->storage;
    const size_t e = dtype_size(t);
    double worst = 0;
    long long at = 0;
    for (size_t i = 0; i < s_.parts.size(); ++i) {
      const size_t n = size_t(s_.outer * s_.parts[i] * s_.inner), width = size_t(s_.parts[i] * s_.inner) * e;
      Buffer back(n * e);
      BZ_CHECK_CUDA(cudaMemcpy2DAsync(back.get(), width, static_cast<const char*>(io_.write) + size_t(at * s_.inner) * e,
                                      size_t(total_ * s_.inner) * e, width, size_t(s_.outer), cudaMemcpyDeviceToDevice,
                                      ctx.stream));
      Buffer ref = as_float(ctx, io_.reads[i], t, n);
      const double err = whole_error(ctx, back.get(), t, ref, n);
      worst = std::isfinite(err) ? std::max(worst, err) : err;
      at += s_.parts[i];
    }
    return worst;
  }

 private:
  Spec s_;
  ReplayIo io_;
  long long total_ = 0;
};

// cudnnBatchNormalizationForwardInference (spatial), with random per-channel parameters of its own.
class BatchNormStep : public ReplayStep {
 public:
  struct Spec {
    Dims4 dims;
    const CudnnPrecision* p;
    double epsilon;
    cudnnTensorFormat_t format;
  };

  BatchNormStep(Context& ctx, const Spec& s, const ReplayIo& io, uint64_t seed) : s_(s), io_(io) {
    if (s.epsilon < CUDNN_BN_MIN_EPSILON) throw Error(Status::NotSupported, "epsilon below CUDNN_BN_MIN_EPSILON");
    if (io.write_elements != count_of(s.dims)) throw Error(Status::Failed, "output buffer of the wrong size");
    set_tensor(x_desc_, s.format, s.p->data, s.dims);
    BZ_CHECK_CUDNN(cudnnDeriveBNTensorDescriptor(bn_desc_, x_desc_, CUDNN_BATCHNORM_SPATIAL));
    const size_t c = size_t(s.dims.c);
    for (int k = 0; k < 4; ++k) {
      params_[k] = Buffer(c * sizeof(float));
      ctx.fill(params_[k], c, DType::F32, seed * 16 + 2 + uint64_t(k));
    }
    positive_variance(params_[3].as<float>(), c, ctx.stream);
  }
  void enqueue(Context& ctx) override {
    const float one = 1.f, zero = 0.f;
    BZ_CHECK_CUDNN(cudnnBatchNormalizationForwardInference(
        ctx.cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, x_desc_, io_.reads[0], x_desc_, io_.write, bn_desc_,
        params_[0].get(), params_[1].get(), params_[2].get(), params_[3].get(), s_.epsilon));
  }
  double check(Context& ctx) override {
    const size_t n = count_of(s_.dims);
    Buffer x = as_float(ctx, io_.reads[0], s_.p->storage, n), ref(n * sizeof(float));
    batchnorm_reference(Packed4{s_.dims, s_.format == CUDNN_TENSOR_NHWC}, x.as<float>(), params_[0].as<float>(),
                        params_[1].as<float>(), params_[2].as<float>(), params_[3].as<float>(), s_.epsilon,
                        ref.as<float>(), ctx.stream);
    BZ_CHECK_CUDA(cudaGetLastError());
    return whole_error(ctx, io_.write, s_.p->storage, ref, n);
  }

 private:
  Spec s_;
  ReplayIo io_;
  TensorDesc x_desc_, bn_desc_;
  Buffer params_[4];  // scale, bias, mean, var (fp32, as cuDNN derives them)
};

// cudnnTransformTensor from the input's descriptor (src_, at src_offset_ bytes into it) to the output's
// (dst_): a strided copy or a layout change. Transformed back into a copy of the input, through the same
// descriptor, the input must come back exactly (the elements a window does not read stay as they were).
class TransformCopy : public ReplayStep {
 public:
  void enqueue(Context& ctx) override {
    const float one = 1.f, zero = 0.f;
    BZ_CHECK_CUDNN(cudnnTransformTensor(ctx.cudnn(), &one, src_, static_cast<const char*>(io_.reads[0]) + src_offset_,
                                        &zero, dst_, io_.write));
  }
  double check(Context& ctx) override {
    const size_t n = src_count_ ? src_count_ : count_, e = dtype_size(type_);
    Buffer back(n * e);
    if (n != count_ || src_offset_) BZ_CHECK_CUDA(cudaMemcpyAsync(back.get(), io_.reads[0], n * e,
                                                                   cudaMemcpyDeviceToDevice, ctx.stream));
    const float one = 1.f, zero = 0.f;
    BZ_CHECK_CUDNN(cudnnTransformTensor(ctx.cudnn(), &one, dst_, io_.write, &zero, src_,
                                        static_cast<char*>(back.get()) + src_offset_));
    Buffer ref = as_float(ctx, io_.reads[0], type_, n);
    return whole_error(ctx, back.get(), type_, ref, n);
  }

 protected:
  TransformCopy(const ReplayIo& io, DType type) : io_(io), type_(type) {}
  ReplayIo io_;
  DType type_;
  size_t count_ = 0;      // elements the step writes
  size_t src_count_ = 0;  // elements of the input where the step reads a window of it (0: count_)
  size_t src_offset_ = 0;  // bytes into the input of the window's first element
  TensorDesc src_, dst_;
};

// A view the bound reads through strides (a Transpose, a Slice, a Split's part, a select; charged nothing),
// replayed as one strided copy (benanza's strided_copy: cudnnTransformTensor moved such windows at ~55 GB/s
// on the H100) of the window of its input it reads, packed into its own buffer: what a consumer that cannot
// read strides pays. Checked by cudnnTransformTensor writing the copy back through the same strides.
class PermuteStep : public TransformCopy {
 public:
  struct Spec {
    const CudnnPrecision* p;
    std::vector<long long> dims, strides;  // the view's dims and each dim's stride in input elements
    long long offset;                      // the input element of the view's first index
  };

  PermuteStep(const Spec& s, const ReplayIo& io) : TransformCopy(io, s.p->storage) {
    const size_t rank = s.dims.size();
    if (rank < 1 || rank > 8 || s.strides.size() != rank) throw Error(Status::Failed, "a view of 1 to 8 dims");
    if (io.reads.size() != 1 || io.read_elements.size() != 1) throw Error(Status::Failed, "a view reads one buffer");
    long long last = s.offset;  // the last input element the window reads
    for (size_t i = 0; i < rank; ++i) {
      if (s.dims[i] < 1 || s.strides[i] < 1 || s.dims[i] > INT_MAX || s.strides[i] > INT_MAX)
        throw Error(Status::Failed, "a view's dims and strides are positive ints");
      last += (s.dims[i] - 1) * s.strides[i];
    }
    if (s.offset < 0 || size_t(last) >= io.read_elements[0]) throw Error(Status::Failed, "a view beyond its input");
    std::vector<int> out_dims, src_strides, dst_strides;
    const size_t pad = rank < 4 ? 4 - rank : 0;  // cuDNN's N-d descriptors take at least 4 dims
    out_dims.assign(pad, 1);
    for (long long d : s.dims) out_dims.push_back(int(d));
    const size_t n = out_dims.size();
    dst_strides.assign(n, 1);
    for (size_t i = n - 1; i > 0; --i) dst_strides[i - 1] = dst_strides[i] * out_dims[i];
    src_strides = dst_strides;  // a dim of one element (the padding's, a select's) reads one: any stride
    for (size_t i = 0; i < rank; ++i)
      if (s.dims[i] > 1) src_strides[pad + i] = int(s.strides[i]);
    count_ = 1;
    for (int d : out_dims) count_ *= size_t(d);
    if (io.write_elements != count_) throw Error(Status::Failed, "output buffer of the wrong size");
    src_count_ = io.read_elements[0];
    src_offset_ = size_t(s.offset) * dtype_size(type_);
    BZ_CHECK_CUDNN(cudnnSetTensorNdDescriptor(src_, s.p->data, int(n), out_dims.data(), src_strides.data()));
    BZ_CHECK_CUDNN(cudnnSetTensorNdDescriptor(dst_, s.p->data, int(n), out_dims.data(), dst_strides.data()));
    window_.rank = int(rank);
    for (size_t i = 0; i < rank; ++i) window_.dims[i] = s.dims[i], window_.strides[i] = s.strides[i];
    window_.offset = s.offset;
    window_.count = (long long)count_;
  }
  void enqueue(Context& ctx) override { strided_copy(window_, type_, io_.reads[0], io_.write, ctx.stream); }

 private:
  StridedWindow window_;
};

// cudnnTransformTensor: a layout change between two steps (the bound charges none: composition cost).
class TransformStep : public TransformCopy {
 public:
  struct Spec {
    Dims4 dims;
    const CudnnPrecision* p;
    cudnnTensorFormat_t src, dst;
  };

  TransformStep(const Spec& s, const ReplayIo& io) : TransformCopy(io, s.p->storage), s_(s) {
    set_tensor(src_, s.src, s.p->data, s.dims);
    set_tensor(dst_, s.dst, s.p->data, s.dims);
    count_ = count_of(s.dims);
    if (io.write_elements != count_) throw Error(Status::Failed, "output buffer of the wrong size");
  }

  // A conv's bias measured in the layout this step changes to, added in place after it (cudnnAddTensor):
  // transformed back, the output must give the input plus the bias.
  bool absorb_bias(const void* bias) override {
    bias_ = bias;
    return true;
  }
  double check(Context& ctx) override {
    if (!bias_) return TransformCopy::check(ctx);
    Buffer back(count_ * dtype_size(type_));
    const float one = 1.f, zero = 0.f;
    BZ_CHECK_CUDNN(cudnnTransformTensor(ctx.cudnn(), &one, dst_, io_.write, &zero, src_, back.get()));
    const bool nhwc = s_.src == CUDNN_TENSOR_NHWC;
    Buffer x = as_float(ctx, io_.reads[0], type_, count_), b = as_float(ctx, bias_, type_, size_t(s_.dims.c));
    Buffer ref(count_ * sizeof(float));
    op_tensor_reference(Packed4{s_.dims, nhwc}, Packed4{Dims4{1, s_.dims.c, 1, 1}, nhwc}, int(CUDNN_OP_TENSOR_ADD),
                        x.as<float>(), b.as<float>(), ref.as<float>(), ctx.stream);
    BZ_CHECK_CUDA(cudaGetLastError());
    return whole_error(ctx, back.get(), type_, ref, count_);
  }

 private:
  Spec s_;
  const void* bias_ = nullptr;
};

// ------------------------------------------------------------------ the run

struct ReplayOptions {
  std::string plan_dir;  // the plan's tables (src/ of the replay project)
  int device = 0;
  int step_reps = 20;  // sequence runs whose per-step event times give each step's median
  bool cold = true;
  bool check_plan = false;  // read and check the tables, print what they hold, touch no GPU
};

inline bool parse_replay_options(int argc, char** argv, ReplayOptions& o, Options& timing) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--plan" && has_value) {
      o.plan_dir = argv[++i];
    } else if (a == "--device" && has_value) {
      o.device = timing.device = std::atoi(argv[++i]);
    } else if (a == "--max-ms" && has_value) {
      timing.max_ms = std::atof(argv[++i]);
    } else if (a == "--weight-gain" && has_value) {
      weight_gain() = std::atof(argv[++i]);
      if (!(weight_gain() > 0.0)) return false;
    } else if (a == "--step-reps" && has_value) {
      o.step_reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--no-cold") {
      o.cold = false;
    } else if (a == "--check-plan") {
      o.check_plan = true;
    } else {
      return false;
    }
  }
  return !o.plan_dir.empty();
}

inline std::string timing_json(const Timing& t) {
  Json j;
  j.add("median_ms", t.ms.median).add("min_ms", t.ms.min).add("max_ms", t.ms.max).add("stddev_ms", t.ms.stddev);
  j.add("repetitions", t.repetitions).add("timing", t.mode).add("calls_per_launch", t.calls_per_launch);
  return j.str();
}

// Run the steps: once to warm up, per-step times from `step_reps` runs of the sequence on the stream
// (events between the steps), the whole sequence as one captured graph warm and then cold, then every
// step's check. Prints one JSON line ("event": "replay"); 0 when every check passes.
inline int run_replay(Context& ctx, const ReplayOptions& o, std::vector<std::unique_ptr<ReplayStep>>& steps,
                      const std::vector<std::string>& kinds) {
  Json out;
  out.add("event", "replay").add("steps_count", int(steps.size()));
  auto all = [&](cudaStream_t) {
    for (auto& s : steps) s->enqueue(ctx);
  };
  all(ctx.stream);
  BZ_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
  // per-step medians: events between the steps of plain stream runs
  std::vector<std::vector<double>> samples(steps.size());
  {
    std::vector<Event> ev(steps.size() + 1);
    for (int rep = 0; rep < o.step_reps; ++rep) {
      BZ_CHECK_CUDA(cudaEventRecord(ev[0], ctx.stream));
      for (size_t i = 0; i < steps.size(); ++i) {
        steps[i]->enqueue(ctx);
        BZ_CHECK_CUDA(cudaEventRecord(ev[i + 1], ctx.stream));
      }
      BZ_CHECK_CUDA(cudaEventSynchronize(ev[steps.size()]));
      for (size_t i = 0; i < steps.size(); ++i) samples[i].push_back(double(elapsed_ms(ev[i], ev[i + 1])));
    }
  }
  const Timing warm = ctx.measure(all, WeightRing(), /*protect=*/true);
  out.raw("warm", timing_json(warm));
  if (o.cold) {
    ctx.opt.l2 = L2Mode::Cold;
    const Timing cold = ctx.measure(all, WeightRing(), /*protect=*/true);
    ctx.opt.l2 = L2Mode::Warm;
    out.raw("cold", timing_json(cold));
  }
  all(ctx.stream);  // the buffers as one run leaves them: every step's inputs are its producers' outputs
  BZ_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
  std::string rows = "[";
  int failed = 0, checked = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const bool covered = steps[i]->checked_elsewhere();
    const double err = covered ? 0.0 : steps[i]->check(ctx);
    const bool ok = covered || err <= steps[i]->tolerance;  // NaN and +inf fail
    checked += covered ? 0 : 1;
    failed += ok ? 0 : 1;
    Json r;
    r.add("step", int(i)).add("kind", kinds[i]).add("median_ms", stats_of(samples[i]).median);
    r.add("workspace_bytes", steps[i]->workspace_bytes).add("tolerance", steps[i]->tolerance);
    if (covered)
      r.add("checked", "with the step before");
    else
      r.add("max_rel_error", err).add("checked", ok ? "ok" : "check_failed");
    const float ref_max = take_reference_max_abs();  // a failed check's first question: did the data overflow?
    if (!covered && ref_max >= 0.f) r.add("ref_max_abs", double(ref_max));
    rows += (i ? "," : "") + r.str();
  }
  out.add("status", failed ? "check_failed" : "ok").add("checked_steps", checked).add("failed_steps", failed);
  out.raw("steps", rows + "]");
  emit(out);
  return failed ? 1 : 0;
}

}  // namespace bz
