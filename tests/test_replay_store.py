"""The ``replays`` table (store/replays.py, docs/DATABASE.md): a replay stored through the one writer path,
kept exactly by pack/unpack and merge, absent from databases written before it (which still read), refused
in one line by a read-only or foreign file; and ``benanza analyze`` showing it beside LBL when the
database holds one for the model, batch and precisions analyzed, and nothing when it holds none.

The replay is real: squeezenet at batch 1 in fp32, as ``bench/replay.py`` ran it on the H100 in
session 20 (tests/data/replay/h100_replay_excerpt.json), stored against the plan the shipped rows give
(the same 39 steps, the same LBL_seq)."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import LIGHT
from test_replay_explain import cells

from benanza.cli.main import main
from benanza.errors import BenanzaError
from benanza.library import Precision
from benanza.store import db as perfdb
from benanza.store.packed import pack, unpack
from benanza.store.replays import stored_replays
from benanza.store.shipped import shipped_db
from benanza.workflows import replay as workflow
from benanza.workflows.prepare import replays_from_db

MODEL = LIGHT / "light_squeezenet.onnx"
FP32 = [Precision.FP32]
SYSTEM_LINE = ("gpu", "sm_count", "cc", "cuda_driver", "cuda_runtime", "cudnn_version", "cublas_version")
REPLAY_LABELS = ("replay, warm L2 (ms)", "replay, cold L2 (ms)", "replay / LBL_seq", "replay / LBL_par",
                 "replay check", "LBL_seq of the replayed plan (ms)")


def small_database(path: Path) -> None:
    """The shipped rows squeezenet's batch-1 fp32 analysis reads (its layers, fusions, bias adds) and the
    ceilings, on the shipped system: a real database of one model, small enough to write in a test."""
    keys = sorted(workflow.prepared_inputs(MODEL, shipped_db(), 1, FP32, None, "both", None, True).measurements)
    perfdb.open_db(path).close()
    conn = sqlite3.connect(path)
    conn.execute("ATTACH DATABASE ? AS src", (str(shipped_db()),))
    conn.execute("CREATE TEMP TABLE wanted (key TEXT PRIMARY KEY)")
    conn.executemany("INSERT INTO wanted VALUES (?)", [(k,) for k in keys])
    conn.execute("INSERT INTO systems SELECT * FROM src.systems")
    conn.execute("INSERT INTO layers SELECT * FROM src.layers WHERE key IN (SELECT key FROM wanted)")
    conn.execute("INSERT INTO benchmarks SELECT * FROM src.benchmarks WHERE layer_key IN (SELECT key FROM wanted) "
                 "OR api = 'ceiling'")
    conn.commit()
    conn.execute("DETACH DATABASE src")
    conn.close()


@pytest.fixture(scope="module")
def small_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("replays") / "squeezenet.db"
    small_database(path)
    return path


def h100_outcome(db: Path, out: Path) -> workflow.ReplayOutcome:
    """The plan ``db`` gives squeezenet (no build), with what the H100 printed when it ran that plan."""
    cell = cells()[("squeezenet", 1, "fp32")]
    outcome = workflow.replay(MODEL, db, out, "tests/test_replay_store.py", 1, FP32, build_it=False)
    assert len(outcome.plan.steps) == cell["steps"] and outcome.plan.lbl_seq_ms == pytest.approx(cell["lbl_seq_ms"])
    assert [s.kind for s in outcome.plan.steps] == [s["kind"] for s in cell["steps_detail"]]
    outcome.result = {"event": "replay", "status": cell["status"], "checked_steps": cell["checked_steps"],
                      "failed_steps": cell["failed_steps"], "warm": {"median_ms": cell["replay_warm_ms"]},
                      "cold": {"median_ms": cell["replay_cold_ms"]},
                      "steps": [{"step": s["step"], "kind": s["kind"], "median_ms": s["replay_ms"],
                                 "max_rel_error": s["max_rel_error"], "checked": s["checked"]}
                                for s in cell["steps_detail"]]}
    (row,) = perfdb.systems(perfdb.open_db(db, readonly=True))
    outcome.system = {"event": "system", **{k: row[k] for k in SYSTEM_LINE}}
    return outcome


def rows(path: Path, table: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def stored(small_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the small database holding the H100 replay."""
    path = tmp_path_factory.mktemp("stored") / "with_replay.db"
    path.write_bytes(small_db.read_bytes())
    outcome = h100_outcome(path, tmp_path_factory.mktemp("project"))
    sid, written = workflow.store(outcome, path)
    assert written and sid == outcome.plan.system["id"]  # the system it ran on: the one the rows are of
    assert workflow.store(outcome, path) == (sid, False)  # the same plan again: kept as it was
    return path


