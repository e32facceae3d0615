"""The runner against a REAL benchmark executable (tests/data/fake_bench/fake_bench.c, built
with CMake + Ninja by benanza.measure.runner.build) that speaks the stdout protocol and crashes,
hangs or prints garbage on the jobs its plan file says."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import CHECK_ONLY_BUILD, LIGHT
from rich.console import Console

from benanza.cli import main
from benanza.cli.progress import summary_table
from benanza.errors import BenanzaError
from benanza.library import L2, Api, Status
from benanza.measure import runner, system
from benanza.measure.system import system_id
from benanza.records import JobKey, Result
from benanza.store import db as perfdb
from benanza.store.db import DatabaseSink
from benanza.workflows import measure

DATA = Path(__file__).parent / "data" / "fake_bench"
ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 1.0

pytestmark = pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja") and shutil.which("cc")),
                                reason="needs cmake, ninja and a C compiler")


@pytest.fixture(scope="module")
def fake_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fake project built once with the runner's own build()."""
    project = tmp_path_factory.mktemp("fake_src")
    shutil.copytree(DATA, project, dirs_exist_ok=True)
    out = runner.build(project, project / "build")
    assert (out / "bench_fake").is_file() and (out / "bench_other").is_file()
    return out


def make_project(tmp: Path, plans: dict[str, list[str]], n_algorithms: int = 2,
                 apis: dict[str, str] | None = None) -> Path:
    """manifest.json + one plan file per executable; the plan dir is $FAKE_BENCH_PLAN.
    ``apis``: an executable's API (default cudnnConvolutionForward)."""
    project = tmp / "project"
    project.mkdir()
    jobs = []
    api_of = {exe: (apis or {}).get(exe, Api.CONV_FWD.value) for exe in plans}
    for exe, behaviours in plans.items():
        lines = []
        for i, behaviour in enumerate(behaviours):
            key = f"{exe}-layer{i:03d}"
            lines.append(f"{i} {behaviour} {key} {api_of[exe]} fp32 fma none {n_algorithms}")
            jobs.append({"executable": exe, "job": i, "layer_key": key, "api": api_of[exe],
                         "dtype": "fp32", "math": "fma", "fusion": "none", "layout": "NCHW",
                         "shapes": {"x": [1, 3, 8, 8]}, "algorithms": ["*"]})
        (project / f"{exe}.plan").write_text("\n".join(lines) + "\n")
    manifest = {"schema": 1, "generated_by": "tests/test_runner.py",
                "executables": {exe: {"api": api_of[exe], "num_jobs": len(b)} for exe, b in plans.items()},
                "jobs": jobs, "benchmarks": [],
                "layers": [{"key": j["layer_key"], "op": "Conv", "shapes": j["shapes"], "attrs": {"pads": [0, 0, 0, 0]},
                            "flops": 100, "macs": 50, "bytes": 64} for j in jobs]}
    (project / "manifest.json").write_text(json.dumps(manifest))
    return project


@pytest.fixture
def plan_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("FAKE_BENCH_PLAN", str(tmp_path / "project"))
    return tmp_path


def job_statuses(db) -> dict[str, str]:
    return {r["layer_key"]: r["status"] for r in db.query("SELECT layer_key, status FROM completed_jobs")}


def test_timeout_bounds_silence_not_the_whole_job(fake_build: Path, plan_env: Path) -> None:
    """A job that keeps printing results (many engine configs) outlives the timeout; a silent one does not."""
    project = make_project(plan_env, {"bench_fake": ["steady", "hang"]}, n_algorithms=3)
    db = perfdb.open_db(plan_env / "perf.db")
    summary = runner.run(project, DatabaseSink(db), timeout_s=TIMEOUT_S, build_dir=fake_build)
    assert (summary.completed, summary.timeout) == (1, 1)
    assert job_statuses(db) == {"bench_fake-layer000": "ok", "bench_fake-layer001": "timeout"}
    assert db.execute("SELECT COUNT(*) FROM benchmarks WHERE layer_key = 'bench_fake-layer000'").fetchone()[0] == 3


def test_every_outcome_is_recorded_once(fake_build: Path, plan_env: Path) -> None:
    plans = {"bench_fake": ["ok", "mixed", "segv", "ok", "hang", "garbage", "badevent", "exit", "ok"],
             "bench_other": ["ok", "ok"]}
    project = make_project(plan_env, plans)
    db = perfdb.open_db(plan_env / "perf.db")
    seen = []
    started = time.monotonic()
    summary = runner.run(project, DatabaseSink(db), timeout_s=TIMEOUT_S, build_dir=fake_build,
                         progress=lambda outcome, s: seen.append(outcome.status))
    assert time.monotonic() - started < 10

    assert summary.errors == []
    assert (summary.jobs, summary.ran, summary.skipped) == (11, 11, 0)
    assert (summary.completed, summary.crashed, summary.timeout, summary.garbage) == (6, 2, 1, 2)
    assert summary.restarts == 3  # after the segfault, the hang and the exit
    assert len(seen) == 11

    statuses = job_statuses(db)
    assert statuses == {
        "bench_fake-layer000": "ok", "bench_fake-layer001": "ok", "bench_fake-layer002": "crashed",
        "bench_fake-layer003": "ok", "bench_fake-layer004": "timeout", "bench_fake-layer005": "garbage",
        "bench_fake-layer006": "garbage", "bench_fake-layer007": "crashed", "bench_fake-layer008": "ok",
        "bench_other-layer000": "ok", "bench_other-layer001": "ok",
    }
    messages = {r["layer_key"]: r["message"] for r in db.query("SELECT layer_key, message FROM completed_jobs")}
    assert "SIGSEGV" in messages["bench_fake-layer002"]
    assert "printed nothing for 1 s" in messages["bench_fake-layer004"]
    assert "not JSON" in messages["bench_fake-layer005"] and "cuDNN says hello" in messages["bench_fake-layer005"]
    assert "bogus" in messages["bench_fake-layer006"]
    assert "exited with code 3" in messages["bench_fake-layer007"] and "fake failure" in messages["bench_fake-layer007"]

    # results printed before a crash or hang are kept; the mixed job has one not_supported
    per_layer = dict(db.execute("SELECT layer_key, COUNT(*) FROM benchmarks GROUP BY layer_key").fetchall())
    assert per_layer["bench_fake-layer002"] == 1 and per_layer["bench_fake-layer004"] == 1
    assert per_layer["bench_fake-layer003"] == 2 and per_layer["bench_fake-layer005"] == 2
    assert summary.results == sum(per_layer.values()) == 19
    assert summary.not_supported == 1 and summary.ok == 18

    row = next(db.query("SELECT * FROM benchmarks WHERE layer_key = 'bench_fake-layer001' AND algorithm = 'algo0'"))
    assert row["median_ms"] == pytest.approx(0.02) and row["system_id"] == summary.system_id
    assert json.loads(row["notes"]) == {"fake_knob": 0}
    system = perfdb.systems(db)
    assert [s["gpu"] for s in system] == ["Fake GPU"] and system[0]["cudnn_version"] == "9.19.0"
    assert db["layers"].count == 11


