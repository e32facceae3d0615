"""Legacy cuDNN op benchmarks (batch norm, activation, pooling, softmax, LRN, add tensor,
op tensor) and the copy bound of non-library layers.

The planner is checked on the nine zoo models and on hand-made layers the zoo lacks
(other activations, ceil_mode, 1-D and dilated pools, 5-D tensors, broadcasts); the
broadcast folding is replayed in numpy; the spellings are checked against the real
cuDNN 9.19 header; the generated sources for every zoo model are built against it;
the GPU test runs them.
"""

from __future__ import annotations

import functools
import json
import math
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import LIGHT, NVCC, SharedBuild, builds_and_runs_on_a_gpu, compiled_in_the_shared_build, listed_jobs

from benanza.apis.base import Unsupported
from benanza.apis.copy import COPY_ALGORITHM
from benanza.apis.cudnn_ops import (
    ADD_TENSOR_ALGORITHM,
    BATCHNORM_ALGORITHM,
    LRN_ALGORITHM,
    LRN_LIMITS,
    OP_TENSOR_OPS,
    POOLING_MODES,
    SOFTMAX_ALGORITHM,
    broadcast4,
    dims4,
)
from benanza.generate import codegen
from benanza.generate.plan import Plan, plan
from benanza.library import NO_COPY_OPS, Activation, Api, Math, Precision
from benanza.model.graph import build_graph, find_fusions
from benanza.model.layer import Layer, Model, Tensor
from benanza.model.onnx_import import load_model
from benanza.records import Result

ZOO_MODELS = sorted(LIGHT.glob("light_*.onnx"))
CUDNN_INCLUDE = Path(np.__file__).parents[1] / "nvidia" / "cudnn" / "include"
OPS_APIS = [Api.BATCHNORM_INF, Api.ACTIVATION, Api.POOLING, Api.SOFTMAX, Api.LRN, Api.ADD_TENSOR, Api.OP_TENSOR,
            Api.COPY]
EXECUTABLES = {"bench_batchnorm", "bench_activation", "bench_pooling", "bench_softmax", "bench_lrn",
               "bench_add_tensor", "bench_op_tensor", "bench_copy"}
NASTY = 'relu "quoted" \\back\\slash\nnew line */ `$(rm -rf /)`'


# ---------------------------------------------------------------- hand-made layers


def t(name: str, shape: tuple[int, ...], constant: bool = False, dtype: str = "float32") -> Tensor:
    return Tensor(name, shape, dtype, constant)


def unary(name: str, op: str, shape: tuple[int, ...], attrs: dict | None = None, y: tuple[int, ...] | None = None,
          index: int = 0) -> Layer:
    return Layer(name, op, [t(name + ":x", shape)], [t(name + ":y", y or shape)], attrs or {}, index=index)


def pool(name: str, op: str, x: tuple[int, ...], y: tuple[int, ...], kernel: list[int], pads: list[int],
         strides: list[int], index: int, **attrs: object) -> Layer:
    base = {"kernel_shape": kernel, "pads": pads, "strides": strides, "dilations": [1] * len(kernel)}
    if op == "MaxPool":
        base.update(ceil_mode=0, storage_order=0)
    if op == "AveragePool":
        base.update(ceil_mode=0, count_include_pad=0)
    return unary(name, op, x, {**base, **attrs}, y, index)


def binary(name: str, op: str, shapes: list[tuple[int, ...]], y: tuple[int, ...], index: int,
           constant: tuple[bool, ...] = ()) -> Layer:
    inputs = [t(f"{name}:{i}", s, i < len(constant) and constant[i]) for i, s in enumerate(shapes)]
    return Layer(name, op, inputs, [t(name + ":y", y)], {}, index=index)


def batchnorm(name: str, x: tuple[int, ...], index: int, epsilon: float = 1e-5) -> Layer:
    params = [t(f"{name}:{p}", (x[1],), True) for p in ("scale", "bias", "mean", "var")]
    return Layer(name, "BatchNormalization", [t(name + ":x", x), *params], [t(name + ":y", x)],
                 {"epsilon": epsilon, "momentum": 0.9}, index=index)


