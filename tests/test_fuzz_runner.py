"""Hostile benchmark executables (tests/data/fake_bench, real processes speaking the harness
protocol): bad result lines, partial lines, forked children, a killed runner. Each job is
recorded as what happened, no value of a bad line reaches the database, no result is lost
and no process is left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_runner import ROOT, TIMEOUT_S, fake_build, job_statuses, make_project, plan_env  # noqa: F401

from benanza.measure import runner
from benanza.records import checked_result
from benanza.store import db as perfdb
from benanza.store.db import DatabaseSink

BAD_LINES = ("badtype", "bigint", "nan", "negative", "listfield")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _pids(directory: Path) -> list[int]:
    return [int(p.name) for p in directory.iterdir()]


@pytest.fixture
def pid_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    directory = tmp_path / "pids"
    directory.mkdir()
    monkeypatch.setenv("FAKE_BENCH_PIDS", str(directory))
    return directory


def test_bad_result_lines_are_garbage_and_the_run_goes_on(fake_build: Path, plan_env: Path,  # noqa: F811
                                                          pid_dir: Path) -> None:
    behaviours = ["ok", *BAD_LINES, "badstart", "partial", "ok", "fork", "ok"]
    project = make_project(plan_env, {"bench_fake": behaviours})
    db = perfdb.open_db(plan_env / "perf.db")
    summary = runner.run(project, DatabaseSink(db), timeout_s=TIMEOUT_S, build_dir=fake_build)
    assert summary.errors == [] and summary.ran == len(behaviours)
    statuses = job_statuses(db)
    expected = {f"bench_fake-layer{i:03d}": s for i, s in enumerate(
        ["ok", *["garbage"] * 6, "crashed", "ok", "ok", "ok"])}
    assert statuses == expected
    messages = {r["layer_key"]: r["message"] for r in db.query("SELECT layer_key, message FROM completed_jobs")}
    assert "'median_ms' = fast" in messages["bench_fake-layer001"]
    assert "'repetitions' = 18446744073709551616" in messages["bench_fake-layer002"]
    assert "'median_ms' = nan" in messages["bench_fake-layer003"]
    assert "'median_ms' = -5.0" in messages["bench_fake-layer004"]
    assert "'algorithm' is list" in messages["bench_fake-layer005"]
    assert "unexpected start of job [6]" in messages["bench_fake-layer006"]
    # no value of a bad line is stored; every good line is (2 per job, the partial one's job has none)
    assert db.execute("SELECT COUNT(*) FROM benchmarks WHERE median_ms IS NULL OR median_ms < 0 "
                      "OR median_ms > 1e6 OR typeof(median_ms) != 'real'").fetchone()[0] == 0
    per_layer = dict(db.execute("SELECT layer_key, COUNT(*) FROM benchmarks GROUP BY layer_key").fetchall())
    assert all(per_layer[k] == 2 for k in expected if k != "bench_fake-layer007")
    assert "bench_fake-layer007" not in per_layer
    assert summary.results == sum(per_layer.values()) == 20
    # the forked child that kept stdout open was killed with its group
    pids = _pids(pid_dir)
    assert len(pids) >= 3
    _wait_for(lambda: not [p for p in pids if _alive(p)], limit_s=2)  # SIGKILL lands asynchronously


@pytest.mark.parametrize("line", [
    {"median_ms": "fast"}, {"median_ms": float("nan")}, {"median_ms": -1.0}, {"median_ms": float("inf")},
    {"repetitions": 2**63}, {"repetitions": -1}, {"repetitions": True}, {"workspace_bytes": 1.5},
    {"algorithm": ["a"]}, {"notes": [1]}, {"median_ms": None}, {"layer_key": None},
])  # fmt: skip
def test_checked_result_refuses(line: dict) -> None:
    good = {"layer_key": "k", "api": "a", "algorithm": "0", "dtype": "fp32", "math": "fma", "fusion": "none",
            "status": "ok", "median_ms": 0.5, "repetitions": 10}
    assert checked_result(good).median_ms == 0.5
    with pytest.raises(ValueError):
        checked_result({**good, **line})


# The runner as a terminal starts it: SIGINT raises KeyboardInterrupt. A suite started in the
# background by a non-interactive shell inherits SIGINT ignored, and so would this child.
RUN_SCRIPT = textwrap.dedent("""
    import signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from benanza.measure import runner
    from benanza.store import db
    runner.run(sys.argv[1], db.DatabaseSink(db.open_db(sys.argv[2])), timeout_s=30, build_dir=sys.argv[3])
""")


def _wait_for(predicate, limit_s: float = 20) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_killed_runner_leaves_no_process_and_resumes(fake_build: Path, plan_env: Path,  # noqa: F811
                                                     pid_dir: Path, how: signal.Signals) -> None:
    """The runner killed while a job hangs (in a process that also forked a child, except under
    SIGKILL: see docs/DATABASE.md): nothing is left running; a plain re-run (no --force) measures
    exactly what is missing."""
    third = "ok" if how == signal.SIGKILL else "fork"
    project = make_project(plan_env, {"bench_fake": ["ok", "ok", third, "hang", "ok"]})
    db_path = plan_env / "perf.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", RUN_SCRIPT, str(project), str(db_path), str(fake_build)],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_for(lambda: db_path.exists() and perfdb.open_db(db_path)["completed_jobs"].count >= 3
              and len(_pids(pid_dir)) >= (1 if how == signal.SIGKILL else 2))
    time.sleep(0.2)  # the hanging job has started
    child.send_signal(how)
    child.communicate(timeout=20)
    pids = _pids(pid_dir)
    _wait_for(lambda: not [p for p in pids if _alive(p)], limit_s=5)  # PDEATHSIG is delivered asynchronously

    db = perfdb.open_db(db_path)
    kept = job_statuses(db)
    assert kept == {"bench_fake-layer000": "ok", "bench_fake-layer001": "ok", "bench_fake-layer002": "ok"}
    summary = runner.run(project, DatabaseSink(db), timeout_s=TIMEOUT_S, build_dir=fake_build)
    assert summary.skipped == 3 and summary.ran == 2
    assert job_statuses(db)["bench_fake-layer003"] == "timeout" and job_statuses(db)["bench_fake-layer004"] == "ok"
    assert db["benchmarks"].count == 2 * 4 + 1  # 4 ok jobs of 2 results, the hang's first result
    assert not [p for p in _pids(pid_dir) if _alive(p)]
