"""Campaigns on a Dask cluster (benanza/measure/cluster.py) with REAL processes: a distributed cluster of
three worker processes (two playing GPU "Fake A", one "Fake B") runs the fake benchmark
executable of tests/data/fake_bench, which speaks the harness's stdout protocol."""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from benanza.cli import main
from benanza.errors import BenanzaError
from benanza.measure import cluster, runner
from benanza.store import db as perfdb
from benanza.store.db import DatabaseSink

distributed = pytest.importorskip("distributed", reason="needs benanza[test]'s dask/distributed")

from test_runner import DATA, make_project, process_alive  # noqa: E402  (the runner tests' fake project)

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 5.0
LOOPBACK = "127.0.0.1"  # every server of these tests listens on this machine only
GPUS = {"a1": "Fake A", "a2": "Fake A", "b1": "Fake B"}

pytestmark = pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja") and shutil.which("cc")),
                                reason="needs cmake, ninja and a C compiler")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's directory: the fake build, and project/ whose plan files the workers read."""
    return tmp_path_factory.mktemp("cluster")


@pytest.fixture(scope="module")
def fake_build(home: Path) -> Path:
    src = home / "fake_src"
    shutil.copytree(DATA, src)
    return runner.build(src, src / "build")


@pytest.fixture(scope="module")
def dask_cluster(home: Path) -> Iterator[distributed.SpecCluster]:
    """Three single-threaded worker processes under nannies (a killed one is restarted); the
    fake executables they start read their plans from home/project and their GPU from the env,
    and leave their pids in home/pids."""
    (home / "pids").mkdir(exist_ok=True)
    workers = {name: {"cls": distributed.Nanny,
                      "options": {"nthreads": 1, "host": LOOPBACK, "env": {"FAKE_BENCH_PLAN": str(home / "project"),
                                                         "FAKE_BENCH_GPU": gpu,
                                                         "FAKE_BENCH_PIDS": str(home / "pids")}}}
               for name, gpu in GPUS.items()}
    spec = distributed.SpecCluster(scheduler={"cls": distributed.Scheduler,
                                                                       "options": {"host": LOOPBACK, "dashboard": False,
                                                                                   "dashboard_address": ":0"}},
                                   workers=workers, asynchronous=False)
    with spec, distributed.Client(spec) as client:
        client.wait_for_workers(len(GPUS), timeout=60)
        yield spec


@pytest.fixture
def client(dask_cluster: distributed.SpecCluster) -> Iterator[distributed.Client]:
    with distributed.Client(dask_cluster) as c:
        c.wait_for_workers(len(GPUS), timeout=60)
        yield c


def fresh_project(home: Path, plans: dict[str, list[str]]) -> Path:
    shutil.rmtree(home / "project", ignore_errors=True)
    return make_project(home, plans)


def rows_by_system(db) -> dict[str, dict[tuple, float | None]]:
    """GPU name -> {benchmark key: median}."""
    gpu = {s["id"]: s["gpu"] for s in perfdb.systems(db)}
    out: dict[str, dict[tuple, float | None]] = collections.defaultdict(dict)
    for r in db.query("SELECT * FROM benchmarks"):
        out[gpu[r["system_id"]]][(r["layer_key"], r["api"], r["algorithm"], r["dtype"], r["fusion"], r["l2"])] = \
            r["median_ms"]
    return out


def jobs_by_system(db) -> dict[str, collections.Counter]:
    gpu = {s["id"]: s["gpu"] for s in perfdb.systems(db)}
    out: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in db.query("SELECT system_id, layer_key, status FROM completed_jobs"):
        out[gpu[r["system_id"]]][(r["layer_key"], r["status"])] += 1
    return out


def test_shards_and_sizes() -> None:
    jobs = {"a": [runner.ScheduledJob("a", i, None) for i in range(10)], "b": [runner.ScheduledJob("b", 3, None)]}
    shards = cluster.make_shards(jobs, 4)
    assert [s.name for s in shards] == ["a:0-3", "a:4-7", "a:8-9", "b:3"]
    assert cluster.shard_size(1000, 2) == cluster.MAX_SHARD_JOBS
    assert cluster.shard_size(80, 2) == 10 and cluster.shard_size(3, 8) == 1 and cluster.shard_size(5, 2, 3) == 3