HAND: list[Layer] = [
    unary(NASTY, "Relu", (2, 8, 5, 5), index=0),
    unary("sigmoid", "Sigmoid", (2, 8, 5, 5), index=1),
    unary("tanh", "Tanh", (3, 7), index=2),
    unary("relu6", "Clip", (2, 8, 5, 5), {"min": 0.0, "max": 6.0}, index=3),
    unary("clip_sym", "Clip", (2, 8, 5, 5), {"min": -1.0, "max": 1.0}, index=4),
    unary("elu", "Elu", (2, 3, 4, 5, 6), {"alpha": 0.5}, index=5),
    unary("leaky", "LeakyRelu", (2, 8, 5, 5), {"alpha": 0.01}, index=6),
    pool("ceil", "MaxPool", (1, 4, 7, 7), (1, 4, 4, 4), [2, 2], [0, 0, 0, 0], [2, 2], 7, ceil_mode=1),
    pool("pool1d", "MaxPool", (1, 4, 9), (1, 4, 5), [3], [1, 1], [2], 8),
    pool("avg_incl", "AveragePool", (1, 4, 8, 8), (1, 4, 8, 8), [3, 3], [1, 1, 1, 1], [1, 1], 9,
         count_include_pad=1),
    pool("dilated", "MaxPool", (1, 4, 9, 9), (1, 4, 5, 5), [3, 3], [0, 0, 0, 0], [1, 1], 10, dilations=[2, 2]),
    unary("gmax", "GlobalMaxPool", (2, 6, 5, 7), y=(2, 6, 1, 1), index=11),
    batchnorm("bn5d", (1, 6, 2, 3, 4), 12),
    unary("softmax2", "Softmax", (2, 3, 4, 5), {"axis": 2}, index=13),
    unary("lrn3", "LRN", (1, 10, 4, 4), {"size": 3, "alpha": 1e-3, "beta": 0.5, "bias": 1.5}, index=14),
    unary("lrn20", "LRN", (1, 30, 4, 4), {"size": 20, "alpha": 1e-4, "beta": 0.75, "bias": 1.0}, index=15),
    binary("add5d", "Add", [(4, 1, 6), (2, 3, 4, 5, 6)], (2, 3, 4, 5, 6), 16, (True, False)),
    binary("outer", "Mul", [(3, 1), (1, 4)], (3, 4), 17),
    binary("sum3", "Sum", [(2, 8), (2, 8), (2, 8)], (2, 8), 18),
    binary("mul_row", "Mul", [(2, 8), (8,)], (2, 8), 19, (False, True)),
    unary("transpose", "Transpose", (2, 3, 4), {"perm": [2, 0, 1]}, y=(4, 2, 3), index=20),
    unary("reshape", "Reshape", (2, 3, 4), {"shape": [6, 4], "allowzero": 0}, y=(6, 4), index=21),
]


def hand_model() -> Model:
    return Model(NASTY, "hand/ops.onnx", 1, HAND, build_graph(HAND), find_fusions(HAND, {HAND[-1].outputs[0].name}))


@functools.cache
def zoo_at_batch_1() -> list[Model]:
    return [load_model(path, batch=1) for path in ZOO_MODELS]


@pytest.fixture(scope="module")
def zoo_models() -> list[Model]:
    return zoo_at_batch_1()


@pytest.fixture(scope="module")
def ops_plan(zoo_models: list[Model]) -> Plan:
    return plan([*zoo_models, hand_model()], ["fp32", "tf32", "fp16", "bf16"], apis=OPS_APIS)


def jobs_of(p: Plan, key: str, api: Api, precision: Precision = Precision.FP32) -> list:
    return [j for j in p.jobs if j.key == key and j.api is api and j.precision is precision]


