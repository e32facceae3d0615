"""Outputs never lose a user's data (issues 33 and 38): no command writes over one of its inputs or over a
file that is not its own earlier output without --force, reports get the mode a plain write gives,
``-`` is stdout, and a special file is written through, never replaced. Each test failed on the code
before this change (a1f5823..614aea6: the model became JSON, the database a CSV, files were 0600, ``-``
was a file named '-', a FIFO became a regular file)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import LIGHT

from benanza.cli import main
from benanza.store import db as perfdb

MODEL = LIGHT / "light_squeezenet.onnx"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return Path(shutil.copy(MODEL, tmp_path / "m.onnx"))


def analyze(*args: str) -> object:
    return CliRunner().invoke(main, ["analyze", *args, "--batch", "1"])


def test_analyze_never_writes_over_its_own_model(model: Path) -> None:
    before = digest(model)
    out = analyze(str(model), "--json", str(model))
    assert out.exit_code == 1 and "is an input of this command" in out.output, out.output
    assert digest(model) == before


def test_db_export_never_writes_over_its_database(tmp_path: Path) -> None:
    path = tmp_path / "perf.db"
    perfdb.open_db(path).close()
    before = digest(path)
    out = CliRunner().invoke(main, ["db", "export", str(path), "--csv", str(path)])
    assert out.exit_code == 1 and "is an input of this command" in out.output, out.output
    assert digest(path) == before


def test_a_users_file_is_replaced_only_with_force_and_an_earlier_output_always(model: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes.csv"
    notes.write_text("my notes\n")
    out = analyze(str(model), "--csv", str(notes))
    assert out.exit_code == 1 and "not a benanza csv output; pass --force" in out.output, out.output
    assert notes.read_text() == "my notes\n"
    assert analyze(str(model), "--csv", str(notes), "--force").exit_code == 0
    assert notes.read_text().startswith("model,batch,precisions,framework,system,gpu,#,layer,op,")
    assert analyze(str(model), "--csv", str(notes)).exit_code == 0  # its own earlier output: replaced


def test_reports_get_the_mode_a_plain_write_gives(model: Path, tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        out = analyze(str(model), "--json", str(tmp_path / "r.json"), "--html", str(tmp_path / "r.html"))
        assert out.exit_code == 0, out.output
    finally:
        os.umask(old)
    for name in ("r.json", "r.html"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644, name  # readable by others, as cp makes it


def test_dash_is_stdout_and_the_report_goes_to_stderr(model: Path) -> None:
    out = CliRunner().invoke(main, ["analyze", str(model), "--batch", "1", "--json", "-"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["model"]["name"]
    assert not Path("-").exists()


def test_a_special_file_is_written_through_not_replaced(model: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    out = analyze(str(model), "--json", str(fifo))
    reader.join(timeout=30)
    assert out.exit_code == 0, out.output
    assert stat.S_ISFIFO(fifo.stat().st_mode)  # still the FIFO, not a regular file put in its place
    assert json.loads(got[0])["schema"]
