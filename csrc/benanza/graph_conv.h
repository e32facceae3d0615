// benanza harness: the cuDNN graph-API convolution, conv_fprop [-> ADD bias] [-> ADD z] [-> activation],
// as one operation graph. Declared once here for the graph convolution benchmark
// (templates/cudnn_graph_conv.cu.j2) and `benanza replay`'s graph convolution steps (replay.h), so both
// run exactly the same graph.
#pragma once

#include <cmath>
#include <cstdint>

#include "benanza/cudnn_conv.h"
#include "benanza/cudnn_graph.h"

namespace bz {

// What the graph computes besides the convolution (the job-table row of benanza/apis/graph.py).
struct GraphConvSpec {
  bool bias;                                // add a per-channel bias (1 x K x 1 x 1)
  float alpha2;                             // 1: add the residual z before the activation
  bool has_act;                             // end in a pointwise activation
  cudnn_frontend::PointwiseMode_t pointwise;  // the activation's pointwise mode
  double upper_clip;                        // RELU_FWD upper clip (HUGE_VAL: none)
  double elu_alpha;                         // ELU_FWD alpha
  ConvDims dims;
};

// Tensor uids of the variant pack.
enum GraphConvUid : int64_t { kConvX = 1, kConvW, kConvY, kConvBias, kConvZ };

// The operation graph: conv_fprop -> [ADD bias] -> [ADD z] -> [activation], fp32 compute and
// intermediates, the precision's storage type and layout (strides) for the tensors in memory.
// Pads are the model's own, begin and end apart (pre/post padding), so asymmetric pads run too.
inline void declare_conv_graph(FeGraph& g, const GraphConvSpec& j, const CudnnPrecision& p) {
  namespace fe = cudnn_frontend;
  const ConvDims& d = j.dims;
  const bool nhwc = p.format == CUDNN_TENSOR_NHWC;
  const fe::DataType_t io = fe_type(p.data), f32 = fe::DataType_t::FLOAT;
  g.set_io_data_type(io).set_intermediate_data_type(f32).set_compute_data_type(f32);
  auto tensor = [&](const char* name, int64_t uid, int64_t n, int64_t c, int64_t h, int64_t w) {
    return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_data_type(io)
                        .set_dim({n, c, h, w}).set_stride(strides_4d(n, c, h, w, nhwc)));
  };
  auto x = tensor("x", kConvX, d.n, d.c, d.h, d.w);
  auto w = tensor("w", kConvW, d.k, d.c / d.groups, d.r, d.s);
  auto conv = fe::graph::Conv_fprop_attributes()
                  .set_name("conv")
                  .set_pre_padding({d.pad_top, d.pad_left})
                  .set_post_padding({d.pad_bottom, d.pad_right})
                  .set_stride({d.stride_h, d.stride_w})
                  .set_dilation({d.dil_h, d.dil_w})
                  .set_compute_data_type(f32);
  auto t = g.conv_fprop(x, w, conv);
  if (j.bias) {
    auto b = g.tensor(fe::graph::Tensor_attributes().set_name("bias").set_uid(kConvBias).set_data_type(io)
                          .set_dim({1, d.k, 1, 1}).set_stride({d.k, 1, d.k, d.k}));
    t = g.pointwise(t, b, fe::graph::Pointwise_attributes().set_name("add_bias").set_mode(fe::PointwiseMode_t::ADD)
                              .set_compute_data_type(f32));
  }
  if (j.alpha2 != 0.f) {
    auto z = tensor("z", kConvZ, d.n, d.k, d.p, d.q);
    t = g.pointwise(t, z, fe::graph::Pointwise_attributes().set_name("add_z").set_mode(fe::PointwiseMode_t::ADD)
                              .set_compute_data_type(f32));
  }
  if (j.has_act) {
    auto a = fe::graph::Pointwise_attributes().set_name("act").set_mode(j.pointwise).set_compute_data_type(f32);
    if (std::isfinite(j.upper_clip)) a.set_relu_lower_clip(0.f).set_relu_upper_clip(float(j.upper_clip));
    if (j.pointwise == fe::PointwiseMode_t::ELU_FWD) a.set_elu_alpha(float(j.elu_alpha));
    t = g.pointwise(t, a);
  }
  t->set_output(true).set_name("y").set_uid(kConvY).set_data_type(io).set_dim({d.n, d.k, d.p, d.q})
      .set_stride(strides_4d(d.n, d.k, d.p, d.q, nhwc));
}

}  // namespace bz
