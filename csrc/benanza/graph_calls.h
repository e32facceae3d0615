// benanza harness: the cuDNN graph API's matmul, normalization, pointwise-chain and SDPA operation
// graphs. Declared once here for their benchmarks (templates/cudnn_graph_{matmul,norm,pointwise,sdpa}.cu.j2)
// and `benanza replay`'s graph steps (replay_graph.h), so both run exactly the same graph; the
// convolution's is graph_conv.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "benanza/cudnn_graph.h"
#include "benanza/kernels.h"

namespace bz {

// ---------------------------------------------------------------- matmul (benanza/apis/graph.py)

// Y = relu?(alpha * op(A) op(B) + beta * C + bias): the job-table row's numbers.
struct GraphMatmulSpec {
  GemmDims dims;
  float alpha, beta;
  bool bias, relu;
};

// Tensor uids of the variant pack.
enum GraphMatmulUid : int64_t { kMatmulA = 1, kMatmulB, kMatmulY, kMatmulC, kMatmulBias };

// The operation graph: matmul(A[b|1, M, K], B[b|1, K, N]) -> [MUL alpha] -> [ADD beta * C[1, Cr, Cc]]
// -> [ADD bias[1, 1, N]] -> [RELU] -> Y[b, M, N], fp32 compute and intermediates. Operands keep the
// model's row-major layout (a transpose is a stride, a shared operand a batch of 1).
inline void declare_matmul_graph(FeGraph& g, const GraphMatmulSpec& j, const CudnnPrecision& p) {
  namespace fe = cudnn_frontend;
  const GemmDims& d = j.dims;
  const fe::DataType_t io = fe_type(p.data), f32 = fe::DataType_t::FLOAT;
  g.set_io_data_type(io).set_intermediate_data_type(f32).set_compute_data_type(f32);
  const int64_t m = d.m, n = d.n, k = d.k;
  auto tensor = [&](const char* name, int64_t uid, std::vector<int64_t> dim, std::vector<int64_t> stride) {
    return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_data_type(io).set_dim(dim)
                        .set_stride(stride));
  };
  auto scalar = [&](float v) {
    auto s = g.tensor(v, fe::graph::ScalarType::RUNTIME_PARAM);
    s->set_dim({1, 1, 1}).set_stride({1, 1, 1});
    return s;
  };
  auto pointwise = [&](const char* name, fe::PointwiseMode_t mode) {
    return fe::graph::Pointwise_attributes().set_name(name).set_mode(mode).set_compute_data_type(f32);
  };
  auto a = tensor("a", kMatmulA, {d.stride_a ? d.batch : 1, m, k},
                  d.trans_a ? std::vector<int64_t>{m * k, 1, m} : std::vector<int64_t>{m * k, k, 1});
  auto b = tensor("b", kMatmulB, {d.stride_b ? d.batch : 1, k, n},
                  d.trans_b ? std::vector<int64_t>{k * n, 1, k} : std::vector<int64_t>{k * n, n, 1});
  auto t = g.matmul(a, b, fe::graph::Matmul_attributes().set_name("matmul").set_compute_data_type(f32));
  if (j.alpha != 1.f) t = g.pointwise(t, scalar(j.alpha), pointwise("scale_alpha", fe::PointwiseMode_t::MUL));
  if (d.c_rows) {
    auto c = tensor("c", kMatmulC, {1, d.c_rows, d.c_cols}, {int64_t(d.c_rows) * d.c_cols, d.c_cols, 1});
    if (j.beta != 1.f) c = g.pointwise(c, scalar(j.beta), pointwise("scale_beta", fe::PointwiseMode_t::MUL));
    t = g.pointwise(t, c, pointwise("add_c", fe::PointwiseMode_t::ADD));
  }
  if (j.bias)
    t = g.pointwise(t, tensor("bias", kMatmulBias, {1, 1, n}, {n, n, 1}),
                    pointwise("add_bias", fe::PointwiseMode_t::ADD));
  if (j.relu) t = g.pointwise(t, pointwise("relu", fe::PointwiseMode_t::RELU_FWD));
  t->set_output(true).set_name("y").set_uid(kMatmulY).set_data_type(io).set_dim({d.batch, m, n})
      .set_stride({m * n, n, 1});
}

// ---------------------------------------------------------------- normalization (benanza/apis/graph_norm.py)