def test_rerun_skips_completed_and_force_reruns(fake_build: Path, plan_env: Path) -> None:
    project = make_project(plan_env, {"bench_fake": ["ok", "segv", "garbage", "ok"]})
    db = perfdb.open_db(plan_env / "perf.db")
    first = runner.run(project, DatabaseSink(db), timeout_s=TIMEOUT_S, build_dir=fake_build)
    rows = db["benchmarks"].count
    again = runner.run(project, DatabaseSink(db), timeout_s=TIMEOUT_S, build_dir=fake_build)
    assert (again.skipped, again.ran, again.results) == (4, 0, 0)
    assert db["benchmarks"].count == rows and db["completed_jobs"].count == 4
    forced = runner.run(project, DatabaseSink(db), timeout_s=TIMEOUT_S, build_dir=fake_build, force=True)
    assert (forced.skipped, forced.ran) == (0, 4) and forced.results == first.results
    assert db["benchmarks"].count == rows and db["completed_jobs"].count == 4


def test_each_outcome_says_where_its_time_went(fake_build: Path, plan_env: Path) -> None:
    """bench/campaign.py's phases: each process's start is charged to its first job, every job's
    database write to itself (the fake harness prints no phases of its own: an older harness)."""
    project = make_project(plan_env, {"bench_fake": ["ok", "ok", "segv", "ok"], "bench_other": ["ok"]})
    db = perfdb.open_db(plan_env / "perf.db")
    outcomes: list[runner.JobOutcome] = []
    runner.run(project, DatabaseSink(db), timeout_s=TIMEOUT_S, build_dir=fake_build, progress=lambda o,
               _s: outcomes.append(o))
    started = [(o.job.executable, o.job.index) for o in outcomes if "process_start" in o.phases]
    assert started == [("bench_fake", 0), ("bench_fake", 3), ("bench_other", 0)]  # restarted after the crash
    assert all(o.phases["db_write"] >= 0 for o in outcomes)
    assert all(o.phases["process_start"] > 0 for o in outcomes if "process_start" in o.phases)
    assert all(set(o.phases) <= {"process_start", "db_write"} for o in outcomes)


def test_a_pipelines_timings_say_where_its_jobs_time_went(fake_build: Path, plan_env: Path) -> None:
    """``pipeline --timings``: the run's summary adds up its jobs' phases, so the measuring step's time is
    split by phase (issue 32: what to cut next) as bench/campaign.py splits a campaign's."""
    from benanza.measure.campaign import JOB_PHASES

    project = make_project(plan_env, {"bench_fake": ["ok", "ok", "segv", "ok"], "bench_other": ["ok"]})
    outcomes: list[runner.JobOutcome] = []
    summary = runner.run(project, DatabaseSink(perfdb.open_db(plan_env / "perf.db")), timeout_s=TIMEOUT_S,
                         build_dir=fake_build, progress=lambda o, _s: outcomes.append(o))
    phases = measure.PipelineRun(project, (summary,)).job_phases_s
    assert tuple(phases) == JOB_PHASES
    starts = [o.phases["process_start"] for o in outcomes if "process_start" in o.phases]
    assert len(starts) == 3 and phases["process_start"] == pytest.approx(sum(starts) / 1e3, abs=2e-3)
    assert phases["db_write"] > 0 and phases["timed"] == 0  # the fake is an older harness: no phases of its own