def drops_of(p: Plan, key: str, api: Api) -> set[str]:
    return {d.reason for d in p.dropped if d.key == key and d.api == api.value and d.dtype != Precision.TF32.value}


def by_name(name: str) -> Layer:
    return next(layer for layer in HAND if layer.name == name)


# ---------------------------------------------------------------- planner on the zoo


def test_every_zoo_layer_of_these_ops_is_planned_or_dropped_with_a_reason(zoo_models: list[Model],
                                                                          ops_plan: Plan) -> None:
    planned = {(j.key, j.api) for j in ops_plan.jobs}
    dropped = {(d.key, d.api): d.reason for d in ops_plan.dropped if d.reason != "API not requested"}
    for model in zoo_models:
        for layer in model.layers:
            for api in layer.apis:
                if api not in OPS_APIS:
                    continue
                if layer.op in NO_COPY_OPS:
                    assert dropped[(layer.key, api.value)] == "moves no bytes", (model.name, layer.op)
                else:
                    assert (layer.key, api) in planned, (model.name, layer.op, api)
    # only the no-copy ops and tf32 drop anything in the zoo
    zoo_keys = {layer.key for m in zoo_models for layer in m.layers}
    reasons = {r for (k, _), r in dropped.items() if k in zoo_keys}
    assert reasons == {"moves no bytes", "tf32 is fp32 for a non-Tensor-Core op"}


def test_zoo_ops_map_to_the_expected_calls(zoo_models: list[Model], ops_plan: Plan) -> None:
    densenet = next(m for m in zoo_models if m.name == "light_densenet121")
    resnet = next(m for m in zoo_models if m.name == "light_resnet50")
    alexnet = next(m for m in zoo_models if m.name == "light_bvlc_alexnet")
    # BN-as-Mul/Add pairs: (1, 64, 112, 112) x (64, 1, 1) constants
    mul = next(layer for layer in densenet.layers if layer.op == "Mul")
    (job,) = jobs_of(ops_plan, mul.key, Api.OP_TENSOR)
    assert job.fields.row["a"] == [1, 64, 112, 112] and job.fields.row["b"] == [1, 64, 1, 1]
    assert job.fields.row["op"] == "CUDNN_OP_TENSOR_MUL" and job.fields.algorithms == ("CUDNN_OP_TENSOR_MUL",)
    add = next(layer for layer in densenet.layers if layer.op == "Add")
    (job,) = jobs_of(ops_plan, add.key, Api.ADD_TENSOR)
    assert job.fields.row["c"] == [1, 64, 112, 112] and job.fields.row["a"] == [1, 64, 1, 1]
    assert job.fields.algorithms == (ADD_TENSOR_ALGORITHM,)
    assert jobs_of(ops_plan, add.key, Api.OP_TENSOR)[0].fields.row["op"] == "CUDNN_OP_TENSOR_ADD"
    # the residual Sum: two full-size operands
    total = next(layer for layer in resnet.layers if layer.op == "Sum")
    (job,) = jobs_of(ops_plan, total.key, Api.OP_TENSOR)
    assert job.fields.row["a"] == job.fields.row["b"] == [1, 256, 56, 56]
    # BN, pooling, LRN, softmax
    bn = next(layer for layer in resnet.layers if layer.op == "BatchNormalization")
    (job,) = jobs_of(ops_plan, bn.key, Api.BATCHNORM_INF)
    assert job.fields.row["dims"] == [1, 64, 112, 112] and job.fields.algorithms == (BATCHNORM_ALGORITHM,)
    assert job.fields.row["epsilon"] == pytest.approx(1e-5)
    mp = next(layer for layer in resnet.layers if layer.op == "MaxPool")
    (job,) = jobs_of(ops_plan, mp.key, Api.POOLING)
    assert job.fields.row["dims"] == [1, 64, 112, 112, 3, 3, 1, 1, 1, 1, 2, 2, 56, 56]
    assert job.fields.row["mode"] == "CUDNN_POOLING_MAX"
    lrn = next(layer for layer in alexnet.layers if layer.op == "LRN")
    (job,) = jobs_of(ops_plan, lrn.key, Api.LRN)
    assert job.fields.row["size"] == 5 and job.fields.row["alpha"] == pytest.approx(1e-4)
    assert job.fields.row["bias"] == 1.0 and job.fields.row["beta"] == 0.75
    sm = next(layer for layer in alexnet.layers if layer.op == "Softmax")
    assert jobs_of(ops_plan, sm.key, Api.SOFTMAX)[0].fields.row["dims"] == [1, 1000, 1, 1]
    gap = next(layer for layer in densenet.layers if layer.op == "GlobalAveragePool")
    (job,) = jobs_of(ops_plan, gap.key, Api.POOLING)
    assert job.fields.row["dims"] == [1, 1024, 7, 7, 7, 7, 0, 0, 0, 0, 1, 1, 1, 1]
    assert job.fields.row["mode"] == "CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING"


