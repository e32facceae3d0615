"""cuBLAS benchmarks (cublasGemmEx, cublasLtMatmul, cublasSgemv) and the system ceilings.

The Gemm/MatMul -> column-major cuBLAS mapping is checked three ways: on the zoo models
(VGG-19's first FC), against the calls ONNX Runtime made on an H100 (the real cuBLAS
log in tests/data/samples), and by replaying the derived arguments with BLAS's
column-major definition in numpy on random operands.  The generated sources are built
against the real cuBLAS 13.1 headers; the GPU test runs them.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from conftest import LIGHT, NVCC, SharedBuild, builds_and_runs_on_a_gpu, compiled_in_the_shared_build, listed_jobs

from benanza.apis.base import Unsupported
from benanza.apis.ceilings import CEILING_KEY
from benanza.apis.gemm import GEMM_EX_ALGORITHMS, GemmShape, gemm_ex_job, gemm_shape, lt_matmul_job, sgemv_job
from benanza.apis.graph import graph_matmul_job
from benanza.generate import codegen
from benanza.generate.plan import Plan, plan
from benanza.library import Activation, Api, Fusion, Precision
from benanza.model.graph import build_graph, find_fusions
from benanza.model.layer import Layer, Model, Tensor
from benanza.model.onnx_import import load_model
from benanza.records import Result

ZOO_MODELS = sorted(LIGHT.glob("light_*.onnx"))
SAMPLES = Path(__file__).parent / "data" / "samples"  # real H100 logs, copied from shared/samples
CUBLAS_INCLUDE = Path(np.__file__).parents[1] / "nvidia" / "cu13" / "include"
CSRC = Path(__file__).parents[1] / "csrc" / "benanza"
CUBLAS_APIS = [Api.GEMM_EX, Api.LT_MATMUL, Api.SGEMV]
ALL_PRECISIONS = [p.value for p in Precision]
NASTY = 'fc "quoted" \\back\\slash\nnew line */ `$(rm -rf /)`'


# ---------------------------------------------------------------- hand-made layers


def gemm(name: str, a: tuple[int, ...], b: tuple[int, ...], c: tuple[int, ...] | None, y: tuple[int, ...],
         trans_a: int = 0, trans_b: int = 0, alpha: float = 1.0, beta: float = 1.0, index: int = 0) -> Layer:
    inputs = [Tensor(f"{name}:a", a, "float32"), Tensor(f"{name}:b", b, "float32", True)]
    if c is not None:
        inputs.append(Tensor(f"{name}:c", c, "float32", True))
    return Layer(name, "Gemm", inputs, [Tensor(f"{name}:y", y, "float32")],
                 {"alpha": alpha, "beta": beta, "transA": trans_a, "transB": trans_b}, index=index)


def matmul(name: str, a: tuple[int, ...], b: tuple[int, ...], y: tuple[int, ...], index: int = 0,
           constant: str = "") -> Layer:
    """``constant``: "a" or "b", the operand that is a model constant (the weights); "": neither."""
    return Layer(name, "MatMul", [Tensor(f"{name}:a", a, "float32", constant == "a"),
                                  Tensor(f"{name}:b", b, "float32", constant == "b")],
                 [Tensor(f"{name}:y", y, "float32")], {}, index=index)


def model_of(layers: list[Layer], name: str = "handmade", outputs: set[str] | None = None) -> Model:
    outputs = outputs if outputs is not None else {layers[-1].outputs[0].name}
    return Model(name, f"{name}.onnx", 1, layers, build_graph(layers), find_fusions(layers, outputs))


# Gemm/MatMul cases the zoo lacks: every transpose, every C broadcast, batched MatMuls, 1-D operands.
CASES: list[Layer] = [
    gemm("nn", (3, 5), (5, 4), (4,), (3, 4)),
    gemm("tn", (5, 3), (5, 4), (3, 4), (3, 4), trans_a=1, alpha=0.5, beta=2.0),
    gemm("nt", (3, 5), (4, 5), (3, 1), (3, 4), trans_b=1),
    gemm("tt", (5, 3), (4, 5), (1, 1), (3, 4), trans_a=1, trans_b=1, beta=-1.0),
    gemm("noc", (3, 5), (5, 4), None, (3, 4)),
    gemm("beta0", (3, 5), (5, 4), (3, 4), (3, 4), beta=0.0),
    gemm("row", (1, 7), (6, 7), (6,), (1, 6), trans_b=1),
    gemm("col", (7, 3), (7, 1), (1,), (3, 1), trans_a=1),
    gemm("colN", (3, 7), (7, 1), (3, 1), (3, 1)),
    gemm("rowT", (7, 1), (7, 6), (1, 6), (1, 6), trans_a=1),
    matmul("fold", (2, 3, 4, 5), (5, 6), (2, 3, 4, 6)),
    matmul("equal", (2, 4, 5), (2, 5, 6), (2, 4, 6)),
    matmul("shared_a", (4, 5), (3, 5, 6), (3, 4, 6)),
    matmul("padded", (1, 4, 5), (2, 3, 5, 6), (2, 3, 4, 6)),
    matmul("vec_a", (5,), (5, 6), (6,)),
    matmul("vec_b", (2, 4, 5), (5,), (2, 4)),
]


def col_major(buf: np.ndarray, rows: int, cols: int, ld: int, offset: int = 0) -> np.ndarray:
    """The rows x cols column-major matrix BLAS reads from `buf` (element [i, j] at offset + i + j * ld)."""
    assert ld >= rows
    return buf[offset + np.arange(rows)[:, None] + np.arange(cols)[None, :] * ld]


def op(x: np.ndarray, trans: str) -> np.ndarray:
    return x.T if trans == "CUBLAS_OP_T" else x


def onnx_reference(layer: Layer, a: np.ndarray, b: np.ndarray, c: np.ndarray | None) -> np.ndarray:
    """The layer's output by the ONNX definition (numpy row-major arrays)."""
    if layer.op == "MatMul":
        return np.matmul(a, b)
    at = a.T if layer.attrs["transA"] else a
    bt = b.T if layer.attrs["transB"] else b
    y = layer.attrs["alpha"] * at @ bt
    return y + layer.attrs["beta"] * c if c is not None else y


