"""The performance database: schema, immutable keyed inserts, exact-key lookups, merge,
export, concurrent writers, and the ``benanza db`` commands (checked through the library)."""

from __future__ import annotations

import csv
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from benanza import SCHEMA_VERSION
from benanza.cli import main
from benanza.errors import BenanzaError
from benanza.measure.system import system_id
from benanza.model.layer import Tensor, layer_key
from benanza.records import JobKey, Result
from benanza.store import db as perfdb

ROOT = Path(__file__).resolve().parent.parent
H100 = {"gpu": "NVIDIA H100 80GB HBM3", "sm_count": 132, "cc": "9.0", "cuda_driver": "13.0",
        "cuda_runtime": "13.0", "cudnn_version": "9.19.0", "cublas_version": "13.1.0", "sm_clock_khz": 1980000}
A100 = {**H100, "gpu": "NVIDIA A100-SXM4-40GB", "sm_count": 108, "cc": "8.0"}


def conv_key(pads: list[int]) -> str:
    x = Tensor("x", (1, 64, 56, 56), "float32")
    w = Tensor("w", (64, 64, 3, 3), "float32", constant=True)
    out = 56 + pads[0] + pads[2] - 2
    y = Tensor("y", (1, 64, out, out), "float32")
    return layer_key("Conv", {"pads": pads, "strides": [1, 1], "dilations": [1, 1], "group": 1}, [x, w], [y])


def result(key: str, algorithm: str = "IMPLICIT_GEMM", median: float | None = 0.1, status: str = "ok",
           dtype: str = "fp32", **kw) -> Result:
    return Result(layer_key=key, api="cudnnConvolutionForward", algorithm=algorithm, dtype=dtype, math="fma",
                  fusion="none", status=status, median_ms=median, min_ms=median, max_ms=median, repetitions=10, **kw)


@pytest.fixture
def mem() -> perfdb.Database:
    return perfdb.open_db(":memory:")


def test_schema_tables_keys_and_version(tmp_path: Path) -> None:
    path = tmp_path / "perf.db"
    db = perfdb.open_db(path)
    assert set(perfdb.TABLES) <= set(db.table_names())
    assert db["benchmarks"].pks == ["system_id", *perfdb.RESULT_KEY]
    assert db["completed_jobs"].pks == ["system_id", *perfdb.JOB_KEY]
    assert perfdb.schema_version(db) == SCHEMA_VERSION
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA busy_timeout").fetchone()[0] == 30000
    db.close()
    perfdb.open_db(path).close()  # opening again is harmless


def test_bad_files_are_one_line_errors(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(BenanzaError, match=r"junk\.db: not a usable SQLite database"):
        perfdb.open_db(junk)
    future = tmp_path / "future.db"
    conn = sqlite3.connect(future)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '99')")
    conn.commit()
    conn.close()
    with pytest.raises(BenanzaError, match=r"future\.db: database schema version 99"):
        perfdb.open_db(future)
    assert sqlite3.connect(future).execute("SELECT name FROM sqlite_master").fetchall() == [("meta",),
        ("sqlite_autoindex_meta_1",)]  # refused before any change
    with pytest.raises(BenanzaError, match="does not exist"):
        perfdb.open_db(tmp_path / "missing" / "perf.db")


def test_inserts_are_idempotent_and_immutable_unless_forced(mem: perfdb.Database) -> None:
    sid = perfdb.upsert_system(mem, H100)
    batch = [result(conv_key([1, 1, 1, 1]), a, 0.1 * (i + 1)) for i, a in enumerate(("A", "B", "C"))]
    assert perfdb.insert_results(mem, sid, batch) == 3
    assert perfdb.insert_results(mem, sid, batch) == 0
    assert mem["benchmarks"].count == 3
    slower = [result(conv_key([1, 1, 1, 1]), "A", 9.0)]
    assert perfdb.insert_results(mem, sid, slower) == 0
    assert next(mem.query("SELECT median_ms FROM benchmarks WHERE algorithm = 'A'"))["median_ms"] == 0.1
    assert perfdb.insert_results(mem, sid, slower, force=True) == 1
    assert next(mem.query("SELECT median_ms FROM benchmarks WHERE algorithm = 'A'"))["median_ms"] == 9.0
    assert mem["benchmarks"].count == 3
    # l2 is part of the key: a cold measurement sits beside the warm one
    assert perfdb.insert_results(mem, sid, [result(conv_key([1, 1, 1, 1]), "A", 0.3, l2="cold")]) == 1


