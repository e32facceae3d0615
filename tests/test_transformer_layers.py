"""Transformer layers: the attention core as a fusion candidate, and the jobs of every transformer layer.

Models are small blocks built with onnx.helper in the forms the exporters write
(``tiny_transformers``); the generated sources of the new APIs (fused SDPA, graph-API
normalization, softmax in both opsets' meaning) are built against the real cuDNN 9.19 and
cudnn-frontend 1.32 headers and must list exactly the planned jobs.
"""

from __future__ import annotations

import json
import math
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest
from conftest import NVCC, SharedBuild, builds_and_runs_on_a_gpu, compiled_in_the_shared_build, listed_jobs
from onnx import TensorProto, helper
from tiny_transformers import bert_block, gpt2_block, rmsnorm_block, sdpa_block

from benanza.apis.cudnn_ops import SOFTMAX_MODES
from benanza.generate import codegen
from benanza.generate.plan import Plan, plan
from benanza.library import Api, Fusion, Precision
from benanza.model.attention import describe
from benanza.model.layer import Model
from benanza.model.onnx_import import load_model
from benanza.records import Result


def load(proto: onnx.ModelProto, tmp_path: Path, batch: int | None = None) -> Model:
    path = tmp_path / f"{proto.graph.name}.onnx"
    onnx.save(proto, path)
    return load_model(path, batch)


@pytest.fixture(scope="module")
def blocks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Model]:
    out = tmp_path_factory.mktemp("blocks")
    return {m.graph.name: load(m, out) for m in (bert_block(), gpt2_block(), sdpa_block(), rmsnorm_block())}


def attention_of(model: Model) -> list:
    return [f for f in model.fusions if f.pattern == Fusion.ATTENTION.value]


# ---------------------------------------------------------------- the attention core


@pytest.mark.parametrize(("name", "ops", "causal", "padding"), [
    ("bert_block", ["Transpose", "MatMul", "Div", "Add", "Softmax", "MatMul"], False, True),
    ("gpt2_block", ["Transpose", "MatMul", "Div", "Where", "Add", "Softmax", "MatMul"], True, True),
    ("sdpa_block", ["Mul", "Transpose", "Mul", "MatMul", "Softmax", "MatMul"], False, False),
])
def test_attention_core_in_each_exporter_form(blocks: dict[str, Model], name: str, ops: list[str], causal: bool,
                                             padding: bool) -> None:
    model = blocks[name]
    (cand,) = attention_of(model)
    assert [model.layers[i].op for i in cand.layers] == ops
    a = describe(cand, model.layers)
    assert (a.batch, a.heads, a.s_q, a.s_kv, a.d_qk, a.d_v) == (2, 2, 16, 16, 8, 8)
    assert (a.causal, a.padding) == (causal, padding) and a.scale == pytest.approx(1 / math.sqrt(8))
    # its MatMuls anchor no GEMM epilogue fusion: each layer joins one candidate at most
    members = [i for f in model.fusions for i in f.layers]
    assert len(members) == len(set(members))


def test_attention_whose_scores_are_read_elsewhere_is_not_fused(tmp_path: Path) -> None:
    proto = sdpa_block()
    softmax = next(n for n in proto.graph.node if n.op_type == "Softmax")
    proto.graph.output.append(helper.make_tensor_value_info(softmax.output[0], TensorProto.FLOAT, [2, 2, 16, 16]))
    assert attention_of(load(proto, tmp_path)) == []


def test_attention_with_the_batch_changed(tmp_path: Path) -> None:
    model = load(bert_block(batch=1, seq=32), tmp_path, batch=1)
    (cand,) = attention_of(model)
    a = describe(cand, model.layers)
    assert (a.batch, a.s_q, a.s_kv) == (1, 32, 32)


@pytest.mark.parametrize(("name", "ops"), [
    ("bert_block", ["Div", "Erf", "Add", "Mul", "Mul"]),  # GELU, Erf form
    ("gpt2_block", ["Pow", "Mul", "Add", "Mul", "Tanh", "Add", "Mul", "Mul"]),  # GELU, tanh form (0.5 x a side branch)
])
def test_gelu_is_one_pointwise_chain(blocks: dict[str, Model], name: str, ops: list[str]) -> None:
    model = blocks[name]
    (chain,) = [f for f in model.fusions if f.pattern == Fusion.POINTWISE.value]
    assert [model.layers[i].op for i in chain.layers] == ops


