"""`benanza analyze` and `benanza quickstart` on the shipped H100 database (perfdb/h100.columns.xz).

Real data: the database was measured on an H100 (docs/RESULTS.md); checked through the library.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import LIGHT

from benanza.cli import main
from benanza.measure import system
from benanza.measure.system import SYSTEM_ID_FIELDS, system_id
from benanza.profile.bundle import write_meta
from benanza.store.shipped import shipped_db
from benanza.workflows.analysis import analyze_model

RESNET = LIGHT / "light_resnet50.onnx"


@pytest.fixture(scope="module")
def h100() -> Path:
    return shipped_db()


@pytest.mark.parametrize("name, lacking", [
    ("resnet50", []), ("vgg19", []), ("densenet121", []),
    ("inception_v1", ["AveragePool"]),  # pads [0,0,1,1]: the legacy API takes symmetric pads only
])
def test_shipped_database_bounds_the_zoo_at_batch_1(h100: Path, name: str, lacking: list[str]) -> None:
    report, mapping = analyze_model(LIGHT / f"light_{name}.onnx", h100)
    assert mapping is None
    s = report.summary
    missing = [r for r in report.tables["missing"].rows if r["policy"] == "best" and r["kind"] == "layer"]
    assert sorted(r["op"] for r in missing) == lacking  # listed, never counted as zero
    assert s.layers_with_data == s.layers - len(lacking)
    assert 0 < s.lbl_par_ms <= s.lbl_seq_ms
    assert report.system["gpu"].startswith("NVIDIA H100")


def test_branchy_model_has_a_parallelism_gap_and_a_chain_has_none(h100: Path) -> None:
    inception, _ = analyze_model(LIGHT / "light_inception_v1.onnx", h100)
    vgg, _ = analyze_model(LIGHT / "light_vgg19.onnx", h100)
    assert inception.summary.lbl_par_ms < inception.summary.lbl_seq_ms
    assert vgg.summary.lbl_par_ms == pytest.approx(vgg.summary.lbl_seq_ms)


def test_cli_writes_json_html_and_trace(tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["analyze", str(RESNET), "--json", str(tmp_path / "r.json"),
                                    "--html", str(tmp_path / "r.html"), "--trace", str(tmp_path / "r.trace.json")])
    assert out.exit_code == 0, out.output
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["schema"] == 2 and data["system"]["gpu"].startswith("NVIDIA H100")
    assert data["summary"]["LBL_seq (ms)"] == data["figures"]["lbl_seq_ms"]["value"] > 0
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(data, json.loads((Path(__file__).resolve().parent.parent / data["schema_file"]).read_text()))
    assert (tmp_path / "r.html").read_text().lstrip().lower().startswith("<!doctype html")
    assert json.loads((tmp_path / "r.trace.json").read_text())["traceEvents"]


@pytest.mark.parametrize("args, says", [
    (["--system", "A100"], "no system matching 'A100'"),
    (["--db", "missing.db"], "missing.db: no such performance database"),
    (["--dtype", "fp8"], "--dtype"),
])
def test_bad_input_is_one_line(args: list[str], says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(main, ["analyze", str(RESNET), *args])
    assert out.exit_code == 1
    assert says in out.output and "Traceback" not in out.output
    assert len(out.output.strip().splitlines()) == 1


def test_a_bundle_of_another_model_is_refused(tmp_path: Path) -> None:
    bundle = tmp_path / "vgg_bundle"
    write_meta(bundle, framework="onnxruntime", framework_version="1.31.1", model="light_vgg19.onnx", batch=1,
               dtype="fp32", latencies_ms=[1.0, 1.1])
    out = CliRunner().invoke(main, ["analyze", str(RESNET), "--profile", str(bundle)])
    assert out.exit_code == 1
    assert "profile bundle of model 'light_vgg19.onnx', not of light_resnet50.onnx" in out.output


@pytest.mark.skipif(bool(system.fingerprint().get("usable")), reason="with a GPU quickstart measures first")
def test_quickstart_without_a_gpu_analyzes_with_the_shipped_data(tmp_path: Path) -> None:
    models = tmp_path / "zoo"
    models.mkdir()
    for name in ("light_alexnet.onnx", "light_zfnet512.onnx"):
        shutil.copy(LIGHT / name.replace("alexnet", "bvlc_alexnet"), models / name)
    out = CliRunner().invoke(main, ["quickstart", str(models), "--out", str(tmp_path / "out")])
    assert out.exit_code == 0, out.output
    assert "no usable NVIDIA GPU here" in out.output
    assert sorted(p.name for p in (tmp_path / "out").glob("*.html")) == ["light_alexnet.html", "light_zfnet512.html"]


@pytest.mark.skipif(bool(system.fingerprint().get("usable")), reason="with a GPU the capture would run")
def test_quickstart_profiling_without_a_gpu_degrades_to_no_profile(tmp_path: Path) -> None:
    from benanza.workflows.measure import Progress
    from benanza.workflows.quickstart import record_bundle

    class Heard(Progress):
        def __init__(self) -> None:
            self.warnings: list[str] = []

        def warned(self, message: str) -> None:
            self.warnings.append(message)

    heard = Heard()
    assert record_bundle(RESNET, tmp_path / "bundles", heard) is None
    assert [w.split(": ", 1)[1].split(": ")[0] for w in heard.warnings] == ["no onnxruntime profile",
                                                                          "no pytorch profile"]
    assert all("no usable CUDA GPU" in w for w in heard.warnings)
    assert not any((tmp_path / "bundles").glob("*"))  # a failed capture leaves no half bundle


@pytest.mark.parametrize("field, value", [("gpu", "NVIDIA A100-SXM4-80GB"), ("cudnn_version", "9.10.2")])
def test_a_bundle_from_another_gpu_or_cudnn_is_refused(field: str, value: str, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    write_meta(bundle, framework="onnxruntime", framework_version="1.31.1", model="light_resnet50.onnx", batch=1,
               dtype="fp32", latencies_ms=[1.0], system={"gpu": "NVIDIA H100 80GB HBM3", field: value})
    out = CliRunner().invoke(main, ["analyze", str(RESNET), "--profile", str(bundle)])
    assert out.exit_code == 1, out.output
    assert f"the profile ran with {field} {value}, the database system" in out.output.replace("\n", "")


def test_a_gpu_quickstart_starts_from_the_shipped_database_only_on_its_own_system(tmp_path: Path) -> None:
    """On the system the shipped database was measured on, a GPU quickstart copies it and
    measures only what it lacks; on any other (another GPU, another cuDNN) it measures all."""
    from benanza.store import db as perfdb
    from benanza.store.systems import seed_database

    (row,) = perfdb.systems(perfdb.open_db(shipped_db()))
    here = {f: row[f] for f in SYSTEM_ID_FIELDS}
    assert system_id(here) == row["id"]
    for field, value in (("gpu", "NVIDIA A100-SXM4-80GB"), ("cudnn_version", "9.10.2")):
        assert not seed_database(tmp_path / f"{field}.db", {**here, field: value})
        assert not (tmp_path / f"{field}.db").exists()
    db_path = tmp_path / "perf.db"
    assert seed_database(db_path, here)
    assert [s["id"] for s in perfdb.systems(perfdb.open_db(db_path))] == [row["id"]]
    assert not seed_database(db_path, here)  # an existing database is never replaced


def test_analyze_model_takes_the_sequence_length_a_bundle_free_cell_needs() -> None:
    """bench/validate.py's report analyzes each transformer cell without a bundle, at the cell's sequence length."""
    from benanza.errors import BenanzaError

    model = Path(__file__).parent / "data" / "exports" / "tinybert_dynamo18.onnx"
    with pytest.raises(BenanzaError, match="dynamic dimension 'seq' at axis 1 with no value"):
        analyze_model(model, shipped_db(), batch=1, cache=False)
    # with seq_len the model loads: the database guard (no H100 rows for the tiny layers) speaks next
    with pytest.raises(BenanzaError, match="holds measurements of none of the 16 library layers of tinybert_dynamo18"):
        analyze_model(model, shipped_db(), batch=1, cache=False, seq_len=16)
