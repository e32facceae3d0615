"""``benanza profile``'s capture side: weight materialization, the child protocol, the no-GPU error.

The GPU test at the end captures real bundles in ONNX Runtime and PyTorch and maps them
(skipped without a usable GPU).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from conftest import LIGHT
from onnx import TensorProto, numpy_helper

from benanza.cli import main
from benanza.errors import BenanzaError
from benanza.library import Precision
from benanza.measure import system
from benanza.model.onnx_import import load_model
from benanza.profile.bundle import Framework, read_bundle
from benanza.profile.capture import (
    LOG_ENV,
    AlgoSearch,
    ChildRun,
    capture,
    child_command,
    export_command,
    run_child,
    run_gated,
)
from benanza.profile.materialize import materialize, strip_weights, to_fp16

GPU = bool(system.device_info().get("usable"))


def _weights(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


@pytest.mark.parametrize("name", ["light_squeezenet.onnx", "light_resnet50.onnx"])
def test_materialize_folds_weights_into_random_initializers(tmp_path, name):
    src = LIGHT / name
    assert any(n.op_type == "ConstantOfShape" for n in onnx.load(str(src)).graph.node)
    mat = materialize(src, 2, tmp_path / "model.onnx")
    model = onnx.load(str(mat.path))
    onnx.checker.check_model(model, full_check=True)
    assert not any(n.op_type in ("ConstantOfShape", "Constant", "Shape") for n in model.graph.node)
    weights = _weights(model)
    original = load_model(src, 2)
    # the same layers, in the same order, with the same keys: the framework runs what benanza analyzes
    again = load_model(mat.path, 2)
    assert [(x.name, x.op, x.key) for x in again.layers] == [(x.name, x.op, x.key) for x in original.layers]
    for layer in original.layers:
        for t in layer.inputs:
            if t.constant:
                assert t.name in weights and weights[t.name].shape == t.shape, (layer.name, t.name)
    assert mat.randomized
    for name_ in mat.randomized:
        w = weights[name_]
        assert w.dtype == np.float32 and np.isfinite(w).all() and (w.size == 1 or w.std() > 0)
    data = [v for v in model.graph.input if v.name not in weights]
    assert len(data) == 1 and data[0].type.tensor_type.shape.dim[0].dim_value == 2
    bn_vars = [n.input[4] for n in model.graph.node if n.op_type == "BatchNormalization"]
    assert all((weights[v] > 0).all() for v in bn_vars)  # variances feed a square root


def test_materialized_model_runs_in_onnxruntime_cpu(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    mat = materialize(LIGHT / "light_resnet50.onnx", 2, tmp_path / "model.onnx")
    sess = ort.InferenceSession(str(mat.path), providers=["CPUExecutionProvider"])
    (inp,) = sess.get_inputs()
    assert inp.shape == [2, 3, 224, 224]
    x = np.random.default_rng(1).uniform(-1, 1, size=inp.shape).astype(np.float32)
    (y,) = sess.run(None, {inp.name: x})
    assert y.shape == (2, 1000) and np.isfinite(y).all()
    assert not np.allclose(y[0], y[1])  # random weights, different inputs: different outputs (no zero weights)


def test_materialize_batch_change_repoints_reshape(tmp_path):
    mat = materialize(LIGHT / "light_zfnet512.onnx", 3, tmp_path / "model.onnx")
    model = onnx.load(str(mat.path))
    weights = _weights(model)
    (reshape,) = [n for n in model.graph.node if n.op_type == "Reshape"]
    assert weights[reshape.input[1]].tolist() == [3, 18432]


def test_to_fp16_casts_inputs_outputs_and_weights(tmp_path):
    mat = materialize(LIGHT / "light_squeezenet.onnx", 1, tmp_path / "model.onnx")
    half = to_fp16(mat.path, tmp_path / "model_fp16.onnx")
    model = onnx.load(str(half))
    onnx.checker.check_model(model, full_check=True)
    assert all(v.type.tensor_type.elem_type == TensorProto.FLOAT16 for v in [*model.graph.input, *model.graph.output])
    assert {t.data_type for t in model.graph.initializer} <= {TensorProto.FLOAT16, TensorProto.INT64}


def test_to_fp16_refuses_a_graph_that_makes_its_own_floats(tmp_path):
    x = onnx.helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = onnx.helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    nodes = [onnx.helper.make_node("Constant", [], ["c"], name="ones",
                                   value=onnx.helper.make_tensor("v", TensorProto.FLOAT, [1, 4], [1.0] * 4)),
             onnx.helper.make_node("Add", ["x", "c"], ["y"], name="add")]
    path = tmp_path / "const.onnx"
    onnx.save(onnx.helper.make_model(onnx.helper.make_graph(nodes, "g", [x], [y])), str(path))
    with pytest.raises(BenanzaError, match=r"const\.onnx: fp16 capture needs a graph without Constant nodes"):
        to_fp16(path, tmp_path / "out.onnx")


def test_child_command_is_an_argument_list(tmp_path):
    hostile = tmp_path / "m o'd\"el; rm -rf $HOME `x`.onnx"
    bundle = tmp_path / "b u;ndle"
    run = child_command(Framework.ONNXRUNTIME, hostile, bundle, Precision.TF32, 7, 2, AlgoSearch.HEURISTIC, True,
                        python="/usr/bin/python3")
    assert run.argv[:3] == ("/usr/bin/python3", "-m", "benanza.profile.capture_child")
    assert str(hostile) in run.argv and str(bundle) in run.argv  # each path is one argument, untouched
    args = dict(zip(run.argv[3::2], run.argv[4::2], strict=True))
    assert args == {"--framework": "onnxruntime", "--model": str(hostile), "--bundle": str(bundle), "--dtype": "tf32",
                    "--runs": "7", "--warmup": "2", "--algo-search": "heuristic", "--mode": "profile"}
    assert run.env["CUDNN_LOGLEVEL_DBG"] == "3"
    assert run.env["CUDNN_LOGDEST_DBG"] == str(bundle / "cudnn_api.log")
    assert run.env["CUBLAS_LOGDEST_DBG"] == str(bundle / "cublas_api.log")
    assert run.env["CUBLASLT_LOG_FILE"] == str(bundle / "cublaslt_api.log")
    quiet = child_command(Framework.PYTORCH, hostile, bundle, Precision.FP32, 7, 2, AlgoSearch.DEFAULT, False)
    assert quiet.argv[-1] == "latency" and quiet.argv[quiet.argv.index("--framework") + 1] == "pytorch"
    assert not any(k.endswith(("DEST_DBG", "LOG_FILE")) for k in quiet.env)
    assert set(LOG_ENV) >= set(quiet.env)


@pytest.mark.skipif(GPU, reason="checks the error on a machine without a usable GPU")
def test_no_gpu_is_one_line(tmp_path):
    with pytest.raises(BenanzaError) as err:
        capture(LIGHT / "light_squeezenet.onnx", "onnxruntime", 1, "fp32", tmp_path / "bundle")
    text = str(err.value)
    assert text.startswith("no usable CUDA GPU: ") and "\n" not in text
    assert not (tmp_path / "bundle").exists()  # nothing written before the check
    result = CliRunner().invoke(main, ["profile", str(LIGHT / "light_squeezenet.onnx"), "--out",
                                       str(tmp_path / "b")])
    assert result.exit_code == 1 and "no usable CUDA GPU: " in result.output


def test_a_real_child_without_cuda_reports_no_gpu(tmp_path):
    """The child protocol end to end: a CPU-only onnxruntime makes the child exit NO_GPU_EXIT with one line."""
    ort = pytest.importorskip("onnxruntime")
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA provider")
    mat = materialize(LIGHT / "light_squeezenet.onnx", 1, tmp_path / "model.onnx")
    child = child_command(Framework.ONNXRUNTIME, mat.path, tmp_path, Precision.FP32, 1, 0, AlgoSearch.DEFAULT,
                          False, python=sys.executable)
    with pytest.raises(BenanzaError, match=r"^no usable CUDA GPU: onnxruntime .* has no CUDAExecutionProvider"):
        run_child(child, "test")


def test_a_child_with_bad_arguments_fails_with_its_reason(tmp_path):
    child = child_command(Framework.ONNXRUNTIME, tmp_path / "missing.onnx", tmp_path, Precision.FP32, 1, 0,
                          AlgoSearch.DEFAULT, False, python=sys.executable)
    bad = type(child)(child.argv[:-2], child.env)  # drop --mode: argparse refuses
    with pytest.raises(BenanzaError, match=r"^label: framework run failed: .*--mode"):
        run_child(bad, "label")


# A stand-in for each side of the gate (the protocol is what is tested: the real children need a GPU):
# the first run sleeps, the second waits at the gate as the real profiled child does, and each says when.
FIRST_RUN = ("import json, time; s = time.time(); time.sleep(0.6); "
             "print(json.dumps({'start': s, 'end': time.time()}))")
GATED_RUN = ("import argparse, json, os, sys, time; s = time.time(); "
             "sys.argv[2:] and open(sys.argv[2], 'w').write(str(os.getpid())); "
             "from benanza.phases import Phases; from benanza.profile.capture_child import wait_for_gate; "
             "wait_for_gate(argparse.Namespace(gate=sys.argv[1], phases=Phases())); "
             "print(json.dumps({'start': s, 'through': time.time()}))")


def test_gated_children_start_together_but_the_second_runs_after_the_first(tmp_path: Path) -> None:
    """Issue 32: the two children's start-ups overlap (most of a profile's time); their GPU work must not,
    or the latency run would time the profiled run's kernels too."""
    gate = tmp_path / "gate"
    first, second = run_gated(ChildRun((sys.executable, "-c", FIRST_RUN), {}), "first",
                              ChildRun((sys.executable, "-c", GATED_RUN, str(gate)), {}), "second", gate)
    assert second["start"] < first["end"]  # started beside the first run
    assert second["through"] >= first["end"]  # went on only once the first had ended
    assert gate.exists()