def test_silu_is_a_pointwise_chain_and_a_shared_intermediate_is_not(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32])
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"], name="sig"),
             helper.make_node("Mul", ["x", "s"], ["y"], name="mul")]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])]
    silu = helper.make_model(helper.make_graph(nodes, "silu", [x], outs), opset_imports=[helper.make_opsetid("", 17)])
    model = load(silu, tmp_path)
    assert [(f.pattern, f.layers) for f in model.fusions] == [(Fusion.POINTWISE.value, (0, 1))]
    silu.graph.output.append(helper.make_tensor_value_info("s", TensorProto.FLOAT, [4, 32]))  # s is needed too
    assert load(silu, tmp_path).fusions == []


@pytest.mark.parametrize(("reciprocal", "ops"), [
    (True, ["Pow", "ReduceMean", "Add", "Sqrt", "Reciprocal", "Mul", "Mul"]),
    (False, ["Pow", "ReduceMean", "Add", "Sqrt", "Div", "Mul"]),
])
def test_rmsnorm_pattern_is_one_norm_forward(tmp_path: Path, reciprocal: bool, ops: list[str]) -> None:
    model = load(rmsnorm_block(reciprocal=reciprocal), tmp_path)
    (cand,) = model.fusions
    assert cand.pattern == Fusion.RMSNORM.value and [model.layers[i].op for i in cand.layers] == ops
    (job,) = [j for j in plan([model], [Precision.BF16]).jobs if j.api is Api.GRAPH_NORM]
    assert job.key == cand.key and job.fusion is Fusion.RMSNORM
    row = job.fields.row
    assert (row["rows"], row["cols"], row["rms"], row["bias"]) == (32, 32, True, False)


# ---------------------------------------------------------------- jobs of every transformer layer


@pytest.fixture(scope="module")
def block_plan(blocks: dict[str, Model]) -> Plan:
    return plan(blocks.values(), list(Precision))


def jobs(p: Plan, api: Api) -> list:
    return [j for j in p.jobs if j.api is api]


def test_sdpa_jobs_fp16_and_bf16_only(block_plan: Plan, blocks: dict[str, Model]) -> None:
    sdpa = jobs(block_plan, Api.GRAPH_SDPA)
    assert {(j.precision, j.executable) for j in sdpa} == {(Precision.FP16, "bench_graph_sdpa"),
                                                           (Precision.BF16, "bench_graph_sdpa")}
    assert len(sdpa) == 6  # three distinct attention cores x two precisions
    keys = {f.key: m.name for m in blocks.values() for f in attention_of(m)}
    rows = {keys[j.key]: j.fields.row for j in sdpa if j.precision is Precision.FP16}
    assert rows["gpt2_block"]["dims"] == [2, 2, 16, 16, 8, 8]
    assert (rows["gpt2_block"]["causal"], rows["gpt2_block"]["padding"]) == (True, True)
    assert (rows["sdpa_block"]["causal"], rows["sdpa_block"]["padding"]) == (False, False)
    fp32 = {d.reason for d in block_plan.dropped if d.api == Api.GRAPH_SDPA.value and d.dtype == "fp32"}
    assert fp32 == {"cuDNN's fused SDPA takes fp16 or bf16, not fp32"}


def test_layernorm_jobs(block_plan: Plan, blocks: dict[str, Model]) -> None:
    ln = next(layer for layer in blocks["bert_block"].layers if layer.op == "LayerNormalization")
    norm = [j for j in jobs(block_plan, Api.GRAPH_NORM) if j.key == ln.key]
    assert {j.precision for j in norm} == {Precision.FP32, Precision.FP16, Precision.BF16}  # no tf32: no Tensor Cores
    row = norm[0].fields.row
    assert (row["rows"], row["cols"], row["rms"], row["bias"]) == (32, 16, False, True)
    assert row["epsilon"] == pytest.approx(1e-12)  # a float attribute: fp32 in the file


