"""The as-executed replay (issue 37, docs/REPLAY.md 'The as-executed replay'): the shipped bundles' framework
calls as a replay plan, charged exactly the rows the analysis's as-executed policy finds; refusals in one
line naming the layer and the call; ``benanza replay --profile``; the comparison with the best replay."""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import LIGHT

from benanza.analyze.inputs import Inputs
from benanza.analyze.replay import ROOFLINE_NOTE
from benanza.analyze.replay_compare import compare, step_differences
from benanza.analyze.replay_executed import AS_EXECUTED, executed_execution
from benanza.cli.main import main
from benanza.errors import BenanzaError
from benanza.generate import replay as gen
from benanza.paths import perfdb_dir
from benanza.store.shipped import shipped_db
from benanza.workflows.analysis import analyze_model
from benanza.workflows.replay import PLANNERS, ReplayOutcome, prepared_inputs

BUNDLES = perfdb_dir() / "bundles"
# shipped bundle -> whether its as-executed execution plans; the refused ones name the call the database lacks:
# PyTorch's fp32 classifier GEMMs at batch 64 ran cuBLASLt algorithms the shipped database never measured
PLANS = {"resnet50_b64_ort_fp32": True, "densenet121_b1_ort_fp32": True, "resnet50_b64_torch_fp16": True,
         "vgg19_b64_torch_fp32": False}


def model_of(bundle: str) -> Path:
    return LIGHT / f"light_{bundle.split('_b')[0]}.onnx"


@functools.cache
def inputs(bundle: str) -> Inputs:
    return prepared_inputs(model_of(bundle), shipped_db(), None, None, None, "both", None, True, BUNDLES / bundle)


@functools.cache
def plan(bundle: str, execution: str = AS_EXECUTED) -> gen.ReplayPlan:
    return PLANNERS[execution](inputs(bundle))


@pytest.mark.parametrize("bundle", [b for b, ok in PLANS.items() if ok])
def test_a_bundle_plans_the_frameworks_own_calls(bundle: str) -> None:
    """Every layer the profile shows a library call of is run by a step making exactly that call's row (API,
    algorithm or engine config, precision, fusion); the plan says which execution it is."""
    p = plan(bundle)
    assert p.execution == AS_EXECUTED and plan(bundle, "best").execution == "best"
    assert p.to_dict()["execution"] == AS_EXECUTED
    prof = inputs(bundle).profile
    names = {layer.index: layer.name for layer in inputs(bundle).model.layers}
    stepped = {(name, s.api, s.algorithm) for s in p.steps for name in s.names}
    for i, lp in prof.layers.items():
        if lp.executed is not None:
            assert (names[i], lp.executed.api, lp.executed.algorithm) in stepped, names[i]
    computed = [i for s in p.steps if not s.names[0].endswith("(bias)") and s.kind != gen.StepKind.TRANSFORM
                for i in s.layers]
    assert len(computed) == len(set(computed))  # no layer twice


def test_the_charged_calls_add_up_to_the_analysiss_as_executed_figure() -> None:
    """The plan's steps that make the profile's calls, by their measured medians, add up to the analysis's
    as-executed figure of those layers (the per-layer table's as-executed column, computed by ``analyze``
    from the profile), in a model with folded BatchNorms, separate bias adds and ReLUs of ORT's own."""
    for bundle in ("resnet50_b64_ort_fp32", "densenet121_b1_ort_fp32"):
        p = plan(bundle)
        report = analyze_model(model_of(bundle), shipped_db(), BUNDLES / bundle)[0]
        prof = inputs(bundle).profile
        called = {i for i, lp in prof.layers.items() if lp.executed is not None}
        analysis = sum(r["as-executed (ms)"] for r in report.tables["layers"].rows if r["#"] in called)
        steps = sum(s.measured_ms for s in p.steps if s.measured_ms is not None and s.note != ROOFLINE_NOTE)
        assert steps == pytest.approx(analysis, rel=1e-9)
        assert p.lbl_seq_ms > report.summary.lbl_seq_ms  # the framework's execution costs more than the best