def test_asymmetric_pools_are_planned_for_a_recorded_refusal(zoo_models: list[Model], ops_plan: Plan) -> None:
    """Inception's [0, 0, 1, 1] pools stay jobs: the binary records not_supported, as for the legacy conv."""
    v1 = next(m for m in zoo_models if m.name == "light_inception_v1")
    avg = next(layer for layer in v1.layers if layer.op == "AveragePool")
    assert avg.attrs["pads"] == [0, 0, 1, 1]
    (job,) = jobs_of(ops_plan, avg.key, Api.POOLING)
    assert job.fields.row["dims"][6:10] == [0, 0, 1, 1] and job.fields.row["dims"][12:] == [1, 1]


def test_copy_bound_of_non_library_layers(zoo_models: list[Model], ops_plan: Plan) -> None:
    for model in zoo_models:
        for layer in model.layers:
            if layer.op not in ("Concat", "Transpose"):
                continue
            out = math.prod(layer.outputs[0].shape)
            for precision, size in ((Precision.FP32, 4), (Precision.FP16, 2), (Precision.BF16, 2)):
                (job,) = jobs_of(ops_plan, layer.key, Api.COPY, precision)
                assert job.fields.row == {"bytes": out * size}
                assert job.fields.algorithms == (COPY_ALGORITHM,) and job.layout == ""
    transpose = by_name("transpose")
    assert jobs_of(ops_plan, transpose.key, Api.COPY)[0].fields.row == {"bytes": 24 * 4}
    assert drops_of(ops_plan, by_name("reshape").key, Api.COPY) == {"moves no bytes"}


def test_math_layout_and_precisions(ops_plan: Plan) -> None:
    jobs = [j for j in ops_plan.jobs if j.api in OPS_APIS]
    assert jobs and all(j.math == Math.NONE.value for j in jobs)
    assert all(b.math == "n/a" for j in jobs for b in j.benchmarks())
    assert not any(j.precision is Precision.TF32 for j in jobs)
    for j in jobs:
        want = "" if j.api is Api.COPY else "NCHW" if j.precision is Precision.FP32 or j.api is Api.LRN else "NHWC"
        assert j.layout == want, (j.api, j.precision)
        if j.api is not Api.COPY:
            assert j.fields.row["layout"] == want and j.fields.row["format"] == f"CUDNN_TENSOR_{want}"


# ---------------------------------------------------------------- planner on hand-made layers