def test_a_stored_replay_reads_back_keyed_like_every_measurement(stored: Path) -> None:
    db = perfdb.open_db(stored, readonly=True)
    (row,) = perfdb.systems(db)
    cell = cells()[("squeezenet", 1, "fp32")]
    model = workflow.prepared_inputs(MODEL, stored, 1, FP32, None, "both", None, True).model
    outcome_key = workflow.identify(model, "both")
    (got,) = stored_replays(db, row["id"], "light_squeezenet", 1, outcome_key["model_key"], FP32, "both")
    assert (got["warm_ms"], got["cold_ms"], got["status"], got["steps"]) == (
        cell["replay_warm_ms"], cell["replay_cold_ms"], "ok", 39)
    assert [s["replay_ms"] for s in got["step_results"]] == [s["replay_ms"] for s in cell["steps_detail"]]
    assert got["step_results"][0]["layers"] == cell["steps_detail"][0]["layers"]
    for other in (("light_squeezenet", 64, FP32, "both"), ("light_squeezenet", 1, [Precision.FP16], "both"),
                  ("light_squeezenet", 1, FP32, "legacy"), ("squeezenet", 1, FP32, "both")):
        name, batch, precisions, apis = other
        assert stored_replays(db, row["id"], name, batch, outcome_key["model_key"], precisions, apis) == []
    assert stored_replays(db, "another system", "light_squeezenet", 1, outcome_key["model_key"], FP32, "both") == []


def test_pack_unpack_and_merge_keep_the_replays_exactly(stored: Path, tmp_path: Path) -> None:
    packed = tmp_path / "with_replay.columns.xz"
    counts = pack(stored, packed)
    assert (counts["replays"], counts["replay_steps"]) == (1, 39)
    unpack(packed, tmp_path / "back.db")
    merged = tmp_path / "merged.db"
    added = perfdb.merge(merged, [tmp_path / "back.db"])
    assert (added["replays"], added["replay_steps"]) == (1, 39)
    assert perfdb.merge(merged, [stored])["replays"] == 0  # a keyed union: nothing twice
    for table in ("replays", "replay_steps"):
        assert rows(tmp_path / "back.db", table) == rows(stored, table) == rows(merged, table)


