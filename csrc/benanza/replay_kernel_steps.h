// benanza harness: the replay steps that run benanza's own kernels (replay_kernels.h), for the groups
// the bound charges a roofline: an elementwise chain as one fused pass (ChainStep), a pool as a
// pooling kernel of its own (PoolKernelStep). Each is checked like every step: against an fp32
// reference of the very inputs it read, made independently of the kernel under test (the chain one
// op at a time, chain_op_reference; the pool by pooling_reference).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "benanza/replay.h"
#include "benanza/replay_kernels.h"

namespace bz {

// An elementwise chain (BatchNormalization folded to a per-channel scale and shift, Mul, Add, Relu ...)
// as one pass of chain_forward: each input read once, the output written once. Its constants are
// random fp32 values in [0.25, 1.25) (no model weights reach the replay; positive, so that a Div by
// one stays in range), one per channel or one scalar each.
class ChainStep : public ReplayStep {
 public:
  struct Spec {
    Dims4 dims;  // the output's (channels on axis 1)
    const CudnnPrecision* p;
    bool nhwc;
    std::vector<ChainOp> ops;
    std::vector<long long> a, b, c;  // operand codes (ChainProgram)
    std::vector<double> alpha, beta;
    std::vector<long long> consts;  // each constant's values: 1 or dims.c
  };

  ChainStep(Context& ctx, const Spec& s, const ReplayIo& io, uint64_t seed) : s_(s), io_(io) {
    const size_t ops = s.ops.size(), inputs = io.reads.size();
    if (ops < 1 || ops > size_t(kMaxChainOps) || inputs < 1 || inputs > size_t(kMaxChainInputs) ||
        s.consts.size() > size_t(kMaxChainConsts))
      throw Error(Status::Failed, "a chain of 1 to 16 ops over 1 to 8 inputs and at most 8 constants");
    for (const auto* list : {&s.a, &s.b, &s.c})
      if (list->size() != ops) throw Error(Status::Failed, "a chain names three operands per op");
    if (s.alpha.size() != ops || s.beta.size() != ops) throw Error(Status::Failed, "a chain has two parameters per op");
    if (io.write_elements != count_of(s.dims)) throw Error(Status::Failed, "output buffer of the wrong size");
    p_.ops = int(ops);
    p_.inputs = int(inputs);
    p_.consts = int(s.consts.size());
    p_.count = (long long)count_of(s.dims);
    p_.channels = s.dims.c;
    p_.inner = s.nhwc ? 1 : (long long)s.dims.h * s.dims.w;
    for (size_t k = 0; k < s.consts.size(); ++k) {
      if (s.consts[k] != 1 && s.consts[k] != s.dims.c) throw Error(Status::Failed, "a constant is a scalar or per channel");
      konst_.emplace_back(size_t(s.consts[k]) * sizeof(float));
      ctx.fill(konst_.back(), size_t(s.consts[k]), DType::F32, seed * 16 + 2 + k);
      positive_variance(konst_.back().as<float>(), size_t(s.consts[k]), ctx.stream);
      p_.const_count[k] = int(s.consts[k]);
      p_.konst[k] = konst_.back().as<float>();
    }
    for (size_t k = 0; k < inputs; ++k) p_.in[k] = io.reads[k];
    for (size_t i = 0; i < ops; ++i) {
      p_.op[i] = int(s.ops[i]);
      p_.a[i] = code(s.a[i], i, false);
      p_.b[i] = code(s.b[i], i, true);
      p_.c[i] = code(s.c[i], i, true);
      p_.alpha[i] = float(s.alpha[i]);
      p_.beta[i] = float(s.beta[i]);
    }
  }

  void enqueue(Context& ctx) override {
    chain_forward(p_, s_.p->storage, io_.write, ctx.stream);
    BZ_CHECK_CUDA(cudaGetLastError());
  }

  // The chain one op at a time over whole fp32 tensors (chain_op_reference), from fp32 copies of its inputs.
  double check(Context& ctx) override {
    const size_t n = count_of(s_.dims);
    const DType t = s_.p->storage;
    const Packed4 full{s_.dims, s_.nhwc};
    std::vector<Buffer> regs;
    for (void* x : io_.reads) regs.push_back(as_float(ctx, x, t, n));
    auto operand = [&](int c) -> std::pair<Packed4, const float*> {
      if (c >= 0) return {full, regs[size_t(c)].as<float>()};
      if (c == kChainNone) return {full, nullptr};
      const int k = -2 - c;
      return {Packed4{Dims4{1, p_.const_count[k], 1, 1}, s_.nhwc}, p_.konst[k]};
    };
    for (int i = 0; i < p_.ops; ++i) {
      Buffer y(n * sizeof(float));
      const auto a = operand(p_.a[i]), b = operand(p_.b[i]), c = operand(p_.c[i]);
      chain_op_reference(ChainOp(p_.op[i]), p_.alpha[i], p_.beta[i], full, a.first, a.second, b.first, b.second,
                         c.first, c.second, y.as<float>(), ctx.stream);
      BZ_CHECK_CUDA(cudaGetLastError());
      regs.push_back(std::move(y));
    }
    return whole_error(ctx, io_.write, t, regs.back(), n);
  }

 private:
  // An operand code checked: an input or an earlier result, a constant of the step, or none (b, c only).
  int code(long long v, size_t op, bool may_be_none) const {
    const long long registers = (long long)io_.reads.size() + (long long)op;
    const bool ok = (v >= 0 && v < registers) || (v == kChainNone && may_be_none) ||
                    (v <= -2 && -2 - v < (long long)s_.consts.size());
    if (!ok) throw Error(Status::Failed, "chain op " + std::to_string(op) + " names an operand it cannot read");
    return int(v);
  }

  Spec s_;
  ReplayIo io_;
  ChainProgram p_;
  std::vector<Buffer> konst_;
};

// A pool the bound charges a roofline, with benanza's pooling kernel (pool_forward): max or average,
// pads begin and end apart, the model's output size, NCHW or NHWC.
class PoolKernelStep : public ReplayStep {
 public:
  struct Spec {
    PoolDims dims;
    const CudnnPrecision* p;
    cudnnPoolingMode_t mode;
    bool nhwc;
  };

  PoolKernelStep(const Spec& s, const ReplayIo& io) : s_(s), io_(io) {
    const PoolDims& d = s.dims;
    if (d.window_h < 1 || d.window_w < 1 || d.stride_h < 1 || d.stride_w < 1 || d.p < 1 || d.q < 1)
      throw Error(Status::Failed, "a pool with an empty window, stride or output");
    if (io.write_elements != count_of(Dims4{d.n, d.c, d.p, d.q}))
      throw Error(Status::Failed, "output buffer of the wrong size");
  }

  void enqueue(Context& ctx) override {
    pool_forward(s_.dims, s_.nhwc, int(s_.mode), s_.p->storage, io_.reads[0], io_.write, ctx.stream);
    BZ_CHECK_CUDA(cudaGetLastError());
  }

  double check(Context& ctx) override { return pool_error(ctx, io_, s_.dims, s_.nhwc, int(s_.mode), s_.p->storage); }

 private:
  Spec s_;
  ReplayIo io_;
};

}  // namespace bz