def random_operands(layer: Layer, rng: np.random.Generator) -> list[np.ndarray]:
    return [rng.uniform(-1, 1, t.shape) for t in layer.inputs]


def cublas_replay(s: GemmShape, a: np.ndarray, b: np.ndarray, c: np.ndarray | None) -> np.ndarray:
    """Run the derived cublasGemmEx / strided-batched call with BLAS semantics on the flat buffers."""
    cb = s.cublas()
    fa, fb = a.ravel(), b.ravel()
    m, n, k = cb["m"], cb["n"], cb["k"]
    y = np.zeros(s.batch * m * n)
    if c is not None:  # the template materializes C to Y's shape; cuBLAS's beta * C is in place
        y[:] = np.tile(np.broadcast_to(c, (s.m, s.n)).ravel(), s.batch)
    for bt in range(s.batch):
        ca = col_major(fb, *((m, k) if cb["transa"] == "CUBLAS_OP_N" else (k, m)), cb["lda"], bt * s.stride_b)
        cbm = col_major(fa, *((k, n) if cb["transb"] == "CUBLAS_OP_N" else (n, k)), cb["ldb"], bt * s.stride_a)
        cc = col_major(y, m, n, cb["ldc"], bt * m * n)
        out = s.alpha * op(ca, cb["transa"]) @ op(cbm, cb["transb"]) + s.beta * cc
        y[bt * m * n + np.arange(m)[:, None] + np.arange(n)[None, :] * cb["ldc"]] = out
    return y


