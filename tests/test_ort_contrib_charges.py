"""ONNX Runtime's fused contrib nodes are charged against the fused benchmarks (profile.contrib), in
the as-executed model and in the execution bound.

The nodes come from real ORT runs (CPU EP: the same graph transformers as the CUDA EP's for
SkipLayerNormalization, FastGelu, Gelu and FusedMatMul) of the checked-in exports; the rows sit in
a real SQLite database written by ``db.insert_results`` from harness result lines.  The lines'
times are arbitrary numbers that make the charges tell apart (they are no measurements): the
tests assert which benchmark stands for which layers, not speed.  ORT's CPU EP fuses no
Attention node on these exports, so the attention charge is shown on the node group that ORT's
Attention covers (the model's attention candidate), with the mapping's own functions.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benanza.analyze.choose import Choice, Policy, RooflineRow, Source, choose, executed_row, roofline_copy_ms
from benanza.analyze.execution import GroupKind, execution_bound
from benanza.analyze.inputs import Constraints
from benanza.library import Api, Fusion, Precision
from benanza.model.onnx_import import load_model
from benanza.profile.contrib import contrib_calls
from benanza.profile.mapping import contrib_charges, ort_node_layers
from benanza.profile.ort_profile import read_ort_profile
from benanza.records import ANY, ROOFLINE, LayerProfile, Profile, checked_result
from benanza.store import db as perfdb
from benanza.workflows.prepare import inputs_from_db

ort = pytest.importorskip("onnxruntime")
from ort_cpu import EXPORTS, ort_nodes, profiling_session  # noqa: E402 (after the skip: it needs onnxruntime)

SYSTEM = {"gpu": "NVIDIA H100 80GB HBM3", "sm_count": 132, "cc": "9.0", "bandwidth_gbs": 3000.0,
          "cuda_driver": "13.0", "cudnn_version": "9.19.0", "cublas_version": "13.1"}


def _line(key: str, api: str, algorithm: str, dtype: str, fusion: str, ms: float) -> dict:
    """One harness result line (times arbitrary, see the module doc)."""
    return {"event": "result", "layer_key": key, "api": api, "algorithm": algorithm, "dtype": dtype,
            "math": "n/a", "fusion": fusion, "status": "ok", "median_ms": ms, "repetitions": 10}


def _database(tmp_path: Path, lines: list[dict]) -> tuple[perfdb.Database, dict]:
    db = perfdb.open_db(tmp_path / "perf.db")
    sid = perfdb.upsert_system(db, SYSTEM)
    perfdb.insert_results(db, sid, [checked_result(line) for line in lines])
    return db, {**SYSTEM, "id": sid}


def _profile(model, charged) -> Profile:
    """The as-executed part of a mapped ORT profile: what ``map_bundle_report`` puts on each layer."""
    layers = {}
    for i, calls in charged.items():
        anchor = next(a for a, c in charged.items() if c and i in _group(model, a, charged)) if not calls else None
        layers[i] = LayerProfile(gpu_ms=1.0 if calls else None, executed=calls[0] if calls else None,
                                 extra=calls[1:], fused_into=anchor)
    return Profile(layers=layers, framework="onnxruntime")


def _group(model, anchor: int, charged) -> set[int]:
    return {anchor} | {i for i, c in charged.items() if not c and i > anchor}


def test_skip_layer_norm_fast_gelu_and_fused_matmul_are_charged(tmp_path: Path) -> None:
    nodes, optimized = ort_nodes(tmp_path, "tinygpt2_dynamo20")
    model = load_model(EXPORTS / "tinygpt2_dynamo20.onnx", 2, 16)
    mapping = ort_node_layers(model, nodes, optimized)
    seen: dict[str, list] = {}
    for node in mapping:
        calls = contrib_calls(model, node.op, node.layers, "fp16")
        if calls:
            seen.setdefault(node.op, []).append((node, calls))
    assert {"SkipLayerNormalization", "FastGelu", "FusedMatMul"} <= set(seen)
    for node, calls in seen["SkipLayerNormalization"]:  # the residual add at its roofline, then the norm forward
        ops = {model.layers[i].op: i for i in node.layers}
        norm = [c for c in calls if c.api == Api.GRAPH_NORM.value]
        assert len(norm) == 1 and norm[0].key == model.layers[ops["LayerNormalization"]].key
        assert [c.key for c in calls if c.algorithm == ROOFLINE] == [model.layers[ops["Add"]].key]
    chains = [f for f in model.fusions if f.pattern == Fusion.POINTWISE.value]
    for node, calls in seen["FastGelu"]:  # GELU's tanh form: the pointwise chain's fused benchmark
        fused = [c for c in calls if c.fusion == Fusion.POINTWISE.value]
        assert len(fused) == 1 and any(f.key == fused[0].key and set(f.layers) <= set(node.layers) for f in chains)
    for node, calls in seen["FusedMatMul"]:  # its MatMul's GEMM rows, any api; Transpose/scale folded in
        gemm = [c for c in calls if c.api == ANY]
        assert len(gemm) == 1 and model.layers[next(i for i in node.layers
                                                     if model.layers[i].op == "MatMul")].key == gemm[0].key


def test_as_executed_charges_the_groups_rows_and_rooflines(tmp_path: Path) -> None:
    nodes, optimized = ort_nodes(tmp_path, "tinybert_dynamo20")
    model = load_model(EXPORTS / "tinybert_dynamo20.onnx", 2, 16)
    mapping = ort_node_layers(model, nodes, optimized)
    charged = contrib_charges(model, mapping, "fp32", {})
    skip = next(n for n in mapping if n.op == "SkipLayerNormalization")
    norm = next(i for i in skip.layers if model.layers[i].op == "LayerNormalization")
    lines = [_line(model.layers[norm].key, Api.GRAPH_NORM.value, "eng0", "fp32", "none", 0.25),
             _line(model.layers[norm].key, Api.GRAPH_NORM.value, "eng1", "fp32", "none", 0.5),
             _line(model.layers[norm].key, Api.GRAPH_NORM.value, "eng0", "fp16", "none", 0.125)]
    db, system = _database(tmp_path, lines)
    profile = _profile(model, charged)
    inputs = inputs_from_db(db, model, system, profile,
                            constraints=Constraints(precisions=frozenset({Precision.FP32})))
    got = choose(model.layers[skip.layers[0]], inputs, Policy.AS_EXECUTED)
    add = next(i for i in skip.layers if model.layers[i].op == "Add")
    roof = roofline_copy_ms(model.layers[add], inputs.ceilings)
    assert isinstance(got, Choice) and got.result is not None and got.result.algorithm == "eng0"
    # the fastest fp32 norm row (the run's; not the faster fp16 one) + the add's bytes at 3000 GB/s
    assert got.latency_ms == pytest.approx(0.25 + roof) and roof > 0
    for member in skip.layers[1:]:
        assert choose(model.layers[member], inputs, Policy.AS_EXECUTED) == Choice(0.0, Source.FUSED)
    gemms = [n for n in mapping if n.op == "Gemm" and len(n.layers) > 1]  # ORT's MatMul + bias Add
    assert gemms and all([(c.api, c.fusion) for c in charged[n.layers[0]]] == [(ANY, Fusion.GEMM_BIAS.value)]
                         for n in gemms)
    assert not any(contrib_calls(model, "Gemm", (n.layers[0],), "fp32") for n in gemms)  # one layer: no fusion
    roofline_call = next(c for c in charged[skip.layers[0]] if c.algorithm == ROOFLINE)
    assert isinstance(executed_row(roofline_call, "", inputs), RooflineRow)


def test_attention_group_is_charged_the_fused_sdpa_as_executed_and_in_the_bound(tmp_path: Path) -> None:
    model = load_model(EXPORTS / "tinybert_ts17.onnx", 2, 16)
    core = next(f for f in model.fusions if f.pattern == Fusion.ATTENTION.value)
    calls = contrib_calls(model, "Attention", core.layers, "fp16")
    assert [(c.api, c.fusion, c.key) for c in calls] == [(Api.GRAPH_SDPA.value, Fusion.ATTENTION.value, core.key)]
    matmuls = {model.layers[i].key for i in core.layers if model.layers[i].op == "MatMul"}
    lines = [_line(core.key, Api.GRAPH_SDPA.value, "eng8", "fp16", Fusion.ATTENTION.value, 0.001),
             *(_line(k, Api.GEMM_EX.value, "CUBLAS_GEMM_DEFAULT", "fp16", "none", 0.01) for k in matmuls)]
    db, system = _database(tmp_path, lines)
    profile = Profile(layers={core.layers[0]: LayerProfile(gpu_ms=1.0, executed=calls[0]),
                              **{m: LayerProfile(fused_into=core.layers[0]) for m in core.layers[1:]}})
    inputs = inputs_from_db(db, model, system, profile,
                            constraints=Constraints(precisions=frozenset({Precision.FP16})))
    got = choose(model.layers[core.layers[0]], inputs, Policy.AS_EXECUTED)
    assert isinstance(got, Choice) and got.latency_ms == 0.001 and got.result.api == Api.GRAPH_SDPA.value
    bound = execution_bound(model, inputs, inputs.constraints, model.graph)
    sdpa = [g for g in bound.groups if g.kind == GroupKind.FUSED and "sdpa" in g.call]
    cores = [f for f in model.fusions if f.pattern == Fusion.ATTENTION.value]
    assert len(sdpa) == len(cores) == 2 and all(any(set(f.layers) <= set(g.layers) for g in sdpa) for f in cores)


def test_bound_charges_a_gelu_chain_one_pass(tmp_path: Path) -> None:
    model = load_model(EXPORTS / "tinybert_ts17.onnx", 2, 16)  # GELU in its Erf form: Div, Erf, Add, Mul, Mul
    chains = [f for f in model.fusions if f.pattern == Fusion.POINTWISE.value]
    assert chains
    db, system = _database(tmp_path, [])
    inputs = inputs_from_db(db, model, system, constraints=Constraints(precisions=frozenset({Precision.FP32})))
    bound = execution_bound(model, inputs, inputs.constraints, model.graph)
    for chain in chains:
        group = next(g for g in bound.groups if chain.layers[0] in g.layers)
        assert set(group.layers) == set(chain.layers) and group.kind == GroupKind.CHAIN
        x, out = model.layers[chain.layers[0]].inputs[0], model.layers[chain.layers[-1]].outputs[0]
        consts = {t.name: np.prod(t.shape) for i in chain.layers for t in model.layers[i].inputs if t.constant}
        moved = 4 * (np.prod(x.shape) + np.prod(out.shape) + sum(consts.values()))  # x read once, y written once
        assert len(consts) == 3 and group.ms == pytest.approx(moved / 3000e9 * 1e3)


def test_map_bundle_report_puts_the_charges_on_each_nodes_anchor(tmp_path: Path) -> None:
    """A bundle of a real ORT run (CPU EP: its profile, its optimized graph, meta.json from the run's own
    latencies; no kernel trace, so no GPU times): the mapping itself gives each contrib node's anchor
    the group's calls and its members none, fused into the anchor."""
    import shutil
    import time

    from benanza.profile.bundle import write_meta
    from benanza.profile.mapping import map_bundle_report

    bundle = tmp_path / "bundle"
    bundle.mkdir()
    sess, feeds = profiling_session("tinygpt2_dynamo20", 2, 16, tmp_path, bundle / "optimized_model.onnx")
    times = []
    for _ in range(3):
        start = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - start) * 1e3)
    shutil.copyfile(sess.end_profiling(), bundle / "ort_profile.json")
    write_meta(bundle, framework="onnxruntime", framework_version=ort.__version__, model="tinygpt2_dynamo20.onnx",
               batch=2, dtype="fp16", latencies_ms=times, extra={"seq_len": 16})
    model = load_model(EXPORTS / "tinygpt2_dynamo20.onnx", 2, 16)
    mapping = map_bundle_report(model, bundle)
    layers = mapping.profile.layers
    nodes = ort_node_layers(model, read_ort_profile(bundle / "ort_profile.json").runs[-1].nodes,
                            bundle / "optimized_model.onnx")
    for node in (n for n in nodes if n.op in ("SkipLayerNormalization", "FastGelu")):
        anchor = layers[node.layers[0]]
        calls = (anchor.executed, *anchor.extra)
        assert calls == contrib_calls(model, node.op, node.layers, "fp16")
        assert all(layers[m].executed is None and layers[m].fused_into == node.layers[0] for m in node.layers[1:])