def test_batched_matmuls_of_the_unfused_chain(block_plan: Plan, blocks: dict[str, Model]) -> None:
    """Q K^T and P V as strided-batched GEMMs (batch = b * heads) in cuBLAS, cuBLASLt and the graph matmul."""
    model = blocks["bert_block"]
    qk, pv = (model.layers[i] for i in attention_of(model)[0].layers if model.layers[i].op == "MatMul")
    for layer, (m, n, k) in ((qk, (16, 16, 8)), (pv, (16, 8, 16))):
        for api in (Api.GEMM_EX, Api.LT_MATMUL, Api.GRAPH_MATMUL):
            (job, *_) = [j for j in jobs(block_plan, api) if j.key == layer.key]
            s = job.fields.shapes
            assert (s["batch"], s["m"], s["n"], s["k"]) == (4, m, n, k)
            assert (s["stride_a"], s["stride_b"]) == (m * k, k * n)


def test_pointwise_and_gather_layers_get_a_roofline_bound(block_plan: Plan, blocks: dict[str, Model]) -> None:
    """Embedding Gather, GELU's Erf/Div/Pow and the causal Where: each has a copy-roofline job; none is a zero."""
    copied = {j.key for j in jobs(block_plan, Api.COPY)}
    for name, ops in (("bert_block", {"Gather", "Erf", "Div"}), ("gpt2_block", {"Pow", "Where"})):
        layers = [layer for layer in blocks[name].layers if layer.op in ops]
        assert {layer.op for layer in layers} == ops
        assert all(layer.key in copied for layer in layers)
    chain = next(f for f in blocks["bert_block"].fusions if f.pattern == Fusion.POINTWISE.value)
    (fused,) = [j for j in jobs(block_plan, Api.COPY) if j.key == chain.key and j.precision is Precision.FP32]
    assert fused.fields.row["bytes"] == 2 * 16 * 64 * 4  # one pass: the chain's output, [2, 16, 4 * 16] fp32
    gather = next(layer for layer in blocks["bert_block"].layers if layer.op == "Gather")
    job = next(j for j in jobs(block_plan, Api.COPY) if j.key == gather.key and j.precision is Precision.FP16)
    assert job.fields.row["bytes"] == 2 * 16 * 16 * 2
    assert all(not m.problems for m in blocks.values())  # every op of the blocks has a mapping


def softmax_model(opset: int, axis: int) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 7])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 7])
    graph = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=axis)], f"sm{opset}", [x],
                              [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize(("opset", "axis", "dims", "mode", "layout"), [
    (11, 1, [2, 35, 1, 1], SOFTMAX_MODES[False], "NHWC"),  # coerced to 2-D at axis 1
    (13, 1, [2, 5, 7, 1], SOFTMAX_MODES[True], "NCHW"),  # over axis 1 alone
    (13, -1, [10, 7, 1, 1], SOFTMAX_MODES[False], "NHWC"),  # last axis: both meanings agree
    (11, 2, [10, 7, 1, 1], SOFTMAX_MODES[False], "NHWC"),
])
def test_softmax_axis_in_each_opset(tmp_path: Path, opset: int, axis: int, dims: list[int], mode: str,
                                    layout: str) -> None:
    model = load(softmax_model(opset, axis), tmp_path)
    (job,) = [j for j in plan([model], [Precision.FP16]).jobs if j.api is Api.SOFTMAX]
    assert (job.fields.row["dims"], job.fields.row["mode"], job.layout) == (dims, mode, layout)


def test_last_axis_softmax_keys_agree_across_opsets(tmp_path: Path) -> None:
    """Where the two meanings agree the layer keys do too (one benchmark); where they differ they do not."""
    key = {(o, a): load(softmax_model(o, a), tmp_path).layers[0].key for o, a in ((11, 2), (13, 2), (11, 1), (13, 1))}
    assert key[(11, 2)] == key[(13, 2)] and key[(11, 1)] != key[(13, 1)]


# ---------------------------------------------------------------- generated sources


TRANSFORMER_EXECUTABLES = {"bench_graph_sdpa", "bench_graph_norm", "bench_softmax", "bench_graph_pointwise"}


@compiled_in_the_shared_build("transformer")
def transformer_plan() -> Plan:
    """The transformer APIs for the four blocks in every precision, compiled in the shared build (a project
    of their own compiled the harness library and bench_softmax a second time, and configured again)."""
    with tempfile.TemporaryDirectory() as tmp:
        models = [load(m, Path(tmp)) for m in (bert_block(), gpt2_block(), sdpa_block(), rmsnorm_block())]
    return plan(models, list(Precision), apis=[Api.GRAPH_SDPA, Api.GRAPH_NORM, Api.SOFTMAX, Api.GRAPH_POINTWISE])


@pytest.fixture(scope="module")
def transformer_project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, codegen.Manifest, Plan]:
    p = transformer_plan()
    out = tmp_path_factory.mktemp("transformer")
    return out, codegen.generate(p, out, "benanza generate blocks"), p


