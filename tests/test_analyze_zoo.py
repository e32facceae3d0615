"""The analyzer on a real zoo model (ResNet-50, 176 layers) through the model processor.

The latencies are SYNTHETIC TEST INPUTS (a fixed multiple of each layer's roofline
bound on made-up ceilings), not measurements and not claims about any GPU: they only
have to be plausible enough to exercise every table on a real graph with residual
branches and real fusion candidates.
"""

from __future__ import annotations

import time

import pytest
from conftest import LIGHT

from benanza.analyze import Ceilings, Inputs, Policy, analyze
from benanza.analyze.roofline import bound_ms
from benanza.apis import REGISTRY
from benanza.library import Api, Fusion, Precision
from benanza.model.layer import Model
from benanza.records import ExecutedCall, LayerProfile, Profile, Result

RESNET50 = LIGHT / "light_resnet50.onnx"
CEIL = Ceilings(bandwidth_gbs=3000.0, flops={Precision.FP32: 50e12, Precision.TF32: 400e12})  # made up
LAUNCH_MS = 0.002  # synthetic per-call floor


def _ms(model_layer, precision: Precision, factor: float) -> float:
    return factor * (bound_ms(model_layer, precision, CEIL) or 0.0) + LAUNCH_MS


def synthetic_measurements(model: Model) -> dict[str, list[Result]]:
    """Test inputs: per layer, API and precision a heuristic-first algorithm (1.5x roofline)
    and a faster second one (1.2x roofline); fused calls at 0.85x of their members' best."""
    out: dict[str, list[Result]] = {}
    for layer in model.layers:
        if layer.key in out:
            continue
        rows = []
        for api in layer.apis:
            if api is Api.COPY:
                continue
            precisions = [Precision.FP32] + ([Precision.TF32] if REGISTRY[api].tensor_core else [])
            for p in precisions:
                for algo, factor, rank in (("first", 1.5, 0), ("second", 1.2, 1)):
                    rows.append(Result(layer.key, api.value, f"{api.name}_{algo}", p.value, "n/a", "none", "ok",
                                       median_ms=_ms(layer, p, factor), heuristic_rank=rank))
        out[layer.key] = rows
    best = {layer.index: min((r.median_ms for r in out[layer.key] if r.dtype == "tf32" or
                              not REGISTRY[Api(r.api)].tensor_core), default=None) for layer in model.layers}
    for cand in model.fusions:
        members = [best[i] for i in cand.layers]
        if None in members:
            continue
        out[cand.key] = [Result(cand.key, Api.GRAPH_CONV.value, "fused_eng", "tf32", "n/a", cand.pattern, "ok",
                                median_ms=0.85 * sum(members), heuristic_rank=0)]
    return out


@pytest.fixture(scope="module")
def zoo():
    if not RESNET50.exists():
        pytest.skip(f"{RESNET50} not shipped by this onnx package")
    from benanza.model.onnx_import import load_model

    model = load_model(RESNET50, 1)
    meas = synthetic_measurements(model)
    conv_exec = {layer.index: LayerProfile(None, 1, ExecutedCall(Api.GRAPH_CONV.value, "GRAPH_CONV_first", "tf32"))
                 for layer in model.layers if layer.op == "Conv"}
    seq = sum(min(r.median_ms for r in meas[layer.key]) for layer in model.layers if meas.get(layer.key))
    prof = Profile(conv_exec, e2e_ms=3 * seq, gpu_busy_ms=1.2 * seq, framework="synthetic test input")
    start = time.perf_counter()
    report = analyze(Inputs(model, meas, {"gpu": "synthetic test input"}, CEIL, prof))
    return model, meas, report, time.perf_counter() - start


def test_handles_a_real_graph_quickly(zoo):
    model, _, report, seconds = zoo
    assert len(model.layers) >= 170
    assert report.summary.layers == len(model.layers)
    assert seconds < 5.0
    print(f"analyzed {len(model.layers)} layers, {len(model.fusions)} fusion candidates in {seconds:.3f} s")


def test_every_layer_has_data_and_reshape_is_bounded(zoo):
    model, _, report, _ = zoo
    assert report.summary.layers_with_data == len(model.layers)
    assert not [r for r in report.tables["missing"].rows if r["policy"] == "best" and r["kind"] == "layer"]
    reshape = [r for r in report.tables["layers"].rows if r["op"] == "Reshape"]
    assert reshape and all(r["source"] == "roofline" and r["best (ms)"] == 0.0 for r in reshape)


def test_residual_branches_make_par_shorter(zoo):
    _, _, report, _ = zoo
    s = report.summary
    # the projection shortcuts (one conv+bn per stage) run beside the main path
    assert s.lbl_par_ms < s.lbl_seq_ms
    assert s.parallelism_gap_ms == pytest.approx(s.lbl_seq_ms - s.lbl_par_ms)
    assert s.br_par_e2e < s.br_seq_e2e < 1


def test_gaps_on_the_real_graph(zoo):
    model, _meas, report, _ = zoo
    s = report.summary
    # as-executed is the heuristic's first choice (1.5x) and best the second (1.2x) in tf32
    convs = [layer for layer in model.layers if layer.op == "Conv"]
    expected_algo = sum(_ms(layer, Precision.TF32, 1.5) - _ms(layer, Precision.TF32, 1.2) for layer in convs)
    assert s.algorithm_gap_ms == pytest.approx(expected_algo)
    assert not report.tables["what-if"].rows  # the run allowed TF32 already: TF32 is no what-if
    # against layer-wise members the fused calls (0.85x their sum) win; in the execution bound the
    # BatchNormalization folds into the conv and the ReLU costs its bytes, so no fused call is worth it
    assert sum(r["gap (ms)"] for r in report.tables["fusion patterns"].rows) > 0
    assert s.fusion_gap_ms == 0.0 and s.joint_fusions == 0
    assert s.joint_ms == s.lbl_par_ms  # every fix under the run's numerics
    assert {r["pattern"] for r in report.tables["fusion patterns"].rows} == {f.pattern for f in model.fusions}
    assert {r["pattern"] for r in report.tables["fusion patterns"].rows} >= {Fusion.CONV_BN_ACT.value}
    as_exec = {r["policy"]: r for r in report.tables["policies"].rows}[Policy.AS_EXECUTED.value]
    reshapes = [layer for layer in model.layers if layer.op == "Reshape"]  # non-library: same bound in every policy
    assert as_exec["layers with data"] == f"{len(convs) + len(reshapes)}/{len(model.layers)}"


def test_as_executed_missing_lists_non_conv_library_layers(zoo):
    model, _, report, _ = zoo
    missing = {r["#"] for r in report.tables["missing"].rows if r["policy"] == "as-executed"}
    expected = {layer.index for layer in model.layers if layer.op not in ("Conv", "Reshape")}
    assert missing == expected