def test_activations(ops_plan: Plan) -> None:
    row = jobs_of(ops_plan, by_name("relu6").key, Api.ACTIVATION)[0].fields.row
    assert row["act"] == Activation.CLIPPED_RELU.value and row["coef"] == 6.0
    row = jobs_of(ops_plan, by_name("elu").key, Api.ACTIVATION)[0].fields.row
    assert row["act"] == Activation.ELU.value and row["coef"] == 0.5 and row["dims"] == [2, 3, 20, 6]
    assert jobs_of(ops_plan, by_name("tanh").key, Api.ACTIVATION)[0].fields.row["dims"] == [3, 7, 1, 1]
    assert jobs_of(ops_plan, by_name("sigmoid").key, Api.ACTIVATION)[0].fields.algorithms == (
        Activation.SIGMOID.value,)
    assert drops_of(ops_plan, by_name("leaky").key, Api.ACTIVATION) == {"no cuDNN activation mode for LeakyRelu"}
    assert drops_of(ops_plan, by_name("clip_sym").key, Api.ACTIVATION) == {"Clip with min != 0 is not a clipped ReLU"}


def test_pools(ops_plan: Plan) -> None:
    row = jobs_of(ops_plan, by_name("ceil").key, Api.POOLING)[0].fields.row
    assert row["dims"] == [1, 4, 7, 7, 2, 2, 0, 0, 0, 0, 2, 2, 4, 4]  # the model's 4x4; cuDNN says 3x3 at run time
    row = jobs_of(ops_plan, by_name("pool1d").key, Api.POOLING)[0].fields.row
    assert row["dims"] == [1, 4, 1, 9, 1, 3, 0, 1, 0, 1, 1, 2, 1, 5]
    row = jobs_of(ops_plan, by_name("avg_incl").key, Api.POOLING)[0].fields.row
    assert row["mode"] == "CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING"
    row = jobs_of(ops_plan, by_name("gmax").key, Api.POOLING)[0].fields.row
    assert row["dims"] == [2, 6, 5, 7, 5, 7, 0, 0, 0, 0, 1, 1, 1, 1] and row["mode"] == "CUDNN_POOLING_MAX"
    assert drops_of(ops_plan, by_name("dilated").key, Api.POOLING) == {
        "dilated pooling (cuDNN pooling has no dilation)"}


def test_batchnorm_softmax_lrn(ops_plan: Plan) -> None:
    assert jobs_of(ops_plan, by_name("bn5d").key, Api.BATCHNORM_INF)[0].fields.row["dims"] == [1, 6, 6, 4]
    job = jobs_of(ops_plan, by_name("softmax2").key, Api.SOFTMAX)[0]
    assert job.fields.row["dims"] == [6, 20, 1, 1] and job.fields.algorithms == (SOFTMAX_ALGORITHM,)
    job = jobs_of(ops_plan, by_name("lrn3").key, Api.LRN)[0]
    assert job.fields.row["size"] == 3 and job.fields.algorithms == (LRN_ALGORITHM,)
    (reason,) = drops_of(ops_plan, by_name("lrn20").key, Api.LRN)
    assert reason.startswith("LRN size 20") and "outside cuDNN's limits" in reason


def test_elementwise(ops_plan: Plan) -> None:
    add5d = by_name("add5d")
    (job,) = jobs_of(ops_plan, add5d.key, Api.ADD_TENSOR)
    assert job.fields.row["c"] == [6, 4, 5, 6] and job.fields.row["a"] == [1, 4, 1, 6]
    (job,) = jobs_of(ops_plan, add5d.key, Api.OP_TENSOR)
    assert job.fields.row["a"] == [6, 4, 5, 6] and job.fields.row["b"] == [1, 4, 1, 6]
    (job,) = jobs_of(ops_plan, by_name("mul_row").key, Api.OP_TENSOR)
    assert job.fields.row["a"] == [2, 8, 1, 1] and job.fields.row["b"] == [1, 8, 1, 1]
    (reason,) = drops_of(ops_plan, by_name("outer").key, Api.OP_TENSOR)
    assert "both broadcast" in reason
    (reason,) = drops_of(ops_plan, by_name("sum3").key, Api.OP_TENSOR)
    assert reason.startswith("Sum of 3 inputs")