def gemv_replay(s: GemmShape, a: np.ndarray, b: np.ndarray, c: np.ndarray | None) -> np.ndarray:
    """Run the derived cublasSgemv call (y = alpha op(matrix) x + beta y) with BLAS semantics."""
    g = s.gemv()
    assert g is not None
    matrix, x = (b.ravel(), a.ravel()) if g["x_is_a"] else (a.ravel(), b.ravel())
    mat = col_major(matrix, g["rows"], g["cols"], g["lda"])
    y0 = np.broadcast_to(c, (s.m, s.n)).ravel() if c is not None else 0.0
    return s.alpha * op(mat, g["trans"]) @ x + s.beta * y0


# ---------------------------------------------------------------- mapping


@pytest.mark.parametrize("layer", CASES, ids=[case.name for case in CASES])
def test_cublas_arguments_compute_the_onnx_result(layer: Layer) -> None:
    rng = np.random.default_rng(7)
    operands = random_operands(layer, rng)
    a, b = operands[0], operands[1]
    c = operands[2] if len(operands) > 2 else None
    expected = onnx_reference(layer, a, b, c).ravel()
    s = gemm_shape(layer)
    np.testing.assert_allclose(cublas_replay(s, a, b, c if s.c_rows else None), expected, rtol=1e-12, atol=1e-12)
    if s.gemv() is not None:
        np.testing.assert_allclose(gemv_replay(s, a, b, c if s.c_rows else None), expected, rtol=1e-12, atol=1e-12)


def test_batched_matmul_strides_and_folds() -> None:
    by_name = {case.name: gemm_shape(case) for case in CASES}
    assert (by_name["fold"].batch, by_name["fold"].m) == (1, 2 * 3 * 4)  # a shared B folds A's batch into rows
    assert (by_name["equal"].batch, by_name["equal"].stride_a, by_name["equal"].stride_b) == (2, 20, 30)
    assert (by_name["shared_a"].batch, by_name["shared_a"].stride_a, by_name["shared_a"].stride_b) == (3, 0, 30)
    assert (by_name["padded"].batch, by_name["padded"].stride_a) == (6, 0)
    assert (by_name["vec_a"].m, by_name["vec_b"].n) == (1, 1)
    assert by_name["beta0"].beta == 0.0 and by_name["beta0"].c_rows == 0  # beta 0: C is not read
    with pytest.raises(Unsupported, match="broadcast against each other"):
        gemm_shape(matmul("cross", (2, 1, 4, 5), (1, 3, 5, 6), (2, 3, 4, 6)))
    with pytest.raises(Unsupported, match="inner dimensions differ"):
        gemm_shape(gemm("bad", (3, 5), (4, 4), None, (3, 4)))
    with pytest.raises(Unsupported, match="does not broadcast"):
        gemm_shape(gemm("badc", (3, 5), (5, 4), (2, 4), (3, 4)))
    with pytest.raises(Unsupported, match="not a Gemm or MatMul"):
        gemm_shape(Layer("r", "Relu", [Tensor("x", (3,), "float32")], [Tensor("y", (3,), "float32")], {}))


@pytest.mark.parametrize("batch", [1, 4])
def test_vgg19_first_fc(batch: int) -> None:
    vgg = load_model(LIGHT / "light_vgg19.onnx", batch=batch)
    fc = next(layer for layer in vgg.layers if layer.op == "Gemm")
    s = gemm_shape(fc)
    assert (s.batch, s.m, s.n, s.k, s.trans_a, s.trans_b) == (1, batch, 4096, 25088, False, True)
    assert (s.c_rows, s.c_cols, s.alpha, s.beta) == (1, 4096, 1.0, 1.0)
    assert s.cublas() == {"m": 4096, "n": batch, "k": 25088, "transa": "CUBLAS_OP_T", "transb": "CUBLAS_OP_N",
                          "lda": 25088, "ldb": 25088, "ldc": 4096}
    p = plan([vgg], ["fp32"], apis=CUBLAS_APIS)
    job = next(j for j in p.jobs if j.api is Api.GEMM_EX and j.key == fc.key)
    assert job.fields.row["dims"][:4] == [1, batch, 4096, 25088]
    assert job.fields.shapes["cublas"]["k"] == 25088 and job.fields.algorithms == GEMM_EX_ALGORITHMS
    sgemv = [j for j in p.jobs if j.api is Api.SGEMV]
    if batch == 1:
        (gemv_job,) = [j for j in sgemv if j.key == fc.key]
        assert gemv_job.fields.row["gemv_op"] == "CUBLAS_OP_T"
        assert gemv_job.fields.row["gemv"] == [25088, 4096, 25088, 1]  # B read as 25088 x 4096, x = A
    else:
        assert not sgemv
        reasons = {d.reason for d in p.dropped if d.api == Api.SGEMV.value}
        assert reasons == {"not a matrix-vector product (M > 1 and N > 1, or batched)"}