def test_system_id_is_stable_and_rows_only_fill_gaps(mem: perfdb.Database) -> None:
    sid = perfdb.upsert_system(mem, {**H100, "bandwidth_gbs": None})
    assert sid == system_id(H100) != system_id(A100)
    assert perfdb.upsert_system(mem, {**H100, "bandwidth_gbs": 3000.0, "sm_clock_khz": 1}) == sid
    (row,) = perfdb.systems(mem)
    assert row["bandwidth_gbs"] == 3000.0 and row["sm_clock_khz"] == 1980000  # filled, not overwritten


def test_exact_key_matching_never_treats_zero_as_any(mem: perfdb.Database) -> None:
    sid = perfdb.upsert_system(mem, H100)
    pad0, pad1, asym = conv_key([0, 0, 0, 0]), conv_key([1, 1, 1, 1]), conv_key([0, 0, 1, 1])
    assert len({pad0, pad1, asym}) == 3
    perfdb.insert_results(mem, sid, [result(pad0, "A", 0.05)])
    measured = perfdb.measured(mem, sid)
    assert measured(result(pad0, "A"))
    assert measured({"layer_key": pad0, "api": "cudnnConvolutionForward", "algorithm": "A", "dtype": "fp32",
                     "fusion": "none"})  # a planner dict without l2 means warm
    assert not measured(result(pad1, "A")) and not measured(result(asym, "A"))
    assert not measured(result(pad0, "B")) and not measured(result(pad0, "A", dtype="fp16"))
    assert not measured(result(pad0, "A", l2="cold"))
    assert not perfdb.measured(mem, system_id(A100))(result(pad0, "A"))

    mem["model_layers"].insert_all([{"model": "m", "batch": 1, "idx": 0, "node_name": "conv0", "layer_key": pad1}])
    assert perfdb.best_latency_per_layer(mem, sid, "m", 1) == {}  # pad 0's time is never used for pad 1


def test_enumerated_jobs_are_measured_by_their_job_identity(mem: perfdb.Database) -> None:
    sid = perfdb.upsert_system(mem, H100)
    job = {"layer_key": "k", "api": "cudnn_frontend::graph::conv_fprop", "dtype": "fp16", "fusion": "none",
           "algorithms": ["*"]}
    measured = perfdb.measured(mem, sid)
    assert not measured({**job, "algorithm": "*"})
    perfdb.record_job(mem, sid, JobKey.of(job, "warm"), "bench_graph_conv", "ok", "", [])
    measured = perfdb.measured(mem, sid)
    assert measured({**job, "algorithm": "*"})
    assert not measured({**job, "algorithms": ["eng0"]})  # another algorithm list is another job
    assert not measured({**job, "algorithm": "*", "l2": "cold"})


def model_fixture(db: perfdb.Database) -> tuple[str, list[str]]:
    sid = perfdb.upsert_system(db, H100)
    keys = [conv_key([p, p, p, p]) for p in range(3)]
    layers = [{"name": f"conv{i}", "key": k, "index": i} for i, k in enumerate(keys)]
    layers.append({"name": "conv_again", "key": keys[0], "index": 3})
    perfdb.store_manifest_models(db, [{"name": "tiny", "batch": 1, "path": "models/tiny.onnx", "layers": layers,
                                       "edges": [[0, 1], [1, 2], [2, 3]]}])
    perfdb.insert_results(db, sid, [
        result(keys[0], "A", 0.30), result(keys[0], "B", 0.10), result(keys[0], "C", 0.05, status="check_failed"),
        result(keys[0], "D", None, status="not_supported"), result(keys[0], "E", 0.02, dtype="fp16"),
        result(keys[1], "A", 0.70, status="failed"), result(keys[1], "B", 0.40),
        result(keys[2], "A", None, status="crashed"),
    ])
    return sid, keys