def test_a_first_child_that_opens_the_gate_lets_the_second_go_before_its_exit(tmp_path: Path) -> None:
    """A capture child made with ``opens_gate`` opens it once its report is ready: the gated child's GPU
    work need not wait for the first one's interpreter and CUDA teardown (about 1.5 s with torch). The
    first child here is the real capture child's ending (``--opens-gate``), then a 2 s exit."""
    gate = tmp_path / "gate"
    opening = ("import json, sys, time; from benanza.profile import capture_child; "
               "capture_child.CHILDREN[capture_child.Framework.PYTORCH] = lambda args: {'latencies_ms': [1.0]}; "
               "code = capture_child.child_main(sys.argv[1:]); "
               "open(sys.argv[-1] + '.ready', 'w').write(repr(time.time())); "
               "time.sleep(2); sys.exit(code)")
    argv = child_command(Framework.PYTORCH, tmp_path / "m.onnx", tmp_path, Precision.FP32, 1, 0, AlgoSearch.DEFAULT,
                         False, opens_gate=gate).argv
    first = ChildRun((sys.executable, "-c", opening, *argv[3:]), {})
    t0 = time.time()
    report, second = run_gated(first, "first", ChildRun((sys.executable, "-c", GATED_RUN, str(gate)), {}), "second",
                               gate)
    assert report["latencies_ms"] == [1.0]
    ready = float((tmp_path / "gate.ready").read_text())
    assert ready - 0.5 < second["through"] < ready + 1.5  # went on at the report, not 2 s later at the exit
    assert second["through"] > t0


