"""Mapping real profile bundles onto real models' layers (benanza.profile.mapping).

The bundles are put together from the real H100 samples in tests/data/samples/ (see its
README): ONNX Runtime's ZFNet cuDNN/cuBLAS logs, its ResNet-50 profile, and PyTorch's
small-CNN Kineto trace with the ONNX twin of that CNN built here.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from conftest import LIGHT
from onnx import TensorProto, helper, numpy_helper

from benanza.cli import main
from benanza.library import Api, Fusion
from benanza.model.layer import Model
from benanza.model.onnx_import import load_model
from benanza.paths import perfdb_dir
from benanza.profile import read_cublas_log, read_cudnn_log, read_kineto_trace, read_ort_profile
from benanza.profile.bundle import read_bundle, write_meta
from benanza.profile.executed import assign_calls
from benanza.profile.kernel_runs import ORT_KERNELS, _events_by_run, _ort_offset
from benanza.profile.kineto import Annotation, GpuEvent, busy_time
from benanza.profile.mapping import map_bundle, map_bundle_report
from benanza.profile.node_layers import ort_node_layers, top_level_ops
from benanza.profile.ort_profile import NodeEvent, OrtRun
from benanza.profile.signatures import layer_signature
from benanza.records import OverheadKind, Profile

SAMPLES = Path(__file__).parent / "data" / "samples"
ZFNET_CUDNN = SAMPLES / "ort1.31_zfnet512_cudnn_api.log.gz"
ZFNET_CUBLAS = SAMPLES / "ort1.31_zfnet512_cublas_api.log.gz"
RESNET_PROFILE = SAMPLES / "ort1.31_resnet50light_b1_profile.json.gz"
TORCH_TRACE = SAMPLES / "torch2.11_smallcnn_b1_trace.json.gz"
CONV3X3_CUDNN = SAMPLES / "torch2.11_conv3x3_cudnn_api.log.gz"
BUNDLES = perfdb_dir() / "bundles"


def _bundle(tmp_path: Path, framework: str, model: str, parts: dict[str, Path], latencies=(1.0, 1.2, 1.1)) -> Path:
    out = tmp_path / "bundle"
    out.mkdir()
    for name, src in parts.items():
        shutil.copy(src, out / name)
    write_meta(out, framework=framework, framework_version="test", model=model, batch=1, dtype="fp32",
               latencies_ms=list(latencies))
    return out


@pytest.fixture(scope="module")
def zfnet() -> Model:
    return load_model(LIGHT / "light_zfnet512.onnx", 1)


@pytest.fixture(scope="module")
def resnet() -> Model:
    return load_model(LIGHT / "light_resnet50.onnx", 1)


def _smallcnn(path: Path) -> Path:
    """The ONNX twin of tests/data/samples/capture_torch_trace.py's nn.Sequential."""
    rng = np.random.default_rng(0)

    def w(name: str, *shape: int) -> TensorProto:
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["y"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "smallcnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        [w("w1", 16, 3, 3, 3), w("b1", 16), w("w2", 32, 16, 3, 3), w("b2", 32), w("w3", 10, 32), w("b3", 10)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


# ---------------------------------------------------------------- layer <-> library call (ZFNet, ORT)


def test_zfnet_convs_map_to_the_last_runs_executes(tmp_path, zfnet):
    bundle = _bundle(tmp_path, "onnxruntime", "light_zfnet512.onnx",
                     {"cudnn_api.log.gz": ZFNET_CUDNN, "cublas_api.log.gz": ZFNET_CUBLAS})
    mapping = map_bundle_report(zfnet, bundle)
    log = read_cudnn_log(ZFNET_CUDNN)
    executes = log.executes()
    assert len(executes) == 15  # 5 convs x 3 runs; the 5 heuristic probes are not layer calls
    last_run = executes[-5:]
    convs = [layer for layer in zfnet.layers if layer.op == "Conv"]
    assert len(convs) == 5
    assert mapping.runs_in_logs == 3
    for layer, call in zip(convs, last_run, strict=True):
        executed = mapping.calls[layer.index]
        assert executed.api == Api.GRAPH_CONV.value
        assert executed.algorithm == call.engine_config
        op = call.operations[0]
        assert op.tensor("xDesc").dims == layer.inputs[0].shape
        assert op.tensor("wDesc").dims == layer.inputs[1].shape
        # ORT 1.31 runs fp32 convolutions with TF32 allowed (enable_tf32 in the log)
        assert executed.precision == "tf32" and call.enable_tf32 is True
        assert executed.fusion == Fusion.NONE.value and executed.key is None
        assert mapping.profile.layers[layer.index].executed == executed
    names = [mapping.calls[layer.index].algorithm for layer in convs]
    assert names[0] == "eng28_kTILE_SIZE=4_kUSE_TEX=0"
    assert names[1] == names[3] == names[4] == ("eng67_kIDX_MODE=0_kTILEK=0_kTILE_CGA_M=1_kTILE_CGA_N=8_kTILE_SIZE=5"
                                                "_kWORKSPACE=1")
    assert names[2].startswith("eng41_")


def test_zfnet_gemms_map_to_the_sgemm_calls(tmp_path, zfnet):
    bundle = _bundle(tmp_path, "onnxruntime", "light_zfnet512.onnx",
                     {"cudnn_api.log.gz": ZFNET_CUDNN, "cublas_api.log.gz": ZFNET_CUBLAS})
    profile = map_bundle(zfnet, bundle)
    sgemms = read_cublas_log(ZFNET_CUBLAS).calls
    gemms = [layer for layer in zfnet.layers if layer.op == "Gemm"]
    assert len(gemms) == 3 and len(sgemms) == 9
    for layer, call in zip(gemms, sgemms[-3:], strict=True):
        executed = profile.layers[layer.index].executed
        assert executed is not None and executed.api == Api.GEMM_EX.value
        assert executed.precision == "tf32"  # cublasSgemm_v2 under CUBLAS_TF32_TENSOR_OP_MATH
        # cuBLAS is column-major: ORT's Y[M,N] = A[M,K] B^T is C[N,M] with m = N (the layer's output width)
        assert (call.m, call.n, call.k) == (layer.outputs[0].shape[1], layer.inputs[0].shape[0],
                                            layer.inputs[0].shape[1])


def test_zfnet_other_calls_and_unmapped_layers(tmp_path, zfnet):
    bundle = _bundle(tmp_path, "onnxruntime", "light_zfnet512.onnx",
                     {"cudnn_api.log.gz": ZFNET_CUDNN, "cublas_api.log.gz": ZFNET_CUBLAS})
    mapping = map_bundle_report(zfnet, bundle)
    by_op = {layer.index: layer.op for layer in zfnet.layers}
    for index, call in mapping.calls.items():
        expected = {"Conv": Api.GRAPH_CONV, "Gemm": Api.GEMM_EX, "LRN": Api.LRN, "MaxPool": Api.POOLING}[by_op[index]]
        assert call.api == expected.value
    assert {mapping.calls[i].algorithm for i in mapping.calls if by_op[i] == "MaxPool"} == {"CUDNN_POOLING_MAX"}
    # ORT runs Relu, Reshape and Softmax with its own kernels: those layers are listed, not dropped
    listed = {index for index, _ in mapping.unmapped_layers}
    assert listed == {i for i, op in by_op.items() if op in ("Relu", "Reshape", "Softmax")}
    assert set(mapping.profile.layers) == set(by_op)  # every layer has an entry
    assert any("kernel trace" in note for note in mapping.notes)


def test_assign_calls_takes_the_last_run_by_line(zfnet):
    log = read_cudnn_log(ZFNET_CUDNN)
    calls = [c for c in log.calls if not c.during_heuristic]
    assigned, runs, notes = assign_calls(zfnet.layers, calls)
    assert runs == 3 and notes == []
    first_of_last_run = log.executes()[-5].line
    assert all(call.line >= first_of_last_run for call in assigned.values())


def test_pytorch_conv3x3_log_maps_to_a_one_conv_model(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 56, 56])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 56, 56])
    w = numpy_helper.from_array(np.ones((64, 64, 3, 3), np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    path = tmp_path / "conv.onnx"
    onnx.save(helper.make_model(helper.make_graph([node], "g", [x], [y], [w]),
                                opset_imports=[helper.make_opsetid("", 13)]), str(path))
    model = load_model(path, 1)
    bundle = _bundle(tmp_path, "pytorch", "conv.onnx", {"cudnn_api.log.gz": CONV3X3_CUDNN})
    mapping = map_bundle_report(model, bundle)
    log = read_cudnn_log(CONV3X3_CUDNN)
    assert mapping.runs_in_logs == 3
    call = mapping.calls[0]
    assert call.algorithm == log.executes()[-1].engine_config == log.heuristics[0].engine_configs[0]
    assert call.precision == "tf32"  # PyTorch allows TF32 in cuDNN convolutions by default


def test_layer_signature_pads_are_read_per_spec(zfnet):
    conv1 = zfnet.layers[0]
    sig = layer_signature(conv1)
    assert sig[0] == "conv" and sig[4] == (0, 0) and sig[5] == (0, 0) and sig[6] == (2, 2)
    asym = dataclasses.replace(conv1, attrs={**conv1.attrs, "pads": [0, 1, 2, 3]})
    assert layer_signature(asym)[4:6] == ((0, 1), (2, 3))  # ONNX: [x1_begin, x2_begin, x1_end, x2_end]


# ---------------------------------------------------------------- ORT node <-> layer (ResNet-50)


def test_resnet_ort_nodes_map_by_name_with_bn_folded(tmp_path, resnet):
    bundle = _bundle(tmp_path, "onnxruntime", "light_resnet50.onnx", {"ort_profile.json.gz": RESNET_PROFILE})
    mapping = map_bundle_report(resnet, bundle)
    run = read_bundle(bundle).ort_profile.runs[-1]
    convs = [n for n in run.nodes if n.op == "Conv"]
    assert len(convs) == 53
    by_index = {layer.index: layer for layer in resnet.layers}
    for node in run.nodes:
        matched = [i for i, name in mapping.nodes.items() if name == node.name]
        assert len(matched) == 1, node.name
        layer = by_index[matched[0]]
        assert layer.op == node.op and layer.outputs[0].shape == node.outputs[0][1]
    bns = [layer for layer in resnet.layers if layer.op == "BatchNormalization"]
    assert len(bns) == 53
    for bn in bns:  # ORT folded every BatchNormalization into the convolution that feeds it
        anchor = mapping.profile.layers[bn.index].fused_into
        assert anchor is not None and by_index[anchor].op == "Conv"
        assert by_index[anchor].outputs[0].name == bn.inputs[0].name
    assert mapping.unmapped_layers == ()


def test_resnet_ort_nodes_map_by_shapes_when_names_differ(resnet):
    """Renamed layers: ORT's nodes still find a layer of the same op and shapes (so the same key), in order."""
    run = read_ort_profile(RESNET_PROFILE).runs[-1]
    by_name = {n.name: n.layers for n in ort_node_layers(resnet, run.nodes, None)}
    renamed = Model(resnet.name, resnet.path, resnet.batch,
                    [dataclasses.replace(layer, name=f"layer{layer.index}") for layer in resnet.layers],
                    resnet.graph, resnet.fusions)
    by_shape = {n.name: n.layers for n in ort_node_layers(renamed, run.nodes, None)}
    assert set(by_shape) == set(by_name)
    for name, layers in by_name.items():
        assert len(by_shape[name]) == 1, name
        assert renamed.layers[by_shape[name][0]].key == resnet.layers[layers[0]].key
    assert len({v[0] for v in by_shape.values()}) == len(by_shape)  # no layer taken twice


def _launch(name: str, t: float) -> tuple[GpuEvent, float]:
    return GpuEvent("kernel", name, t + 5.0, 3.0, 0, 7, None, None, None, None), t


def _node(name: str, op: str, ts: float, dur: float) -> NodeEvent:
    return NodeEvent(name, "kernel_time", op, "CUDAExecutionProvider", None, (), (), ts, dur, 1)


def test_ort_offset_puts_the_run_and_its_launches_inside_the_trace_range():
    run = Annotation("model_run", start_us=1000.0, dur_us=100.0, gpu=False, external_id=1)
    # ORT's Run() at ts 10 for 80 us; launches at trace times 1015 and 1085, of kernels no op claims
    ort = OrtRun(0, 10.0, 80.0, None, (_node("a", "Custom", 20.0, 60.0),))
    c = _ort_offset(run, ort, [_launch("mystery", 1015.0), _launch("mystery", 1085.0)])
    assert 10.0 + c >= run.start_us and 90.0 + c <= run.end_us
    assert 10.0 + c <= 1015.0 and 90.0 + c >= 1085.0
    assert c == pytest.approx((max(990.0, 995.0) + min(1010.0, 1005.0)) / 2)


def test_ort_offset_follows_the_kernels_each_node_launches():
    """The bounds leave a wide interval; within it the launches must land in nodes of their ops."""
    run = Annotation("model_run", start_us=0.0, dur_us=400.0, gpu=False, external_id=1)
    nodes = (_node("c1", "Conv", 10.0, 20.0), _node("r1", "Relu", 32.0, 8.0), _node("cat", "Concat", 42.0, 10.0),
             _node("c2", "Conv", 54.0, 20.0))
    ort = OrtRun(0, 0.0, 80.0, None, nodes)
    launches = [_launch("sm80_xmma_fprop_implicit_gemm", 120.0), _launch("onnxruntime::cuda::OP_Relu", 143.0),
                _launch("onnxruntime::cuda::_ConcatKernelInputMajor", 150.0), _launch("fft2d_r2c_16x16", 170.0)]
    c = _ort_offset(run, ort, launches)
    spans = {n.name: (n.ts_us + c, n.ts_us + n.dur_us + c) for n in nodes}
    for (ev, t), name in zip(launches, ("c1", "r1", "cat", "c2"), strict=True):
        assert spans[name][0] <= t <= spans[name][1], (ev.name, name, c)
    assert c != pytest.approx((max(0.0, 170.0 - 80.0) + min(320.0, 120.0)) / 2)  # not the middle of the bounds


@pytest.mark.parametrize("name", ["densenet121_b64_ort_fp32", "inception_v1_b1_ort_fp32"])
def test_shipped_ort_bundles_put_kernels_in_nodes_of_their_op(name):
    """On real H100 bundles: launches whose kernels ORT_KERNELS knows fall in a node of that op
    (the middle of the bounds put 39 % of DenseNet's in the wrong node)."""
    bundle = read_bundle(BUNDLES / name)
    trace, profile = bundle.torch_trace, bundle.ort_profile
    runs = [a for a in trace.annotations if a.name == "model_run" and not a.gpu]
    ort = profile.runs[len(profile.runs) - len(runs):]
    for run, o, events in zip(runs, ort, _events_by_run(trace, runs), strict=True):
        c = _ort_offset(run, o, events)
        spans = [(n.ts_us + c, n.ts_us + n.dur_us + c, n.op) for n in o.nodes]
        hinted = [(ev, t) for ev, t in events if any(h in ev.name for hs in ORT_KERNELS.values() for h in hs)]
        right = [1 for ev, t in hinted if any(s <= t <= e and any(h in ev.name for h in ORT_KERNELS.get(op, ()))
                                               for s, e, op in spans)]
        assert len(hinted) > 100 and len(right) >= 0.98 * len(hinted)


# ---------------------------------------------------------------- kernels <-> layers (PyTorch Kineto)


def test_torch_trace_kernels_map_to_layers(tmp_path):
    model = load_model(_smallcnn(tmp_path / "smallcnn.onnx"), 1)
    bundle = _bundle(tmp_path, "pytorch", "smallcnn.onnx", {"torch_trace.json.gz": TORCH_TRACE},
                     latencies=(0.5, 0.45, 0.41))
    mapping = map_bundle_report(model, bundle)
    profile: Profile = mapping.profile
    assert mapping.unmapped_layers == ()
    ops = {layer.index: layer.op for layer in model.layers}
    trace = read_kineto_trace(TORCH_TRACE)
    runs = [a for a in trace.annotations if a.name == "model_run" and not a.gpu]
    assert len(runs) == 3
    for index, lp in profile.layers.items():
        if ops[index] == "Flatten":  # a view: an op, no kernel
            assert lp.gpu_ms is None and lp.kernel_count == 0
            continue
        assert lp.gpu_ms is not None and 0 < lp.gpu_ms <= profile.gpu_busy_ms
        assert lp.kernel_count == len(lp.kernels) >= 1
    conv = profile.layers[0]
    assert conv.kernel_count == 2  # the cuDNN convolution and PyTorch's separate bias add
    assert any("fprop" in k.name for k in conv.kernels)
    assert profile.unmapped and all(w.kind is OverheadKind.COPY for w in profile.unmapped)
    # every GPU event of the representative run is a layer's or listed as unmapped
    n_layer = sum(len(lp.kernels) for lp in profile.layers.values())
    per_run = [[e for e in trace.gpu_events() if e.runtime and any(
        c.correlation == e.correlation and r.start_us <= c.start_us <= r.end_us for c in trace.runtime_calls)]
        for r in runs]
    kernel_busy = [busy_time(e.interval for e in evs if e.kind == "kernel") / 1e3 for evs in per_run]
    busy = sorted(kernel_busy)
    assert profile.gpu_busy_ms == pytest.approx(busy[1])  # kernels only: memcpy/memset are on their own line
    rep = per_run[kernel_busy.index(busy[1])]
    assert n_layer + len(profile.unmapped) == len(rep)
    assert profile.kernel_count == sum(1 for e in rep if e.kind == "kernel")
    assert profile.e2e_ms == pytest.approx(0.45)
    assert profile.framework == "pytorch"


def test_top_level_ops_hide_nested_aten_calls():
    trace = read_kineto_trace(TORCH_TRACE)
    run = [a for a in trace.annotations if a.name == "model_run" and not a.gpu][1]
    ops = top_level_ops([o for o in trace.cpu_ops if run.start_us <= o.start_us <= run.end_us])
    names = [o.name for o in ops]
    assert names == ["aten::to", "aten::conv2d", "aten::relu", "aten::max_pool2d", "aten::conv2d", "aten::relu",
                     "aten::adaptive_avg_pool2d", "aten::flatten", "aten::linear", "aten::softmax", "aten::to"]


# ---------------------------------------------------------------- nothing to map, and the CLI


def test_a_bundle_with_only_meta_lists_every_layer(tmp_path, zfnet):
    bundle = _bundle(tmp_path, "onnxruntime", "light_zfnet512.onnx", {})
    mapping = map_bundle_report(zfnet, bundle)
    assert {i for i, _ in mapping.unmapped_layers} == {layer.index for layer in zfnet.layers}
    assert mapping.profile.e2e_ms == pytest.approx(1.1)
    assert all(lp.executed is None and lp.gpu_ms is None for lp in mapping.profile.layers.values())


def test_cli_profile_map_only(tmp_path):
    model = _smallcnn(tmp_path / "smallcnn.onnx")
    bundle = _bundle(tmp_path, "pytorch", "smallcnn.onnx", {"torch_trace.json.gz": TORCH_TRACE})
    result = CliRunner().invoke(main, ["profile", str(model), "--framework", "torch", "--out", str(bundle),
                                       "--map-only"])
    assert result.exit_code == 0, result.output
    expected = map_bundle_report(load_model(model, 1), bundle)
    with_time = sum(1 for lp in expected.profile.layers.values() if lp.gpu_ms is not None)
    assert with_time == 8
    assert re.search(rf"with GPU time\W+{with_time}\W", result.output), result.output
    assert re.search(r"unmapped layers\W+0\W", result.output), result.output


def test_cli_profile_help():
    result = CliRunner().invoke(main, ["profile", "--help"])
    assert result.exit_code == 0 and "--algo-search" in result.output and "bundle" in result.output


def test_a_convolutions_layout_is_read_from_its_input_strides():
    from benanza.profile.cudnn_log import TensorDesc
    from benanza.profile.executed import tensor_layout

    def t(dims, strides):
        return TensorDesc("xDesc", dims, strides, "CUDNN_DATA_HALF")

    assert tensor_layout(t((64, 64, 56, 56), (200704, 3136, 56, 1))) == "NCHW"  # PyTorch fp16, as logged
    assert tensor_layout(t((64, 64, 56, 56), (200704, 1, 3584, 64))) == "NHWC"
    assert tensor_layout(t((64, 512, 1, 1), (512, 1, 1, 1))) == "NCHW"
    assert tensor_layout(t((64, 512, 1, 1), (512, 1, 512, 512))) == "NHWC"
    assert tensor_layout(t((64, 1, 1, 1), (1, 1, 1, 1))) == ""  # one element per image: both
    assert tensor_layout(t((64, 8, 8), (64, 8, 1))) == ""
