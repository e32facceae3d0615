"""The planner on real zoo models and on hand-built Conv layers."""

from __future__ import annotations

import networkx as nx
import pytest
from conftest import LIGHT

from benanza.apis.base import JobFields
from benanza.generate.plan import JOB_BUILDERS, plan
from benanza.library import Activation, Api, ConvFwdAlgo, Fusion, Precision
from benanza.model.layer import Layer, Model, Tensor, bias_add
from benanza.model.onnx_import import load_model


def conv_layer(name: str, x: tuple[int, ...], k: int, r: int, pads: list[int], stride: int = 1, dil: int = 1,
               group: int = 1, index: int = 0) -> Layer:
    """A 2-D Conv layer with the output shape ONNX would infer."""
    n, c, h, w = x
    p = (h + pads[0] + pads[2] - dil * (r - 1) - 1) // stride + 1
    q = (w + pads[1] + pads[3] - dil * (r - 1) - 1) // stride + 1
    return Layer(name, "Conv", [Tensor("x", x, "float32"), Tensor("w", (k, c // group, r, r), "float32", True)],
                 [Tensor("y", (n, k, p, q), "float32")],
                 {"group": group, "pads": pads, "strides": [stride, stride], "kernel_shape": [r, r],
                  "dilations": [dil, dil]}, index=index)


def model_of(layers: list[Layer], name: str = "handmade") -> Model:
    return Model(name, f"{name}.onnx", layers[0].inputs[0].shape[0], layers, nx.DiGraph())


@pytest.fixture(scope="module")
def squeezenet() -> Model:
    return load_model(LIGHT / "light_squeezenet.onnx", batch=1)


@pytest.fixture(scope="module")
def resnet50() -> Model:
    return load_model(LIGHT / "light_resnet50.onnx", batch=1)


def test_one_conv_job_per_unique_conv_key_precision_and_layout(squeezenet: Model) -> None:
    p = plan([squeezenet], ["fp32", "fp16"], apis=[Api.CONV_FWD])
    conv_keys = {layer.key for layer in squeezenet.layers if layer.op == "Conv"}
    n = len(conv_keys)
    assert len(p.jobs) == 4 * n  # fp32 NCHW and NHWC, fp16 NHWC and NCHW (each what some framework runs)
    assert {j.key for j in p.jobs} == conv_keys
    assert all(j.executable == "bench_conv_fwd" for j in p.jobs)
    assert [j.index for j in p.jobs] == list(range(len(p.jobs)))
    # precision order as requested in the preferred layouts, then the other layouts; every job measures the
    # 8 algorithms
    assert [j.precision for j in p.jobs] == [Precision.FP32] * n + [Precision.FP16] * n + [Precision.FP32] * n \
        + [Precision.FP16] * n
    assert [j.layout for j in p.jobs] == ["NCHW"] * n + ["NHWC"] * n + ["NHWC"] * n + ["NCHW"] * n
    assert {len(j.benchmarks()) for j in p.jobs} == {len(ConvFwdAlgo)}
    names = [b.name() for b in p.benchmarks]
    assert len(names) == len(set(names)) == 8 * len(p.jobs)


@pytest.mark.parametrize("api", [Api.CONV_FWD, Api.CONV_BIAS_ACT, Api.GRAPH_CONV])
def test_convolutions_are_planned_in_both_layouts_in_every_precision(resnet50: Model, api: Api) -> None:
    """PyTorch runs fp16 convolutions NCHW unless the model is channels_last, and fp32 ones NHWC when the
    tensors are (ConvNeXt-T's depthwise convolutions: 2.70 ms in cuDNN's NHWC kernel at batch 64 in TF32,
    5.3 ms for the best NCHW rows, so a bound of NCHW fp32 rows alone lay above that run)."""
    p = plan([resnet50], ["fp32", "tf32", "fp16"], apis=[api])
    layouts = {(j.key, j.precision): set() for j in p.jobs}
    for j in p.jobs:
        layouts[(j.key, j.precision)].add(j.layout)
    assert layouts and all(v == {"NHWC", "NCHW"} for v in layouts.values())
    assert {p_ for _k, p_ in layouts} == {Precision.FP32, Precision.TF32, Precision.FP16}
    names = [b.name() for b in p.benchmarks]
    assert len(names) == len(set(names))
    nhwc = {b.name().replace("/NHWC/", "/NCHW/") for b in p.benchmarks if b.layout == "NHWC"}
    assert nhwc == {b.name() for b in p.benchmarks if b.layout == "NCHW"}


def test_other_fp16_ops_keep_their_single_layout(resnet50: Model) -> None:
    p = plan([resnet50], ["fp16"], apis=[Api.POOLING, Api.ACTIVATION, Api.GEMM_EX])
    keys = [(j.key, j.api) for j in p.jobs]
    assert p.jobs and len(keys) == len(set(keys))


def test_dedupes_across_models_but_not_across_batches(squeezenet: Model) -> None:
    once = plan([squeezenet], ["fp32"], apis=[Api.CONV_FWD])
    twice = plan([squeezenet, squeezenet], ["fp32"], apis=[Api.CONV_FWD])
    assert [j.key for j in once.jobs] == [j.key for j in twice.jobs]
    batch8 = load_model(LIGHT / "light_squeezenet.onnx", batch=8)
    both = plan([squeezenet, batch8], ["fp32"], apis=[Api.CONV_FWD])
    assert len(both.jobs) == 2 * len(once.jobs)
    batches = [j.fields.row["dims"][0] for j in both.jobs]
    assert batches.count(8) == batches.count(1) == len(once.jobs)


def test_every_conv_gets_a_bias_add_job_keyed_as_the_onnx_add_that_computes_it() -> None:
    """Frameworks may add a conv's bias with a call of its own (ORT: cudnnAddTensor): it is
    benchmarked under the key of Add(y, bias[K,1,1]), so a model's real bias Add shares it."""
    conv = conv_layer("c", (8, 3, 32, 32), 16, 3, [1, 1, 1, 1])
    p = plan([model_of([conv])], ["fp32"], apis=[Api.ADD_TENSOR, Api.OP_TENSOR])
    add = Layer("add", "Add", [Tensor("y", (8, 16, 32, 32), "float32"), Tensor("b", (16, 1, 1), "float32", True)],
                [Tensor("z", (8, 16, 32, 32), "float32")], {})
    assert bias_add(conv).key == add.key
    assert [(j.api, j.key) for j in p.jobs] == [(Api.ADD_TENSOR, add.key), (Api.OP_TENSOR, add.key)]
    assert p.jobs[0].fields.row["c"] == [8, 16, 32, 32] and p.jobs[0].fields.row["a"] == [1, 16, 1, 1]
    assert plan([model_of([conv])], ["fp32"], apis=[Api.CONV_FWD]).jobs[0].key == conv.key  # the conv itself


def test_conv_rows_follow_onnx_pad_order() -> None:
    layer = conv_layer("asym", (2, 16, 20, 21), 32, 3, [0, 1, 2, 3], stride=2, dil=1, group=4)
    p = plan([model_of([layer])], ["fp32"], apis=[Api.CONV_FWD])
    assert [j.layout for j in p.jobs] == ["NCHW", "NHWC"]  # the same problem in either layout
    job = p.jobs[0]
    n, c, h, w, k, r, s, top, left, bottom, right, sh, sw, dh, dw, g, oh, ow = job.fields.row["dims"]
    assert (n, c, h, w, k, r, s) == (2, 16, 20, 21, 32, 3, 3)
    assert (top, left, bottom, right) == (0, 1, 2, 3)  # ONNX: [x1_begin, x2_begin, x1_end, x2_end]
    assert (sh, sw, dh, dw, g) == (2, 2, 1, 1, 4)
    assert (oh, ow) == layer.outputs[0].shape[2:]
    assert job.fields.shapes["pads"] == [0, 1, 2, 3]  # asymmetric pads are a run-time status, not a drop
    assert not p.dropped or all(d.api != Api.CONV_FWD.value for d in p.dropped)


def test_one_d_conv_becomes_height_one_and_three_d_is_dropped() -> None:
    one_d = Layer("c1", "Conv", [Tensor("x", (1, 8, 50), "float32"), Tensor("w", (4, 8, 5), "float32", True)],
                  [Tensor("y", (1, 4, 24), "float32")],
                  {"group": 1, "pads": [1, 1], "strides": [2], "kernel_shape": [5], "dilations": [1]})
    three_d = Layer("c3", "Conv", [Tensor("x", (1, 8, 4, 4, 4), "float32"),
                                   Tensor("w", (4, 8, 3, 3, 3), "float32", True)],
                    [Tensor("y", (1, 4, 2, 2, 2), "float32")],
                    {"group": 1, "pads": [0] * 6, "strides": [1] * 3, "kernel_shape": [3] * 3, "dilations": [1] * 3},
                    index=1)
    p = plan([model_of([one_d, three_d])], ["fp32"], apis=[Api.CONV_FWD])
    assert [j.layout for j in p.jobs] == ["NCHW", "NHWC"]
    job = p.jobs[0]
    assert job.fields.row["dims"] == [1, 8, 1, 50, 4, 1, 5, 0, 1, 0, 1, 1, 2, 1, 1, 1, 1, 24]
    (dropped,) = [d for d in p.dropped if d.api == Api.CONV_FWD.value]
    assert dropped.key == three_d.key and "3-D convolution" in dropped.reason


def test_fusion_jobs_use_fusion_keys_and_patterns(resnet50: Model) -> None:
    p = plan([resnet50], ["fp32"], apis=[Api.CONV_BIAS_ACT])
    fusion_keys = {f.key for f in resnet50.fusions if f.pattern.startswith("conv")}
    assert {j.key for j in p.jobs} == fusion_keys
    by_fusion = {j.fusion: j for j in p.jobs}
    assert Fusion.CONV_BIAS_ADD_ACT in by_fusion and Fusion.CONV_BN_ACT in by_fusion
    residual = by_fusion[Fusion.CONV_BIAS_ADD_ACT].fields
    assert residual.row["alpha2"] == 1.0 and residual.row["act"] == Activation.RELU.value
    assert residual.shapes["z"] == residual.shapes["y"]
    assert by_fusion[Fusion.CONV_BN_ACT].fields.row["alpha2"] == 0.0
    no_act = [j for j in p.jobs if j.fusion == Fusion.CONV_BN]
    assert all(j.fields.row["act"] == Activation.IDENTITY.value for j in no_act)


def test_skip_drops_jobs_already_measured(squeezenet: Model) -> None:
    full = plan([squeezenet], ["fp32"], apis=[Api.CONV_FWD])
    first = full.jobs[0]
    by_name = plan([squeezenet], ["fp32"], apis=[Api.CONV_FWD], skip={b.name() for b in first.benchmarks()})
    assert len(by_name.jobs) == len(full.jobs) - 1
    assert (first.key, first.layout) not in {(j.key, j.layout) for j in by_name.jobs}
    assert by_name.drop_reasons()["already in the database"] == 1
    # a job with one unmeasured algorithm stays
    partial = {b.name() for b in first.benchmarks()[1:]}
    assert len(plan([squeezenet], ["fp32"], apis=[Api.CONV_FWD], skip=partial).jobs) == len(full.jobs)
    by_predicate = plan([squeezenet], ["fp32"], apis=[Api.CONV_FWD],
                        skip=lambda b: b.layer_key == first.key and b.layout == first.layout)
    assert [j.key for j in by_predicate.jobs] == [j.key for j in by_name.jobs]
    assert [j.index for j in by_predicate.jobs] == list(range(len(by_predicate.jobs)))


def test_drop_log_names_reasons(squeezenet: Model, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(JOB_BUILDERS, Api.POOLING)
    p = plan([squeezenet], ["fp32"])
    reasons = p.drop_reasons()
    assert reasons["no benchmark template for cudnnPoolingForward yet"] >= 1
    assert all(d.key and d.what and d.api for d in p.dropped)
    # a non-Tensor-Core API gets no tf32 job (one more builder is one table entry)
    monkeypatch.setitem(JOB_BUILDERS, Api.POOLING, lambda item, model, prec: JobFields({}, {}, ("*",), "NCHW"))
    p = plan([squeezenet], ["fp32", "tf32"], apis=[Api.POOLING])
    pools = {layer.key for layer in squeezenet.layers if Api.POOLING in layer.apis}
    assert len(p.jobs) == len(pools) and {j.precision for j in p.jobs} == {Precision.FP32}
    assert p.drop_reasons()["tf32 is fp32 for a non-Tensor-Core op"] == len(pools)
    assert p.jobs[0].executable == "bench_pooling"