def test_non_float_and_fusions_are_refused() -> None:
    from benanza.apis.copy import copy_job
    from benanza.apis.cudnn_ops import activation_job

    shape_calc = Layer("shape", "Concat", [t("a", (2,), dtype="int64"), t("b", (2,), dtype="int64")],
                       [t("c", (4,), dtype="int64")], {"axis": 0})
    with pytest.raises(Unsupported, match="not a floating-point type"):
        copy_job(shape_calc, hand_model(), Precision.FP32)
    relu = unary("r", "Relu", (1, 2, 3, 3))
    with pytest.raises(Unsupported, match="dtype int32"):
        activation_job(Layer("i", "Relu", [t("x", (4,), dtype="int32")], [t("y", (4,), dtype="int32")], {}),
                       hand_model(), Precision.FP32)
    assert activation_job(relu, hand_model(), Precision.BF16).layout == "NHWC"


# ---------------------------------------------------------------- shape folding


@pytest.mark.parametrize(("full", "other"), [
    ((2, 3, 4, 5, 6), (4, 1, 6)),
    ((2, 3, 4, 5, 6), (3, 1, 1, 1)),
    ((2, 3, 4, 5, 6, 7), (1, 1, 1, 1, 1, 1)),
    ((1, 64, 112, 112), (64, 1, 1)),
    ((2, 8), (8,)),
    ((2, 8), (2, 8)),
    ((7,), (1,)),
    ((2, 1, 3, 1, 5, 1, 7), (1, 1, 3, 1, 1, 1, 7)),
])
def test_broadcast4_is_the_same_broadcast(full: tuple[int, ...], other: tuple[int, ...]) -> None:
    """Both operands reshaped to the 4-D dims and broadcast give numpy's result, element for element."""
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, full), rng.uniform(-1, 1, other)
    c4, o4 = broadcast4(full, other)
    assert len(c4) == len(o4) == 4 and math.prod(c4) == a.size and math.prod(o4) == b.size
    assert all(o in (1, c) for o, c in zip(o4, c4, strict=True))
    np.testing.assert_array_equal((a.reshape(c4) + b.reshape(o4)).ravel(), (a + b).ravel())


def test_broadcast4_refusals() -> None:
    with pytest.raises(Unsupported, match="does not broadcast"):
        broadcast4((2, 3), (3, 2))
    with pytest.raises(Unsupported, match="more than 4"):
        broadcast4((2, 3, 4, 5, 6), (2, 1, 4, 1, 6))


def test_dims4() -> None:
    assert dims4((3,)) == [3, 1, 1, 1] and dims4((2, 5)) == [2, 5, 1, 1] and dims4((1, 2, 3, 4)) == [1, 2, 3, 4]
    assert dims4((1, 2, 3, 4, 5)) == [1, 2, 12, 5] and dims4((2, 3, 4, 5, 6, 7)) == [2, 3, 120, 7]


# ---------------------------------------------------------------- spellings vs the real header


def test_spellings_exist_in_the_cudnn_header() -> None:
    header = (CUDNN_INCLUDE / "cudnn_ops.h").read_text() + (CUDNN_INCLUDE / "cudnn_graph.h").read_text()
    names = {*POOLING_MODES.values(), *OP_TENSOR_OPS.values(), *(a.value for a in Activation), BATCHNORM_ALGORITHM,
             SOFTMAX_ALGORITHM, LRN_ALGORITHM, "CUDNN_TENSOR_NCHW", "CUDNN_TENSOR_NHWC"}
    for name in names:
        assert re.search(rf"\b{name}\b\s*=", header), name
    limits = {m[0]: float(m[1]) for m in re.findall(r"#define CUDNN_LRN_(MIN_N|MAX_N|MIN_K|MIN_BETA)\s+([0-9.e-]+)",
                                                     header)}
    assert limits == {"MIN_N": LRN_LIMITS["min_n"], "MAX_N": LRN_LIMITS["max_n"], "MIN_K": LRN_LIMITS["min_k"],
                      "MIN_BETA": LRN_LIMITS["min_beta"]}


# ---------------------------------------------------------------- generated project