def test_a_call_without_a_measured_row_is_refused_in_one_line() -> None:
    with pytest.raises(BenanzaError) as err:
        plan("vgg19_b64_torch_fp32")
    message = err.value.message
    assert "\n" not in message
    assert "layer 'n38' (Gemm)" in message and "cublasLtMatmul / algo20_" in message
    assert "has no measured row (as-executed call was not benchmarked)" in message
    plan("vgg19_b64_torch_fp32", "best")  # the best execution of the same inputs still plans


def test_a_compute_layer_without_a_call_is_refused_never_replaced_by_the_best_row() -> None:
    bundle = "resnet50_b64_ort_fp32"
    given = inputs(bundle)
    conv = next(layer for layer in given.model.layers if layer.op == "Conv")
    layers = {**given.profile.layers, conv.index: dataclasses.replace(given.profile.layers[conv.index], executed=None,
                                                                      extra=())}
    changed = dataclasses.replace(given, profile=dataclasses.replace(given.profile, layers=layers))
    with pytest.raises(BenanzaError, match=rf"layer '{conv.name}' \(Conv\): the profile shows no library call of it"):
        executed_execution(changed)


def test_the_frameworks_own_kernels_run_as_roofline_groups() -> None:
    """ORT ran ResNet-50's ReLUs and Adds with kernels of its own: each is a step of its own, charged its bytes
    (not fused into the conv as the best execution fuses it), run by benanza's chain kernel."""
    exe, _ = executed_execution(inputs("resnet50_b64_ort_fp32"))
    model = inputs("resnet50_b64_ort_fp32").model
    relus = [g for g in exe.groups if model.layers[g.layers[0]].op == "Relu"]
    assert relus and all(len(g.layers) == 1 and not g.rows and g.call.startswith("framework kernel") for g in relus)
    chains = [s for s in plan("resnet50_b64_ort_fp32").steps if s.kind == gen.StepKind.CHAIN]
    assert len(chains) == sum(1 for layer in model.layers if layer.op in ("Relu", "Sum"))


def test_the_comparison_splits_the_charged_difference_over_layer_sets() -> None:
    """Per set of layers both plans run whole, the charged differences add up to the plans' LBL_seq difference,
    and a comparison of the plans alone says the figures and names the largest differences."""
    bundle = "resnet50_b64_ort_fp32"
    best, executed = (ReplayOutcome(plan(bundle, e), Path()) for e in ("best", AS_EXECUTED))
    rows = [{**o.summary(), "steps_detail": o.step_results()} for o in (best, executed)]
    diffs = step_differences(rows[0]["steps_detail"], rows[1]["steps_detail"], "charged_ms")
    assert sum(d.diff_ms for d in diffs) == pytest.approx(executed.plan.lbl_seq_ms - best.plan.lbl_seq_ms)
    assert all(d.layers for d in diffs)
    joint = analyze_model(model_of(bundle), shipped_db(), BUNDLES / bundle)[0].summary.joint_gap_ms
    c = compare(rows[0], rows[1], joint, "charged_ms")
    assert c.realized_ms == pytest.approx(c.charged_gap_ms)
    assert f"joint gap {joint:.4g} ms" in c.reason() and "\n" not in c.reason()
    assert c.within or "largest differences: " in c.reason()


def test_cli_replays_the_bundles_execution(tmp_path: Path) -> None:
    bundle = "resnet50_b64_ort_fp32"
    runner = CliRunner()
    for flags, execution in (([], AS_EXECUTED), (["--best"], "best")):
        out = tmp_path / execution
        r = runner.invoke(main, ["replay", str(model_of(bundle)), "--profile", str(BUNDLES / bundle),
                                 "--generate-only", "--out", str(out), *flags])
        assert r.exit_code == 0, r.output
        assert f"{execution} execution:" in r.output
        assert json.loads((out / "plan.json").read_text())["execution"] == execution
    r = runner.invoke(main, ["replay", str(model_of(bundle)), "--best", "--generate-only",
                             "--out", str(tmp_path / "x")])
    assert r.exit_code != 0 and "--profile" in r.output