// LayerNorm / RMSNorm of rows x cols over cols, inference phase.
struct GraphNormSpec {
  int rows, cols;
  float epsilon;
  bool rms, bias;  // RMSNorm (no mean) instead of LayerNorm; a bias after the scale
};

enum GraphNormUid : int64_t { kNormX = 1, kNormScale, kNormBias, kNormY };

// x seen as [rows, cols, 1, 1] with a [1, cols, 1, 1] fp32 scale (and bias: LayerNorm always takes one).
inline void declare_norm_graph(FeGraph& g, const GraphNormSpec& j, const CudnnPrecision& p) {
  namespace fe = cudnn_frontend;
  const fe::DataType_t io = fe_type(p.data), f32 = fe::DataType_t::FLOAT;
  g.set_io_data_type(io).set_intermediate_data_type(f32).set_compute_data_type(f32);
  const int64_t rows = j.rows, cols = j.cols;
  auto x = g.tensor(fe::graph::Tensor_attributes().set_name("x").set_uid(kNormX).set_dim({rows, cols, 1, 1})
                        .set_stride({cols, 1, cols, cols}));
  auto param = [&](const char* name, int64_t uid) {
    return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim({1, cols, 1, 1})
                        .set_stride({cols, 1, cols, cols}).set_data_type(f32));
  };
  auto scale = param("scale", kNormScale);
  // epsilon passed by value, as Layernorm_attributes::set_epsilon(float) makes it
  auto eps = std::make_shared<fe::graph::Tensor_attributes>(j.epsilon);
  std::shared_ptr<fe::graph::Tensor_attributes> y;
  if (j.rms) {
    auto attrs = fe::graph::Rmsnorm_attributes().set_name("rmsnorm").set_forward_phase(fe::NormFwdPhase_t::INFERENCE)
                     .set_epsilon(eps);
    if (j.bias) {
      auto bias = param("bias", kNormBias);
      attrs.set_bias(bias);
    }
    auto [out, inv_var] = g.rmsnorm(x, scale, attrs);
    (void)inv_var;
    y = out;
  } else {
    auto attrs = fe::graph::Layernorm_attributes().set_name("layernorm")
                     .set_forward_phase(fe::NormFwdPhase_t::INFERENCE).set_epsilon(eps);
    auto [out, mean, inv_var] = g.layernorm(x, scale, param("bias", kNormBias), attrs);
    (void)mean;
    (void)inv_var;
    y = out;
  }
  y->set_output(true).set_name("y").set_uid(kNormY).set_dim({rows, cols, 1, 1}).set_stride({cols, 1, cols, cols});
}

// ---------------------------------------------------------------- pointwise chain (benanza/apis/graph_pointwise.py)

// A chain of pointwise nodes over x [rows, cols, 1, 1]: the program kernels.h's PwProgram evaluates.
struct GraphPointwiseSpec {
  int rows, cols;
  float scalar;  // the value of every scalar constant
  int steps;
  cudnn_frontend::PointwiseMode_t mode[kMaxPwSteps];
  PwOp op[kMaxPwSteps];                  // the same op for the reference
  int a[kMaxPwSteps], b[kMaxPwSteps];    // operands: register >= 0, -1 none, -2 - k constant k
  int consts;
  int const_cols[kMaxPwConsts];  // 1: a scalar, cols: one value per column
};

// Tensor uids of the variant pack: x, y, then one per constant.
enum GraphPointwiseUid : int64_t { kPwX = 1, kPwY, kPwConst0 };

// Constants are fp32 tensors [1, n, 1, 1] (n = 1: a scalar, n = cols: one per column).
inline void declare_pointwise_graph(FeGraph& g, const GraphPointwiseSpec& j, const CudnnPrecision& p) {
  namespace fe = cudnn_frontend;
  const fe::DataType_t io = fe_type(p.data), f32 = fe::DataType_t::FLOAT;
  g.set_io_data_type(io).set_intermediate_data_type(f32).set_compute_data_type(f32);
  const int64_t rows = j.rows, cols = j.cols;
  std::vector<std::shared_ptr<fe::graph::Tensor_attributes>> reg, consts;
  reg.push_back(g.tensor(fe::graph::Tensor_attributes().set_name("x").set_uid(kPwX).set_dim({rows, cols, 1, 1})
                             .set_stride({cols, 1, cols, cols})));
  for (int k = 0; k < j.consts; ++k) {
    const int64_t n = j.const_cols[k];
    consts.push_back(g.tensor(fe::graph::Tensor_attributes().set_name("c" + std::to_string(k)).set_uid(kPwConst0 + k)
                                  .set_dim({1, n, 1, 1}).set_stride({n, 1, n, n}).set_data_type(f32)));
  }
  auto operand = [&](int o) { return o >= 0 ? reg[size_t(o)] : consts[size_t(-2 - o)]; };
  for (int s = 0; s < j.steps; ++s) {
    auto attrs = fe::graph::Pointwise_attributes().set_name("step" + std::to_string(s)).set_mode(j.mode[s])
                     .set_compute_data_type(f32);
    reg.push_back(j.b[s] == kNoOperand ? g.pointwise(operand(j.a[s]), attrs)
                                       : g.pointwise(operand(j.a[s]), operand(j.b[s]), attrs));
  }
  reg.back()->set_output(true).set_name("y").set_uid(kPwY).set_dim({rows, cols, 1, 1}).set_stride({cols, 1, cols, cols});
}