def test_a_run_keeps_the_plan_cache_within_its_bound(fake_build: Path, plan_env: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Before its jobs, a run prunes the harness's plan cache to BENANZA_PLAN_CACHE_MAX_MB."""
    plans = plan_env / "plans"
    for name in ("00/a.plan", "01/b.plan"):
        (plans / name).parent.mkdir(parents=True, exist_ok=True)
        (plans / name).write_bytes(b"x" * 4096)
    os.utime(plans / "00/a.plan", (1000, 1000))  # the least recently used
    monkeypatch.setenv("BENANZA_PLAN_CACHE_DIR", str(plans))
    monkeypatch.setenv("BENANZA_PLAN_CACHE_MAX_MB", str(5000 / 2**20))
    project = make_project(plan_env, {"bench_fake": ["ok"]})
    runner.run(project, DatabaseSink(perfdb.open_db(plan_env / "perf.db")), timeout_s=TIMEOUT_S, build_dir=fake_build)
    assert sorted(p.name for p in plans.rglob("*.plan")) == ["b.plan"]


def test_max_engines_reaches_every_process_through_the_workflow(fake_build: Path, plan_env: Path) -> None:
    """``--max-engines`` (run and pipeline): ``workflows.measure.run_here``, which ``pipeline`` measures
    with, hands it to every benchmark process (the fake tells it back in its end lines); without it none
    is passed, so each job measures every engine config."""
    project = make_project(plan_env, {"bench_fake": ["ok", "ok"], "bench_other": ["ok"]})

    def told(**options: Any) -> set[Any]:
        outcomes: list[runner.JobOutcome] = []

        class Seen(measure.Progress):
            def running(self, project: Path, total: int | None) -> contextlib.AbstractContextManager[measure.JobBar]:
                class Bar(measure.JobBar):
                    def advance(self, outcome: runner.JobOutcome, worker: str | None = None) -> None:
                        outcomes.append(outcome)
                return contextlib.nullcontext(Bar())

        db_path = plan_env / f"perf{len(options)}.db"
        measure.run_here(project, db_path, {}, Seen(), build_dir=fake_build, timeout_s=TIMEOUT_S, **options)
        assert len(outcomes) == 3 and {o.status for o in outcomes} == {"ok"}
        return {o.phases.get("max_engines") for o in outcomes}

    assert told(max_engines=3) == {3.0}
    assert told() == {None}


def test_cold_l2_is_measured_beside_warm(fake_build: Path, plan_env: Path) -> None:
    project = make_project(plan_env, {"bench_fake": ["ok", "ok"]})
    db = perfdb.open_db(plan_env / "perf.db")
    runner.run(project, DatabaseSink(db), timeout_s=TIMEOUT_S, build_dir=fake_build)
    cold = runner.run(project, DatabaseSink(db), timeout_s=TIMEOUT_S, build_dir=fake_build, l2="cold")
    assert cold.ran == 2 and cold.skipped == 0
    assert dict(db.execute("SELECT l2, COUNT(*) FROM benchmarks GROUP BY l2").fetchall()) == {"cold": 4, "warm": 4}


def test_cold_weights_runs_only_the_jobs_of_apis_with_weights(fake_build: Path, plan_env: Path) -> None:
    """--l2 cold-weights leaves out the pooling jobs (no weights: their warm rows stand for them),
    resumes on its own job keys, and leaves the warm jobs to a warm run."""
    project = make_project(plan_env, {"bench_fake": ["ok", "ok"], "bench_other": ["ok", "ok", "ok"]},
                           apis={"bench_other": Api.POOLING.value})
    db = perfdb.open_db(plan_env / "perf.db")
    cold_w = runner.run(project, DatabaseSink(db), timeout_s=TIMEOUT_S, build_dir=fake_build, l2=L2.COLD_WEIGHTS.value)
    assert (cold_w.jobs, cold_w.weightless, cold_w.ran, cold_w.skipped, cold_w.results) == (5, 3, 2, 0, 4)
    assert sorted(db.execute("SELECT layer_key, l2 FROM completed_jobs").fetchall()) == [
        ("bench_fake-layer000", "cold-weights"), ("bench_fake-layer001", "cold-weights")]
    assert dict(db.execute("SELECT l2, COUNT(*) FROM benchmarks GROUP BY l2").fetchall()) == {"cold-weights": 4}
    again = runner.run(project, DatabaseSink(db), timeout_s=TIMEOUT_S, build_dir=fake_build, l2=L2.COLD_WEIGHTS.value)
    assert (again.weightless, again.skipped, again.ran) == (3, 2, 0)
    warm = runner.run(project, DatabaseSink(db), timeout_s=TIMEOUT_S, build_dir=fake_build)
    assert (warm.weightless, warm.skipped, warm.ran) == (0, 0, 5)
    assert dict(db.execute("SELECT l2, COUNT(*) FROM completed_jobs GROUP BY l2").fetchall()) == {
        "cold-weights": 2, "warm": 5}


def test_run_summary_says_what_cold_weights_left_out() -> None:
    def rendered(summary: runner.RunSummary) -> str:
        console = Console(width=200, record=True, file=io.StringIO())
        console.print(summary_table(summary, "run"))
        return console.export_text()

    left_out = "left out (no weights: their warm rows stand for them)"
    (line,) = [line for line in rendered(runner.RunSummary(jobs=5, weightless=3, ran=2)).splitlines()
               if left_out in line]
    assert line.replace(left_out, "").strip(" │|") == "3"
    assert left_out not in rendered(runner.RunSummary(jobs=5, ran=5))
    conv = JobKey("k", Api.CONV_FWD.value, "fp32", "none", "cold-weights", "[]")
    pool = JobKey("p", Api.POOLING.value, "fp32", "none", "cold-weights", "[]")
    jobs = {"bench_conv_fwd": [runner.ScheduledJob("bench_conv_fwd", 0, conv)],
            "bench_pooling": [runner.ScheduledJob("bench_pooling", 0, pool)]}
    assert runner.jobs_to_run(jobs, L2.COLD_WEIGHTS.value) == {"bench_conv_fwd": jobs["bench_conv_fwd"],
                                                                "bench_pooling": []}
    assert runner.jobs_to_run(jobs, L2.COLD.value) == jobs


def test_run_summary_counts_the_plans_the_harness_loaded_or_kept() -> None:
    """A result's notes.plan_cache (the harness's plan cache) adds to the run's counts, which the summary
    table shows when there are any (a run with no runtime-compiled engine shows no such row)."""
    def rendered(summary: runner.RunSummary) -> str:
        console = Console(width=200, record=True, file=io.StringIO())
        console.print(summary_table(summary, "run"))
        return console.export_text()

    key = JobKey("k", Api.GRAPH_CONV.value, "fp16", "conv+bias+act", "warm", "[]")
    job = runner.ScheduledJob("bench_graph_conv", 0, key)
    results = [Result.from_dict({"layer_key": "k", "api": Api.GRAPH_CONV.value, "algorithm": f"eng{i}",
                                 "dtype": "fp16", "fusion": "conv+bias+act", "math": "tensor_op", "status": "ok",
                                 "notes": {"plan_cache": cached} if cached else {}})
               for i, cached in enumerate(("hit", "hit", "kept", None))]
    summary = runner.RunSummary()
    summary.count(runner.JobOutcome(job, "ok", results=results))
    assert (summary.plans_loaded, summary.plans_kept, summary.results) == (2, 1, 4)
    text = rendered(summary)
    assert any("plans loaded from the plan cache" in line and line.rstrip(" │|").endswith("2")
               for line in text.splitlines())
    assert "plan cache" not in rendered(runner.RunSummary(jobs=1, ran=1))


def test_relative_project_and_build_paths(fake_build: Path, plan_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``benanza run some/dir`` from anywhere: an executable runs with its build directory as cwd."""
    make_project(plan_env, {"bench_fake": ["ok"]})
    db = perfdb.open_db(plan_env / "perf.db")
    monkeypatch.chdir(plan_env)
    summary = runner.run(Path("project"), DatabaseSink(db), timeout_s=TIMEOUT_S, build_dir=os.path.relpath(fake_build,
                                                                                                           plan_env))
    assert summary.errors == [] and summary.completed == 1


def test_fixed_system_id_and_fingerprint_merge(fake_build: Path, plan_env: Path) -> None:
    project = make_project(plan_env, {"bench_fake": ["ok"]})
    db = perfdb.open_db(plan_env / "perf.db")
    summary = runner.run(project, DatabaseSink(db), timeout_s=TIMEOUT_S, build_dir=fake_build,
                         system={"gpu": "overridden by the executable", "sm_clock_khz": 1980000})
    (system,) = perfdb.systems(db)
    assert system["gpu"] == "Fake GPU" and system["sm_clock_khz"] == 1980000
    assert summary.system_id == system["id"] == system_id(system)
    fixed = runner.run(project, DatabaseSink(db), system_id="given", timeout_s=TIMEOUT_S, build_dir=fake_build)
    assert fixed.ran == 1 and perfdb.completed_jobs(db, "given")


def test_executable_that_cannot_start_records_nothing(fake_build: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_project(tmp_path, {"bench_fake": ["ok", "ok"]})
    monkeypatch.setenv("FAKE_BENCH_PLAN", str(tmp_path / "nowhere"))
    db = perfdb.open_db(tmp_path / "perf.db")
    summary = runner.run(project, DatabaseSink(db), timeout_s=TIMEOUT_S, build_dir=fake_build)
    assert len(summary.errors) == 1 and "exited with code 2" in summary.errors[0]
    assert "cannot read the plan file" in summary.errors[0]
    assert summary.ran == 0 and db["completed_jobs"].count == 0 and db["benchmarks"].count == 0


def test_job_never_reached_is_retried_then_reported(fake_build: Path, plan_env: Path) -> None:
    project = make_project(plan_env, {"bench_fake": ["ok", "skip", "ok"]})
    db = perfdb.open_db(plan_env / "perf.db")
    summary = runner.run(project, DatabaseSink(db), timeout_s=TIMEOUT_S, build_dir=fake_build)
    assert summary.completed == 2 and summary.restarts == 1
    assert summary.errors and "before starting a job" in summary.errors[0]
    assert sorted(job_statuses(db)) == ["bench_fake-layer000", "bench_fake-layer002"]


def test_hang_between_jobs_blames_no_job(fake_build: Path, plan_env: Path) -> None:
    project = make_project(plan_env, {"bench_fake": ["ok", "endhang", "ok", "endhang"]})
    db = perfdb.open_db(plan_env / "perf.db")
    summary = runner.run(project, DatabaseSink(db), timeout_s=TIMEOUT_S, build_dir=fake_build)
    # a hang between jobs blames no job: the executable restarts with the jobs after it
    assert set(job_statuses(db).values()) == {"ok"} and len(job_statuses(db)) == 4
    assert summary.errors == [] and summary.restarts == 1 and summary.timeout == 0


def test_harness_error_events(fake_build: Path, plan_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_project(plan_env, {"bench_fake": ["ok", "error", "sticky", "ok"]})
    db = perfdb.open_db(plan_env / "perf.db")
    summary = runner.run(project, DatabaseSink(db), timeout_s=TIMEOUT_S, build_dir=fake_build)
    assert (summary.completed, summary.job_errors, summary.crashed, summary.restarts) == (2, 1, 1, 1)
    jobs = {r["layer_key"]: r for r in db.query("SELECT * FROM completed_jobs")}
    assert jobs["bench_fake-layer001"]["status"] == "failed" and jobs["bench_fake-layer001"]["results"] == 2
    assert "cudaErrorIllegalAddress" in jobs["bench_fake-layer001"]["message"]
    sticky = jobs["bench_fake-layer002"]
    assert sticky["status"] == "crashed" and "exited with code 3" in sticky["message"]
    assert "CUDA context lost" in sticky["message"]

    monkeypatch.setenv("FAKE_BENCH_NO_DEVICE", "1")
    failed = runner.run(project, DatabaseSink(perfdb.open_db(":memory:")), timeout_s=TIMEOUT_S, build_dir=fake_build)
    assert failed.ran == 0 and "no usable CUDA device" in failed.errors[0]


RUN_SCRIPT = textwrap.dedent("""
    import sys
    from benanza.measure import runner
    from benanza.store import db
    summary = runner.run(sys.argv[1], db.DatabaseSink(db.open_db(sys.argv[2])), timeout_s=5, build_dir=sys.argv[3])
    print(summary.ran, summary.skipped, summary.errors)
""")


def start_runner(project: Path, db_path: Path, build: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", RUN_SCRIPT, str(project), str(db_path), str(build)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_jobs(db_path: Path, count: int, limit_s: float = 20) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if db_path.exists() and perfdb.open_db(db_path)["completed_jobs"].count >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"runner did not complete {count} jobs in {limit_s} s")


def _pooled_runner(db, fake_build: Path, pool: runner.ChildPool) -> runner.Runner:
    return runner.Runner(DatabaseSink(db), fake_build, TIMEOUT_S, False, L2.WARM.value, None, None, None, None,
                         pool=pool)


def _all_started(pool: runner.ChildPool, limit_s: float = 10) -> None:
    """Wait until the pool's prestart thread has started every queued process (a list that comes first
    starts its own, as when met)."""
    deadline = time.monotonic() + limit_s
    while pool.queued and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pool.queued == 0


def _started(pids: Path) -> set[int]:
    return {int(p.name) for p in pids.iterdir()}


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not; nor a process reaped between the two looks)."""
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


def test_a_pooled_process_serves_job_lists_in_turn(fake_build: Path, plan_env: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """With a ChildPool (a cluster worker's shards) one --serve process runs job list after job list of
    its executable; a crash mid-list costs one new process, which the next lists use; close ends it."""
    pids = plan_env / "pids"
    pids.mkdir()
    monkeypatch.setenv("FAKE_BENCH_PIDS", str(pids))
    project = make_project(plan_env, {"bench_fake": ["ok", "ok", "segv", "ok", "ok", "ok"], "bench_other": ["ok"]})
    db = perfdb.open_db(plan_env / "perf.db")
    jobs = runner.manifest_jobs(runner.load_manifest(project), L2.WARM.value)
    pool = runner.ChildPool()
    shard_runner = _pooled_runner(db, fake_build, pool)
    for todo in (jobs["bench_fake"][:2], jobs["bench_other"], jobs["bench_fake"][2:4], jobs["bench_fake"][4:]):
        shard_runner.run_executable(todo[0].executable, todo)
        assert shard_runner.system_id is not None
    assert job_statuses(db) == {**{f"bench_fake-layer{i:03d}": "ok" for i in range(6)},
                                "bench_fake-layer002": "crashed", "bench_other-layer000": "ok"}
    assert db.execute("SELECT COUNT(*) FROM benchmarks").fetchone()[0] == 5 * 2 + 1 + 2
    # bench_fake: one process for lists 1 and 3 up to the crash, one for the rest; bench_other: one
    assert len(_started(pids)) == 3 and shard_runner.summary.restarts == 1
    live = {pid for pid in _started(pids) if process_alive(pid)}
    assert len(live) == 2  # idle in the pool: bench_fake's second process and bench_other's
    # a new runner (the next shard) takes them and learns the system from the kept system line
    again = _pooled_runner(db, fake_build, pool)
    again.force = True
    again.run_executable("bench_other", jobs["bench_other"])
    assert again.system_id == shard_runner.system_id and len(_started(pids)) == 3
    assert pool.close() == 2
    assert not any(process_alive(pid) for pid in live)


def test_a_pooled_process_gone_while_idle_is_replaced_without_a_restart(
        fake_build: Path, plan_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pids = plan_env / "pids"
    pids.mkdir()
    monkeypatch.setenv("FAKE_BENCH_PIDS", str(pids))
    project = make_project(plan_env, {"bench_fake": ["ok"] * 4})
    db = perfdb.open_db(plan_env / "perf.db")
    todo = runner.manifest_jobs(runner.load_manifest(project), L2.WARM.value)["bench_fake"]
    pool = runner.ChildPool()
    shard_runner = _pooled_runner(db, fake_build, pool)
    shard_runner.run_executable("bench_fake", todo[:2])
    (first,) = _started(pids)
    os.kill(first, signal.SIGKILL)
    while process_alive(first):
        time.sleep(0.01)
    shard_runner.run_executable("bench_fake", todo[2:])
    assert len(_started(pids)) == 2 and shard_runner.summary.restarts == 0
    assert set(job_statuses(db).values()) == {"ok"} and len(job_statuses(db)) == 4
    pool.close()


def test_one_place_builds_a_process_argv(tmp_path: Path) -> None:
    """A prestarted process is found in the pool only under the argv the runner looks it up by: one function
    builds both (options in the order the harness took them before)."""
    limited = runner.Runner(runner.MemorySink(), tmp_path, 1.0, False, L2.COLD.value, None, None, None, 5, 3,
                            ("--plan-threads", "4"), pool=runner.ChildPool())
    exe = str(tmp_path / "bench_x")
    assert limited.process_argv(tmp_path / "bench_x") == \
        [exe, "--serve", "--l2", "cold", "--max-reps", "5", "--max-engines", "3", "--plan-threads", "4"]
    assert limited.process_argv(tmp_path / "bench_x", [0, 1, 2, 7]) == \
        [exe, "--jobs", "0-2,7", "--l2", "cold", "--max-reps", "5", "--max-engines", "3", "--plan-threads", "4"]
    plain = runner.Runner(runner.MemorySink(), tmp_path, 1.0, False, L2.WARM.value, None, None, None, None)
    assert plain.process_argv(tmp_path / "bench_x") == [exe, "--serve", "--l2", "warm"]


def test_prestarted_processes_serve_the_first_lists_and_a_job_waits_for_its_own_process_alone(
        fake_build: Path, plan_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster worker's first shard starts the processes of every executable at once (Runner.prestart) and
    goes on: no list starts one, and a job waits for its own process only, not for the slowest of them (all
    waited for, a worker's first job waited 5.3 s on each of two H200s: docs/RESULTS.md §11). Each one's
    first job is charged what it waited; the rows are those of processes started one by one."""
    pids = plan_env / "pids"
    pids.mkdir()
    monkeypatch.setenv("FAKE_BENCH_PIDS", str(pids))
    monkeypatch.setenv("FAKE_BENCH_SLOW_START", "bench_other:3000")
    project = make_project(plan_env, {"bench_fake": ["ok", "mixed", "ok"], "bench_other": ["ok", "ok"]})
    db = perfdb.open_db(plan_env / "perf.db")
    jobs = runner.manifest_jobs(runner.load_manifest(project), L2.WARM.value)
    pool = runner.ChildPool()
    shard_runner = runner.Runner(DatabaseSink(db), fake_build, 10.0, False, L2.WARM.value, None, None, None, None,
                                 pool=pool)  # 10 s for a system line: bench_other's takes 3
    t0 = time.monotonic()
    done = shard_runner.prestart(["bench_other", "bench_fake", "bench_other"], at_once=2)  # the slow one first
    assert done.queued == 2
    _all_started(pool)
    assert shard_runner.prestart(["bench_fake", "bench_other"], at_once=2).queued == 0  # both there already
    outcomes: list[runner.JobOutcome] = []
    shard_runner.progress = lambda outcome, summary: outcomes.append(outcome)
    shard_runner.run_executable("bench_fake", jobs["bench_fake"][:2])
    fast_done_s = time.monotonic() - t0
    for todo in (jobs["bench_other"], jobs["bench_fake"][2:]):
        shard_runner.run_executable(todo[0].executable, todo)
    assert len(_started(pids)) == 2 and shard_runner.summary.processes == 0  # the lists started none
    charged = {o.job.executable: o.phases["process_start"] for o in outcomes if "process_start" in o.phases}
    assert [o.job.index for o in outcomes if "process_start" in o.phases] == [0, 0]  # each process's first job
    # bench_fake's list ran while bench_other was still starting; bench_other's first job waited out the rest
    assert fast_done_s < 2.0 and charged["bench_fake"] < 2000, (fast_done_s, charged)
    assert 3000 - fast_done_s * 1e3 - 500 < charged["bench_other"] < 3000 + 500, charged
    assert job_statuses(db) == {**{f"bench_fake-layer{i:03d}": "ok" for i in range(3)},
                                **{f"bench_other-layer{i:03d}": "ok" for i in range(2)}}
    assert db.execute("SELECT COUNT(*) FROM benchmarks").fetchone()[0] == 3 * 2 + 2 * 2
    assert pool.failed == [] and pool.close() == 2


def test_a_prestarted_process_that_fails_is_not_served_and_its_list_reports_the_failure(
        fake_build: Path, plan_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that exits (or prints an error) before its system line is closed when its list takes it,
    not served: the runner that needs the executable starts one as it always did, and reports the failure
    as it always did; the pool says why the prestarted one could not serve."""
    pids = plan_env / "pids"
    pids.mkdir()
    monkeypatch.setenv("FAKE_BENCH_PIDS", str(pids))
    project = make_project(plan_env, {"bench_fake": ["ok", "ok"], "bench_other": ["ok"]})
    db = perfdb.open_db(plan_env / "perf.db")
    jobs = runner.manifest_jobs(runner.load_manifest(project), L2.WARM.value)
    plan = (project / "bench_other.plan").read_text()
    (project / "bench_other.plan").unlink()  # bench_other's process exits at start-up: no plan to read
    pool = runner.ChildPool()
    shard_runner = _pooled_runner(db, fake_build, pool)
    assert shard_runner.prestart(["bench_fake", "bench_other"], at_once=2).queued == 2
    _all_started(pool)
    failure = r"bench_other: exited with code 2; .*cannot read the plan file .* before starting a job"
    with pytest.raises(runner._ExecutableFailed, match=failure):
        shard_runner.run_executable("bench_other", jobs["bench_other"])
    assert len(pool.failed) == 1 and "bench_other: exited with code 2" in pool.failed[0]
    assert "cannot read the plan file" in pool.failed[0]
    (project / "bench_other.plan").write_text(plan)
    shard_runner.run_executable("bench_other", jobs["bench_other"])  # started as usual once it can start
    shard_runner.run_executable("bench_fake", jobs["bench_fake"])  # the prestarted one
    assert job_statuses(db) == {"bench_fake-layer000": "ok", "bench_fake-layer001": "ok", "bench_other-layer000": "ok"}
    # bench_fake: its prestarted process; bench_other: two started as usual (the fake notes its pid once it
    # has read its plan: the failed ones left none)
    assert len(_started(pids)) == 2 and shard_runner.summary.processes == 2
    pool.close()
    # without a GPU every process prints its error line and exits: none serves, the list fails as before
    monkeypatch.setenv("FAKE_BENCH_NO_DEVICE", "1")
    pool = runner.ChildPool()
    shard_runner = _pooled_runner(perfdb.open_db(plan_env / "none.db"), fake_build, pool)
    assert shard_runner.prestart(["bench_fake", "bench_other"], at_once=2).queued == 2
    _all_started(pool)
    with pytest.raises(runner._ExecutableFailed, match="no usable CUDA device"):
        shard_runner.run_executable("bench_fake", jobs["bench_fake"])
    assert len(pool.failed) == 1 and "printed 'error'" in pool.failed[0]
    assert pool.close() == 1  # bench_other's, never taken: closed all the same


@pytest.mark.parametrize("at_once", [1, 2])
def test_prestarted_processes_start_at_most_so_many_at_once(fake_build: Path, plan_env: Path,
                                                            monkeypatch: pytest.MonkeyPatch, at_once: int) -> None:
    """On 4 H200s 64 processes started at once slowed one another (first jobs waited 40.5 GPU-s:
    docs/RESULTS.md §11): a prestart starts ``at_once`` of them, the next ones once those printed their
    system lines, in the order given."""
    pids = plan_env / "pids"
    pids.mkdir()
    monkeypatch.setenv("FAKE_BENCH_PIDS", str(pids))
    monkeypatch.setenv("FAKE_BENCH_SLOW_START", "bench_fake:800")
    make_project(plan_env, {"bench_fake": ["ok"], "bench_other": ["ok"]})
    pool = runner.ChildPool()
    shard_runner = runner.Runner(runner.MemorySink(), fake_build, 10.0, False, L2.WARM.value, None, None, None, None,
                                 pool=pool)
    assert shard_runner.prestart(["bench_fake", "bench_other"], at_once).queued == 2
    _all_started(pool)
    deadline = time.monotonic() + 10
    while len(_started(pids)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    noted = {Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode().rsplit("/", 1)[-1]:
             (pids / str(pid)).stat().st_mtime for pid in _started(pids)}
    apart = noted["bench_other"] - noted["bench_fake"]
    assert (apart >= 0.7) if at_once == 1 else (abs(apart) < 0.5), (at_once, apart)
    assert pool.close() == 2


@pytest.mark.parametrize("spawn_pause_s", [0.0, 0.5])
def test_a_pool_closed_while_its_processes_start_ends_them(fake_build: Path, plan_env: Path,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           spawn_pause_s: float) -> None:
    """A campaign that ends (or a worker that closes) before a prestarted process printed its system line
    ends that process too, reaped in the background, and ``join_reapers`` waits for it. ``spawn_pause_s``
    holds the starter thread between a process's spawn and what follows it, as a busy machine may: a close
    in that gap counted nothing and left the process to the starter, which ``join_reapers`` did not wait for
    (CI failed so once, session 26)."""
    spawn = runner._Child.__init__

    def paused_spawn(self: runner._Child, *args: Any, **kwargs: Any) -> None:
        spawn(self, *args, **kwargs)
        time.sleep(spawn_pause_s)

    monkeypatch.setattr(runner._Child, "__init__", paused_spawn)
    pids = plan_env / "pids"
    pids.mkdir()
    monkeypatch.setenv("FAKE_BENCH_PIDS", str(pids))
    monkeypatch.setenv("FAKE_BENCH_SLOW_START", "bench_fake:30000")
    make_project(plan_env, {"bench_fake": ["ok"]})
    pool = runner.ChildPool()
    shard_runner = _pooled_runner(perfdb.open_db(plan_env / "perf.db"), fake_build, pool)
    assert shard_runner.prestart(["bench_fake"], at_once=1).queued == 1
    deadline = time.monotonic() + 10
    while not _started(pids) and time.monotonic() < deadline:  # it has read its plan and sleeps
        time.sleep(0.02)
    (pid,) = _started(pids)
    t0 = time.monotonic()
    assert pool.close(wait=False) == 1
    assert pool.join_reapers(10.0) and time.monotonic() - t0 < 5
    assert not Path(f"/proc/{pid}").exists()  # reaped, not a zombie


def test_killed_runner_resumes_without_loss_or_duplicates(fake_build: Path, plan_env: Path) -> None:
    n_jobs, n_algos = 14, 3
    project = make_project(plan_env, {"bench_fake": ["slow"] * n_jobs}, n_algorithms=n_algos)
    db_path = plan_env / "perf.db"
    child = start_runner(project, db_path, fake_build)
    wait_for_jobs(db_path, 3)
    child.send_signal(signal.SIGKILL)
    child.wait()
    db = perfdb.open_db(db_path)
    kept = db["completed_jobs"].count
    assert 3 <= kept < n_jobs
    assert db["benchmarks"].count == kept * n_algos  # results and job marks were committed together

    summary = runner.run(project, DatabaseSink(db), timeout_s=5, build_dir=fake_build)
    assert summary.skipped == kept and summary.ran == n_jobs - kept and summary.crashed == 0
    assert db["completed_jobs"].count == n_jobs
    assert db["benchmarks"].count == n_jobs * n_algos
    assert set(job_statuses(db).values()) == {Status.OK.value}


def test_two_runners_on_one_database(fake_build: Path, plan_env: Path) -> None:
    n_jobs, n_algos = 10, 3
    project = make_project(plan_env, {"bench_fake": ["slow"] * n_jobs}, n_algorithms=n_algos)
    db_path = plan_env / "perf.db"
    perfdb.open_db(db_path).close()
    children = [start_runner(project, db_path, fake_build) for _ in range(2)]
    outputs = [c.communicate(timeout=60) for c in children]
    assert all(c.returncode == 0 for c in children), outputs
    db = perfdb.open_db(db_path)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert db["completed_jobs"].count == n_jobs and db["benchmarks"].count == n_jobs * n_algos


def test_build_failure_names_the_project_and_shows_the_compiler(tmp_path: Path) -> None:
    shutil.copytree(DATA, tmp_path / "broken")
    source = tmp_path / "broken" / "fake_bench.c"
    source.write_text(source.read_text() + "\nthis is not C;\n")
    with pytest.raises(BenanzaError) as info:
        runner.build(tmp_path / "broken")
    text = str(info.value)
    assert text.startswith(f"{tmp_path / 'broken' / 'CMakeLists.txt'}: build failed")
    assert "fake_bench.c" in text and "error" in text


def test_bad_projects_are_one_line_errors(fake_build: Path, tmp_path: Path) -> None:
    db = perfdb.open_db(":memory:")
    with pytest.raises(BenanzaError, match=r"manifest\.json: no such file"):
        runner.run(tmp_path, DatabaseSink(db))
    (tmp_path / "manifest.json").write_text('{"schema": 99}')
    with pytest.raises(BenanzaError, match="manifest schema 99"):
        runner.run(tmp_path, DatabaseSink(db))
    (tmp_path / "manifest.json").write_text(json.dumps(
        {"schema": 1, "executables": {}, "jobs": [{"executable": "bench_x", "job": 0, "layer_key": "k",
                                                   "api": "a", "dtype": "fp32"}]}))
    with pytest.raises(BenanzaError, match="names executable 'bench_x'"):
        runner.run(tmp_path, DatabaseSink(db))
    (tmp_path / "manifest.json").write_text(json.dumps(
        {"schema": 1, "executables": {"bench_x": {}}, "jobs": [{"executable": "bench_x", "job": 0, "layer_key": "k",
                                                               "api": "a", "dtype": "fp32"}]}))
    with pytest.raises(BenanzaError, match="no executable bench_x"):
        runner.run(tmp_path, DatabaseSink(db), build_dir=fake_build)
    with pytest.raises(BenanzaError, match=r"CMakeLists\.txt: no such file"):
        runner.build(tmp_path)


def test_job_ranges() -> None:
    assert runner.job_ranges([9, 0, 3, 5, 6, 7, 8]) == "0,3,5-9"
    assert runner.job_ranges([4]) == "4"
    assert runner.job_ranges([]) == ""


def test_cmake_defines_pass_through_environment() -> None:
    env = {"CUDNN_INCLUDE_DIR": "/opt/cudnn/include", "HOME": "/root", "BENANZA_CMAKE_ARGS": "-DX='a b' -DY=1"}
    assert runner.cmake_defines(env) == ["-DCUDNN_INCLUDE_DIR=/opt/cudnn/include", "-DX=a b", "-DY=1"]


def test_cli_run_without_gpu_writes_nothing(tmp_path: Path) -> None:
    if system.fingerprint()["usable"]:
        pytest.skip("this machine has a usable GPU")
    project = make_project(tmp_path, {"bench_fake": ["ok"]})
    result = CliRunner().invoke(main, ["run", str(project), "--db", str(tmp_path / "perf.db")])
    assert result.exit_code == 1
    assert "no usable NVIDIA GPU" in result.output and "nothing was built, run or written" in result.output
    assert not (tmp_path / "perf.db").exists() and not (project / "build").exists()


def test_cli_run_refuses_an_unknown_api(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", str(LIGHT / "light_zfnet512.onnx"), "--db", str(tmp_path / "perf.db"),
                                       "--api", "conv_fwd,warp_drive"])
    assert result.exit_code == 1 and "--api: unknown warp_drive" in result.output
    assert not (tmp_path / "perf.db").exists()


def test_cli_run_builds_runs_and_summarizes(plan_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Stand in for a GPU machine's fingerprint only; build, executables and database are real.
    monkeypatch.setattr(system, "fingerprint", lambda bandwidth=False: {"usable": True, "sm_clock_khz": 1755000})
    project = make_project(plan_env, {"bench_fake": ["ok", "segv", "ok"], "bench_other": ["hang"]})
    shutil.copytree(DATA, project, dirs_exist_ok=True)
    db_path = plan_env / "perf.db"
    cli = CliRunner()
    result = cli.invoke(main, ["run", str(project), "--db", str(db_path), "--timeout", "1"])
    assert result.exit_code == 0, result.output
    for label in ("ran", "crashed", "timed out", "unsupported"):
        assert label in result.output
    db = perfdb.open_db(db_path)
    assert job_statuses(db) == {"bench_fake-layer000": "ok", "bench_fake-layer001": "crashed",
                                "bench_fake-layer002": "ok", "bench_other-layer000": "timeout"}
    assert perfdb.systems(db)[0]["sm_clock_khz"] == 1755000
    again = cli.invoke(main, ["run", str(project), "--db", str(db_path)])
    assert again.exit_code == 0 and db["completed_jobs"].count == 4
    assert re.search(r"skipped \(already measured\)\s*│\s*4\s*│", again.output), again.output


ZOO = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages" / \
    "onnx" / "backend" / "test" / "data" / "light"


@pytest.mark.compile
@pytest.mark.skipif(not shutil.which("nvcc") and not Path("/usr/local/cuda/bin/nvcc").is_file(), reason="needs nvcc")
@pytest.mark.skipif(not (ZOO / "light_zfnet512.onnx").is_file(), reason="needs the onnx package's light zoo models")
def test_cli_run_generates_builds_and_runs_a_real_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end through the real generator and harness; without a GPU the harness itself refuses.
    One API (--api conv_fwd) keeps the build to one executable: every template is compiled by the
    shared build of the compile tests (conftest.shared_build)."""
    if system.fingerprint()["usable"]:
        pytest.skip("this machine has a GPU: the real run would measure for minutes")
    monkeypatch.setattr(system, "fingerprint", lambda bandwidth=False: {"usable": True})
    # nothing built here runs a benchmark: the shared build's check-only flags (-O0), as test_build_cache's
    # builds use (Release was 38 CPU s of the compile group for a build no GPU runs)
    monkeypatch.setenv("BENANZA_CMAKE_ARGS", " ".join(CHECK_ONLY_BUILD))
    db_path, project = tmp_path / "perf.db", tmp_path / "zfnet"
    result = CliRunner().invoke(main, ["run", str(ZOO / "light_zfnet512.onnx"), "--db", str(db_path),
                                       "--project-dir", str(project), "--timeout", "30", "-j", "2",
                                       "--api", "conv_fwd"])
    assert result.exit_code == 1, result.output
    output = " ".join(result.output.split())
    assert "before starting a job" in output and "no usable CUDA device" in output
    manifest = runner.load_manifest(project)
    assert set(manifest["executables"]) == {"bench_conv_fwd"}
    assert manifest["jobs"] and all(os.access(project / "build" / exe, os.X_OK) for exe in manifest["executables"])
    db = perfdb.open_db(db_path)
    assert db["completed_jobs"].count == 0 and db["benchmarks"].count == 0  # nothing measured, nothing claimed
    assert db["models"].count == 1 and db["layers"].count == len(manifest["layers"])


class Recorded(measure.Progress):
    """Every hook a measuring workflow calls, in order."""

    def __init__(self) -> None:
        self.heard: list[tuple] = []

    def step(self, message: str) -> contextlib.AbstractContextManager[None]:
        self.heard.append(("step", message.split(" ", 1)[0]))
        return contextlib.nullcontext()

    def built(self, project: Path, done: Any) -> None:
        self.heard.append(("built", project.name))

    @contextlib.contextmanager
    def running(self, project: Path, total: int | None) -> Iterator[measure.JobBar]:
        self.heard.append(("running", total))
        heard = self.heard

        class Bar(measure.JobBar):
            def advance(self, outcome: Any, worker: str | None = None) -> None:
                heard.append(("job", outcome.status))

        yield Bar()

    def ran(self, project: Path, summary: Any) -> None:
        self.heard.append(("ran", summary.ran))


def test_measure_builds_then_runs_each_project_and_reports_every_step(plan_env: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``workflows.measure.measure`` (``benanza run``): the GPU check first, then build, a bar of the
    manifest's jobs, each job as it ends, and the summary; the rows reach the database."""
    monkeypatch.setattr(system, "fingerprint", lambda bandwidth=False: {"usable": False, "reason": "no driver"})
    project = make_project(plan_env, {"bench_fake": ["ok", "segv", "ok"]})
    shutil.copytree(DATA, project, dirs_exist_ok=True)
    db_path, progress = plan_env / "perf.db", Recorded()
    with pytest.raises(BenanzaError, match=r"^no usable NVIDIA GPU \(no driver\); nothing was built"):
        measure.measure([project], [], db_path, ("fp32",), None, plan_env / "gen", progress)
    assert progress.heard == [] and not db_path.exists() and not (project / "build").exists()
    monkeypatch.setattr(system, "fingerprint", lambda bandwidth=False: {"usable": True, "sm_clock_khz": 1755000})
    (summary,) = measure.measure([project], [], db_path, ("fp32",), None, plan_env / "gen", progress,
                                 timeout_s=TIMEOUT_S)
    assert progress.heard == [("step", "building"), ("built", "project"), ("running", 3), ("job", "ok"),
                              ("job", "crashed"), ("job", "ok"), ("ran", 3)]
    assert (summary.ran, summary.crashed, summary.errors) == (3, 1, [])
    assert job_statuses(perfdb.open_db(db_path)) == {"bench_fake-layer000": "ok", "bench_fake-layer001": "crashed",
                                                     "bench_fake-layer002": "ok"}
    assert not measure.failed([summary])