def test_a_database_written_before_the_table_reads_merges_and_packs(stored: Path, tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    old.write_bytes(stored.read_bytes())
    conn = sqlite3.connect(old)
    conn.execute("DROP TABLE replays")
    conn.execute("DROP TABLE replay_steps")
    conn.commit()
    conn.close()
    db = perfdb.open_db(old, readonly=True)
    assert stored_replays(db, "x", "light_squeezenet", 1, "k", FP32, "both") == []
    assert perfdb.info(db)["tables"]["replays"] == 0
    db.close()
    assert perfdb.merge(tmp_path / "merged.db", [old, stored])["replays"] == 1
    assert pack(old, tmp_path / "old.columns.xz")["replays"] == 0
    unpack(tmp_path / "old.columns.xz", tmp_path / "old_back.db")
    assert rows(tmp_path / "old_back.db", "replays") == []
    perfdb.open_db(old).close()  # opened for writing: it gains the tables
    assert rows(old, "replays") == []


def test_a_read_only_or_foreign_database_refuses_in_one_line(small_db: Path, tmp_path: Path) -> None:
    outcome = h100_outcome(small_db, tmp_path / "project")
    ro = tmp_path / "ro.db"
    ro.write_bytes(small_db.read_bytes())
    ro.chmod(stat.S_IRUSR)
    before = ro.read_bytes()
    if os.access(ro, os.W_OK):  # root writes anyway: only the foreign file is checked here
        ro.chmod(stat.S_IRUSR | stat.S_IWUSR)
    else:
        with pytest.raises(BenanzaError) as exc:
            workflow.store(outcome, ro)
        assert "\n" not in exc.value.message and ro.read_bytes() == before
    foreign = tmp_path / "foreign.db"
    sqlite3.connect(foreign).execute("CREATE TABLE t (x)").connection.close()
    before = foreign.read_bytes()
    with pytest.raises(BenanzaError, match="not a benanza performance database") as exc:
        workflow.store(outcome, foreign)
    assert "\n" not in exc.value.message and foreign.read_bytes() == before
    with pytest.raises(BenanzaError, match="compressed database is read-only"):
        workflow.store(outcome, tmp_path / "perf.columns.xz")


def analyze_json(db: Path, out: Path, *extra: str) -> tuple[dict[str, Any], str]:
    done = CliRunner().invoke(main, ["analyze", str(MODEL), "--db", str(db), "--batch", "1", "--dtype", "fp32",
                                     "--json", str(out), *extra])
    assert done.exit_code == 0, done.output
    return json.loads(out.read_text()), done.output


def test_analyze_shows_the_replay_beside_lbl_only_when_the_database_holds_one(small_db: Path, stored: Path,
                                                                               tmp_path: Path) -> None:
    without, text = analyze_json(small_db, tmp_path / "without.json")
    assert not [k for k in without["summary"] if k.startswith("replay")]
    assert "replay," not in text and "replay /" not in text
    assert not [k for k in without["figures"] if "replay" in k]
    report, text = analyze_json(stored, tmp_path / "with.json")
    cell = cells()[("squeezenet", 1, "fp32")]
    summary = report["summary"]
    keys = list(summary)
    assert keys[keys.index("LBL_par (ms)") + 1:keys.index("LBL_par (ms)") + 7] == list(REPLAY_LABELS)
    assert summary["replay, warm L2 (ms)"] == cell["replay_warm_ms"]
    assert summary["replay, cold L2 (ms)"] == cell["replay_cold_ms"]
    assert summary["replay / LBL_seq"] == pytest.approx(cell["replay_over_lbl_seq"])
    assert summary["replay check"] == "ok" and summary["LBL_seq of the replayed plan (ms)"] == summary["LBL_seq (ms)"]
    assert report["figures"]["replay_lbl_seq"]["value"] == pytest.approx(1.1812, abs=1e-4)
    assert report["figures"]["replay_warm_l2_ms"]["unit"] == "ms"
    assert "replay / LBL_seq" in text and "replay, warm L2 (ms)" in text
    (note,) = [n for n in report["notes"] if n.startswith("replay:")]  # 1.18 > 1.15: where the time goes
    assert note.startswith("replay: 1.18x LBL_seq (+0.0394 ms): most in composition")
    others, _ = analyze_json(stored, tmp_path / "legacy.json", "--api", "legacy")  # another bound: not its replay
    assert "replay, warm L2 (ms)" not in others["summary"]


def test_a_replay_of_an_older_plan_is_shown_with_a_note(stored: Path) -> None:
    db = perfdb.open_db(stored, readonly=True)
    (row,) = perfdb.systems(db)
    inputs = workflow.prepared_inputs(MODEL, stored, 1, FP32, None, "both", None, True)
    (held,) = replays_from_db(db, inputs.model, row, FP32, "both")
    from dataclasses import replace

    from benanza.analyze import analyze

    older = replace(held, lbl_seq_ms=held.lbl_seq_ms * 2, reason="")
    report = analyze(replace(inputs, replays=(older,)))
    assert report.summary.replay == older
    assert any("the stored replay ran a plan whose LBL_seq was" in n for n in report.notes)
    assert analyze(replace(inputs, replays=())).summary.replay is None


def test_the_replay_command_says_where_the_time_goes_and_stores_after_its_outputs(
        small_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``benanza replay`` through the CLI, the GPU run stood in for by the H100's printed result."""
    from benanza.cli import replay as cli

    db = tmp_path / "perf.db"
    db.write_bytes(small_db.read_bytes())
    outcome = h100_outcome(db, tmp_path / "project")
    monkeypatch.setattr(cli, "replay", lambda *args, **kwargs: outcome)
    base = ["replay", str(MODEL), "--batch", "1", "--dtype", "fp32", "--out", str(tmp_path / "project")]
    done = CliRunner().invoke(main, [*base, "--db", str(db), "--json", str(tmp_path / "r.json")])
    assert done.exit_code == 0, done.output
    assert "where the time goes: 1.18x LBL_seq (+0.0394 ms): most in composition" in done.output
    assert f"stored in {db} (system {outcome.plan.system['id']})" in done.output
    assert json.loads((tmp_path / "r.json").read_text())["explanation"]["largest"].startswith("composition")
    again = CliRunner().invoke(main, [*base, "--db", str(db)])
    assert again.exit_code == 0 and "already holds this replay of the same plan; kept it" in again.output
    replaced = CliRunner().invoke(main, [*base, "--db", str(db), "--replace"])
    assert replaced.exit_code == 0 and "stored in" in replaced.output and len(rows(db, "replays")) == 1
    shipped = CliRunner().invoke(main, base)
    assert shipped.exit_code == 0 and "not stored: the shipped database is compressed (read-only)" in shipped.output
    foreign = tmp_path / "foreign.db"
    sqlite3.connect(foreign).execute("CREATE TABLE t (x)").connection.close()
    refused = CliRunner().invoke(main, [*base, "--db", str(foreign), "--json", str(tmp_path / "kept.json")])
    assert refused.exit_code == 1 and "where the time goes" in refused.output and (tmp_path / "kept.json").is_file()
    assert refused.output.strip().splitlines()[-1].startswith(f"error: {foreign}: not a benanza performance database")
