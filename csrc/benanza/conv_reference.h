// benanza harness, bz::ConvReference: the fp32 reference of a convolution (and of its bias,
// residual and activation) on the batch entries its output is checked on.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <numeric>
#include <vector>

#include "benanza/buffers.h"
#include "benanza/common.h"
#include "benanza/kernels.h"

namespace bz {

// The batch entries a convolution's output is checked on: the first, the middle and the last
// (all of them when n <= 3).
inline std::vector<int> checked_images(int n) {
  if (n <= 3) {
    std::vector<int> all(size_t(n > 0 ? n : 0));
    std::iota(all.begin(), all.end(), 0);
    return all;
  }
  return {0, n / 2, n - 1};
}

// The naive reference of every entry of a batch-256 layer took up to 1.9 s of GPU time in one job
// on the H100 (issue 17's sample), more than all of that job's timed calls. Three entries check
// every output channel and position, the pads and the batch stride, for 3/n of it. Both layouts
// (NCHW, NHWC) keep a batch entry contiguous, so each checked entry is one span of the output.
class ConvReference {
 public:
  ConvReference() = default;
  explicit ConvReference(const ConvShape& shape)
      : shape_(shape),
        images_(checked_images(shape.n)),
        image_in_(size_t(shape.c) * shape.h * shape.w),
        image_out_(size_t(shape.k) * shape.p * shape.q),
        ref_(images_.size() * image_out_ * sizeof(float)) {}

  // ref = conv(x, w) on the checked entries (x and w of the storage type `dtype`).
  void conv(const void* x, const void* w, DType dtype, cudaStream_t stream) const {
    const size_t e = dtype_size(dtype);
    for (size_t i = 0; i < images_.size(); ++i)
      conv_reference(one_image(), static_cast<const char*>(x) + size_t(images_[i]) * image_in_ * e, w, dtype,
                     slot(i), stream);
  }

  // Then, in place: ref = act(alpha1 * ref + alpha2 * z + bias) (bias_act_reference; z has the
  // output's shape and may be null when alpha2 == 0).
  void bias_act(DType dtype, const void* z, const void* bias, float alpha1, float alpha2, int act, double coef,
                cudaStream_t stream) const {
    const size_t e = dtype_size(dtype);
    for (size_t i = 0; i < images_.size(); ++i) {
      const void* zi = z ? static_cast<const char*>(z) + size_t(images_[i]) * image_out_ * e : nullptr;
      bias_act_reference(one_image(), slot(i), dtype, zi, bias, alpha1, alpha2, act, coef, stream);
    }
  }

  // The output's checked spans (Context::check): one batch entry each.
  std::vector<CheckedSpan> spans() const {
    std::vector<CheckedSpan> out;
    for (size_t i = 0; i < images_.size(); ++i) out.push_back({size_t(images_[i]) * image_out_, image_out_, slot(i)});
    return out;
  }

 private:
  ConvShape one_image() const {
    ConvShape one = shape_;
    one.n = 1;
    return one;
  }
  float* slot(size_t i) const { return ref_.as<float>() + i * image_out_; }

  ConvShape shape_{};
  std::vector<int> images_;
  size_t image_in_ = 0, image_out_ = 0;
  Buffer ref_;
};

}  // namespace bz