def test_mapping_matches_what_onnx_runtime_called_on_the_h100() -> None:
    """ZFNet-512 at batch 1: ONNX Runtime's cublasSgemm calls are the generated cublasGemmEx arguments."""
    from benanza.profile.cublas_log import read_cublas_log

    log = SAMPLES / "ort1.31_zfnet512_cublas_api.log.gz"
    logged = {(c.transa, c.transb, c.m, c.n, c.k, c.lda, c.ldb, c.ldc) for c in read_cublas_log(log).calls}
    zfnet = load_model(LIGHT / "light_zfnet512.onnx", batch=1)
    ours = set()
    for job in plan([zfnet], ["fp32"], apis=[Api.GEMM_EX]).jobs:
        c = job.fields.shapes["cublas"]
        ours.add((c["transa"].removeprefix("CUBLAS_OP_"), c["transb"].removeprefix("CUBLAS_OP_"), c["m"], c["n"],
                  c["k"], c["lda"], c["ldb"], c["ldc"]))
    assert len(logged) == 3 and ours == logged


# ---------------------------------------------------------------- planner


@functools.cache
def zoo_at_batch_1() -> list[Model]:
    return [load_model(path, batch=1) for path in ZOO_MODELS]


@pytest.fixture(scope="module")
def zoo_models() -> list[Model]:
    assert len(ZOO_MODELS) == 9
    return zoo_at_batch_1()


def test_zoo_plan_covers_every_gemm(zoo_models: list[Model]) -> None:
    p = plan(zoo_models, ALL_PRECISIONS, apis=CUBLAS_APIS)
    gemm_keys = {layer.key for m in zoo_models for layer in m.layers if layer.op in ("Gemm", "MatMul")}
    by_api = {api: [j for j in p.jobs if j.api is api] for api in CUBLAS_APIS}
    assert {j.key for j in by_api[Api.GEMM_EX]} == gemm_keys
    assert len(by_api[Api.GEMM_EX]) == 4 * len(gemm_keys)
    # cublasSgemv: fp32 only (tf32 is dropped as fp32 of a non-Tensor-Core op), every zoo FC is M = 1 at batch 1
    assert {j.precision for j in by_api[Api.SGEMV]} == {Precision.FP32}
    assert {j.key for j in by_api[Api.SGEMV]} == gemm_keys
    reasons = p.drop_reasons()
    assert reasons["cublasSgemv is fp32 only"] == 2 * len(gemm_keys)
    # cublasLtMatmul: every Gemm plus every gemm fusion, algorithms enumerated at run time
    fusions = {f.key for m in zoo_models for f in m.fusions if f.pattern.startswith("gemm")}
    assert fusions and {j.key for j in by_api[Api.LT_MATMUL]} == gemm_keys | fusions
    assert {j.fields.algorithms for j in by_api[Api.LT_MATMUL]} == {("*",)}
    names = [b.name() for b in p.benchmarks]
    assert len(names) == len(set(names))