def test_a_campaign_drains_on_small_shards_of_every_executable() -> None:
    """With equal shards 4 H100s ran 180 to 456 of 1 261 jobs each (docs/RESULTS.md §11): the campaign ended
    on some workers' long shards. Draining: each executable ends in halving shards, listed (and so started)
    largest first, so every executable's last jobs come in shards of at most MIN_SHARD_JOBS at the end."""
    jobs = {"a": [runner.ScheduledJob("a", i, None) for i in range(200)],
            "b": [runner.ScheduledJob("b", 100 + i, None) for i in range(20)]}
    shards = cluster.make_shards(jobs, 64, drain=True)
    lengths = [len(s.indices) for s in shards]
    assert lengths == sorted(lengths, reverse=True) and max(lengths) == 64
    for exe, todo in jobs.items():  # every job once, each shard a run of its executable's job order
        mine = [s.indices for s in shards if s.executable == exe]
        assert sorted(i for run in mine for i in run) == [j.index for j in todo]
        assert all(list(run) == list(range(run[0], run[0] + len(run))) for run in mine)
    assert [len(s.indices) for s in shards if s.executable == "a"] == [64, 64, 36, 18, 9, 5, 4]
    assert [len(s.indices) for s in shards if s.executable == "b"] == [10, 5, 5]
    assert all(n <= 2 * cluster.MIN_SHARD_JOBS for n in lengths[-4:])
    # a given --shard-jobs, or one worker, keeps equal shards in job order
    assert [len(s.indices) for s in cluster.make_shards(jobs, 64)] == [64, 64, 64, 8, 20]


def test_the_next_shard_is_the_longest_expected_and_an_unknown_executable_goes_first() -> None:
    """The client hands out the shard expected to take longest (its jobs x its executable's mean job so far):
    4 H200s ended a campaign with one worker idle 6.5 s while another ran its last shards."""
    shards = collections.deque(cluster.make_shards(
        {"pool": [runner.ScheduledJob("pool", i, None) for i in range(40)],
         "graph": [runner.ScheduledJob("graph", i, None) for i in range(12)],
         "new": [runner.ScheduledJob("new", i, None) for i in range(2)]}, 16, drain=True))
    job_ms = {"pool": (40.0, 20), "graph": (3000.0, 6)}  # 2 ms and 500 ms per job
    taken = [cluster.next_shard(shards, job_ms).name for _ in range(len(shards))]
    assert taken == ["new:0-1", "graph:0-5", "graph:6-11", "pool:0-15", "pool:16-27", "pool:28-33", "pool:34-39"]
    # nothing known: make_shards' order (largest first)
    shards = collections.deque(cluster.make_shards({"a": [runner.ScheduledJob("a", i, None) for i in range(20)],
                                                    "b": [runner.ScheduledJob("b", i, None) for i in range(30)]},
                                                   16, drain=True))
    order = [s.name for s in shards]
    assert [cluster.next_shard(shards, {}).name for _ in range(len(order))] == order


def test_a_worker_takes_the_shards_of_its_own_executables_first() -> None:
    """Each executable a worker meets costs a process start (0.48 s on an H200), its kernels' loads and its
    handles: met as they came, 4 GPUs started 47 processes for 16 executables (docs/RESULTS.md §11). A worker
    takes, of the executables it serves already, the longest shard; another executable's only when none of
    its own is left; and of those, one another worker is still learning the cost of last."""
    def backlog() -> collections.deque:
        return collections.deque(cluster.make_shards(
            {"pool": [runner.ScheduledJob("pool", i, None) for i in range(40)],
             "graph": [runner.ScheduledJob("graph", i, None) for i in range(12)],
             "new": [runner.ScheduledJob("new", i, None) for i in range(2)]}, 16, drain=True))

    job_ms = {"pool": (40.0, 20), "graph": (3000.0, 6)}  # 2 ms and 500 ms per job
    shards = backlog()
    taken = [cluster.next_shard(shards, job_ms, served={"pool"}).name for _ in range(len(shards))]
    assert taken == ["pool:0-15", "pool:16-27", "pool:28-33", "pool:34-39", "new:0-1", "graph:0-5", "graph:6-11"]
    # nothing finished yet: a worker serving "pool" keeps to it; one serving nothing starts what no worker has
    shards = backlog()
    assert cluster.next_shard(shards, {}, served={"pool"}, given={"pool"}).name == "pool:0-15"
    assert cluster.next_shard(shards, {}, served=set(), given={"pool"}).name == "graph:0-5"
    assert cluster.next_shard(shards, {}, served=set(), given={"pool", "graph"}).name == "new:0-1"
    # every executable taken by others, none finished: make_shards' order among them
    assert cluster.next_shard(shards, {}, served=set(), given={"pool", "graph", "new"}).name == "pool:16-27"


