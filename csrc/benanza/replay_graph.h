// benanza harness: `benanza replay`'s steps for the cuDNN graph API's matmul, normalization,
// pointwise-chain and SDPA calls (docs/REPLAY.md). Each builds its benchmark's own operation graph
// (graph_calls.h) for exactly the engine config the analysis chose, makes its constants as its
// benchmark made them, and checks its output against the benchmark's fp32 reference kernel of the
// very inputs it read (kernels.cu: gemm_reference, norm_reference, pointwise_reference,
// attention_reference).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "benanza/graph_calls.h"
#include "benanza/replay.h"

namespace bz {

// What the four steps share: the one named engine config's plan, built first from the step's declare
// function (as each benchmark builds it, before its constants), the step's io, and the variant pack its
// constructor fills; enqueue executes the plan on the pack.
class GraphStep : public ReplayStep {
 public:
  void enqueue(Context& ctx) override { plan_.execute(ctx, pack_); }

 protected:
  template <class Declare>
  GraphStep(Context& ctx, const std::vector<NamedEngineConfig>& engines, const ReplayIo& io, Declare&& declare)
      : io_(io), plan_(ctx, engines, std::forward<Declare>(declare)) {
    workspace_bytes = plan_.workspace_bytes();
  }

  ReplayIo io_;
  NamedGraphPlan plan_;
  std::unordered_map<int64_t, void*> pack_;
};

// cudnn-frontend matmul [-> alpha] [-> beta C] [-> bias] [-> ReLU]: A is the step's first read, B its
// second (an activation: attention's Q K^T and P V) or, for a layer's weights, a constant of its own
// (He-scaled); C and the bias random, as the benchmark's GemmProblem makes them.
class GraphMatmulStep : public GraphStep {
 public:
  struct Spec {
    GraphMatmulSpec graph;
    const CudnnPrecision* p;
    bool b_constant;
    std::vector<NamedEngineConfig> engines;  // the one config the analysis chose (job 0)
  };

  GraphMatmulStep(Context& ctx, const Spec& s, const ReplayIo& io, uint64_t seed)
      : GraphStep(ctx, s.engines, io, [&](FeGraph& g) { declare_matmul_graph(g, s.graph, *s.p); }), s_(s) {
    const GemmDims& d = s.graph.dims;
    const DType t = s.p->storage;
    const size_t e = dtype_size(t);
    y_count_ = size_t(d.batch) * d.m * d.n;
    if (io.write_elements != y_count_) throw Error(Status::Failed, "output buffer of the wrong size");
    if (io.reads.size() != (s.b_constant ? 1u : 2u)) throw Error(Status::Failed, "a matmul reads A [and B]");
    if (s.b_constant) {
      const size_t b_count = size_t(d.stride_b ? d.batch : 1) * d.k * d.n;
      own_b_ = Buffer(b_count * e);
      fill_weights(ctx, own_b_, b_count, t, s.p->data, seed * 16 + 2, d.k);
    }
    if (d.c_rows) {
      c_ = Buffer(size_t(d.c_rows) * d.c_cols * e);
      ctx.fill(c_, size_t(d.c_rows) * d.c_cols, t, seed * 16 + 3);
    }
    if (s.graph.bias) {
      bias_ = Buffer(size_t(d.n) * e);
      ctx.fill(bias_, size_t(d.n), t, seed * 16 + 4);
    }
    pack_ = {{kMatmulA, io.reads[0]}, {kMatmulB, const_cast<void*>(b())}, {kMatmulY, io.write}};
    if (d.c_rows) pack_[kMatmulC] = c_.get();
    if (s.graph.bias) pack_[kMatmulBias] = bias_.get();
  }

  double check(Context& ctx) override {
    const GraphMatmulSpec& j = s_.graph;
    Buffer ref(y_count_ * sizeof(float));
    gemm_reference(j.dims, j.alpha, j.dims.c_rows ? j.beta : 0.f, io_.reads[0], b(), j.dims.c_rows ? c_.get() : nullptr,
                   j.bias ? bias_.get() : nullptr, j.relu, s_.p->storage, ref.as<float>(), ctx.stream);
    return whole_error(ctx, io_.write, s_.p->storage, ref, y_count_);
  }

 private:
  const void* b() const { return s_.b_constant ? own_b_.get() : io_.reads[1]; }

  Spec s_;
  size_t y_count_ = 0;
  Buffer own_b_, c_, bias_;
};

// cudnn-frontend layernorm / rmsnorm forward (inference) over the last axis: fp32 scale and bias of
// its own, random, as its benchmark makes them (a LayerNorm without a bias input: a zero bias).
class GraphNormStep : public GraphStep {
 public:
  struct Spec {
    GraphNormSpec graph;
    const CudnnPrecision* p;
    std::vector<NamedEngineConfig> engines;
  };

  GraphNormStep(Context& ctx, const Spec& s, const ReplayIo& io, uint64_t seed)
      : GraphStep(ctx, s.engines, io, [&](FeGraph& g) { declare_norm_graph(g, s.graph, *s.p); }), s_(s) {
    const GraphNormSpec& j = s.graph;
    const size_t cols = size_t(j.cols);
    count_ = size_t(j.rows) * cols;
    if (io.write_elements != count_ || io.reads.size() != 1) throw Error(Status::Failed, "a norm reads x, writes y");
    scale_ = Buffer(cols * sizeof(float));
    ctx.fill(scale_, cols, DType::F32, seed * 16 + 2);
    if (j.bias || !j.rms) {
      bias_ = Buffer(cols * sizeof(float));
      if (j.bias)
        ctx.fill(bias_, cols, DType::F32, seed * 16 + 3);
      else
        BZ_CHECK_CUDA(cudaMemsetAsync(bias_.get(), 0, bias_.bytes(), ctx.stream));
    }
    pack_ = {{kNormX, io.reads[0]}, {kNormScale, scale_.get()}, {kNormY, io.write}};
    if (j.bias || !j.rms) pack_[kNormBias] = bias_.get();
  }