def test_lt_fusion_folds_the_gemm_bias_into_the_epilogue(zoo_models: list[Model]) -> None:
    alexnet = next(m for m in zoo_models if m.name == "light_bvlc_alexnet")
    p = plan([alexnet], ["fp16"], apis=[Api.LT_MATMUL])
    fused = [j for j in p.jobs if j.fusion is Fusion.GEMM_BIAS_ACT]
    assert len(fused) == 2
    for job in fused:
        row = job.fields.row
        assert row["epilogue"] == "CUBLASLT_EPILOGUE_RELU_BIAS" and row["bias"] and row["relu"]
        assert row["beta"] == 0.0 and row["dims"][8:10] == [0, 0]  # the C row vector became the bias
        assert job.fields.shapes["bias"] == [row["dims"][2]]
    plain = [j for j in p.jobs if j.fusion is Fusion.NONE]
    assert all(j.fields.row["epilogue"] == "CUBLASLT_EPILOGUE_DEFAULT" and j.fields.row["beta"] == 1.0
               for j in plain)
    assert all(j.fields.row["b_constant"] and not j.fields.row["a_constant"] for j in p.jobs)  # FC weights


def _add(name: str, x: Tensor, bias: tuple[int, ...], index: int) -> Layer:
    return Layer(name, "Add", [x, Tensor(f"{name}:bias", bias, "float32", True)],
                 [Tensor(f"{name}:y", x.shape, "float32")], {}, index=index)


def _act(name: str, op_name: str, x: Tensor, index: int) -> Layer:
    return Layer(name, op_name, [x], [Tensor(f"{name}:y", x.shape, "float32")], {}, index=index)


def test_lt_epilogues_for_matmul_chains() -> None:
    mm = matmul("mm", (2, 8, 16), (16, 32), (2, 8, 32))
    add = _add("add", mm.outputs[0], (32,), 1)
    relu = _act("relu", "Relu", add.outputs[0], 2)
    m = model_of([mm, add, relu])
    (f,) = m.fusions
    assert f.pattern == Fusion.GEMM_BIAS_ACT.value and f.activation == Activation.RELU.value
    row = lt_matmul_job(f, m, Precision.FP32).row
    assert row["epilogue"] == "CUBLASLT_EPILOGUE_RELU_BIAS" and row["dims"][:4] == [1, 16, 32, 16]

    mm2 = matmul("mm2", (8, 16), (16, 32), (8, 32))
    m2 = model_of([mm2, _add("add2", mm2.outputs[0], (1, 32), 1)])
    (f2,) = m2.fusions
    assert f2.pattern == Fusion.GEMM_BIAS.value
    assert lt_matmul_job(f2, m2, Precision.FP32).row["epilogue"] == "CUBLASLT_EPILOGUE_BIAS"

    mm3 = matmul("mm3", (8, 16), (16, 32), (8, 32))
    m3 = model_of([mm3, _act("sig", "Sigmoid", mm3.outputs[0], 1)])
    (f3,) = m3.fusions
    with pytest.raises(Unsupported, match="no epilogue for CUDNN_ACTIVATION_SIGMOID"):
        lt_matmul_job(f3, m3, Precision.FP32)
    # a Gemm whose C has M rows keeps beta * C beside the epilogue
    g = gemm("gfull", (8, 16), (16, 32), (8, 32), (8, 32), beta=0.5)
    m4 = model_of([g, _act("r4", "Relu", g.outputs[0], 1)])
    row4 = lt_matmul_job(m4.fusions[0], m4, Precision.FP32).row
    assert row4["epilogue"] == "CUBLASLT_EPILOGUE_RELU" and row4["beta"] == 0.5 and row4["dims"][8:10] == [8, 32]