def test_best_latency_per_layer_uses_only_ok_rows_of_the_model(mem: perfdb.Database) -> None:
    sid, keys = model_fixture(mem)
    best = perfdb.best_latency_per_layer(mem, sid, "tiny", 1, dtype="fp32")
    assert {k: (v["algorithm"], v["median_ms"]) for k, v in best.items()} == {keys[0]: ("B", 0.10),
                                                                              keys[1]: ("B", 0.40)}
    any_dtype = perfdb.best_latency_per_layer(mem, sid, "tiny", 1)
    assert any_dtype[keys[0]]["algorithm"] == "E"
    assert perfdb.best_latency_per_layer(mem, sid, "tiny", 8) == {}
    assert mem["model_edges"].count == 3 and mem["model_layers"].count == 4


def test_store_manifest_layers_is_keyed(mem: perfdb.Database) -> None:
    layers = [{"key": "k1", "op": "Conv", "inputs": [[1, 3, 8, 8]], "outputs": [[1, 8, 8, 8]],
               "attrs": {"pads": [1, 1, 1, 1]}, "flops": 10, "macs": 5, "bytes": 100},
              {"key": "k2", "op": "Relu", "shapes": {"x": [1, 8]}, "flops": 8, "bytes": 64}]
    assert perfdb.store_manifest_layers(mem, layers) == 2
    assert perfdb.store_manifest_layers(mem, layers) == 0
    row = mem["layers"].get("k1")
    assert row["op"] == "Conv" and '"inputs"' in row["shapes"] and row["macs"] == 5


def make_db(path: Path, system: dict, keys: list[str]) -> str:
    db = perfdb.open_db(path)
    sid = perfdb.upsert_system(db, system)
    perfdb.store_manifest_layers(db, [{"key": k, "op": "Conv"} for k in keys])
    perfdb.insert_results(db, sid, [result(k, a, 0.1) for k in keys for a in ("A", "B")])
    perfdb.record_job(db, sid, JobKey.of({"layer_key": keys[0], "api": "x", "dtype": "fp32"}, "warm"),
                      "bench", "ok", "", [])
    db.close()
    return sid


def test_merge_is_a_keyed_union_across_systems(tmp_path: Path) -> None:
    h100 = make_db(tmp_path / "h100.db", H100, ["k1", "k2", "k3"])
    a100 = make_db(tmp_path / "a100.db", A100, ["k2", "k3", "k4"])
    out = tmp_path / "all.db"
    added = perfdb.merge(out, [tmp_path / "h100.db", tmp_path / "a100.db"])
    assert added["systems"] == 2 and added["benchmarks"] == 12 and added["layers"] == 4
    db = perfdb.open_db(out)
    per_system = dict(db.execute("SELECT system_id, COUNT(*) FROM benchmarks GROUP BY system_id").fetchall())
    assert per_system == {h100: 6, a100: 6}
    assert db["completed_jobs"].count == 2
    db.close()
    assert not any(perfdb.merge(out, [out, tmp_path / "h100.db"]).values())  # itself and again: nothing new
    db = perfdb.open_db(out)
    assert db["benchmarks"].count == 12 and db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_merge_keeps_the_measurement_it_already_has(tmp_path: Path) -> None:
    for name, median in (("a.db", 0.1), ("b.db", 0.9)):
        db = perfdb.open_db(tmp_path / name)
        perfdb.insert_results(db, perfdb.upsert_system(db, H100), [result("k", "A", median)])
        db.close()
    perfdb.merge(tmp_path / "a.db", [tmp_path / "b.db"])
    db = perfdb.open_db(tmp_path / "a.db")
    assert [r["median_ms"] for r in db.query("SELECT median_ms FROM benchmarks")] == [0.1]


