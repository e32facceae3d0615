"""bench/close_loop.py's native changes (BN folding, conv+ReLU fusion, branches on streams) keep the model's outputs,
and its command line refuses what it does not know. The torch parts skip where torch is not
installed (CI); the GPU run itself is the lead's (docs/RESULTS.md §5)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "close_loop.py"
sys.path.insert(0, str(SCRIPT.parent))


def test_help_and_a_bad_gap_kind_are_one_line_answers() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "--dry-run" in done.stdout and "--budget-s" in done.stdout
    bad = subprocess.run([sys.executable, str(SCRIPT), "--only", "nope", "--dry-run"], capture_output=True, text=True)
    assert bad.returncode == 2 and "no experiment of 'nope'" in bad.stderr and "Traceback" not in bad.stderr
    no_out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert no_out.returncode == 2 and "--out is required" in no_out.stderr


def test_every_gap_kind_has_an_experiment_and_names_a_shipped_bundle_pattern() -> None:
    import close_loop

    assert {e.gap for e in close_loop.EXPERIMENTS} == {"algorithm choice", "Tensor Cores", "folding", "fusion",
                                                       "parallel branches", "layout", "framework overhead"}
    assert {e.bundle for e in close_loop.EXPERIMENTS} == {"resnet50_b64_torch_fp32_heuristic",
                                                          "resnet50_b64_torch_fp32", "inception_v1_b1_torch_fp32",
                                                          "resnet50_b64_torch_fp16"}


def test_folding_and_streams_keep_the_outputs() -> None:
    torch = pytest.importorskip("torch")
    import close_loop
    from torch import fx, nn

    class Branchy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(8)
            self.a = nn.Conv2d(8, 4, 1)
            self.b = nn.Sequential(nn.Conv2d(8, 4, 3, padding=1), nn.ReLU())
            self.c = nn.MaxPool2d(3, 1, 1)

        def forward(self, x):
            y = torch.relu(self.bn(self.stem(x)))
            return torch.cat([self.a(y), self.b(y), self.c(y)], 1)

    torch.manual_seed(0)
    net = Branchy().eval()
    with torch.no_grad():
        net.bn.running_mean.uniform_(-1, 1)
        net.bn.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 3, 8, 8)
    gm = fx.symbolic_trace(net)
    with torch.inference_mode():
        ref = gm(x)
        folded, n = close_loop.fold_bn(close_loop.copy.deepcopy(gm))
        assert n == 1 and not any(isinstance(m, nn.BatchNorm2d) for m in folded.modules())
        assert torch.allclose(folded(x), ref, atol=1e-5)
        fused, n = close_loop.fuse_conv_relu(close_loop.fold_bn(close_loop.copy.deepcopy(gm))[0])
        assert n == 1 and torch.allclose(fused(x), ref, atol=1e-5)  # branch b's conv + ReLU
        plan = close_loop.stream_plan(gm.graph)
        assert len(set(plan.values())) == 3  # three branches after the ReLU
        streamed = close_loop.streamed(close_loop.copy.deepcopy(gm))
        assert torch.equal(streamed(x), ref)


def test_each_cudnn_setting_is_timed_on_its_own_thread() -> None:
    """PyTorch's cuDNN plan cache is thread-local and keyed without ``benchmark``: benchmark off and
    on must not share a thread, a graph change must share its baseline's (same conv plans)."""
    import threading

    import close_loop as cl

    threads = cl.PlanCacheThreads()
    try:
        ident = {v.name: threads.submit(v, threading.get_ident)
                 for v in (cl.FP32, cl.FP32_BENCH, cl.FP32_ALL, cl.TF32_ALL, cl.FOLDED, cl.FUSED, cl.GRAPHED)}
    finally:
        threads.close()
    assert len({ident[v.name] for v in (cl.FP32, cl.FP32_BENCH, cl.FP32_ALL, cl.TF32_ALL)}) == 4
    assert ident[cl.FOLDED.name] == ident[cl.FUSED.name] == ident[cl.GRAPHED.name] == ident[cl.FP32_BENCH.name]
    assert threading.get_ident() not in ident.values()