def test_a_failed_first_child_stops_the_waiting_one(tmp_path: Path) -> None:
    gate, pid_file = tmp_path / "gate", tmp_path / "pid"
    failing = "import json, time; time.sleep(0.5); print(json.dumps({'error': 'the framework could not run it'}))"
    t0 = time.monotonic()
    with pytest.raises(BenanzaError, match=r"^first: framework run failed: the framework could not run it$"):
        run_gated(ChildRun((sys.executable, "-c", failing), {}), "first",
                  ChildRun((sys.executable, "-c", GATED_RUN, str(gate), str(pid_file)), {}), "second", gate)
    assert time.monotonic() - t0 < 30 and not gate.exists()
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left waiting at the gate
        os.kill(pid, 0)


def test_the_export_child_writes_the_modules_onnx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--torch-module's export runs in a child of its own (the parent never imports torch)."""
    pytest.importorskip("torch")
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))  # tiny_modules for the factory
    out = tmp_path / "m.onnx"
    report = run_child(export_command("tiny_modules:tiny_net", out, 2), "export")
    assert report["batch"] == 2 and "build and export the module" in report["phases_s"]
    assert load_model(out).layers[0].inputs[0].shape[0] == 2
    with pytest.raises(BenanzaError, match=r"^export: framework run failed: --torch-module "
                                           r"tiny_modules:unexportable: export to ONNX failed"):
        run_child(export_command("tiny_modules:unexportable", tmp_path / "u.onnx", None), "export")