def test_merge_fills_the_fields_a_system_row_lacks(tmp_path: Path) -> None:
    """The zoo campaign's chunks recorded no bandwidth; merged with the run that measured it, the
    shipped system row keeps that measurement (it lost it before: one row per id was kept whole)."""
    for name, system in (("campaign.db", H100), ("measured.db", {**H100, "bandwidth_gbs": 3013.96})):
        db = perfdb.open_db(tmp_path / name)
        perfdb.insert_results(db, perfdb.upsert_system(db, system), [result("k", "A", 0.1)])
        db.close()
    added = perfdb.merge(tmp_path / "campaign.db", [tmp_path / "measured.db"])
    assert added["systems"] == 1 and added["benchmarks"] == 0
    (row,) = perfdb.systems(perfdb.open_db(tmp_path / "campaign.db"))
    assert row["bandwidth_gbs"] == 3013.96 and row["sm_clock_khz"] == H100["sm_clock_khz"]
    assert not any(perfdb.merge(tmp_path / "campaign.db", [tmp_path / "measured.db"]).values())  # nothing left
    added = perfdb.merge(tmp_path / "measured.db", [tmp_path / "campaign.db"])  # a null never overwrites
    assert added["systems"] == 0 and perfdb.systems(perfdb.open_db(tmp_path / "measured.db"))[0]["bandwidth_gbs"]


def test_merge_rejects_non_databases(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n" * 200)
    with pytest.raises(BenanzaError, match=r"notes\.txt: not a benanza performance database"):
        perfdb.merge(tmp_path / "out.db", [tmp_path / "notes.txt"])
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    before = other.read_bytes()
    with pytest.raises(BenanzaError, match=r"other\.db: not a benanza performance database \(no meta table\)"):
        perfdb.merge(tmp_path / "out.db", [other])
    assert other.read_bytes() == before  # an input is only read
    with pytest.raises(BenanzaError, match="no such database file"):
        perfdb.merge(tmp_path / "out.db", [tmp_path / "absent.db"])


def test_export_csv_and_info(tmp_path: Path, mem: perfdb.Database) -> None:
    sid, keys = model_fixture(mem)
    perfdb.store_manifest_layers(mem, [{"key": keys[0], "op": "Conv"}])
    out = tmp_path / "bench.csv"
    assert perfdb.export_csv(mem, out) == 8
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 8 and rows[0]["gpu"] == H100["gpu"]
    assert {r["op"] for r in rows if r["layer_key"] == keys[0]} == {"Conv"}
    data = perfdb.info(mem)
    assert data["tables"]["benchmarks"] == 8 and data["tables"]["models"] == 1
    assert data["benchmarks_by_status"] == {"check_failed": 1, "crashed": 1, "failed": 1, "not_supported": 1, "ok": 4}
    assert data["systems"][0]["system_id"] == sid and data["systems"][0]["ok"] == 4


WRITER = textwrap.dedent("""
    import sys
    from benanza.store import db
    from benanza.records import Result
    d = db.open_db(sys.argv[1])
    sid = db.upsert_system(d, {"gpu": "G", "sm_count": 1})
    lo, hi = int(sys.argv[2]), int(sys.argv[3])
    for start in range(lo, hi, 20):
        db.insert_results(d, sid, [Result(f"k{i}", "api", "algo", "fp32", "fma", "none", "ok", median_ms=1.0)
                                   for i in range(start, min(start + 20, hi))])
        d.execute("SELECT COUNT(*) FROM benchmarks").fetchone()  # interleave reads with the other writer
""")


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ranges = [(0, 3000), (1500, 4500), (4000, 6000)]  # disjoint and overlapping
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(lo), str(hi)], env=env,
                              stderr=subprocess.PIPE, text=True) for lo, hi in ranges]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    db = perfdb.open_db(path)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert db["benchmarks"].count == 6000 and db["systems"].count == 1
    keys = {r[0] for r in db.execute("SELECT layer_key FROM benchmarks")}
    assert keys == {f"k{i}" for i in range(6000)}