def test_gemm_shape_says_which_operand_is_the_weights() -> None:
    """B constant (an FC, MatMul(x, W)), neither (attention's MatMul(q, k)), A constant (MatMul(W, x)):
    the job rows carry it as plain bools for the templates' weight rings (--l2 cold-weights)."""
    fc = gemm("fc", (1, 64), (32, 64), (32,), (1, 32), trans_b=1)
    xw = matmul("xw", (8, 64), (64, 16), (8, 16), constant="b")
    qk = matmul("qk", (8, 64), (64, 16), (8, 16))
    wx = matmul("wx", (16, 64), (64, 1), (16, 1), constant="a")
    expected = {"fc": (False, True), "xw": (False, True), "qk": (False, False), "wx": (True, False)}
    shapes = {layer.name: gemm_shape(layer) for layer in (fc, xw, qk, wx)}
    assert {name: (s.a_constant, s.b_constant) for name, s in shapes.items()} == expected
    assert shapes["wx"].describe()["a_constant"] and not shapes["qk"].describe()["b_constant"]
    for layer in (fc, wx):  # both are matrix-vector products, which every GEMM builder takes
        model = model_of([layer])
        for builder in (gemm_ex_job, lt_matmul_job, graph_matmul_job, sgemv_job):
            row = builder(layer, model, Precision.FP32).row
            assert (row["a_constant"], row["b_constant"]) == expected[layer.name], builder.__name__
            codegen.check_plain(row)
    mm = matmul("mm", (8, 16), (16, 32), (8, 32), constant="b")
    m = model_of([mm, _add("add", mm.outputs[0], (32,), 1)])
    assert lt_matmul_job(m.fusions[0], m, Precision.FP32).row["b_constant"]  # the epilogue's rebuilt shape keeps it


# ---------------------------------------------------------------- ceilings


def test_ceiling_jobs(zoo_models: list[Model]) -> None:
    squeeze = next(m for m in zoo_models if m.name == "light_squeezenet")
    assert not any(j.api is Api.CEILING for j in plan([squeeze], ["fp32"]).jobs)  # off unless asked for
    p = plan([squeeze], ["fp32"], ceilings=True)
    jobs = p.executables()["bench_ceilings"]
    assert [j.fields.algorithms for j in jobs] == [("copy_d2d",), ("gemm_fp32",), ("gemm_tf32",), ("gemm_fp16",),
                                                    ("gemm_bf16",)]
    assert [j.index for j in jobs] == list(range(5)) and {j.key for j in jobs} == {CEILING_KEY}
    assert jobs[0].fields.row == {"memcpy": True, "size": 1 << 30, "algorithm": "copy_d2d"}
    only = plan([squeeze], ["fp16"], apis=[Api.CEILING])  # --api ceilings
    assert [j.api for j in only.jobs] == [Api.CEILING] * 5
    measured = {b.name() for j in jobs[:2] for b in j.benchmarks()}
    again = plan([squeeze], ["fp32"], apis=[Api.CEILING], skip=measured)
    assert [j.fields.algorithms[0] for j in again.jobs] == ["gemm_tf32", "gemm_fp16", "gemm_bf16"]
    assert [j.index for j in again.jobs] == [0, 1, 2]
    assert again.drop_reasons()["already in the database"] == 1  # copy and gemm_fp32 share (key, api, fp32)


# ---------------------------------------------------------------- the C++ side's tables


def test_lt_spelling_tables_match_the_cublaslt_header() -> None:
    header = (CUBLAS_INCLUDE / "cublasLt.h").read_text()
    ours = (CSRC / "cublaslt_names.h").read_text()
    for prefix, table in [("CUBLASLT_MATMUL_TILE_", "kLtTileNames"), ("CUBLASLT_MATMUL_STAGES_", "kLtStagesNames"),
                          ("CUBLASLT_CLUSTER_SHAPE_", "kLtClusterNames"),
                          ("CUBLASLT_MATMUL_INNER_SHAPE_", "kLtInnerShapeNames")]:
        enum = {}
        for name, value in re.findall(rf"\b{prefix}(\w+)\s*=\s*(\d+)", header):
            enum.setdefault(int(value), name)
        body = re.search(rf"{table}\[\] = \{{(.*?)\}};", ours, re.S)
        assert body, table
        names = re.findall(r'"([^"]*)"', body.group(1))
        assert names == [enum.get(i, "") for i in range(max(enum) + 1)], table


