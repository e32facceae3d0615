// benanza harness: cuDNN helpers shared by the cuDNN benchmarks.
#pragma once

#include <cudnn.h>

#include <utility>

#include "benanza/common.h"

namespace bz {

// One row of a generated precision table: the C++ spellings of a benanza Precision
// (benanza/library.py PRECISIONS), so that benchmark bodies never branch on names.
struct CudnnPrecision {
  const char* dtype;   // benanza Precision value: "fp32", "tf32", "fp16", "bf16"
  const char* math;    // benanza Math value
  const char* layout;  // "NCHW" or "NHWC"
  cudnnDataType_t data;
  cudnnDataType_t compute;
  cudnnMathType_t math_type;
  cudnnTensorFormat_t format;
  DType storage;
  double tolerance;
};

// RAII for a cuDNN descriptor type.
template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class Descriptor {
 public:
  Descriptor() { BZ_CHECK_CUDNN(Create(&d_)); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() { Destroy(d_); }
  operator T() const { return d_; }

 private:
  T d_{};
};

using TensorDesc = Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc = Descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc =
    Descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;
using ActivationDesc =
    Descriptor<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor, cudnnDestroyActivationDescriptor>;
using PoolingDesc = Descriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor>;
using LRNDesc = Descriptor<cudnnLRNDescriptor_t, cudnnCreateLRNDescriptor, cudnnDestroyLRNDescriptor>;
using OpTensorDesc =
    Descriptor<cudnnOpTensorDescriptor_t, cudnnCreateOpTensorDescriptor, cudnnDestroyOpTensorDescriptor>;

}  // namespace bz