def _attention_inputs(tmp_path: Path, sdpa_ms: float):
    """tinybert's two attention cores with an SDPA row of ``sdpa_ms`` and every MatMul at 0.01 ms, fp16."""
    model = load_model(EXPORTS / "tinybert_ts17.onnx", 2, 16)
    cores = [f for f in model.fusions if f.pattern == Fusion.ATTENTION.value]
    matmuls = {model.layers[i].key for f in cores for i in f.layers if model.layers[i].op == "MatMul"}
    lines = [*(_line(f.key, Api.GRAPH_SDPA.value, "eng8", "fp16", Fusion.ATTENTION.value, sdpa_ms) for f in cores),
             *(_line(k, Api.GEMM_EX.value, "CUBLAS_GEMM_DEFAULT", "fp16", "none", 0.01) for k in matmuls)]
    db, system = _database(tmp_path, lines)
    return cores, inputs_from_db(db, model, system, constraints=Constraints(precisions=frozenset({Precision.FP16})))


def test_attention_is_fused_when_cheaper_than_its_two_gemms_and_the_passes_between(tmp_path: Path) -> None:
    """An attention core whose head is a GEMM is priced unfused as both GEMMs plus the bytes of the
    ops between them: an SDPA row dearer than one GEMM (0.015 ms against 0.01 each) still saves."""
    cores, inputs = _attention_inputs(tmp_path, 0.015)
    model = inputs.model
    bound = execution_bound(model, inputs, inputs.constraints, model.graph)
    sdpa = [g for g in bound.groups if g.kind == GroupKind.FUSED and "sdpa" in g.call]
    assert len(sdpa) == len(cores) == 2


def test_the_fusion_gaps_fix_names_fused_attention_for_a_transformer(tmp_path: Path) -> None:
    """The waterfall's fusion fix follows the pattern whose fused calls save most: a transformer whose
    saving is its attention cores is told to fuse attention, never to fold a BatchNorm it lacks; a
    PyTorch run that already had SDPA is told the next change instead."""
    from benanza.analyze import analyze
    from benanza.analyze.fixes import fix_for

    _, inputs = _attention_inputs(tmp_path, 0.001)
    gaps = {r["step"]: r for r in analyze(inputs).tables["gaps"].rows}
    assert "attention" in gaps["fusion"]["fix"] and "BatchNorm" not in gaps["fusion"]["fix"]
    assert "scaled_dot_product_attention" in fix_for("fusion", "pytorch", {"attn_implementation": "eager"}, "attention")
    assert "CUDNN_ATTENTION" in fix_for("fusion", "pytorch", {"attn_implementation": "sdpa"}, "attention")