def test_cli_db_commands(tmp_path: Path) -> None:
    make_db(tmp_path / "h100.db", H100, ["k1", "k2"])
    make_db(tmp_path / "a100.db", A100, ["k2", "k9"])
    cli = CliRunner()
    merged = cli.invoke(main, ["db", "merge", str(tmp_path / "all.db"), str(tmp_path / "h100.db"),
                               str(tmp_path / "a100.db")])
    assert merged.exit_code == 0, merged.output
    assert "8 benchmarks" in merged.output
    assert perfdb.open_db(tmp_path / "all.db")["benchmarks"].count == 8

    info = cli.invoke(main, ["db", "info", str(tmp_path / "all.db")])
    assert info.exit_code == 0 and "benchmarks" in info.output and "NVIDIA A100" in info.output
    systems = cli.invoke(main, ["db", "systems", str(tmp_path / "all.db"), "--json"])
    assert systems.exit_code == 0 and {s["gpu"] for s in json.loads(systems.output)} == {
        H100["gpu"], A100["gpu"]}
    export = cli.invoke(main, ["db", "export", str(tmp_path / "all.db"), "--csv", str(tmp_path / "all.csv")])
    assert export.exit_code == 0 and len(list(csv.DictReader((tmp_path / "all.csv").open()))) == 8

    (tmp_path / "bad.db").write_text("not sqlite\n" * 100)
    bad = cli.invoke(main, ["db", "info", str(tmp_path / "bad.db")])
    assert bad.exit_code == 1 and "bad.db: not a usable SQLite database" in bad.output
    for command in ("info", "systems", "export", "merge"):
        assert cli.invoke(main, ["db", command, "--help"]).output.count("\n") > 3


def test_one_measurement_in_two_layouts_is_two_rows(mem: perfdb.Database) -> None:
    """fp16 convolutions are measured NHWC and NCHW (PyTorch's): the layout is part of the key."""
    sid = perfdb.upsert_system(mem, H100)
    key = conv_key([1, 1, 1, 1])
    nhwc = result(key, "A", 0.05, dtype="fp16", layout="NHWC")
    nchw = result(key, "A", 0.09, dtype="fp16", layout="NCHW")
    assert perfdb.insert_results(mem, sid, [nhwc, nchw]) == 2
    assert {r.layout: r.median_ms for r in perfdb.results_for(mem, sid, [key])[key]} == {"NHWC": 0.05, "NCHW": 0.09}
    measured = perfdb.measured(mem, sid)
    assert measured(nhwc) and measured(nchw) and not measured(result(key, "A", dtype="fp16", layout=""))
    job = {"layer_key": key, "api": "cudnn_frontend::graph::conv_fprop", "dtype": "fp16", "fusion": "none",
           "algorithms": ["*"], "layout": "NHWC"}
    perfdb.record_job(mem, sid, JobKey.of(job, "warm"), "bench_graph_conv", "ok", "", [])
    measured = perfdb.measured(mem, sid)
    assert measured({**job, "algorithm": "*"}) and not measured({**job, "algorithm": "*", "layout": "NCHW"})


OLD_KEYS = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE benchmarks (system_id TEXT NOT NULL, layer_key TEXT NOT NULL, api TEXT NOT NULL,
    algorithm TEXT NOT NULL, dtype TEXT NOT NULL, fusion TEXT NOT NULL, l2 TEXT NOT NULL, math TEXT, layout TEXT,
    status TEXT NOT NULL, message TEXT, median_ms REAL, min_ms REAL, max_ms REAL, stddev_ms REAL,
    repetitions INTEGER, host_ms REAL, workspace_bytes INTEGER, timing TEXT, max_rel_error REAL, tolerance REAL,
    heuristic_rank INTEGER, find_rank INTEGER, notes TEXT, schema INTEGER, measured_at TEXT,
    PRIMARY KEY (system_id, layer_key, api, algorithm, dtype, fusion, l2));
CREATE TABLE completed_jobs (system_id TEXT NOT NULL, layer_key TEXT NOT NULL, api TEXT NOT NULL,
    dtype TEXT NOT NULL, fusion TEXT NOT NULL, l2 TEXT NOT NULL, algorithms TEXT NOT NULL, executable TEXT,
    status TEXT NOT NULL, message TEXT, results INTEGER, finished_at TEXT,
    PRIMARY KEY (system_id, layer_key, api, dtype, fusion, l2, algorithms));