def test_gemm_ex_algorithms_exist_in_the_cublas_header() -> None:
    header = (CUBLAS_INCLUDE / "cublas_api.h").read_text()
    declared = set(re.findall(r"\b(CUBLAS_GEMM_\w+)\s*=", header))
    assert set(GEMM_EX_ALGORITHMS) <= declared
    # every value but the deprecated aliases (DFALT) is measured
    assert declared - set(GEMM_EX_ALGORITHMS) == {"CUBLAS_GEMM_DFALT", "CUBLAS_GEMM_DFALT_TENSOR_OP"}


# ---------------------------------------------------------------- build and run


@compiled_in_the_shared_build("cublas")
def cublas_project_plan() -> Plan:
    """Every cuBLAS API and the ceilings for the zoo and hostile hand-made GEMMs, in every precision."""
    hostile = [gemm(NASTY, (2, 64), (32, 64), (32,), (2, 32), trans_b=1),
               matmul("nodeBatched", (3, 8, 64), (3, 64, 16), (3, 8, 16), index=1),
               matmul("nodeShared", (8, 64), (4, 64, 16), (4, 8, 16), index=2),
               gemm("nodeColumn", (64, 8), (64, 1), (8, 1), (8, 1), trans_a=1, index=3),
               matmul("nodeWeightsB", (8, 64), (64, 16), (8, 16), index=4, constant="b"),
               matmul("nodeWeightsA", (16, 64), (64, 8), (16, 8), index=5, constant="a")]
    hand = Model(NASTY, "hand/made.onnx", 2, hostile, nx.DiGraph())
    return plan([*zoo_at_batch_1(), hand], ALL_PRECISIONS, apis=CUBLAS_APIS, ceilings=True)


@pytest.fixture(scope="module")
def cublas_plan() -> Plan:
    return cublas_project_plan()


@pytest.fixture(scope="module")
def cublas_project(cublas_plan: Plan, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, codegen.Manifest]:
    out = tmp_path_factory.mktemp("cublas")
    return out, codegen.generate(cublas_plan, out, "benanza generate zoo --api gemm_ex,lt_matmul,sgemv")


def test_generated_sources_hold_no_model_text(cublas_project: tuple[Path, codegen.Manifest]) -> None:
    out, manifest = cublas_project
    assert set(manifest.executables) == {"bench_gemm_ex", "bench_lt_matmul", "bench_sgemv", "bench_ceilings"}
    for path in out.glob("src/*.cu"):
        text = path.read_text()
        assert text.startswith("// generated by benanza, do not edit: ")
        for fragment in ("quoted", "back\\slash", "rm -rf", "nodeBatched", "nodeShared", "nodeColumn", "nodeWeights"):
            assert fragment not in text, (path.name, fragment)




@pytest.mark.compile
@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_cublas_benchmarks_build_and_list(shared_build: SharedBuild) -> None:
    build, manifest = shared_build.build, shared_build.manifest
    assert shared_build.executables["cublas"] == {"bench_gemm_ex", "bench_lt_matmul", "bench_sgemv", "bench_ceilings"}
    for exe in sorted(shared_build.executables["cublas"]):
        spec = manifest.executables[exe]
        lines, jobs = listed_jobs(build, exe, manifest.jobs)
        assert len(lines) == spec["num_jobs"] == len(jobs)
        assert [d["layer_key"] for d in lines] == [j["layer_key"] for j in jobs]
        assert [d["dtype"] for d in lines] == [j["dtype"] for j in jobs]
        if exe != "bench_ceilings":  # the row's numbers are the planner's mapping
            assert [d["dims"]["k"] for d in lines] == [j["shapes"]["k"] for j in jobs]
            assert [d["dims"]["cublas_m"] for d in lines] == [j["shapes"]["cublas"]["m"] for j in jobs]
            # which operand the weight ring rotates (--l2 cold-weights): B constant, A constant, neither
            assert [(d["a_constant"], d["b_constant"]) for d in lines] == \
                [(j["shapes"]["a_constant"], j["shapes"]["b_constant"]) for j in jobs]
        if exe == "bench_gemm_ex":
            assert {(d["a_constant"], d["b_constant"]) for d in lines} == {(False, True), (True, False), (False, False)}


