"""`benanza compare` on two shipped bundles of one model (VGG-19 in ONNX Runtime vs PyTorch):
per-layer totals equal each side's own `benanza analyze` (run separately, read from its CSV/JSON)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import LIGHT

from benanza.cli import main
from benanza.paths import perfdb_dir

BUNDLES = perfdb_dir() / "bundles"
SIDES = ("vgg19_b1_ort_fp32", "vgg19_b1_torch_fp32")
FIGURES = ("measured", "as-executed", "best", "gap")


def number(text: str) -> float | None:
    return float(text) if text else None


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    tmp = tmp_path_factory.mktemp("compare")
    zoo = tmp / "zoo"
    zoo.mkdir()
    (zoo / "vgg19.onnx").write_bytes((LIGHT / "light_vgg19.onnx").read_bytes())
    result: dict[str, object] = {}
    for side in SIDES:  # each analysis on its own, as a user runs it
        out = CliRunner().invoke(main, ["analyze", str(zoo / "vgg19.onnx"), "--profile", str(BUNDLES / side),
                                        "--csv", str(tmp / f"{side}.csv"), "--json", str(tmp / f"{side}.json")])
        assert out.exit_code == 0, out.output
        result[side] = (list(csv.DictReader((tmp / f"{side}.csv").open())),
                        json.loads((tmp / f"{side}.json").read_text())["summary"])
    out = CliRunner().invoke(main, ["compare", *(str(BUNDLES / s) for s in SIDES), "--model", str(zoo),
                                    "--csv", str(tmp / "cmp.csv"), "--html", str(tmp / "cmp.html")])
    assert out.exit_code == 0, out.output
    result["terminal"] = out.output
    result["csv"] = list(csv.DictReader((tmp / "cmp.csv").open()))
    result["html"] = (tmp / "cmp.html").read_text()
    return result


def test_per_layer_totals_equal_the_two_analyses(outputs: dict) -> None:
    rows = outputs["csv"]
    total = rows[-1]
    assert total["layer"] == "total" and len(rows) - 1 == len(outputs[SIDES[0]][0])
    for side in SIDES:
        layers, summary = outputs[side]
        for figure in FIGURES:
            own = [number(r[f"{figure} (ms)"]) for r in layers]
            assert number(total[f"{figure} {side} (ms)"]) == pytest.approx(sum(v for v in own if v is not None))
        assert number(total[f"best {side} (ms)"]) == pytest.approx(summary["LBL_seq layer-wise (ms)"])
    a, b = (number(total[f"measured {s} (ms)"]) for s in SIDES)
    assert number(total[f"measured {SIDES[1]} - {SIDES[0]} (ms)"]) == pytest.approx(b - a)


def test_analyze_csv_has_one_row_per_layer_with_shapes_and_implementations(outputs: dict) -> None:
    layers, summary = outputs[SIDES[0]]
    assert list(layers[0]) == ["model", "batch", "precisions", "framework", "system", "gpu", "#", "layer", "op",
                               "shapes", "measured (ms)", "as-executed (ms)", "best (ms)", "bound (ms)", "bound type",
                               "gap (ms)", "as-executed call", "best benchmark", "efficiency (%)"]
    assert len(layers) == summary["layers"]
    # every row names its run, so that the CSVs of many runs concatenate
    assert {(r["model"], r["batch"], r["precisions"], r["framework"], r["gpu"]) for r in layers} == {
        ("vgg19", "1", "fp32", "onnxruntime", "NVIDIA H100 80GB HBM3")}
    assert {r["framework"] for r in outputs[SIDES[1]][0]} == {"pytorch"}
    first = layers[0]
    assert first["op"] == "Conv" and first["shapes"] == "1x3x224x224 -> 1x64x224x224"
    assert first["bound type"] == "benchmark" and first["best benchmark"] and first["as-executed call"]
    best = sum(float(r["best (ms)"]) for r in layers if r["best (ms)"])
    assert best == pytest.approx(summary["LBL_seq layer-wise (ms)"])  # the per-layer best column: the paper's figure


def test_each_layer_row_matches_its_analysis(outputs: dict) -> None:
    by_index = {int(r["#"]): r for r in outputs["csv"][:-1]}
    for side in SIDES:
        for layer in outputs[side][0]:
            row = by_index[int(layer["#"])]
            assert row["op"] == layer["op"]
            assert number(row[f"measured {side} (ms)"]) == number(layer["measured (ms)"])


def test_the_same_headline_in_terminal_and_html(outputs: dict) -> None:
    for side in SIDES:
        summary = outputs[side][1]
        assert f"{summary['LBL_par (ms)']:.4g}" in outputs["terminal"]
        assert f"{summary['measured end-to-end (ms)']:.4g}" in outputs["html"]
    assert "Benanza ratio (LBL_seq / GPU kernel time)" in outputs["terminal"]
    assert 'id="headline"' in outputs["html"] and 'class="sortable"' in outputs["html"]


def test_compare_refuses_one_side_and_a_model_on_one_system(tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["compare", str(BUNDLES / SIDES[0])])
    assert out.exit_code == 1 and "needs at least two analyses" in out.output
    out = CliRunner().invoke(main, ["compare", str(LIGHT / "light_vgg19.onnx"), "--system", "H100"])
    assert out.exit_code == 1 and "needs two --system or more" in out.output


def two_system_database(path: Path) -> None:
    """SqueezeNet's rows of the shipped database, plus the same rows on a second system at twice
    the time: a real database with two systems, whose comparison is known in advance."""
    import sqlite3

    from benanza.store import db as perfdb
    from benanza.store.shipped import shipped_db

    perfdb.open_db(path).close()
    conn = sqlite3.connect(path)
    conn.execute("ATTACH DATABASE ? AS src", (str(shipped_db()),))
    keys = "SELECT layer_key FROM src.model_layers WHERE model = 'squeezenet' AND batch = 1"
    conn.execute("INSERT INTO systems SELECT * FROM src.systems")
    conn.execute(f"INSERT INTO layers SELECT * FROM src.layers WHERE key IN ({keys})")
    conn.execute(f"INSERT INTO benchmarks SELECT * FROM src.benchmarks WHERE layer_key IN ({keys}) "
                 "OR api = 'ceiling'")
    columns = [r[1] for r in conn.execute("PRAGMA table_info(systems)")]
    conn.execute(f"INSERT INTO systems SELECT 'slower', gpu || ' (half speed)', {', '.join(columns[2:])} "
                 "FROM systems")
    bench = [r[1] for r in conn.execute("PRAGMA table_info(benchmarks)")]
    picked = ["'slower'" if c == "system_id" else "median_ms * 2" if c == "median_ms" else c for c in bench]
    conn.execute(f"INSERT INTO benchmarks SELECT {', '.join(picked)} FROM benchmarks WHERE system_id != 'slower'")
    conn.commit()
    conn.execute("DETACH DATABASE src")
    conn.close()


def test_compare_one_model_on_two_systems(tmp_path: Path) -> None:
    db = tmp_path / "two.db"
    two_system_database(db)
    model = LIGHT / "light_squeezenet.onnx"
    fast = CliRunner().invoke(main, ["analyze", str(model), "--db", str(db), "--system", "46ce",
                                     "--json", str(tmp_path / "fast.json")])
    assert fast.exit_code == 0, fast.output
    out = CliRunner().invoke(main, ["compare", str(model), "--db", str(db), "--system", "46ce", "--system", "slower",
                                    "--csv", str(tmp_path / "cmp.csv")])
    assert out.exit_code == 0, out.output
    total = list(csv.DictReader((tmp_path / "cmp.csv").open()))[-1]
    lbl = json.loads((tmp_path / "fast.json").read_text())["summary"]["LBL_seq layer-wise (ms)"]
    assert number(total["best 46ce (ms)"]) == pytest.approx(lbl)
    assert number(total["best slower (ms)"]) > number(total["best 46ce (ms)"])  # every benchmark twice as slow


def test_compare_finds_the_model_outside_the_checkout(outputs: dict, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from any directory with no --model: the bundle's model is found by its content hash (here
    in the onnx package's light zoo, the shipped bundles' models byte for byte); the same comparison."""
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(main, ["compare", *(str(BUNDLES / s) for s in SIDES), "--csv", "cmp.csv"])
    assert out.exit_code == 0, out.output
    assert list(csv.DictReader((tmp_path / "cmp.csv").open())) == outputs["csv"]
    empty = tmp_path / "empty"
    empty.mkdir()
    missing = CliRunner().invoke(main, ["compare", *(str(BUNDLES / s) for s in SIDES), "--model", str(empty)])
    assert missing.exit_code == 1 and "pass the model with --model" in missing.output