// The chain as the fp32 reference evaluates it (constants' device data filled in by the caller).
inline PwProgram pointwise_program(const GraphPointwiseSpec& j) {
  PwProgram program{};
  program.steps = j.steps;
  program.consts = j.consts;
  for (int s = 0; s < j.steps; ++s) {
    program.op[s] = int(j.op[s]);
    program.a[s] = j.a[s];
    program.b[s] = j.b[s];
  }
  for (int k = 0; k < j.consts; ++k) program.const_cols[k] = j.const_cols[k];
  return program;
}

// ---------------------------------------------------------------- SDPA (benanza/apis/graph_sdpa.py)

// O = softmax(scale Q K^T [causal] [padding]) V, Q K V O [b, h, s, d] contiguous.
struct GraphSdpaSpec {
  AttentionDims dims;
  float scale;
  bool causal, padding;
};

enum GraphSdpaUid : int64_t { kSdpaQ = 1, kSdpaK, kSdpaV, kSdpaO, kSdpaSeqQ, kSdpaSeqKV };

// Key lengths of the padding mask, per batch entry: s_kv - (i % 4) * s_kv / 8 (at least 1), so that
// the mask changes the output (the reference reads the same values).
inline std::vector<int> sdpa_kv_lengths(const AttentionDims& d) {
  std::vector<int> out(size_t(d.b));
  for (int b = 0; b < d.b; ++b) out[size_t(b)] = std::max(1, d.s_kv - (b % 4) * d.s_kv / 8);
  return out;
}

// Inference (no softmax stats); a padding mask takes per-batch sequence lengths (int32 [b, 1, 1, 1]).
inline void declare_sdpa_graph(FeGraph& g, const GraphSdpaSpec& j, const CudnnPrecision& p) {
  namespace fe = cudnn_frontend;
  const AttentionDims& d = j.dims;
  const fe::DataType_t io = fe_type(p.data), f32 = fe::DataType_t::FLOAT;
  g.set_io_data_type(io).set_intermediate_data_type(f32).set_compute_data_type(f32);
  auto bhsd = [&](const char* name, int64_t uid, int64_t s, int64_t dim) {
    return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim({d.b, d.h, s, dim})
                        .set_stride({d.h * s * dim, s * dim, dim, 1}));
  };
  auto q = bhsd("q", kSdpaQ, d.s_q, d.d_qk), k = bhsd("k", kSdpaK, d.s_kv, d.d_qk);
  auto v = bhsd("v", kSdpaV, d.s_kv, d.d_v);
  auto attrs = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(false).set_attn_scale(j.scale);
  if (j.causal) attrs.set_causal_mask(true);
  if (j.padding) {
    auto lengths = [&](const char* name, int64_t uid) {
      return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim({d.b, 1, 1, 1})
                          .set_stride({1, 1, 1, 1}).set_data_type(fe::DataType_t::INT32));
    };
    attrs.set_padding_mask(true).set_seq_len_q(lengths("seq_q", kSdpaSeqQ)).set_seq_len_kv(lengths("seq_kv", kSdpaSeqKV));
  }
  auto [o, stats] = g.sdpa(q, k, v, attrs);
  (void)stats;
  o->set_output(true).set_name("o").set_uid(kSdpaO).set_dim({d.b, d.h, d.s_q, d.d_v})
      .set_stride({d.h * d.s_q * d.d_v, d.s_q * d.d_v, d.d_v, 1});
}

}  // namespace bz