def test_workers_sharing_a_hosts_cpus_split_them_for_plan_threads() -> None:
    """Issue 35: each benchmark process starts its CPUs - 1 plan threads unless told; workers that share
    CPUs get their share of them - 1 (at least 1), a worker alone keeps the harness's default."""
    def w(name: str, cpus: range | list[int], host: str = "h1") -> dict:
        return {"name": name, "host": host, "cpus": list(cpus)}

    split = cluster.plan_threads_split
    # 4 workers left on all 64 CPUs of a host: 16 each, one of them the GPU thread
    assert split([w(str(i), range(64)) for i in range(4)]) == {str(i): 15 for i in range(4)}
    # dask-cuda's NUMA pinning: GPUs 0, 1 on CPUs 0-31, GPUs 2, 3 on 32-63
    assert split([w(str(i), range(32 * (i // 2), 32 * (i // 2) + 32)) for i in range(4)]) == \
        {str(i): 15 for i in range(4)}
    # partly shared: 4 CPUs of its own and half of 4 shared
    assert split([w("a", range(0, 8)), w("b", range(4, 12))]) == {"a": 5, "b": 5}
    # more workers than CPUs: at least one plan thread each
    assert split([w(str(i), [0, 1]) for i in range(3)]) == {"0": 1, "1": 1, "2": 1}
    # alone on its CPUs (one GPU; pinned apart; one worker per host; affinity unknown): the harness's default
    assert split([w("0", range(64))]) == {}
    assert split([w("0", range(32)), w("1", range(32, 64))]) == {}
    assert split([w("0", range(64)), w("1", range(64), host="h2")]) == {}
    assert split([w("0", []), w("1", [])]) == {}
    # names are strings (LocalCUDACluster names its workers 0, 1, ...)
    assert split([{"name": 0, "host": "h", "cpus": [0, 1, 2, 3]}, {"name": 1, "host": "h", "cpus": [0, 1, 2, 3]}]) \
        == {"0": 1, "1": 1}


def test_a_campaign_takes_a_plan_thread_policy(fake_build: Path, home: Path, client: distributed.Client) -> None:
    """bench/cluster_scaling.py --plan-threads split|default|N measures the per-worker count (4 H200s:
    split 49.6 s, the harness's default 53.4 s): run_campaign takes the policy, the split by default."""
    workers = [{"name": n, "host": "h", "cpus": [0, 1, 2, 3]} for n in (0, 1)]
    assert cluster.plan_threads_policy("split") is cluster.plan_threads_split
    assert cluster.plan_threads_policy("default")(workers) == {}
    assert cluster.plan_threads_policy("7")(workers) == {"0": 7, "1": 7}
    for bad in ("0", "many"):
        with pytest.raises(BenanzaError, match="--plan-threads"):
            cluster.plan_threads_policy(bad)
    project = fresh_project(home, {"bench_fake": ["ok"] * 4})
    for spec, told in (("3", {3.0}), ("default", {None})):  # what the fake's end lines tell back
        outcomes: list[runner.JobOutcome] = []
        summary = cluster.run_campaign(project, DatabaseSink(perfdb.open_db(home / f"threads-{spec}.db")), client,
                                       timeout_s=TIMEOUT_S, build_dir=fake_build, shard_jobs=1,
                                       progress=lambda outcome, report, seen=outcomes: seen.append(outcome),
                                       plan_threads=cluster.plan_threads_policy(spec))
        assert summary.errors == [] and len(outcomes) == 8
        assert summary.plan_threads == ({name: 3 for name in GPUS} if spec == "3" else {})
        assert {o.phases.get("plan_threads") for o in outcomes} == told, spec


def test_two_systems_spread_over_workers_match_the_single_process_runner(
        fake_build: Path, home: Path, client: distributed.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    plans = {"bench_fake": ["slow"] * 8 + ["mixed", "segv", "ok"], "bench_other": ["ok"] * 4}
    project = fresh_project(home, plans)
    db = perfdb.open_db(home / "campaign.db")
    outcomes: list[runner.JobOutcome] = []
    threads_seen: set[tuple[str, float | None]] = set()

    assigned: collections.Counter[str] = collections.Counter()  # system -> most shards on its workers at once

    def progress(outcome: runner.JobOutcome, report: cluster.WorkerReport) -> None:
        outcomes.append(outcome)
        if outcome.status == "ok":  # the fake tells its --plan-threads back in its end lines
            threads_seen.add((report.name, outcome.phases.get("plan_threads")))
        now = collections.Counter(str(key).split("-")[2] for keys in client.processing().values() for key in keys
                                  if str(key).startswith("benanza-shard-"))
        assigned.update({sid: n - assigned[sid] for sid, n in now.items() if n > assigned[sid]})

    summary = cluster.run_campaign(project, DatabaseSink(db), client, timeout_s=TIMEOUT_S, build_dir=fake_build,
                                   shard_jobs=2, progress=progress)
    assert summary.errors == [] and summary.duplicates == 0
    # the three workers share this host's CPUs: each executable gets its part of them as --plan-threads
    mine = sorted(os.sched_getaffinity(0))
    assert summary.plan_threads == cluster.plan_threads_split(
        [{"name": name, "host": "here", "cpus": mine} for name in GPUS])
    assert threads_seen == {(name, float(n)) for name, n in summary.plan_threads.items()}
    assert summary.worker_cpus == dict.fromkeys(GPUS, len(mine))
    assert {s["gpu"] for s in summary.systems.values()} == {"Fake A", "Fake B"}
    # shards go to Dask a few per worker at a time (a worker that is done early takes the next), not all
    # 16 up front: system A's two workers held at most 4 at once, B's one at most 2
    per_gpu = {summary.systems[sid]["gpu"]: n for sid, n in assigned.items()}
    assert per_gpu == {"Fake A": 2 * cluster.IN_FLIGHT_PER_WORKER, "Fake B": cluster.IN_FLIGHT_PER_WORKER}, per_gpu
    # each job's phases reach the client (a campaign's per-GPU efficiency is read from them): every
    # process started timed its start (charged to its first job), and every job its database write.
    # A worker's process of an executable serves each shard of it that the worker runs (--serve):
    # one per worker and executable, and one more per crash, fewer than the shards
    starts = sum("process_start" in o.phases for o in outcomes)
    assert 0 < starts <= len(summary.workers) * len(plans) + summary.total.crashed < summary.shards
    assert all("db_write" in o.phases for o in outcomes)
    # the campaign over, no benchmark process is left on any worker (killed at once, reaped in the background)
    deadline = time.monotonic() + 10
    while [pid for pid in map(int, os.listdir(home / "pids")) if process_alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in map(int, os.listdir(home / "pids")) if process_alive(pid)]
    # each system measured every job once; the segfault is recorded as a crash, its results so far kept
    expected = collections.Counter({(f"{exe}-layer{i:03d}", "crashed" if b == "segv" else "ok"): 1
                                    for exe, behaviours in plans.items() for i, b in enumerate(behaviours)})
    assert jobs_by_system(db) == {"Fake A": expected, "Fake B": expected}
    assert (summary.total.ran, summary.total.crashed, summary.total.skipped) == (30, 2, 0)
    # system A's shards went to both of its workers, system B's to its only one
    ran = {name: report.summary.ran for name, report in summary.workers.items()}
    assert ran["a1"] > 0 and ran["a2"] > 0 and ran["a1"] + ran["a2"] == 15 and ran["b1"] == 15
    assert {r.gpu for n, r in summary.workers.items() if n.startswith("a")} == {"Fake A"}

    # the same rows (keys and medians) as the single-process runner on the same executables
    monkeypatch.setenv("FAKE_BENCH_PLAN", str(project))
    monkeypatch.setenv("FAKE_BENCH_GPU", "Fake A")
    single = perfdb.open_db(home / "single.db")
    alone = runner.run(project, DatabaseSink(single), timeout_s=TIMEOUT_S, build_dir=fake_build)
    assert alone.system_id in summary.systems
    assert rows_by_system(db)["Fake A"] == rows_by_system(single)["Fake A"]
    assert len(rows_by_system(single)["Fake A"]) == 2 * 15 - 1  # the segfault's job printed 1 of 2


def running_children(home: Path, parent: int, earlier: frozenset[int] = frozenset()) -> list[str]:
    """The executables of the live benchmark processes that the worker process ``parent`` started, but for
    ``earlier`` ones (an earlier campaign's, SIGKILLed at its end, may not be gone yet)."""
    out = []
    for pid in set(map(int, os.listdir(home / "pids"))) - earlier:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if stat[0] != "Z" and int(stat[1]) == parent:
            out.append(Path(argv0).name)
    return sorted(out)


def test_a_workers_first_shard_starts_every_executables_process_and_later_shards_none(
        fake_build: Path, home: Path, client: distributed.Client) -> None:
    """A process start (0.45 s on an H200) is paid in turn by each worker the first time it meets each
    executable: 47 starts on 4 GPUs (docs/RESULTS.md §11). With ``prestart`` (opt-in: all at once on 4 GPUs
    cost more than it saved) a worker's first shard starts its own executable's process and, in the
    background, one for every other executable of the campaign, and its later shards start none: a worker
    of system A that never runs a bench_other job (one shard of it, on the other worker) started its process
    all the same. (At its first job the background start may not have come yet: that is not looked at.)"""
    plans = {"bench_fake": ["ok"] * 12, "bench_other": ["ok"] * 2}
    project = fresh_project(home, plans)
    db = perfdb.open_db(home / "prestart.db")
    ran: dict[str, set[str]] = collections.defaultdict(set)  # worker -> the executables whose jobs it ran

    def look(outcome: runner.JobOutcome, report: cluster.WorkerReport) -> None:
        ran[report.name].add(outcome.job.executable)

    summary = cluster.run_campaign(project, DatabaseSink(db), client, timeout_s=TIMEOUT_S, build_dir=fake_build,
                                   shard_jobs=2, progress=look, prestart=len(plans))
    assert summary.errors == [] and summary.duplicates == 0
    assert sorted(len(ran[name]) for name in ("a1", "a2")) == [1, 2], dict(ran)  # one shard of bench_other on A
    assert {name: r.summary.processes for name, r in summary.workers.items()} == dict.fromkeys(summary.workers, 2)
    assert summary.total.processes == 2 * len(summary.workers)
    expected = collections.Counter({(f"{exe}-layer{i:03d}", "ok"): 1 for exe, todo in plans.items()
                                    for i in range(len(todo))})
    assert jobs_by_system(db) == {"Fake A": expected, "Fake B": expected}
    assert db.execute("SELECT COUNT(*) FROM benchmarks").fetchone()[0] == 2 * 14 * 2


def test_without_prestart_a_worker_starts_the_process_of_an_executable_when_it_meets_it(
        fake_build: Path, home: Path, client: distributed.Client) -> None:
    """The default: when a worker's first job comes in, the worker has started that job's process alone
    (on 4 H200s the prestart started 64 processes, of which 34 ever ran a job: docs/RESULTS.md §11)."""
    plans = {"bench_fake": ["ok"] * 12, "bench_other": ["ok"] * 12}
    project = fresh_project(home, plans)
    at_first_job: dict[str, tuple[str, list[str]]] = {}  # worker -> (its first job's executable, its processes)
    earlier = frozenset(map(int, os.listdir(home / "pids")))

    def look(outcome: runner.JobOutcome, report: cluster.WorkerReport) -> None:
        if report.name not in at_first_job:
            at_first_job[report.name] = (outcome.job.executable, running_children(home, report.pid, earlier))

    summary = cluster.run_campaign(project, DatabaseSink(perfdb.open_db(home / "lazy.db")), client,
                                   timeout_s=TIMEOUT_S, build_dir=fake_build, shard_jobs=2, progress=look)
    assert summary.errors == [] and set(at_first_job) == set(summary.workers)
    assert all(live == [exe] for exe, live in at_first_job.values()), at_first_job


def test_workers_of_a_system_keep_to_their_executables_and_start_fewer_processes(
        fake_build: Path, home: Path, client: distributed.Client) -> None:
    """System A's two workers begin with different executables and each keeps to its own while it has
    shards left: one process per executable on A, plus at most one where a worker that ran out took over
    the other's last shards (met as they came, both workers started both: 4)."""
    plans = {"bench_fake": ["ok"] * 12, "bench_other": ["ok"] * 12}
    project = fresh_project(home, plans)
    first: dict[str, str] = {}  # worker -> its first job's executable

    def look(outcome: runner.JobOutcome, report: cluster.WorkerReport) -> None:
        first.setdefault(report.name, outcome.job.executable)

    summary = cluster.run_campaign(project, DatabaseSink(perfdb.open_db(home / "affinity.db")), client,
                                   timeout_s=TIMEOUT_S, build_dir=fake_build, shard_jobs=2, progress=look)
    assert summary.errors == [] and summary.duplicates == 0
    assert first["a1"] != first["a2"], first
    assert summary.workers["a1"].summary.processes + summary.workers["a2"].summary.processes <= 3
    assert summary.workers["b1"].summary.processes == 2


def test_workers_killed_mid_shard_lose_only_their_running_job(
        fake_build: Path, home: Path, client: distributed.Client) -> None:
    """One of system A's two workers dies mid-shard: Dask moves the shard to the other one. System B's
    only worker dies mid-shard: its nanny restarts it at a new address and the shard follows it."""
    project = fresh_project(home, {"bench_fake": ["slow"] * 8})
    db = perfdb.open_db(home / "killed.db")
    commits: list[tuple[str, int, int]] = []  # (system, job, pid of the worker process that ran it)
    killed: dict[str, tuple[int, int]] = {}  # system -> (pid, the job it was running)

    def kill_mid_shard(outcome: runner.JobOutcome, worker: cluster.WorkerReport) -> None:
        commits.append((worker.gpu, outcome.job.index, worker.pid))
        if worker.gpu not in killed and outcome.job.index % 4 == 0:
            os.kill(worker.pid, signal.SIGKILL)  # 3 slow jobs of its 4-job shard still to go
            killed[worker.gpu] = (worker.pid, outcome.job.index + 1)

    summary = cluster.run_campaign(project, DatabaseSink(db), client, timeout_s=TIMEOUT_S, build_dir=fake_build,
                                   shard_jobs=4,
                                   progress=kill_mid_shard)
    assert set(killed) == {"Fake A", "Fake B"}
    assert summary.errors == []
    # 0 lost, 0 duplicated: each system holds each job exactly once, with all its results
    expected = collections.Counter({(f"bench_fake-layer{i:03d}", "ok"): 1 for i in range(8)})
    assert jobs_by_system(db) == {"Fake A": expected, "Fake B": expected}
    assert db.execute("SELECT COUNT(*) FROM benchmarks").fetchone()[0] == 2 * 8 * 2
    assert collections.Counter((gpu, job) for gpu, job, _ in commits) == \
        collections.Counter({(gpu, i): 1 for gpu in ("Fake A", "Fake B") for i in range(8)})
    # the job each dead worker was running ran again, in another worker process
    for gpu, (pid, job) in killed.items():
        rerun = [p for g, j, p in commits if (g, j) == (gpu, job)]
        assert rerun and rerun[0] != pid, gpu


def test_a_restarted_worker_takes_shards_again(fake_build: Path, home: Path, client: distributed.Client) -> None:
    """System A's worker a1 is SIGKILLed at its first job; its nanny restarts it at a new address, and
    the shards handed out after that may go to it: it does not sit idle while a2 finishes alone."""
    project = fresh_project(home, {"bench_fake": ["slow"] * 60})  # a2 alone: 9 s, time for a1 to come back
    db = perfdb.open_db(home / "restarted.db")
    runs: list[tuple[str, str, int]] = []  # (gpu, worker name, worker pid) per committed job
    killed: list[int] = []

    def kill_a1_once(outcome: runner.JobOutcome, worker: cluster.WorkerReport) -> None:
        runs.append((worker.gpu, worker.name, worker.pid))
        if worker.name == "a1" and not killed:
            before = {a for a, w in cluster.workers_of(client).items() if w.get("name") == "a1"}
            killed.append(worker.pid)
            os.kill(worker.pid, signal.SIGKILL)
            # The client waits (as a slow one would) until the nanny has a1 back at a new address: on a
            # loaded 2-core machine the restart alone outlasted a2's 9 s of work, and no shard was left.
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not {a for a, w in cluster.workers_of(client).items()
                                                       if w.get("name") == "a1"} - before:
                time.sleep(0.1)

    summary = cluster.run_campaign(project, DatabaseSink(db), client, timeout_s=TIMEOUT_S, build_dir=fake_build,
                                   shard_jobs=2, progress=kill_a1_once)
    assert summary.errors == [] and killed
    expected = collections.Counter({(f"bench_fake-layer{i:03d}", "ok"): 1 for i in range(60)})
    assert jobs_by_system(db) == {"Fake A": expected, "Fake B": expected}
    assert [pid for gpu, name, pid in runs if name == "a1" and pid != killed[0]], "the restarted a1 ran no job"


class _SlowToCloseCluster(distributed.SpecCluster):
    """A real cluster whose close then raises what Dask raised on 4 H200s: a worker whose benchmark
    processes' CUDA contexts were still going down outlived its 5 s to exit (docs/RESULTS.md §11)."""

    def close(self, timeout: float | None = None) -> None:
        super().close(timeout)
        raise TimeoutError


def test_a_started_cluster_that_fails_to_close_is_a_line_and_its_workers_children_are_reaped_first(
        fake_build: Path, home: Path) -> None:
    """``--cluster local`` on 4 H200s: every job was written, then closing the cluster raised TimeoutError
    (a traceback, rc 1). Before the close each worker now reaps its benchmark processes; a close that
    fails all the same is one line returned (``measure_on_cluster`` warns with it), not an exception."""
    pids = home / "pids"
    pids.mkdir(exist_ok=True)
    worker = {"cls": distributed.Nanny, "options": {"nthreads": 1, "host": LOOPBACK, "env": {
        "FAKE_BENCH_PLAN": str(home / "project"), "FAKE_BENCH_GPU": "Fake A", "FAKE_BENCH_PIDS": str(pids)}}}
    started = _SlowToCloseCluster(scheduler={"cls": distributed.Scheduler, "options": {
        "host": LOOPBACK, "dashboard": False, "dashboard_address": ":0"}}, workers={"c1": worker}, asynchronous=False)
    client = distributed.Client(started)
    client.wait_for_workers(1, timeout=60)
    worker_pid = next(iter(client.run(os.getpid).values()))
    project = fresh_project(home, {"bench_fake": ["ok"] * 4, "bench_other": ["ok"] * 4})
    children: set[int] = set()  # the worker's benchmark processes, seen while jobs came in

    def look(outcome: runner.JobOutcome, report: cluster.WorkerReport) -> None:
        children.update(pid for pid in map(int, os.listdir(pids)) if _parent(pid) == worker_pid)

    summary = cluster.run_campaign(project, DatabaseSink(perfdb.open_db(home / "closing.db")), client,
                                   timeout_s=TIMEOUT_S, build_dir=fake_build, progress=look)
    assert summary.errors == [] and summary.total.ran == 8 and len(children) == 2
    line = cluster.Cluster(client, started).close()
    assert line == "the local Dask cluster did not close cleanly (TimeoutError: no message)"
    assert client.status == "closed"
    assert not any(Path(f"/proc/{pid}").exists() for pid in children)  # reaped, not even zombies


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None


def test_resume_after_the_client_is_killed(fake_build: Path, home: Path, client: distributed.Client) -> None:
    project = fresh_project(home, {"bench_fake": ["slow"] * 10})
    shutil.copytree(DATA, project, dirs_exist_ok=True)  # the CLI builds (a no-op in the built --build-dir)
    db_path = home / "resume.db"
    address = client.scheduler.address
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-m", "benanza", "run", str(project), "--db", str(db_path),
                              "--build-dir", str(fake_build), "--cluster", address, "--shard-jobs", "2",
                              "--timeout", str(TIMEOUT_S)], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and child.poll() is None:
            if db_path.exists():
                seen = perfdb.open_db(db_path)
                done = seen.execute("SELECT COUNT(*) FROM completed_jobs").fetchone()[0]
                seen.close()
                if done >= 4:
                    break
            time.sleep(0.05)
        assert child.poll() is None, f"the client ended before it could be killed: {child.stderr.read()!r}"
        child.kill()
    finally:
        child.kill()
        child.wait()
    db = perfdb.open_db(db_path)
    before = db.execute("SELECT COUNT(*) FROM completed_jobs").fetchone()[0]
    assert 4 <= before < 20
    summary = cluster.run_campaign(project, DatabaseSink(db), client, timeout_s=TIMEOUT_S, build_dir=fake_build,
                                   shard_jobs=2)
    assert summary.errors == []
    assert (summary.total.skipped, summary.total.ran) == (before, 20 - before)
    expected = collections.Counter({(f"bench_fake-layer{i:03d}", "ok"): 1 for i in range(10)})
    assert jobs_by_system(db) == {"Fake A": expected, "Fake B": expected}
    assert db.execute("SELECT COUNT(*) FROM benchmarks").fetchone()[0] == 2 * 10 * 2


@pytest.mark.parametrize(("missing", "says"), [("distributed", "--cluster needs Dask's distributed package"),
                                               ("dask_cuda", "--cluster local needs dask-cuda")])
def test_cluster_flag_without_dask_is_one_line(fake_build: Path, home: Path, monkeypatch: pytest.MonkeyPatch,
                                               missing: str, says: str) -> None:
    project = fresh_project(home, {"bench_fake": ["ok"]})
    monkeypatch.setitem(sys.modules, missing, None)  # import it -> ImportError
    result = CliRunner().invoke(main, ["run", str(project), "--db", str(home / "x.db"), "--cluster", "local"])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "pip install 'benanza[dask]'" in lines[0], result.output
    assert not (home / "x.db").exists()


def test_cli_joins_by_scheduler_file_and_prints_a_row_per_worker(fake_build: Path, home: Path,
                                                                 client: distributed.Client) -> None:
    project = fresh_project(home, {"bench_fake": ["ok"] * 6})
    shutil.copytree(DATA, project, dirs_exist_ok=True)
    scheduler_file = home / "scheduler.json"
    scheduler_file.write_text(json.dumps({"type": "Scheduler", "address": client.scheduler.address}))
    db_path = home / "cli.db"
    result = CliRunner().invoke(main, ["run", str(project), "--db", str(db_path), "--build-dir", str(fake_build),
                                       "--scheduler-file", str(scheduler_file), "--timeout", str(TIMEOUT_S)])
    assert result.exit_code == 0, result.output
    assert "per worker (one GPU each)" in result.output and "on 2 system(s)" in result.output
    for name, gpu in GPUS.items():
        assert re.search(rf"│ {name}\s+│ \S+\s+│ {gpu}", result.output), result.output
    expected = collections.Counter({(f"bench_fake-layer{i:03d}", "ok"): 1 for i in range(6)})
    assert jobs_by_system(perfdb.open_db(db_path)) == {"Fake A": expected, "Fake B": expected}