def test_the_changes_isolate_what_the_prediction_assumes() -> None:
    import close_loop as cl

    by_gap = {e.gap: e for e in cl.EXPERIMENTS}
    algo, tc, par = by_gap["algorithm choice"], by_gap["Tensor Cores"], by_gap["parallel branches"]
    # the bound takes the best graph-API engine: every engine config is tried, on both sides of the TC change
    assert algo.apis == tc.apis == "graph" and algo.after.benchmark_limit == 0
    assert tc.before.benchmark_limit == tc.after.benchmark_limit == 0 and tc.after.tf32 and not tc.before.tf32
    # only the streams differ: both sides are one CUDA graph, launched off the critical path
    assert par.before.cuda_graph and par.after.cuda_graph and (par.before.change, par.after.change) == ("", "streams")


def test_spread_of_the_realized_saving() -> None:
    import close_loop as cl

    before = {"kernel_ms_iters": [10.0, 10.1, 10.2, 10.3, 10.4] * 4}
    after = {"kernel_ms_iters": [9.0, 9.1, 9.2, 9.3, 9.4] * 4}
    q = __import__("statistics").quantiles(before["kernel_ms_iters"], n=4)
    one = 1.2533 * (q[2] - q[0]) / 1.349 / 20 ** 0.5
    assert abs(cl.spread(before, after) - one * 2 ** 0.5) < 1e-12
    assert cl.spread({"kernel_ms_iters": [1.0, 2.0]}, after) is None  # too few iterations to say


def test_the_graph_variants_wrap_and_keep_the_outputs_off_the_gpu() -> None:
    """Off the GPU the CUDA-graph wrapper runs its module directly (the capture needs CUDA): the
    wrapping and the streams' interpreter are checked here, the capture in the lead's GPU run."""
    torch = pytest.importorskip("torch")
    import close_loop
    from torch import fx, nn

    class Fork(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem, self.a, self.b = nn.Conv2d(3, 3, 1), nn.Conv2d(3, 4, 1), nn.Conv2d(3, 4, 3, padding=1)

        def forward(self, x):
            y = self.stem(x)  # a fork is a compute node read by several: the two convs after it
            return torch.cat([self.a(y), self.b(y)], 1)

    gm = fx.symbolic_trace(Fork().eval())
    x = torch.randn(1, 3, 8, 8)
    with torch.inference_mode():
        ref = gm(x)
        for variant, streams in ((close_loop.GRAPHED, None), (close_loop.STREAMS, 2)):
            module, notes = close_loop.apply(gm, variant)
            assert notes.get("CUDA graph") is True and notes.get("streams used") == streams
            assert torch.equal(module(x), ref)


def test_the_native_set_closes_every_gap_kind_on_modules_and_onnx_runtime() -> None:
    import close_loop as cl

    kinds = {e.gap for e in cl.EXPERIMENTS}
    assert {e.gap for e in cl.NATIVE_EXPERIMENTS if e.source == cl.MODULE} == kinds
    assert {e.source for e in cl.NATIVE_EXPERIMENTS} == {cl.MODULE, cl.ORT}
    assert {e.model for e in cl.NATIVE_EXPERIMENTS} >= {"resnet50", "googlenet", "bert_base"}
    assert all(e.bundle.startswith("native_") for e in cl.NATIVE_EXPERIMENTS)
    assert all(e.before.ort == e.after.ort == (e.source == cl.ORT) for e in cl.NATIVE_EXPERIMENTS)


def test_native_residual_add_fuses_into_the_conv_call() -> None:
    """torchvision's ``out += identity`` is an fx call_function (operator.iadd), not an onnx2torch module."""
    torch = pytest.importorskip("torch")
    import close_loop
    from torch import fx, nn

    class Residual(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(4, 4, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(4)
            self.relu = nn.ReLU()

        def forward(self, x):
            out = self.bn(self.conv(x))
            out += x
            return self.relu(out)

    torch.manual_seed(0)
    net = Residual().eval()
    x = torch.randn(2, 4, 8, 8)
    gm = fx.symbolic_trace(net)
    with torch.inference_mode():
        fused, n = close_loop.fuse_conv_relu(close_loop.fold_bn(close_loop.copy.deepcopy(gm))[0])
        assert n == 1 and torch.allclose(fused(x), net(x), atol=1e-5)