@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="needs a usable NVIDIA GPU")
@pytest.mark.parametrize("framework", ["onnxruntime", "pytorch"])
def test_capture_and_map_on_the_gpu(tmp_path, framework):
    from benanza.profile.mapping import map_bundle_report

    module = pytest.importorskip("onnxruntime" if framework == "onnxruntime" else "onnx2torch")
    if framework == "onnxruntime" and "CUDAExecutionProvider" not in module.get_available_providers():
        pytest.skip("needs onnxruntime-gpu (this onnxruntime has no CUDAExecutionProvider)")
    src = LIGHT / "light_zfnet512.onnx"
    out = capture(src, framework, 1, "tf32", tmp_path / "bundle", runs=5, warmup=3)
    bundle = read_bundle(out)
    assert bundle.meta.latency_ms.runs == 5 and bundle.meta.latency_ms.median > 0
    assert bundle.torch_trace is not None and bundle.cudnn_log is not None
    model = load_model(src, 1)
    mapping = map_bundle_report(model, bundle)
    convs = [layer.index for layer in model.layers if layer.op == "Conv"]
    for i in convs:
        lp = mapping.profile.layers[i]
        assert lp.executed is not None and lp.executed.precision == "tf32", (i, mapping.notes)
        assert lp.gpu_ms is not None and lp.gpu_ms > 0, (i, mapping.notes)
    assert mapping.profile.gpu_busy_ms is not None and mapping.profile.gpu_busy_ms > 0


def test_strip_weights_keeps_the_nodes_the_mapping_reads(tmp_path):
    mat = materialize(LIGHT / "light_resnet50.onnx", 1, tmp_path / "model.onnx")
    before = onnx.load(str(mat.path))
    strip_weights(mat.path)
    after = onnx.load(str(mat.path))
    assert not after.graph.initializer and len(before.graph.initializer) > 100
    assert [(n.name, n.op_type, list(n.input)) for n in after.graph.node] == \
        [(n.name, n.op_type, list(n.input)) for n in before.graph.node]
    assert mat.path.stat().st_size < 1_000_000  # ResNet-50 with its weights: about 98 MB


def test_the_torch_child_records_a_hugging_face_modules_attention_implementation() -> None:
    """The fusion fix reads it: a run that had fused attention is never told to fuse it (analyze.fixes)."""
    from types import SimpleNamespace

    from benanza.profile.capture_child import _attention_setting

    class Module:  # what the child reads of an nn.Module: its submodules, one with a Hugging Face config
        def __init__(self, *subs: object) -> None:
            self.subs = subs

        def modules(self) -> tuple[object, ...]:
            return (self, *self.subs)

    bert = Module(SimpleNamespace(config=SimpleNamespace(_attn_implementation="sdpa")))
    assert _attention_setting(bert) == {"attn_implementation": "sdpa"}
    assert _attention_setting(Module(SimpleNamespace())) == {}
