// benanza harness: the legacy cuDNN convolution problem shared by the
// cudnnConvolutionForward and cudnnConvolutionBiasActivationForward benchmarks:
// descriptors, random inputs, the fp32 reference output (of checked batch entries), workspace sizes and the
// heuristic / find rankings of the forward algorithms.
#pragma once

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <utility>

#include "benanza/bench.h"
#include "benanza/conv_reference.h"
#include "benanza/cudnn_util.h"

namespace bz {

// One convolution as the model has it (ONNX pads: begin and end per axis).
struct ConvDims {
  int n, c, h, w;  // input
  int k, r, s;     // filters (k outputs, r x s window; each sees c / groups channels)
  int pad_top, pad_left, pad_bottom, pad_right;
  int stride_h, stride_w;
  int dil_h, dil_w;
  int groups;
  int p, q;  // output height, width
};

// The dims as a JSON object (for --list).
inline std::string to_json(const ConvDims& d) {
  Json j;
  j.add("n", d.n).add("c", d.c).add("h", d.h).add("w", d.w).add("k", d.k).add("r", d.r).add("s", d.s);
  j.add("pad_top", d.pad_top).add("pad_left", d.pad_left).add("pad_bottom", d.pad_bottom);
  j.add("pad_right", d.pad_right).add("stride_h", d.stride_h).add("stride_w", d.stride_w);
  j.add("dil_h", d.dil_h).add("dil_w", d.dil_w).add("groups", d.groups).add("p", d.p).add("q", d.q);
  return j.str();
}

using AlgoRanks = std::array<std::optional<int>, CUDNN_CONVOLUTION_FWD_ALGO_COUNT>;

// The order to measure `algos` in: by `first` (cudnnFind's timed order), then by `then` (the
// heuristic's), the unranked last in their own order. Racing (Context::measure) compares each
// algorithm with the job's best so far, so the likely fastest first lets the others be timed coarsely.
template <size_t N>
std::array<size_t, N> measuring_order(const cudnnConvolutionFwdAlgo_t (&algos)[N], const AlgoRanks& first,
                                      const AlgoRanks& then = AlgoRanks{}) {
  std::array<size_t, N> order{};
  for (size_t a = 0; a < N; ++a) order[a] = a;
  constexpr int kUnranked = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  auto key = [&](size_t a) {
    const size_t algo = size_t(algos[a]);
    return std::pair{first[algo].value_or(kUnranked), then[algo].value_or(kUnranked)};
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return key(x) < key(y); });
  return order;
}

// The legacy API has one pad per axis: a layer with different begin and end pads is
// recorded as not supported (never silently measured with other pads).
inline void require_symmetric_pads(const ConvDims& d) {
  if (d.pad_top != d.pad_bottom || d.pad_left != d.pad_right)
    throw Error(Status::NotSupported, "asymmetric pads (top " + std::to_string(d.pad_top) + ", bottom " +
                                          std::to_string(d.pad_bottom) + ", left " + std::to_string(d.pad_left) +
                                          ", right " + std::to_string(d.pad_right) +
                                          ") are not supported by the legacy cuDNN convolution API");
}

// The descriptors of one convolution in precision `p` (the model's dims, checked against cuDNN's
// output shape), without buffers: ConvProblem adds its random operands, and `benanza replay`'s
// convolution steps (replay.h) read and write the model's own buffers through the same descriptors.
class ConvDescriptors {
 public:
  TensorDesc x_desc, y_desc;
  FilterDesc w_desc;
  ConvDesc conv;
  size_t x_count = 0, w_count = 0, y_count = 0;
  ConvShape shape{};

  ConvDescriptors(const ConvDims& d, const CudnnPrecision& p) {
    require_symmetric_pads(d);
    shape = ConvShape{d.n, d.c, d.h, d.w, d.k, d.r, d.s, d.pad_top, d.pad_left, d.stride_h, d.stride_w,
                      d.dil_h, d.dil_w, d.groups, d.p, d.q, p.format == CUDNN_TENSOR_NHWC};
    BZ_CHECK_CUDNN(cudnnSetTensor4dDescriptor(x_desc, p.format, p.data, d.n, d.c, d.h, d.w));
    BZ_CHECK_CUDNN(cudnnSetFilter4dDescriptor(w_desc, p.data, p.format, d.k, d.c / d.groups, d.r, d.s));
    BZ_CHECK_CUDNN(cudnnSetConvolution2dDescriptor(conv, d.pad_top, d.pad_left, d.stride_h, d.stride_w, d.dil_h,
                                                   d.dil_w, CUDNN_CROSS_CORRELATION, p.compute));
    BZ_CHECK_CUDNN(cudnnSetConvolutionMathType(conv, p.math_type));
    BZ_CHECK_CUDNN(cudnnSetConvolutionGroupCount(conv, d.groups));
    int on = 0, oc = 0, oh = 0, ow = 0;
    BZ_CHECK_CUDNN(cudnnGetConvolution2dForwardOutputDim(conv, x_desc, w_desc, &on, &oc, &oh, &ow));
    if (on != d.n || oc != d.k || oh != d.p || ow != d.q)
      throw Error(Status::Failed, "cuDNN output shape " + dims(on, oc, oh, ow) + " differs from the model's " +
                                      dims(d.n, d.k, d.p, d.q));
    BZ_CHECK_CUDNN(cudnnSetTensor4dDescriptor(y_desc, p.format, p.data, d.n, d.k, d.p, d.q));
    x_count = size_t(d.n) * d.c * d.h * d.w;
    w_count = size_t(d.k) * (d.c / d.groups) * d.r * d.s;
    y_count = size_t(d.n) * d.k * d.p * d.q;
  }

