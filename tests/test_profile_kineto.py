"""Kineto trace reader and interval helpers, on a real PyTorch 2.11 trace (CPU + CUDA) captured on an H100."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from benanza.errors import BenanzaError
from benanza.profile.kineto import busy_time, gaps, read_kineto_trace

SAMPLES = Path(__file__).parent / "data" / "samples"
TRACE = SAMPLES / "torch2.11_smallcnn_b1_trace.json.gz"
# the captured model: conv, (bias add), relu, maxpool, conv, (bias add), relu, avgpool(mean), linear(gemv), softmax
KERNEL_OPS = ["aten::cudnn_convolution", "aten::add_", "aten::clamp_min", "aten::max_pool2d_with_indices",
              "aten::cudnn_convolution", "aten::add_", "aten::clamp_min", "aten::mean", "aten::addmm",
              "aten::_softmax"]


def test_kernels_linked_to_launch_and_op():
    trace = read_kineto_trace(TRACE)
    raw = json.load(gzip.open(TRACE, "rt"))["traceEvents"]
    assert len(trace.kernels) == sum(1 for e in raw if e.get("cat") == "kernel")
    assert trace.notes == ()
    assert trace.devices[0]["name"] == "NVIDIA H100 80GB HBM3" and trace.cuda_runtime_version == 13000
    for k in trace.kernels:
        assert k.runtime in ("cudaLaunchKernel", "cudaLaunchKernelExC")
        assert k.dur_us > 0 and k.device == 0 and k.stream == 7
        assert k.grid and k.block
    assert [k.cpu_op for k in trace.kernels] == KERNEL_OPS * 3
    conv = trace.kernels[0]
    assert "fprop" in conv.name and conv.runtime == "cudaLaunchKernelExC"
    launch = next(r for r in trace.runtime_calls if r.correlation == conv.correlation)
    assert launch.start_us <= conv.start_us  # launched before it ran
    copies = trace.memory_ops
    assert [c.name.split(" ")[1] for c in copies] == ["HtoD", "DtoH"] * 3
    assert copies[0].bytes == 1 * 3 * 32 * 32 * 4 and copies[0].cpu_op == "aten::copy_"


def test_runs_from_gpu_annotations():
    trace = read_kineto_trace(TRACE)
    runs = [a for a in trace.annotations if a.gpu and a.name == "model_run"]
    cpu_runs = [a for a in trace.annotations if not a.gpu and a.name == "model_run"]
    assert len(runs) == len(cpu_runs) == 3
    for run in runs:
        events = trace.within(run.start_us, run.end_us)
        assert [e.kind for e in events].count("kernel") == len(KERNEL_OPS)
        assert [e.kind for e in events].count("memcpy") == 2
        busy = busy_time(e.interval for e in events)
        assert 0 < busy <= sum(e.dur_us for e in events) + 1e-6
        assert busy < run.dur_us  # batch 1: the GPU idles most of the run
        assert len(gaps(e.interval for e in events)) == len(events) - 1  # one stream, no overlap


def test_busy_time_and_gaps_are_union_not_sum():
    intervals = [(0.0, 10.0), (5.0, 15.0), (20.0, 25.0), (21.0, 22.0)]
    assert busy_time(intervals) == 20.0
    assert gaps(intervals) == [(15.0, 20.0)]
    assert busy_time([]) == 0.0 and gaps([]) == []
    assert busy_time([(1e12, 1e12 + 2.5), (1e12 + 1.0, 1e12 + 3.0)]) == pytest.approx(3.0, abs=1e-9)
    with pytest.raises(ValueError):
        busy_time([(2.0, 1.0)])


def test_not_a_kineto_trace(tmp_path):
    with pytest.raises(BenanzaError, match="no 'traceEvents'") as err:
        read_kineto_trace(SAMPLES / "ort1.31_resnet50light_b1_profile.json.gz")
    assert "ort1.31_resnet50light_b1_profile.json.gz" in str(err.value)
    empty = tmp_path / "t.json"
    empty.write_text('{"traceEvents": []}')
    with pytest.raises(BenanzaError, match="no cpu_op"):
        read_kineto_trace(empty)


def test_a_tensor_list_argument_reads_as_its_first_shape(tmp_path):
    """aten::cat (an ONNX Concat) records its input as a list of shapes: DenseNet's traces have it."""
    data = json.loads(gzip.open(TRACE).read())
    op = next(e for e in data["traceEvents"] if e.get("cat") == "cpu_op")
    cat = {**op, "name": "aten::cat", "ts": op["ts"] + 1e6,
           "args": {**op.get("args", {}), "Input Dims": [[[1, 64, 56, 56], [1, 32, 56, 56]], []]}}
    data["traceEvents"].append(cat)
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(data))
    parsed = next(o for o in read_kineto_trace(path).cpu_ops if o.name == "aten::cat")
    assert parsed.input_dims == ((1, 64, 56, 56), ())