  double check(Context& ctx) override {
    const GraphNormSpec& j = s_.graph;
    Buffer ref(count_ * sizeof(float));
    norm_reference(j.rows, j.cols, j.rms, j.epsilon, io_.reads[0], scale_.as<float>(),
                   j.bias ? bias_.as<float>() : nullptr, s_.p->storage, ref.as<float>(), ctx.stream);
    BZ_CHECK_CUDA(cudaGetLastError());
    return whole_error(ctx, io_.write, s_.p->storage, ref, count_);
  }

 private:
  Spec s_;
  size_t count_ = 0;
  Buffer scale_, bias_;
};

// cudnn-frontend pointwise nodes, one op graph, for an elementwise chain (GELU, SiLU ...): scalar
// constants the row's value, per-column constants random, as its benchmark makes them.
class GraphPointwiseStep : public GraphStep {
 public:
  struct Spec {
    GraphPointwiseSpec graph;
    const CudnnPrecision* p;
    std::vector<NamedEngineConfig> engines;
  };

  GraphPointwiseStep(Context& ctx, const Spec& s, const ReplayIo& io, uint64_t seed)
      : GraphStep(ctx, s.engines, io, [&](FeGraph& g) { declare_pointwise_graph(g, s.graph, *s.p); }), s_(s) {
    const GraphPointwiseSpec& j = s.graph;
    count_ = size_t(j.rows) * j.cols;
    if (io.write_elements != count_ || io.reads.size() != 1) throw Error(Status::Failed, "a chain reads x, writes y");
    program_ = pointwise_program(j);
    pack_ = {{kPwX, io.reads[0]}, {kPwY, io.write}};
    for (int k = 0; k < j.consts; ++k) {
      const size_t n = size_t(j.const_cols[k]);
      consts_.emplace_back(n * sizeof(float));
      if (n == 1)
        BZ_CHECK_CUDA(cudaMemcpy(consts_.back().get(), &s_.graph.scalar, sizeof(float), cudaMemcpyHostToDevice));
      else
        ctx.fill(consts_.back(), n, DType::F32, seed * 16 + 2 + uint64_t(k));
      program_.const_data[k] = consts_.back().as<float>();
      pack_[kPwConst0 + k] = consts_.back().get();
    }
  }

  double check(Context& ctx) override {
    Buffer ref(count_ * sizeof(float));
    pointwise_reference(program_, s_.graph.rows, s_.graph.cols, io_.reads[0], s_.p->storage, ref.as<float>(),
                        ctx.stream);
    BZ_CHECK_CUDA(cudaGetLastError());
    return whole_error(ctx, io_.write, s_.p->storage, ref, count_);
  }

 private:
  Spec s_;
  size_t count_ = 0;
  PwProgram program_{};
  std::vector<Buffer> consts_;
};

// cudnn-frontend sdpa (inference) of Q, K, V [b, h, s, d] (the step's three reads); a padding mask as
// its benchmark gives it (the keys of batch entry i cut short: sdpa_kv_lengths).
class GraphSdpaStep : public GraphStep {
 public:
  struct Spec {
    GraphSdpaSpec graph;
    const CudnnPrecision* p;
    std::vector<NamedEngineConfig> engines;
  };

  GraphSdpaStep(Context& ctx, const Spec& s, const ReplayIo& io, uint64_t)
      : GraphStep(ctx, s.engines, io, [&](FeGraph& g) { declare_sdpa_graph(g, s.graph, *s.p); }), s_(s) {
    const AttentionDims& d = s.graph.dims;
    o_count_ = size_t(d.b) * d.h * d.s_q * d.d_v;
    if (io.write_elements != o_count_ || io.reads.size() != 3) throw Error(Status::Failed, "SDPA reads Q, K, V");
    pack_ = {{kSdpaQ, io.reads[0]}, {kSdpaK, io.reads[1]}, {kSdpaV, io.reads[2]}, {kSdpaO, io.write}};
    if (s.graph.padding) {
      const std::vector<int> kv = sdpa_kv_lengths(d), q(size_t(d.b), d.s_q);
      seq_q_ = Buffer(q.size() * sizeof(int));
      seq_kv_ = Buffer(kv.size() * sizeof(int));
      BZ_CHECK_CUDA(cudaMemcpy(seq_q_.get(), q.data(), seq_q_.bytes(), cudaMemcpyHostToDevice));
      BZ_CHECK_CUDA(cudaMemcpy(seq_kv_.get(), kv.data(), seq_kv_.bytes(), cudaMemcpyHostToDevice));
      pack_[kSdpaSeqQ] = seq_q_.get();
      pack_[kSdpaSeqKV] = seq_kv_.get();
    }
  }

  double check(Context& ctx) override {
    const GraphSdpaSpec& j = s_.graph;
    Buffer ref(o_count_ * sizeof(float));
    attention_reference(j.dims, j.scale, j.causal, j.padding ? seq_kv_.as<int>() : nullptr, io_.reads[0],
                        io_.reads[1], io_.reads[2], s_.p->storage, ref.as<float>(), ctx.stream);
    BZ_CHECK_CUDA(cudaGetLastError());
    return whole_error(ctx, io_.write, s_.p->storage, ref, o_count_);
  }

 private:
  Spec s_;
  size_t o_count_ = 0;
  Buffer seq_q_, seq_kv_;
};

}  // namespace bz