  size_t workspace_size(Context& ctx, cudnnConvolutionFwdAlgo_t algo) const {
    size_t bytes = 0;
    BZ_CHECK_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(ctx.cudnn(), x_desc, w_desc, conv, y_desc, algo, &bytes));
    return bytes;
  }

 private:
  static std::string dims(int a, int b, int c, int d) {
    return "[" + std::to_string(a) + "," + std::to_string(b) + "," + std::to_string(c) + "," + std::to_string(d) + "]";
  }
};

class ConvProblem : public ConvDescriptors {
 public:
  Buffer x, w, y;
  ConvReference ref;  // fp32 reference of y's checked batch entries, in y's layout

  // Descriptors, random x and w, and the reference conv(x, w) (epilogues add to it).
  ConvProblem(Context& ctx, const ConvDims& d, const CudnnPrecision& p, uint64_t seed) : ConvDescriptors(d, p) {
    size_t e = dtype_size(p.storage);
    x = Buffer(x_count * e);
    w = Buffer(w_count * e);
    y = Buffer(y_count * e);
    ref = ConvReference(shape);
    ctx.fill(x, x_count, p.storage, seed * 16 + 1);
    ctx.fill(w, w_count, p.storage, seed * 16 + 2);
    ref.conv(x.get(), w.get(), p.storage, ctx.stream);
  }

  // Fill y with NaN so that an algorithm that writes nothing fails the output check.
  void poison_output(Context& ctx) const { BZ_CHECK_CUDA(cudaMemsetAsync(y.get(), 0xff, y.bytes(), ctx.stream)); }

  // Rank of each algorithm in cudnnGetConvolutionForwardAlgorithm_v7's order (entries
  // with status success only, first occurrence); empty where it has none.
  AlgoRanks heuristic_ranks(Context& ctx) const {
    std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT * 2> perf{};
    int n = 0;
    if (cudnnGetConvolutionForwardAlgorithm_v7(ctx.cudnn(), x_desc, w_desc, conv, y_desc, int(perf.size()), &n,
                                               perf.data()) != CUDNN_STATUS_SUCCESS)
      return {};
    return ranks(perf.data(), n);
  }

  // Rank of each algorithm in cudnnFindConvolutionForwardAlgorithmEx's (timed) order,
  // given as much workspace as the largest algorithm asks for and memory allows.
  AlgoRanks find_ranks(Context& ctx) const {
    size_t want = 0;
    for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
      size_t b = 0;
      if (cudnnGetConvolutionForwardWorkspaceSize(ctx.cudnn(), x_desc, w_desc, conv, y_desc,
                                                  cudnnConvolutionFwdAlgo_t(a), &b) == CUDNN_STATUS_SUCCESS)
        want = std::max(want, b);
    }
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) want = std::min(want, free_b / 2);
    Buffer work;
    try {
      work = Buffer(want);
    } catch (const Error&) {
      want = 0;
    }
    std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT * 2> perf{};
    int n = 0;
    cudnnStatus_t s = cudnnFindConvolutionForwardAlgorithmEx(ctx.cudnn(), x_desc, x.get(), w_desc, w.get(), conv,
                                                             y_desc, y.get(), int(perf.size()), &n, perf.data(),
                                                             work.get(), want);
    cudaGetLastError();
    return s == CUDNN_STATUS_SUCCESS ? ranks(perf.data(), n) : AlgoRanks{};
  }

 private:
  static AlgoRanks ranks(const cudnnConvolutionFwdAlgoPerf_t* perf, int n) {
    AlgoRanks out{};
    int next = 0;
    for (int i = 0; i < n; ++i) {
      int a = int(perf[i].algo);
      if (perf[i].status == CUDNN_STATUS_SUCCESS && a >= 0 && a < int(out.size()) && !out[size_t(a)])
        out[size_t(a)] = next++;
    }
    return out;
  }
};

}  // namespace bz
