"""What each gap's fix predicts (``analyze.predictions``, ``workflows.close_loop``): the readings the
close-the-loop harness judges a native change by, on the analyzer's fixture and on a shipped bundle
(the change itself and its timing are bench/close_loop.py's, on the GPU: docs/RESULTS.md §4)."""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import LIGHT
from pytest import approx
from test_analyze_fixtures import branchy_inputs

from benanza.analyze import analyze
from benanza.analyze import predictions as p
from benanza.analyze.tables import Table
from benanza.errors import BenanzaError
from benanza.model.onnx_import import load_model
from benanza.paths import perfdb_dir
from benanza.store.shipped import shipped_db
from benanza.workflows import close_loop
from benanza.workflows.analysis import analyze_model

BUNDLE = perfdb_dir() / "bundles" / "resnet50_b64_torch_fp32"
RESNET = LIGHT / "light_resnet50.onnx"


@pytest.fixture(scope="module")
def report():
    return analyze(branchy_inputs())


def test_fused_groups_are_the_runs_kernels_of_their_layers_less_the_fused_row(report) -> None:
    # the fixture's one fused call: conv1 (measured .11) + relu1 (.012), charged its fused row .07
    got = p.fused_groups(report)
    assert (got["predicted_ms"], got["fused groups"], got["fused rows charged (ms)"]) == (approx(0.052), 1, 0.07)
    assert p.fused_groups(report, lambda ops: ops == "Conv+BatchNormalization+Relu")["predicted_ms"] is None
    layers = report.tables["layers"]
    unmeasured = Table(layers.title, layers.columns, tuple({**r, "measured (ms)": None} if r["layer"] == "relu1"
                                                           else r for r in layers.rows))
    got = p.fused_groups(replace(report, tables={**report.tables, "layers": unmeasured}))
    assert got["predicted_ms"] is None and got["groups with an unmeasured layer"] == 1


def test_a_cuda_graph_saves_the_idle_time_not_the_kernels_it_still_runs(report) -> None:
    # overhead .59 = idle .55 + an extra layer .03 + an unmapped kernel .01; the HtoD copy .02 is not counted
    got = p.cuda_graph(report)
    assert got["predicted_ms"] == approx(0.55) and got["of it: unmapped kernels a CUDA graph still runs (ms)"] == (
        approx(0.04))
    assert got["unmapped copies within the idle time (ms)"] == 0.02
    assert got["of it: GPU idle, end-to-end - GPU busy (ms)"] == approx(0.55)
    overhead = report.tables["overhead"]
    no_idle = Table(overhead.title, overhead.columns, tuple(r for r in overhead.rows if r["kind"] != "idle"))
    assert p.cuda_graph(replace(report, tables={**report.tables, "overhead": no_idle}))["predicted_ms"] is None


def test_the_summary_readings(report) -> None:
    assert p.tf32_saving(report)["predicted_ms"] is None  # the fixture was asked no what-if
    with_tf32 = replace(report, summary=replace(report.summary, what_if_ms={"tf32": 0.1}))
    assert p.PREDICTORS["what-if tf32 saving"](with_tf32)["predicted_ms"] == approx(report.summary.lbl_seq_ms - 0.1)
    s = report.summary
    for reading, value in (("parallelism gap (ms)", s.parallelism_gap_ms), ("fusion gap (ms)", s.fusion_gap_ms),
                           ("algorithm-selection gap (ms)", s.algorithm_gap_ms), ("layout gap (ms)", s.layout_gap_ms)):
        assert p.PREDICTORS[reading](report) == {"predicted_ms": value}, reading
    assert p.fused_attention(report)["predicted_ms"] is None  # no attention core


def test_realized_against_predicted() -> None:
    assert p.realized_ratio(1.1, 1.0) == approx(1.1) and p.holds(1.1) and not p.holds(1.2)
    assert p.realized_ratio(None, 1.0) is None and p.realized_ratio(1.0, 0.0) is None and p.holds(None) is None
    before = {"kernel_ms_iters": [10.0, 10.1, 10.2, 10.3, 10.4] * 4}
    after = {"kernel_ms_iters": [9.0, 9.1, 9.2, 9.3, 9.4] * 4}
    q = statistics.quantiles(before["kernel_ms_iters"], n=4)
    one = 1.2533 * (q[2] - q[0]) / 1.349 / 20 ** 0.5
    assert p.spread(before, after) == approx(one * 2 ** 0.5, abs=1e-12)
    assert p.spread({"kernel_ms_iters": [1.0, 2.0]}, after) is None  # too few iterations to say


@pytest.mark.skipif(not RESNET.is_file(), reason="needs the onnx package's light zoo models")
def test_folding_batchnorm_on_a_shipped_bundle_prices_each_bn_against_its_bias_add(tmp_path: Path) -> None:
    """ResNet-50 b64 in PyTorch: 53 conv -> BN pairs; their as-executed BN rows go, one fp32 bias add per
    conv comes, each from the shipped database (none at the roofline)."""
    got = close_loop.predict(RESNET, BUNDLE, shipped_db(), p.FOLDED_BN, batch=64)
    report, _ = analyze_model(RESNET, shipped_db(), BUNDLE)
    bns = [r["as-executed (ms)"] for r in report.tables["layers"].rows if r["op"] == "BatchNormalization"]
    assert got["BN layers folded"] == len(bns) == 53 and got["bias adds at the roofline (no row)"] == 0
    assert got["BN as-executed (ms)"] == approx(sum(bns))
    assert got["bias adds (ms)"] > 0
    assert got["predicted_ms"] == approx(got["BN as-executed (ms)"] - got["bias adds (ms)"])
    assert got["LBL_seq (ms)"] == report.summary.lbl_seq_ms  # the analysis' own figures beside it
    model = load_model(RESNET, 64)  # without a bias-add row, each is its bytes at the bandwidth
    roofed = p.folded_bn(report, model, {}, 2000.0)
    assert roofed["bias adds at the roofline (no row)"] == 53
    convs = {layer.name: layer for layer in model.layers if layer.op == "Conv"}
    assert roofed["bias adds (ms)"] == approx(sum(2 * convs[n].bytes_written / 2e9 for n in convs
                                                  if any(s for s in model.graph.successors(convs[n].index)
                                                         if model.layers[s].op == "BatchNormalization")))


@pytest.mark.skipif(not RESNET.is_file(), reason="needs the onnx package's light zoo models")
def test_a_refused_analysis_is_one_line_and_tf32_falls_back_to_the_model_alone() -> None:
    vgg = LIGHT / "light_vgg19.onnx"
    with pytest.raises(BenanzaError, match="no prediction 'nope'"):
        close_loop.predict(RESNET, BUNDLE, shipped_db(), "nope")
    refused = close_loop.predict_or_model_alone(vgg, BUNDLE, shipped_db(), "fused groups")
    assert refused["predicted_ms"] is None and refused["error"].startswith("BenanzaError: ")
    alone = close_loop.predict_or_model_alone(vgg, BUNDLE, shipped_db(), "what-if tf32 saving", batch=1)
    assert alone["from the model alone (the bundle's analysis refused)"] == refused["error"]
    assert alone["predicted_ms"] == approx(alone["LBL_seq (ms)"] - alone["what-if tf32: LBL_seq (ms)"])
    assert alone["predicted_ms"] > 0