INSERT INTO meta VALUES ('schema_version', '1');
INSERT INTO benchmarks (system_id, layer_key, api, algorithm, dtype, fusion, l2, math, layout, status, median_ms)
    VALUES ('s', 'k', 'g', 'eng0', 'fp16', 'none', 'warm', 'tensor_op', 'NHWC', 'ok', 0.5),
           ('s', 'k', 'g', 'eng0', 'fp32', 'none', 'warm', 'fma', 'NCHW', 'ok', 0.9),
           ('s', 'm', 'gemm', 'a', 'fp32', 'none', 'warm', 'fma', NULL, 'ok', 0.2);
INSERT INTO completed_jobs (system_id, layer_key, api, dtype, fusion, l2, algorithms, status)
    VALUES ('s', 'k', 'g', 'fp16', 'none', 'warm', '["*"]', 'ok'),
           ('s', 'x', 'g', 'fp16', 'none', 'warm', '["*"]', 'ok');
"""


def test_a_database_keyed_without_the_layout_is_rekeyed_on_open_and_read_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript(OLD_KEYS)
    conn.executescript(perfdb.SCHEMA)  # the other tables, as they are
    conn.close()
    fp16 = {"layer_key": "k", "api": "g", "dtype": "fp16", "fusion": "none", "algorithm": "*", "layout": "NHWC"}
    # read-only (the shipped database): a completed job's layout is that of its rows
    ro = perfdb.open_db(path, readonly=True)
    assert perfdb.measured(ro, "s")(fp16) and not perfdb.measured(ro, "s")({**fp16, "layout": "NCHW"})
    ro.close()
    db = perfdb.open_db(path)
    assert db["benchmarks"].pks == ["system_id", *perfdb.RESULT_KEY]
    assert db["completed_jobs"].pks == ["system_id", *perfdb.JOB_KEY]
    rows = {(r.layer_key, r.dtype): r for r in perfdb.results_for(db, "s", ["k", "m"])["k"] +
            perfdb.results_for(db, "s", ["m"])["m"]}
    assert {k: (r.layout, r.median_ms) for k, r in rows.items()} == \
        {("k", "fp16"): ("NHWC", 0.5), ("k", "fp32"): ("NCHW", 0.9), ("m", "fp32"): ("", 0.2)}
    assert {(j.layer_key, j.layout) for j in perfdb.completed_jobs(db, "s")} == {("k", "NHWC"), ("x", "")}
    measured = perfdb.measured(db, "s")
    assert measured(fp16) and not measured({**fp16, "layout": "NCHW"})
    assert perfdb.insert_results(db, "s", [Result(layer_key="k", api="g", algorithm="eng0", dtype="fp16", math="m",
                                                  fusion="none", status="ok", layout="NCHW", median_ms=0.7)]) == 1
    assert {"benchmarks_by_layer", *perfdb.VIEWS} <= {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    assert db.execute("SELECT COUNT(*) FROM benchmark_details").fetchone()[0] == 4
    db.close()
    assert perfdb.open_db(path)["benchmarks"].count == 4  # opening again changes nothing


def test_merging_a_database_keyed_without_the_layout_keeps_its_jobs_layouts(tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old)
    conn.executescript(OLD_KEYS)
    conn.executescript(perfdb.SCHEMA)
    conn.close()
    added = perfdb.merge(tmp_path / "new.db", [old])
    assert added["benchmarks"] == 3 and added["completed_jobs"] == 2
    db = perfdb.open_db(tmp_path / "new.db")
    assert {(j.layer_key, j.layout) for j in perfdb.completed_jobs(db, "s")} == {("k", "NHWC"), ("x", "")}
    assert perfdb.measured(db, "s")({"layer_key": "k", "api": "g", "dtype": "fp16", "fusion": "none",
                                     "algorithm": "*", "layout": "NHWC"})


# Notes texts as a database may hold them: what results_for must decode exactly as json.loads does, or keep
# as they are (then refused: notes must be an object).
NOTES_TEXTS = ('{"calls_per_launch": 32}', '{}', ' {"a": 1}', '{"a": 1} ', '{"a": 1}\n', '{"a": [1, 2.5, {"b": null}]}',
               '{"a": NaN, "b": -Infinity}', '{"a": 1, "a": 2}', '{"\\u00e9": "\\ud83d\\ude00"}', '{"a": 1}{"b": 2}',
               '{"a": 1} {"b": 2}', '{"a": }', '{"a": 1', '{', '}', '{}}', '[1]', '"{}"', '{"a": 1}x',
               '{"a": ' * 5000 + '1' + '}' * 5000)


def test_notes_decode_as_json_loads_does() -> None:
    for text in NOTES_TEXTS:
        try:
            expected = json.loads(text)
        except (ValueError, RecursionError):
            expected = text
        got = perfdb._notes(text)
        assert got == expected and type(got) is type(expected), text[:40]
    assert perfdb._notes(None) == {} and perfdb._notes("") == {}


def as_rows_were_read(db: perfdb.Database, system: str, keys: list[str]) -> dict[str, list[Result]]:
    """results_for as it was before it read tuples: a dict per row, ``json.loads`` of its notes, ``Result(**row)``."""
    found: dict[str, list[Result]] = {}
    columns = [*perfdb._RESULT_COLUMNS, "notes", "schema"]
    for key in keys:
        for row in db.query(f"SELECT {', '.join(columns)} FROM benchmarks WHERE system_id = ? AND layer_key = ?",
                            [system, key]):
            row["notes"] = json.loads(row["notes"]) if row["notes"] else {}
            found.setdefault(key, []).append(Result(**row))
    return found


def test_results_for_builds_the_results_a_row_by_row_read_built(mem: perfdb.Database) -> None:
    """results_for reads tuples in Result's field order and makes each row's dict the Result's attributes
    (``records.result_from_fields``): the same values, types and attribute order as ``Result(**row)``,
    still frozen and hashable, on hand-written rows and on the shipped database's."""
    from dataclasses import FrozenInstanceError, replace

    from benanza.store.shipped import shipped_db

    sid = perfdb.upsert_system(mem, H100)
    key = conv_key([1, 1, 1, 1])
    rows = [result(key, "A", 0.5, notes={"calls_per_launch": 32, "knobs": {"k": [1, 2]}}, workspace_bytes=1 << 40,
                   heuristic_rank=0, find_rank=3, host_ms=0.01, timing="graph", max_rel_error=0.0, tolerance=1e-3),
            result(key, "B", None, status="not_supported", message="no", l2="cold", layout="NHWC"),
            result(key, "C", 2)]
    perfdb.insert_results(mem, sid, rows)
    with perfdb.transaction(mem):
        mem.execute("UPDATE benchmarks SET notes = ' {\"a\": [1, {\"b\": null}]} ' WHERE algorithm = 'C'")
    shipped = perfdb.open_db(shipped_db(), readonly=True)
    system = perfdb.systems(shipped)[0]["id"]
    sample = [str(r[0]) for r in shipped.execute(
        "SELECT DISTINCT layer_key FROM benchmarks WHERE system_id = ? ORDER BY layer_key LIMIT 60", [system])]
    for db, system_key, keys in ((mem, sid, [key, "absent"]), (shipped, system, sample)):
        got, expected = perfdb.results_for(db, system_key, keys), as_rows_were_read(db, system_key, keys)
        assert got == expected and sum(map(len, got.values())) > 2
        for have, want in zip([r for rs in got.values() for r in rs], [r for rs in expected.values() for r in rs],
                              strict=True):
            assert list(vars(have).items()) == list(vars(want).items())
            assert [type(v) for v in vars(have).values()] == [type(v) for v in vars(want).values()]
    read = {r.algorithm: r for r in perfdb.results_for(mem, sid, [key])[key]}
    assert {a: r.notes for a, r in read.items()} == {"A": {"calls_per_launch": 32, "knobs": {"k": [1, 2]}}, "B": {},
                                                     "C": {"a": [1, {"b": None}]}}
    with pytest.raises(FrozenInstanceError):
        read["A"].median_ms = 1.0  # type: ignore[misc]
    assert replace(read["B"], median_ms=1.0).median_ms == 1.0 and read["B"].median_ms is None
    assert read["C"].job is None and read["C"].schema == SCHEMA_VERSION and read["C"].median_ms == 2