def test_generated_sources_name_every_mask(transformer_project: tuple[Path, codegen.Manifest, Plan]) -> None:
    out, manifest, _ = transformer_project
    assert set(manifest.executables) == TRANSFORMER_EXECUTABLES
    sdpa = (out / "src" / "bench_graph_sdpa.cu").read_text()
    graph = (out / "csrc" / "benanza" / "graph_calls.h").read_text()  # the graph its benchmark and the replay build
    assert "bz::declare_sdpa_graph(" in sdpa
    assert "set_causal_mask(true)" in graph and "set_padding_mask(true)" in graph
    assert "bz::attention_reference(" in sdpa  # checked against the reference, never unchecked
    pointwise = (out / "src" / "bench_graph_pointwise.cu").read_text()
    assert "fe::PointwiseMode_t::ERF" in pointwise and "fe::PointwiseMode_t::TANH_FWD" in pointwise
    assert "bz::pointwise_reference(" in pointwise
    steps = (out / "src" / "bench_graph_pointwise.jobs").read_text()  # GELU's Erf (BERT) and tanh (GPT-2) forms
    assert " ERF " in steps and " TANH_FWD " in steps


@pytest.mark.compile
@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_transformer_benchmarks_build_and_list(shared_build: SharedBuild) -> None:
    build, manifest = shared_build.build, shared_build.manifest
    assert shared_build.executables["transformer"] == TRANSFORMER_EXECUTABLES
    for exe in sorted(shared_build.executables["transformer"]):
        spec = manifest.executables[exe]
        lines, planned = listed_jobs(build, exe, manifest.jobs)
        assert [d["job"] for d in lines] == list(range(spec["num_jobs"]))
        assert [(d["layer_key"], d["dtype"], d["fusion"]) for d in lines] == \
            [(j["layer_key"], j["dtype"], j["fusion"]) for j in planned]
    sdpa = [json.loads(line) for line in subprocess.run([str(build / "bench_graph_sdpa"), "--list"],
                                                        capture_output=True, text=True).stdout.splitlines()]
    rows = [(d["dims"]["b"], d["dims"]["s_kv"], d["causal"], d["padding"]) for d in sdpa]
    assert (2, 16, True, True) in rows and (2, 16, False, False) in rows


@builds_and_runs_on_a_gpu
def test_transformer_benchmarks_run_on_a_gpu(transformer_project: tuple[Path, codegen.Manifest, Plan],
                                            cmake_build: Callable[[Path], Path]) -> None:
    """Every job runs to its end; each engine config is ok (output within tolerance) or a recorded status.

    The fused SDPA must have a checked engine config for every mask form and both precisions,
    and the norm forward one per precision: a benchmark that computes nothing cannot pass.
    """
    out, manifest, _ = transformer_project
    build = out / "build" if (out / "build" / "bench_graph_sdpa").exists() else cmake_build(out)
    for exe, spec in manifest.executables.items():
        run = subprocess.run([str(build / exe), "--max-ms", "50"], capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, run.stderr[-2000:]
        lines = [json.loads(line) for line in run.stdout.splitlines()]
        assert sum(d["event"] == "end" for d in lines) == spec["num_jobs"]
        results = [Result.from_dict(d) for d in lines if d["event"] == "result"]
        assert not [r for r in results if r.status in ("check_failed", "failed")], \
            [(r.status, r.message) for r in results if not r.ok][:10]
        ok = {(r.layer_key, r.dtype) for r in results if r.ok}
        planned = {(j["layer_key"], j["dtype"]) for j in manifest.jobs if j["executable"] == exe}
        assert ok == planned, planned - ok  # every job has at least one checked result
        for r in results:
            if r.ok:
                assert r.median_ms > 0 and r.max_rel_error <= r.tolerance