@compiled_in_the_shared_build("ops")
def ops_project_plan() -> Plan:
    """Every op API for all nine zoo models (and the hand-made layers) at batch 1, fp32 and fp16."""
    return plan([*zoo_at_batch_1(), hand_model()], ["fp32", "fp16"], apis=OPS_APIS)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, codegen.Manifest, Plan]:
    p = ops_project_plan()
    out = tmp_path_factory.mktemp("ops")
    return out, codegen.generate(p, out, "benanza generate zoo --api ops"), p


def test_generated_sources_hold_no_model_text(project: tuple[Path, codegen.Manifest, Plan]) -> None:
    out, manifest, _ = project
    assert set(manifest.executables) == EXECUTABLES
    assert (out / "csrc" / "benanza" / "cudnn_ops.h").is_file()
    for path in out.glob("src/*.cu"):
        text = path.read_text()
        assert text.startswith("// generated by benanza, do not edit: benanza generate zoo --api ops")
        for fragment in ("quoted", "back\\slash", "rm -rf", "relu6", "lrn3", "gpu_0/"):
            assert fragment not in text, (path.name, fragment)
    data = json.loads((out / "manifest.json").read_text())
    assert {b["math"] for b in data["benchmarks"]} == {"n/a"}




@pytest.mark.compile
@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_op_benchmarks_build_and_list(shared_build: SharedBuild) -> None:
    build, manifest = shared_build.build, shared_build.manifest
    assert shared_build.executables["ops"] == EXECUTABLES
    for exe in sorted(shared_build.executables["ops"]):
        spec = manifest.executables[exe]
        lines, jobs = listed_jobs(build, exe, manifest.jobs)
        assert [d["job"] for d in lines] == list(range(spec["num_jobs"]))
        assert [(d["layer_key"], d["dtype"]) for d in lines] == [(j["layer_key"], j["dtype"]) for j in jobs]
        assert all(d["api"] == spec["api"] for d in lines)


@builds_and_runs_on_a_gpu
def test_op_benchmarks_run_on_a_gpu(project: tuple[Path, codegen.Manifest, Plan],
                                    cmake_build: Callable[[Path], Path]) -> None:
    out, manifest, p = project
    build = out / "build" if (out / "build" / "bench_copy").exists() else cmake_build(out)
    hand = {layer.key: layer.name for layer in HAND}
    pads = {layer.key: layer.attrs.get("pads", []) for m in p.models for layer in m.layers}
    for exe in sorted(manifest.executables):
        run = subprocess.run([str(build / exe), "--max-ms", "20", "--min-reps", "3", "--max-reps", "10"],
                             capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, (exe, run.stderr[-2000:])
        lines = [json.loads(line) for line in run.stdout.splitlines()]
        assert lines[0]["event"] == "system" and not [d for d in lines if d["event"] == "error"], exe
        results = [Result.from_dict(d) for d in lines if d["event"] == "result"]
        expected = [(b["layer_key"], b["algorithm"], b["dtype"]) for b in manifest.benchmarks
                    if b["executable"] == exe]
        assert [(r.layer_key, r.algorithm, r.dtype) for r in results] == expected
        for r in results:
            asymmetric = len(pads.get(r.layer_key, [])) == 4 and pads[r.layer_key][:2] != pads[r.layer_key][2:]
            if exe == "bench_pooling" and hand.get(r.layer_key) == "ceil":
                assert r.status == "not_supported" and "ceil_mode" in r.message, r
            elif exe == "bench_pooling" and asymmetric:
                assert r.status == "not_supported" and "asymmetric" in r.message, r
            else:
                assert r.status == "ok", (exe, r)
                assert r.median_ms > 0 and r.max_rel_error <= r.tolerance and r.math == "n/a"
            if exe == "bench_copy" and r.ok:
                assert r.max_rel_error == 0.0 and r.notes["bytes"] > 0 and r.notes["gbs"] > 0
