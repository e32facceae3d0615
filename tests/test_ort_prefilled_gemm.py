"""ONNX Runtime's Gemm for a MatMul + bias Add: BroadcastBiasKernel pre-fills Y with the bias, then
one cublasGemmEx with beta = 1 (docs/PROFILES.md). The mapping charges that logged call as the
gemm+bias fusion's gemm_ex row, ``plan_executed`` plans exactly that job (beta 1, C the bias row),
and the bound never takes such a row as a whole execution.

The nodes come from a real ORT CPU-EP run of a checked-in export (the same MatMul + Add -> Gemm
transformer as the CUDA EP's); the logged calls are what ``mapping.logged_calls`` gives a plain
cublasGemmEx (no key, fusion none). Row times are arbitrary numbers that tell the charges apart.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benanza.analyze.choose import Choice, Miss, Policy, choose, choose_fused
from benanza.analyze.execution import GroupKind, execution_bound
from benanza.analyze.inputs import Constraints
from benanza.apis import job_table
from benanza.generate import codegen
from benanza.generate.plan import plan_executed
from benanza.library import Api, Fusion, Precision
from benanza.model.onnx_import import load_model
from benanza.profile.mapping import contrib_charges, ort_node_layers
from benanza.records import ExecutedCall, LayerProfile, Profile, checked_result
from benanza.store import db as perfdb
from benanza.workflows.prepare import inputs_from_db

pytest.importorskip("onnxruntime")
from ort_cpu import EXPORTS, ort_nodes  # after the skip: it needs onnxruntime

SYSTEM = {"gpu": "NVIDIA H100 80GB HBM3", "sm_count": 132, "cc": "9.0", "bandwidth_gbs": 3000.0,
          "cuda_driver": "13.0", "cudnn_version": "9.19.0", "cublas_version": "13.1"}
PLAIN = ExecutedCall(Api.GEMM_EX.value, "CUBLAS_GEMM_DEFAULT", "tf32")  # as logged_calls gives it


@pytest.fixture(scope="module")
def ort_gemms(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("ort")
    nodes, optimized = ort_nodes(tmp, "tinybert_dynamo20")
    model = load_model(EXPORTS / "tinybert_dynamo20.onnx", 2, 16)
    mapping = ort_node_layers(model, nodes, optimized)
    # ORT's MatMul + bias Add (some nodes also cover the Reshape before the MatMul)
    gemms = [(n, f) for n in mapping if n.op == "Gemm" for f in model.fusions
             if f.pattern == Fusion.GEMM_BIAS.value and set(f.layers) <= set(n.layers)]
    logged = {f.layers[0]: PLAIN for _, f in gemms}
    return model, mapping, gemms, logged


def test_a_logged_gemm_ex_of_an_ort_gemm_node_is_the_gemm_bias_call(ort_gemms) -> None:
    model, mapping, gemms, logged = ort_gemms
    assert len(gemms) >= 4 and all([model.layers[i].op for i in f.layers] == ["MatMul", "Add"] for _, f in gemms)
    charged = contrib_charges(model, mapping, "tf32", logged)
    for node, cand in gemms:
        # the whole node is the one logged call, as the fusion (no roofline for the Add): on the anchor
        assert charged[node.layers[0]] == (ExecutedCall(Api.GEMM_EX.value, "CUBLAS_GEMM_DEFAULT", "tf32",
                                                        Fusion.GEMM_BIAS.value, key=cand.key),)
        assert all(charged[i] == () for i in node.layers[1:])


def test_plan_executed_plans_the_beta_one_bias_gemm(ort_gemms, tmp_path: Path) -> None:
    model, mapping, gemms, logged = ort_gemms
    charged = contrib_charges(model, mapping, "tf32", logged)
    calls = [(model, model.layers[n.layers[0]].key, charged[n.layers[0]][0]) for n, _ in gemms]
    p = plan_executed(calls)
    assert not p.dropped
    keys = {f.key for _, f in gemms}
    assert {j.key for j in p.jobs} == keys and len(p.jobs) == len(keys)
    for job in p.jobs:
        assert (job.api, job.precision, job.fusion) == (Api.GEMM_EX, Precision.TF32, Fusion.GEMM_BIAS)
        n = job.fields.shapes["n"]
        assert job.fields.row["beta"] == 1.0 and job.fields.shapes["c"] == [1, n] and job.fields.shapes["batch"] == 1
        assert job.fields.row["b_constant"] and not job.fields.row["a_constant"]  # cold-weights rotates B
    manifest = codegen.generate(p, tmp_path / "gen", "test")
    table = (tmp_path / "gen" / manifest.executables["bench_gemm_ex"]["table"]).read_text()
    _, columns, rows = job_table.read(table)
    lines = {job_table.decode_text(row[0]): dict(zip(columns, row, strict=True)) for row in rows}
    for job in p.jobs:  # the job table's line: fusion, C = 1 x n, beta 1, B the weights
        n = job.fields.shapes["n"]
        line = lines[job.key]
        assert job_table.decode_text(line["fusion"]) == "gemm+bias" and f" 0 0 0 0 1 {n} " in line["dims"]
        assert (line["alpha"], line["beta"], line["a_constant"], line["b_constant"]) == ("1.0", "1.0", "0", "1")


def test_only_a_bias_chain_is_planned(ort_gemms) -> None:
    from dataclasses import replace

    from benanza.apis.base import Unsupported
    from benanza.apis.gemm import gemm_ex_job
    from benanza.model.layer import FusionCandidate

    model, _, gemms, _ = ort_gemms
    _, cand = gemms[0]
    with pytest.raises(Unsupported, match="adds a bias only"):  # cuBLAS's beta = 1 adds no activation
        gemm_ex_job(FusionCandidate(Fusion.GEMM_BIAS_ACT.value, cand.layers, cand.layer_keys, "relu"), model,
                    Precision.FP32)
    matmul, add = (model.layers[i] for i in cand.layers)
    bias = next(t for t in add.inputs if t.constant)
    full = replace(bias, shape=tuple(matmul.outputs[0].shape))  # a full-size constant is no bias row
    other = replace(model, layers=[replace(x, inputs=[full if t is bias else t for t in x.inputs]) if x is add else x
                                   for x in model.layers])
    with pytest.raises(Unsupported, match="row vector"):
        gemm_ex_job(cand, other, Precision.FP32)


def test_the_prefilled_row_is_as_executed_but_never_a_whole_execution(ort_gemms, tmp_path: Path) -> None:
    model, mapping, gemms, logged = ort_gemms
    charged = contrib_charges(model, mapping, "tf32", logged)
    node, cand = next((n, f) for n, f in gemms if n.layers == f.layers)
    line = {"event": "result", "layer_key": cand.key, "api": Api.GEMM_EX.value, "algorithm": "CUBLAS_GEMM_DEFAULT",
            "dtype": "tf32", "math": "tf32", "fusion": Fusion.GEMM_BIAS.value, "status": "ok", "median_ms": 0.001,
            "repetitions": 10}
    db = perfdb.open_db(tmp_path / "perf.db")
    sid = perfdb.upsert_system(db, SYSTEM)
    perfdb.insert_results(db, sid, [checked_result(line)])
    profile = Profile(layers={node.layers[0]: LayerProfile(gpu_ms=1.0, executed=charged[node.layers[0]][0]),
                              node.layers[1]: LayerProfile(fused_into=node.layers[0])}, framework="onnxruntime")
    inputs = inputs_from_db(db, model, {**SYSTEM, "id": sid}, profile,
                            constraints=Constraints(precisions=frozenset({Precision.TF32, Precision.FP32})))
    got = choose(model.layers[node.layers[0]], inputs, Policy.AS_EXECUTED)
    assert isinstance(got, Choice) and got.latency_ms == 0.001 and got.result.fusion == Fusion.GEMM_BIAS.value
    # the row needs Y pre-filled by another kernel: no fused group of the bound, no fusion-gap choice
    assert isinstance(choose_fused(cand, inputs, inputs.constraints), Miss)
    bound = execution_bound(model, inputs, inputs.constraints, model.graph)
    assert not any(g.kind == GroupKind.FUSED and "cublasGemmEx" in g.call for g in bound.groups)


def test_library_call_check_takes_the_calls_cold_weights_rows(ort_gemms, tmp_path: Path) -> None:
    """Batch 1 streams the weights from HBM: the library-call check under cold weights compares the
    same kernels (ORT's BroadcastBiasKernel left out) with the same call's cold-weights row."""
    from benanza.analyze.core import _library_call_check
    from benanza.library import L2
    from benanza.records import KernelSpan

    model, mapping, gemms, logged = ort_gemms
    charged = contrib_charges(model, mapping, "tf32", logged)
    node, cand = next((n, f) for n, f in gemms if n.layers == f.layers)
    row = {"event": "result", "layer_key": cand.key, "api": Api.GEMM_EX.value, "algorithm": "CUBLAS_GEMM_DEFAULT",
           "dtype": "tf32", "math": "tf32", "fusion": Fusion.GEMM_BIAS.value, "status": "ok", "repetitions": 10}
    kernels = (KernelSpan("void onnxruntime::cuda::BroadcastBiasKernel<float>", 0.0, 2.0),
               KernelSpan("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", 2.0, 8.0))
    lp = LayerProfile(gpu_ms=0.01, executed=charged[node.layers[0]][0], kernels=kernels)
    profile = Profile(layers={node.layers[0]: lp, node.layers[1]: LayerProfile(fused_into=node.layers[0])},
                      framework="onnxruntime")

    def check(lines: list[dict], l2: L2):
        db = perfdb.open_db(tmp_path / f"{len(lines)}.db")
        sid = perfdb.upsert_system(db, SYSTEM)
        perfdb.insert_results(db, sid, [checked_result(x) for x in lines])
        inputs = inputs_from_db(db, model, {**SYSTEM, "id": sid}, profile,
                                constraints=Constraints(precisions=frozenset({Precision.TF32, Precision.FP32})))
        layer = model.layers[node.layers[0]]
        executed = {layer.index: choose(layer, inputs, Policy.AS_EXECUTED)}
        return _library_call_check([(layer, lp, 0.0)], executed, inputs, l2)

    warm = {**row, "median_ms": 0.006}
    cold = {**row, "median_ms": 0.0085, "l2": L2.COLD_WEIGHTS.value}
    assert check([warm, cold], L2.WARM) == (1, pytest.approx(0.008), pytest.approx(0.006))  # the gemm kernel only
    assert check([warm, cold], L2.COLD_WEIGHTS) == (1, pytest.approx(0.008), pytest.approx(0.0085))
    assert check([warm], L2.COLD_WEIGHTS) == (None, None, None)  # no cold-weights row: no such check
    cold_l2 = {**row, "median_ms": 0.0079, "l2": L2.COLD.value}  # after an L2 flush, timed by its kernels
    assert check([warm, cold, cold_l2], L2.COLD) == (1, pytest.approx(0.008), pytest.approx(0.0079))
    assert check([warm, cold], L2.COLD) == (None, None, None)