@builds_and_runs_on_a_gpu
def test_cublas_benchmarks_run_on_a_gpu(cublas_project: tuple[Path, codegen.Manifest],
                                        cmake_build: Callable[[Path], Path]) -> None:
    out, manifest = cublas_project
    build = out / "build" if (out / "build" / "bench_ceilings").exists() else cmake_build(out)
    # the hand-made layers and VGG-19 (its FCs and gemm+bias+act fusions) keep the run short
    keys = {CEILING_KEY}
    for m in manifest.models:
        if m["name"] in (NASTY, "light_vgg19"):
            keys |= {layer["key"] for layer in m["layers"]} | {f["key"] for f in m["fusions"]}
    results: dict[str, list[Result]] = {}
    for exe in manifest.executables:
        jobs = [str(j["job"]) for j in manifest.jobs if j["executable"] == exe and j["layer_key"] in keys]
        run = subprocess.run([str(build / exe), "--jobs", ",".join(jobs), "--max-ms", "50", "--max-reps", "20"],
                             capture_output=True, text=True, timeout=1200)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        lines = [json.loads(line) for line in run.stdout.splitlines()]
        assert lines[0]["event"] == "system" and not [d for d in lines if d["event"] == "error"]
        results[exe] = [Result.from_dict(d) for d in lines if d["event"] == "result"]
    everything = [r for rs in results.values() for r in rs]
    # only the deprecated *_TENSOR_OP algorithms may compute fp32 in reduced precision (FAST_16F semantics)
    off = [r for r in everything if r.status == "check_failed"]
    assert all(r.algorithm.endswith("_TENSOR_OP") and r.dtype in ("fp32", "tf32") for r in off), off[:3]
    for r in everything:
        if r.ok:
            assert r.median_ms > 0 and r.max_rel_error <= r.tolerance, r
    gemm_ex = [j for j in manifest.jobs if j["executable"] == "bench_gemm_ex" and j["layer_key"] in keys]
    assert len(results["bench_gemm_ex"]) == len(gemm_ex) * len(GEMM_EX_ALGORITHMS)
    assert all(r.ok for r in results["bench_gemm_ex"] if r.algorithm == "CUBLAS_GEMM_DEFAULT")
    assert all(r.ok for r in results["bench_sgemv"])
    lt = results["bench_lt_matmul"]
    for job in (j for j in manifest.jobs if j["executable"] == "bench_lt_matmul" and j["layer_key"] in keys):
        mine = [r for r in lt if r.job == job["job"]]
        assert mine and any(r.ok for r in mine), job
        assert len({r.algorithm for r in mine}) == len(mine)
        assert all(re.fullmatch(r"algo\d+_tile\w+_stages\w+_splitk-?\d+_red[a-z]+_swizzle\d+_custom\d+_inner\w+"
                                r"_cluster\w+", r.algorithm) for r in mine)
        ranks = [r.heuristic_rank for r in mine]
        assert ranks == sorted(set(ranks)) and ranks[0] == 0  # in the heuristic's order, the first one first
    ceilings = {r.algorithm: r for r in results["bench_ceilings"]}
    assert set(ceilings) == {"copy_d2d", "gemm_fp32", "gemm_tf32", "gemm_fp16", "gemm_bf16"}
    assert all(r.ok for r in ceilings.values())
    assert 100 < ceilings["copy_d2d"].notes["gbs"] < 20000
    assert 1 < ceilings["gemm_fp32"].notes["tflops"] < ceilings["gemm_fp16"].notes["tflops"]
