"""A convolution's output is checked on three whole batch entries (bz::ConvReference: the first,
the middle and the last), not on all of them: the naive fp32 reference of a batch-256 layer cost
up to 1.9 s of GPU time per job (issue 17). On a GPU: the entries' reference equals the whole
batch's on those entries (NCHW and NHWC, with bias, residual and activation), and an error in a
checked entry is caught wherever it lies in it, while one in an unchecked entry is not (the
trade-off, stated in docs/GENERATOR.md)."""

from __future__ import annotations

from pathlib import Path

from conftest import cuda_tool, runs_a_cuda_program

from benanza import paths

PROGRAM = r"""
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>
#include "benanza/conv_reference.h"

using namespace bz;

// Each line: "<layout> <image> <max_rel_error>": image -1 for the unperturbed output, else the
// batch entry one output value was changed in (by +100, at the entry's first, middle or last value).
int main() {
  for (int nhwc = 0; nhwc < 2; ++nhwc) {
    const ConvShape s{8, 3, 6, 5, 4, 3, 2, 1, 0, 2, 1, 1, 1, 1, 3, 4, bool(nhwc)};  // p = 3, q = 4
    const size_t xs = size_t(s.n) * s.c * s.h * s.w, ws = size_t(s.k) * s.c * s.r * s.s;
    const size_t entry = size_t(s.k) * s.p * s.q, ys = s.n * entry;
    Buffer x(xs * 4), w(ws * 4), z(ys * 4), bias(s.k * 4), full(ys * 4);
    fill_uniform(x.get(), xs, DType::F32, 1, nullptr);
    fill_uniform(w.get(), ws, DType::F32, 2, nullptr);
    fill_uniform(z.get(), ys, DType::F32, 3, nullptr);
    fill_uniform(bias.get(), s.k, DType::F32, 4, nullptr);
    // the whole batch's reference stands for an algorithm's output
    conv_reference(s, x.get(), w.get(), DType::F32, full.as<float>(), nullptr);
    bias_act_reference(s, full.as<float>(), DType::F32, z.get(), bias.get(), 1.f, 1.f, 1 /* relu */, 0.0, nullptr);
    ConvReference ref(s);
    ref.conv(x.get(), w.get(), DType::F32, nullptr);
    ref.bias_act(DType::F32, z.get(), bias.get(), 1.f, 1.f, 1, 0.0, nullptr);
    std::printf("%s -1 %g\n", nhwc ? "nhwc" : "nchw", max_rel_error(full.get(), DType::F32, ref.spans(), nullptr));
    std::vector<float> host(ys);
    cudaMemcpy(host.data(), full.get(), ys * 4, cudaMemcpyDeviceToHost);
    for (int image = 0; image < s.n; ++image) {
      double least = INFINITY;  // of the three places: each must be caught
      for (size_t at : {size_t(0), entry / 2, entry - 1}) {
        std::vector<float> bad = host;
        bad[image * entry + at] += 100.f;
        Buffer out(ys * 4);
        cudaMemcpy(out.get(), bad.data(), ys * 4, cudaMemcpyHostToDevice);
        least = std::min(least, max_rel_error(out.get(), DType::F32, ref.spans(), nullptr));
      }
      std::printf("%s %d %g\n", nhwc ? "nhwc" : "nchw", image, least);
    }
  }
  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}
"""


@runs_a_cuda_program
def test_checked_entries_catch_errors_where_they_lie_on_a_gpu(tmp_path: Path) -> None:
    lines = cuda_tool(tmp_path, PROGRAM, paths.csrc_dir() / "benanza/kernels.cu")
    errors = {(layout, int(image)): float(e) for layout, image, e in map(str.split, lines)}
    for layout in ("nchw", "nhwc"):
        assert errors[(layout, -1)] == 0.0, errors  # the same kernel on the same entries
        caught = {image for image in range(8) if errors[(layout, image)] > 1.0}
        missed = {image for image in range(8) if errors[(layout, image)] == 0.0}
        assert caught == {0, 4, 7} and missed == {1, 2, 3, 5, 6}, errors
