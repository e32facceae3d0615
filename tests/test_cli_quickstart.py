"""`benanza quickstart` ends with one summary table across the models (no GPU: the shipped data)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import LIGHT

from benanza.cli import main
from benanza.measure import system
from benanza.paths import perfdb_dir
from benanza.report.fmt import cell
from benanza.store.shipped import shipped_db
from benanza.workflows.analysis import analyze_model


@pytest.mark.skipif(bool(system.fingerprint().get("usable")), reason="with a GPU quickstart measures first")
def test_quickstart_ends_with_a_summary_across_models(tmp_path: Path) -> None:
    models = tmp_path / "zoo"
    models.mkdir()
    for name in ("vgg19", "squeezenet"):
        shutil.copy(LIGHT / f"light_{name}.onnx", models / f"{name}.onnx")
    out = CliRunner().invoke(main, ["quickstart", str(models), "--out", str(tmp_path / "out")])
    assert out.exit_code == 0, out.output
    summary = out.output[out.output.index("quickstart summary"):]
    rows = {line.split("│")[1].strip(): line for line in summary.splitlines() if line.startswith("│")}
    assert set(rows) == {"vgg19", "squeezenet"}
    assert "vgg19_b1_ort_fp32" in rows["vgg19"]  # the shipped bundle it was analyzed with
    report, _ = analyze_model(models / "vgg19.onnx", shipped_db(), perfdb_dir() / "bundles" / "vgg19_b1_ort_fp32")
    for value, label in ((report.summary.lbl_seq_ms, "LBL sequential (ms)"),
                         (report.summary.br_seq_busy, "Benanza ratio (LBL_seq / GPU kernel time)")):
        assert f" {cell(value, label)} " in rows["vgg19"]
    assert "squeezenet" in rows and " - " in rows["squeezenet"]  # no profile: no measured latency, no ratio


@pytest.mark.skipif(bool(system.fingerprint().get("usable")), reason="with a GPU quickstart measures first")
def test_quickstart_prints_one_line_per_model_and_the_full_report_only_when_asked(tmp_path: Path) -> None:
    """The full report is in each model's HTML; the terminal gets one line per model (--verbose: all of it)."""
    models = tmp_path / "zoo"
    models.mkdir()
    shutil.copy(LIGHT / "light_squeezenet.onnx", models / "squeezenet.onnx")
    short = CliRunner().invoke(main, ["quickstart", str(models), "--out", str(tmp_path / "out")])
    assert short.exit_code == 0, short.output
    before_summary = short.output[:short.output.index("quickstart summary")].splitlines()
    assert [line for line in before_summary if line.startswith("squeezenet: LBL_seq ")] == before_summary[-1:]
    assert str(tmp_path / "out" / "squeezenet.html") in before_summary[-1] and "Headline" not in short.output
    assert (tmp_path / "out" / "squeezenet.html").is_file()
    full = CliRunner().invoke(main, ["quickstart", str(models), "--out", str(tmp_path / "out"), "--verbose"])
    assert full.exit_code == 0 and "Headline" in full.output and len(full.output.splitlines()) > 5 * len(
        short.output.splitlines())


@pytest.mark.skipif(bool(system.fingerprint().get("usable")), reason="with a GPU quickstart measures first")
def test_the_quickstart_workflow_says_what_it_skips_and_hands_each_model_over_as_it_goes(tmp_path: Path) -> None:
    """``workflows.quickstart.quickstart`` without a GPU: the shipped data (said once), a model the
    database cannot answer said and skipped, the others analyzed, their pages written, in order."""
    from benanza.workflows.quickstart import QuickstartProgress, quickstart

    class Heard(QuickstartProgress):
        def __init__(self) -> None:
            self.heard: list[str] = []

        def warned(self, message: str) -> None:
            self.heard.append(f"warned {message}")

        def analyzed(self, name: str, report, page: Path) -> None:
            self.heard.append(f"analyzed {name} {report.model['name']} {page.is_file()}")

    models = tmp_path / "zoo"
    models.mkdir()
    shutil.copy(LIGHT / "light_squeezenet.onnx", models / "a_squeezenet.onnx")
    (models / "b_broken.onnx").write_bytes(b"not onnx")
    heard = Heard()
    done = quickstart(models, tmp_path / "out", ("fp32",), progress=heard)
    assert heard.heard[0] == f"warned no usable NVIDIA GPU here: analyzing with the shipped database {shipped_db()}"
    assert heard.heard[1] == "analyzed a_squeezenet a_squeezenet True"
    assert heard.heard[2].startswith("warned b_broken.onnx: not analyzed: ") and len(heard.heard) == 3
    assert [(a.name, a.bundle, a.page.name) for a in done.analyzed] == [("a_squeezenet", "-", "a_squeezenet.html")]
    assert not done.failed
