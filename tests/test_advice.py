"""The advice against the shipped H100 database and bundles (issue 31): each gap is the counterfactual
docs/METRICS.md defines, the headline keeps the run's numerics, and every charge says where it comes
from. Each test was seen failing on the code before its fix (the commit messages quote it).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from conftest import LIGHT

from benanza.analyze import Report
from benanza.analyze.inputs import WhatIf
from benanza.library import Precision
from benanza.model.layer import bias_add, separate_bias
from benanza.model.onnx_import import load_model
from benanza.paths import perfdb_dir
from benanza.store import db as perfdb
from benanza.store.shipped import shipped_db
from benanza.workflows.analysis import analyze_model

BUNDLES = perfdb_dir() / "bundles"
FP32 = (Precision.FP32,)


def light(stem: str) -> Path:
    return LIGHT / f"light_{'bvlc_alexnet' if stem == 'alexnet' else stem}.onnx"


@functools.cache
def analysis(stem: str, batch: int | None = None, precisions: tuple[Precision, ...] | None = None,
             bundle: str | None = None) -> Report:
    """One analysis per argument set and test session (the shipped data are read-only)."""
    path = BUNDLES / bundle if bundle else None
    return analyze_model(light(stem), shipped_db(), path, batch=batch, precisions=precisions)[0]


def ok_fp32_rows(keys: set[str]) -> set[str]:
    """The keys among ``keys`` that hold an ok warm fp32 row, by our own SQL (not the code under test)."""
    db = perfdb.open_db(shipped_db(), readonly=True)
    marks = ",".join("?" * len(keys))
    rows = db.execute(f"SELECT DISTINCT layer_key FROM benchmarks WHERE status = 'ok' AND l2 = 'warm' "
                      f"AND dtype = 'fp32' AND layer_key IN ({marks})", tuple(keys)).fetchall()
    return {r[0] for r in rows}


def test_conv_bias_adds_are_charged_their_benchmark_without_a_profile() -> None:
    """Defect 4: the bias add after each conv is read from the database whether or not a profile
    logged it. Inception-v1 at batch 1 in fp32: every conv has a bias and the database holds each
    bias add's row, so no conv's bias is charged a roofline and none is 'without a benchmark'."""
    model = load_model(light("inception_v1"), 1)
    convs = [layer for layer in model.layers if separate_bias(layer) and len(layer.inputs) > 2]
    keys = {bias_add(layer).key for layer in convs}
    assert len(convs) > 50 and ok_fp32_rows(keys) == keys  # the data are there
    report = analysis("inception_v1", 1, FP32)
    calls = {g["#"]: g["call"] for g in report.tables["execution"].rows}
    roofline_bias = [model.layers[c.index].name for c in convs if "bias (roofline)" in calls.get(c.index, "")]
    assert not roofline_bias, roofline_bias[:5]
    assert not [r for r in report.tables["missing"].rows if "bias add has no benchmark" in r["reason"]]


def call_dtypes(calls: list[str]) -> set[str]:
    """The precisions of 'api / algorithm / dtype [...]' call descriptions."""
    return {c.split(" / ")[2].split(" ")[0] for c in calls if c.count(" / ") >= 2}


def test_precision_changes_stay_out_of_the_headline_and_the_joint_estimate() -> None:
    """Defect 3: ResNet-50 b1 in ONNX Runtime with use_tf32=0 (meta.json) computed in fp32. The bound,
    the joint estimate and the predicted speedup use fp32 rows only; TF32 is a labelled what-if beside
    them (before: predicted speedup 4.21x from a joint estimate of 0.605 ms in TF32, below the 1.282 ms
    fp32 bound the same report called the lower bound)."""
    bundle = "resnet50_b1_ort_fp32"
    assert json.loads((BUNDLES / bundle / "meta.json").read_text())["extra"]["use_tf32"] == 0
    report = analysis("resnet50", bundle=bundle)
    s = report.summary
    executed = [g["call"] for g in report.tables["execution"].rows]
    joint = [g["fused call"] for g in report.tables["joint"].rows]
    assert call_dtypes(executed) == {"fp32"} and call_dtypes(joint) <= {"fp32"}, call_dtypes(executed + joint)
    assert s.joint_ms >= s.lbl_par_ms - 1e-12
    assert s.speedup_e2e <= s.e2e_ms / s.lbl_par_ms + 1e-9
    (tf32,) = [r for r in report.tables["what-if"].rows if r["what-if"] == "tf32"]
    assert tf32["LBL_seq (ms)"] < s.lbl_seq_ms and tf32["tolerance (rel)"] == 1e-2
    assert "fp32,tf32" in tf32["constraints"]


def test_rows_beyond_fp32_tolerance_are_not_fp32() -> None:
    """Defect 7: fp32 WINOGRAD_NONFUSED rows pass only a loosened 1e-2 check (fp32's is 1e-4). In
    ResNet-50 b1 such a row is the fastest fp32 row of several convs (our SQL); the strict-fp32 bound
    charges none of them, and the 'approx' what-if, which may, is below it."""
    db = perfdb.open_db(shipped_db(), readonly=True)
    loose = {k for (k,) in db.execute(
        "SELECT b.layer_key FROM benchmarks b WHERE b.dtype = 'fp32' AND b.status = 'ok' AND b.l2 = 'warm' "
        "AND b.fusion = 'none' AND b.tolerance > 1e-4 AND b.median_ms = (SELECT MIN(x.median_ms) FROM "
        "benchmarks x WHERE x.layer_key = b.layer_key AND x.dtype = 'fp32' AND x.status = 'ok' "
        "AND x.l2 = 'warm' AND x.fusion = 'none')")}
    model = load_model(light("resnet50"), 1)
    convs = [layer.index for layer in model.layers if layer.key in loose]
    assert len(convs) >= 5
    report = analyze_model(light("resnet50"), shipped_db(), batch=1, precisions=FP32,
                           what_if=[WhatIf.APPROX])[0]
    calls = {g["#"]: g["call"] for g in report.tables["execution"].rows}
    best = {r["#"]: r["best benchmark"] for r in report.tables["layers"].rows}
    assert not [i for i in convs if "WINOGRAD" in calls.get(i, "") or "WINOGRAD" in (best[i] or "")]
    (approx,) = report.tables["what-if"].rows
    assert approx["LBL_seq (ms)"] < report.summary.lbl_seq_ms and approx["tolerance (rel)"] == 1e-2


def test_layout_is_its_own_gap_and_the_fix_is_one_the_run_has_not_made() -> None:
    """Defect 2: PyTorch fp16 ResNet-50 b64 ran its convs NCHW with cudnn.benchmark on (meta.json).
    Algorithm choice is measured within NCHW and the run's API; NCHW->NHWC is the layout gap. Layer key
    ef19cdc8cbfc3ada: eng63 0.3548 ms NCHW vs its best NHWC 0.1587 ms (our SQL) belongs to the layout gap alone."""
    bundle = "resnet50_b64_torch_fp16"
    extra = json.loads((BUNDLES / bundle / "meta.json").read_text())["extra"]
    assert extra["cudnn.benchmark"] is True
    report = analysis("resnet50", bundle=bundle)
    s = report.summary
    algo = {r["#"]: r for r in report.tables["algorithm"].rows}
    db = perfdb.open_db(shipped_db(), readonly=True)
    model = load_model(light("resnet50"), 64)
    checked = 0
    for i, row in algo.items():
        if row["layout"] != "NCHW":
            continue
        api = row["as-executed call"].split(" / ")[0]  # the API is held too: the run's search stays in it
        (nchw,) = db.execute("SELECT MIN(median_ms) FROM benchmarks WHERE layer_key = ? AND dtype = 'fp16' AND "
                             "status = 'ok' AND l2 = 'warm' AND fusion = 'none' AND layout = 'NCHW' AND api = ?",
                             (model.layers[i].key, api)).fetchone()
        assert row["best same precision (ms)"] == pytest.approx(nchw), row  # never an NHWC row
        checked += 1
    assert checked >= 40
    assert s.algorithm_gap_ms < 0.2 < 1.0 < s.layout_gap_ms
    fixes = {r["step"]: r["fix"] for r in report.tables["gaps"].rows}
    assert "cudnn.benchmark = True" not in fixes["algorithm selection"]
    assert "channels_last" in fixes["layout"]


def test_a_layer_whose_benchmarks_all_failed_is_charged_counted_and_listed() -> None:
    """Defect 9: Inception-v1's asymmetric AveragePool has rows, none ok (our SQL). The headline charges
    its roofline and says so (kind, missing table, measured share), and the layer-wise figure charges the
    same, never 0 (before: charged as a plain memory roofline, neither counted nor listed, 0 layer-wise)."""
    model = load_model(light("inception_v1"), 64)
    db = perfdb.open_db(shipped_db(), readonly=True)
    failed = [layer for layer in model.layers if layer.op == "AveragePool" and db.execute(
        "SELECT COUNT(*), SUM(status = 'ok') FROM benchmarks WHERE layer_key = ?", (layer.key,)).fetchone()[1] == 0]
    assert failed
    report = analysis("inception_v1", 64, FP32)
    groups = {g["#"]: g for g in report.tables["execution"].rows}
    missing = {r["#"]: r["reason"] for r in report.tables["missing"].rows if r["policy"] == "best execution"}
    s = report.summary
    for layer in failed:
        assert groups[layer.index]["kind"] == "roofline (every benchmark failed)"
        assert missing[layer.index].startswith("every benchmark failed")
    assert s.roofline_layers >= len(failed)
    assert s.measured_share < 1.0
    best = [r["best (ms)"] for r in report.tables["layers"].rows if r["best (ms)"] is not None]
    assert s.layerwise_seq_ms > sum(best)  # the failed layers weigh their roofline
