"""The database for browsing: readable views, indexes on the facets, portable model paths,
`db export` with shape and model columns, and the documented datasette recipe (docs/DATABASE.md)
serving the view. On the shipped H100 database."""

from __future__ import annotations

import csv
import json
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from benanza.cli import main
from benanza.store import db as perfdb
from benanza.store.packed import PACKED_SUFFIX, pack
from benanza.store.shipped import shipped_db

READABLE = ["model", "batch", "layer", "node", "op", "shape", "api", "algorithm", "dtype", "fusion", "l2", "status",
            "median_ms", "gpu", "layer_key", "system_id"]


@pytest.fixture(scope="module")
def h100() -> Path:
    path = shipped_db()
    perfdb.open_db(path).close()  # opening creates the views and indexes of a database written before them
    return path


def test_the_view_joins_model_batch_op_shape_and_benchmark(h100: Path) -> None:
    db = perfdb.open_db(h100)
    cursor = db.execute("SELECT * FROM model_benchmarks WHERE model = 'resnet50' AND batch = 1 AND layer = 0 "
                        "AND api = 'cudnnConvolutionForward' AND status = 'ok' ORDER BY median_ms LIMIT 1")
    assert [d[0] for d in cursor.description] == READABLE
    row = dict(zip(READABLE, cursor.fetchone(), strict=True))
    assert row["op"] == "Conv" and row["shape"] == "1x3x224x224, 64x3x7x7 -> 1x64x112x112"
    assert row["dtype"] in {"fp32", "tf32", "fp16"} and row["median_ms"] > 0 and row["gpu"].startswith("NVIDIA H100")


@pytest.mark.parametrize("column, index", [("api", "benchmarks_by_api"), ("dtype", "benchmarks_by_dtype"),
                                           ("status", "benchmarks_by_status")])
def test_facets_use_an_index(h100: Path, column: str, index: str) -> None:
    """datasette's facet query: a GROUP BY that timed out on the api column without an index."""
    plan = perfdb.open_db(h100).execute(f"EXPLAIN QUERY PLAN SELECT {column}, count(*) FROM benchmarks "
                                        f"GROUP BY {column}").fetchall()
    assert any(index in str(step) for step in plan), plan


def test_model_paths_are_stored_without_the_measuring_machines_directories() -> None:
    db = perfdb.open_db(":memory:")
    perfdb.store_manifest_models(db, [{"name": "resnet50", "batch": 1, "path": "/tmp/tmpab12/zoo/resnet50.onnx",
                                       "layers": [], "edges": []}])
    assert db.execute("SELECT path FROM models").fetchall() == [("resnet50.onnx",)]


def one_model(h100: Path, path: Path, model: str = "squeezenet", batch: int = 1) -> Path:
    """The shipped database's rows of one model at one batch (its layers, their benchmarks, the systems):
    a real database small enough to export in a test (the whole one, 367 743 rows, took 27 s: CI time)."""
    perfdb.open_db(path).close()
    conn = sqlite3.connect(path)
    conn.execute("ATTACH DATABASE ? AS src", (str(h100),))
    conn.execute("INSERT INTO systems SELECT * FROM src.systems")
    conn.execute("INSERT INTO models SELECT * FROM src.models WHERE name = ? AND batch = ?", (model, batch))
    conn.execute("INSERT INTO model_layers SELECT * FROM src.model_layers WHERE model = ? AND batch = ?",
                 (model, batch))
    conn.execute("INSERT INTO layers SELECT * FROM src.layers WHERE key IN (SELECT layer_key FROM main.model_layers)")
    conn.execute("INSERT INTO benchmarks SELECT * FROM src.benchmarks "
                 "WHERE layer_key IN (SELECT layer_key FROM main.model_layers)")
    conn.commit()
    conn.execute("DETACH DATABASE src")
    conn.close()
    return path


def test_db_export_has_shape_and_model_columns(h100: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`db export` of a packed database (the shipped form), here one model's rows packed."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # where the export unpacks it
    packed = tmp_path / f"squeezenet{PACKED_SUFFIX}"
    pack(one_model(h100, tmp_path / "squeezenet.db"), packed)
    out = CliRunner().invoke(main, ["db", "export", str(packed), "--csv", str(tmp_path / "b.csv")])
    assert out.exit_code == 0, out.output
    with (tmp_path / "b.csv").open() as handle:
        rows = csv.DictReader(handle)
        assert {"gpu", "op", "shape", "models", "api", "algorithm", "dtype", "median_ms"} <= set(rows.fieldnames or [])
        first = next(r for r in rows if r["op"] == "Conv")
    assert " -> " in first["shape"] and "@" in first["models"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_datasette_serves_the_view(h100: Path) -> None:
    """The recipe of docs/DATABASE.md: datasette on the database, the view as JSON."""
    pytest.importorskip("datasette", reason="datasette is in the test extras: pip install -e '.[test]'")
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "datasette", "serve", str(h100), "--host", "127.0.0.1",
                               "--port", str(port), "--setting", "facet_time_limit_ms", "2000"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        url = (f"http://127.0.0.1:{port}/{h100.stem}/model_benchmarks.json?model=vgg19&batch=1&op=Conv"
               "&_shape=objects&_size=3")
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url, timeout=10) as response:
                    data = json.load(response)
                break
            except urllib.error.HTTPError:
                raise  # the server answered: a missing view is a failure, not a slow start
            except OSError:  # not listening yet
                assert server.poll() is None, server.stdout.read().decode() if server.stdout else ""
                assert time.monotonic() < deadline, "datasette did not answer within 60 s"
                time.sleep(0.5)
        rows = data["rows"]
        assert rows and all(r["model"] == "vgg19" and r["op"] == "Conv" and " -> " in r["shape"] for r in rows)
        facet = f"http://127.0.0.1:{port}/{h100.stem}/benchmarks.json?_facet=api&_size=0"
        with urllib.request.urlopen(facet, timeout=30) as response:
            apis = {f["value"] for f in json.load(response)["facet_results"]["api"]["results"]}
        assert "cudnnConvolutionForward" in apis
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
