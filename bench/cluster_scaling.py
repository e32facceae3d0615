"""One campaign on 1, 2, 4 … GPUs of one machine (issue 35): wall, jobs/s, per-GPU efficiency and
scaling, the rows compared with the one-GPU run; then a worker SIGKILLed mid-campaign, and the
client without a GPU driving the workers through a scheduler file.

    PYTHONPATH=. python bench/cluster_scaling.py PROJECT [--build-dir DIR] [--gpus 4,2,1] [--sample N]
        [--warm-up] [--kill-after-s S] [--scheduler-file] [--plan-threads split|default|N] [--prestart N]
        [--ab-env VAR=VALUE] [--out DIR]

PROJECT is a generated project (``benanza generate``), built here when it is not. ``--sample N``
keeps every N-th job of each executable (bench/campaign.py's sample). Each GPU count runs the same
jobs into a fresh database with ``--cluster local`` (a LocalCUDACluster on the first G visible
GPUs); its wall is the campaign's (probe included, cluster start apart). Per-GPU efficiency is the
timed repetitions' GPU time (the harness's ``timed_gpu`` phase) over G x wall; scaling efficiency
is the speedup over the one-GPU run divided by G.

Where the wall goes, per G: the host's CPUs' busy fraction during the campaign (``/proc/stat`` read
once a second: mean over the run, max of a second; benanza.measure.hostload), and the G x wall
worker-seconds split into the jobs' phases (bench/campaign.py's, ``benanza.measure.campaign.job_phases``)
summed over every job, "other" the rest (a worker idle, Dask, between jobs). The database holds no
phase times: they come with each job's message to the client. Also each worker's ``--plan-threads``
(``cluster.plan_threads_split``; none: the harness's default, its CPUs - 1) and CPUs, and the
benchmark processes the workers started ("processes": one per executable a worker meets, or with
``--prestart N`` one per executable of the campaign from its first shard on, N at a time in the
background, plus one per crash; a killed worker's are not counted) and how many of them ran a job.

``--plan-threads``: ``split`` (the default, ``cluster.plan_threads_split``), ``default`` (every worker the
harness's own default: its CPUs - 1) or N (every worker N); ``cluster.plan_threads_policy``. Measured so far,
4 H200s, sample 3: split (15 per worker) 49.6 s, default (63 per worker) 53.4 s; one H200, the whole project
(session 26): 15 threads 336.8 s, the default (63) 374.4 s.

``--prestart N``: each worker's first shard starts every executable's process in the background, N at a
time (``cluster.run_campaign``'s ``prestart``; 0, the default: each when met). A count written ``4p1`` in
``--gpus`` runs with ``--prestart 1`` alone: ``--gpus 4,4p1,2,1`` is the A/B on 4 GPUs beside the scaling.
Measured so far, 4 H200s, sample 3: all 16 at once (``4p16``) 48.3 s, first jobs waiting 40.5 GPU-s.

``--ab-env VAR=VALUE``: one more run on the largest G with VAR=VALUE in the workers' environment (their
benchmark processes inherit it): an A/B of a harness switch beside that G's run, its keys and statuses
against it. ``BENANZA_BUFFER_CACHE=0`` runs the harness without its BufferCache (every buffer a cudaMalloc
and a cudaFree of its own, as before session 26): on 4 H200s, the whole project, 88.8 s against 85.9 s with it.

``--warm-up``: one unreported run on the largest G first. The first campaign on a machine pays the
runtime-compiled kernels into the disk caches; run first, the largest G paid them alone (its plan
builds took 75 GPU-s against 39 for the counts after it, docs/RESULTS.md §11).

``--kill-after-s S``: the largest G again, one worker process SIGKILLed S seconds in (its nanny
starts it again; the client puts its shards back, whose new attempts skip the jobs already reported):
its rows against that G's run, the jobs written twice (none may be), ``PRAGMA integrity_check``
and the wall it cost. ``--scheduler-file``: ``dask scheduler`` and ``dask cuda worker`` as separate
processes (all GPUs), and ``benanza run --scheduler-file`` as the client with
``CUDA_VISIBLE_DEVICES`` empty (docs/CLUSTER.md's fleet on one host).

Writes DIR/scaling.json and the databases (DIR defaults to $OUT, else ./scaling-bench) and prints
one Markdown table. Needs GPUs and benanza[dask] (distributed, dask-cuda).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/cluster_vs_single.py

from cluster_vs_single import compare, rows

from benanza.errors import BenanzaError
from benanza.measure import cluster, runner
from benanza.measure.campaign import JOB_PHASES, PHASE_LABELS, job_phases, sampled_project
from benanza.measure.hostload import CpuSampler
from benanza.store import db as perfdb
from benanza.store.db import DatabaseSink


class Tally:
    """The campaign's progress callback: per worker, jobs and the GPU time of their timed repetitions;
    over all jobs, the time of each phase (``job_phases``, ms)."""

    def __init__(self) -> None:
        self.jobs: dict[str, int] = {}
        self.timed_gpu_s: dict[str, float] = {}
        self.phases_ms: dict[str, float] = dict.fromkeys(JOB_PHASES, 0.0)
        self.processes = 0  # benchmark processes that ran a job (each one's start is charged to its first job)
        self.last: dict[str, float] = {}  # worker -> when its latest job reached the client (perf_counter)

    def __call__(self, outcome: runner.JobOutcome, report: cluster.WorkerReport) -> None:
        self.jobs[report.name] = self.jobs.get(report.name, 0) + 1
        gpu = outcome.phases.get("timed_gpu", 0.0) / 1e3
        self.timed_gpu_s[report.name] = self.timed_gpu_s.get(report.name, 0.0) + gpu
        for phase, ms in job_phases(outcome.phases, outcome.results).items():
            self.phases_ms[phase] += ms
        self.processes += "process_start" in outcome.phases
        self.last[report.name] = time.perf_counter()


def visible_gpus() -> list[str]:
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given:
        return [g for g in given.split(",") if g]
    out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                         text=True, check=True).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def one_run(project: Path, build: Path, db_path: Path, gpus: list[str], kill_after_s: float = 0.0,
            plan_threads: cluster.PlanThreads = cluster.plan_threads_split, prestart: int = 0,
            env: dict[str, str] | None = None) -> dict[str, Any]:
    """The project's jobs on these GPUs into a fresh database; with ``kill_after_s``, one worker
    process SIGKILLed that many seconds in; ``plan_threads``: each worker's ``--plan-threads``;
    ``prestart``: run_campaign's; ``env``: set for the workers (and their processes) of this run alone."""
    db_path.unlink(missing_ok=True)
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    before = {name: os.environ.get(name) for name in env or {}}
    os.environ.update(env or {})
    up = time.perf_counter()
    try:  # the workers inherit the environment when they start
        dask = cluster.local_cuda_cluster()
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    start_s = time.perf_counter() - up
    tally, killed = Tally(), {}
    try:
        pids = dask.client.run(os.getpid)  # worker address -> its process (the nanny's child)
        box: dict[str, Any] = {}

        def campaign() -> None:  # the database opened in the thread that writes it (sqlite3's rule)
            try:
                sink = DatabaseSink(perfdb.open_db(db_path))
                box["summary"] = cluster.run_campaign(project, sink, dask.client, build_dir=build, progress=tally,
                                                      plan_threads=plan_threads, prestart=prestart)
            except BaseException as exc:
                box["error"] = exc

        began = time.perf_counter()
        cpu = CpuSampler().start()
        worker = threading.Thread(target=campaign)
        worker.start()
        if kill_after_s:
            worker.join(kill_after_s)
            if worker.is_alive():
                victim = sorted(pids)[-1]
                os.kill(pids[victim], signal.SIGKILL)
                killed = {"address": victim, "pid": pids[victim], "at_s": time.perf_counter() - began,
                          "jobs_written_before": sum(tally.jobs.values())}
        worker.join()
        ended = time.perf_counter()
        wall = ended - began
        cpu.stop()
        if "error" in box:
            raise box["error"]
        summary: cluster.CampaignSummary = box["summary"]
    finally:
        unclean = dask.close()
        if unclean:
            print(f"cluster_scaling.py: {unclean}", file=sys.stderr, flush=True)
    gpu_s = sum(tally.timed_gpu_s.values())
    phases_s = {phase: ms / 1e3 for phase, ms in tally.phases_ms.items()}
    with sqlite3.connect(db_path) as raw:
        integrity = raw.execute("PRAGMA integrity_check").fetchone()[0]
        completed = raw.execute("SELECT COUNT(*) FROM completed_jobs").fetchone()[0]
    return {"gpus": len(gpus), "devices": gpus, "workers": len(pids), "cluster_start_s": start_s, "wall_s": wall,
            "probe_s": summary.probe_s, "shards": summary.shards,
            "processes": summary.total.processes, "processes_that_ran_a_job": tally.processes,
            "jobs": summary.total.ran, "plans_loaded": summary.total.plans_loaded,
            "plans_kept": summary.total.plans_kept,
            "results": summary.total.results, "restarts": summary.total.restarts,
            "duplicates": summary.duplicates, "errors": summary.errors, "completed_jobs_rows": completed,
            "integrity_check": integrity, "timed_gpu_s": gpu_s, "per_gpu_efficiency": gpu_s / (len(gpus) * wall),
            "jobs_per_worker": tally.jobs, "killed": killed, "db": str(db_path),
            "prestart": prestart, "env": dict(env or {}), "plan_threads": summary.plan_threads,
            "worker_cpus": summary.worker_cpus,
            "host_cpu_busy": cpu.summary(),
            "worker_s": len(gpus) * wall, "phases_s": phases_s,
            "tail_s": {name: ended - last for name, last in sorted(tally.last.items())},
            "other_s": len(gpus) * wall - sum(phases_s.values())}


def scheduler_file_run(project: Path, build: Path, db_path: Path, gpus: list[str], work: Path) -> dict[str, Any]:
    """``dask scheduler`` + ``dask cuda worker`` as processes of their own, the client without a GPU."""
    db_path.unlink(missing_ok=True)
    file = work / "scheduler.json"
    file.unlink(missing_ok=True)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(gpus)}
    logs = [open(work / name, "w") for name in ("scheduler.log", "workers.log")]
    up = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", "dask", "scheduler", "--scheduler-file", str(file),
                               "--no-dashboard"], stdout=logs[0], stderr=subprocess.STDOUT, env=env)]
    try:
        while not file.exists():
            if time.perf_counter() - up > 60 or procs[0].poll() is not None:
                raise RuntimeError(f"dask scheduler wrote no {file} (see {work / 'scheduler.log'})")
            time.sleep(0.2)
        procs.append(subprocess.Popen([sys.executable, "-m", "dask", "cuda", "worker", "--scheduler-file", str(file),
                                       "--no-dashboard"], stdout=logs[1], stderr=subprocess.STDOUT, env=env))
        client_env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
        began = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "benanza", "run", str(project), "--db", str(db_path),
                               "--build-dir", str(build), "--scheduler-file", str(file)],
                              capture_output=True, text=True, env=client_env)
        wall = time.perf_counter() - began
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        for log in logs:
            log.close()
    return {"gpus": len(gpus), "client_cuda_visible_devices": "", "rc": done.returncode,
            "wall_s_with_worker_start": wall, "output_tail": done.stdout[-3000:] + done.stderr[-2000:],
            "db": str(db_path)}


def row_check(reference: Path, other: Path, sid: str) -> dict[str, Any]:
    return compare(rows(perfdb.open_db(reference), sid), rows(perfdb.open_db(other), sid))


def system_of(db_path: Path) -> str:
    with sqlite3.connect(db_path) as raw:
        return raw.execute("SELECT system_id FROM completed_jobs LIMIT 1").fetchone()[0]


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _threads(r: dict[str, Any]) -> str:
    """The --plan-threads the workers got: 'default' where none (the harness's, its CPUs - 1)."""
    given = sorted(set(r.get("plan_threads", {}).values()))
    return "/".join(str(n) for n in given) if given else "default"


def print_table(runs: list[dict[str, Any]], base: dict[str, Any]) -> None:
    print("\n| GPUs | workers | jobs | jobs per worker | shards | processes | wall (s) | cluster start (s) | probe (s) "
          "| jobs/s | speedup | scaling eff. | per-GPU eff. | host CPU busy mean/max | plan threads | prestart "
          "| env | plans loaded/kept | keys/statuses as 1 GPU | medians > 10 % apart |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        speed = base["wall_s"] / r["wall_s"]
        c = r.get("versus_one_gpu", {})
        same = (c.get("only_a") == c.get("only_b") == c.get("status_differs") == 0) if c else "(itself)"
        busy = r.get("host_cpu_busy", {})
        per_worker = " / ".join(str(n) for n in sorted(r.get("jobs_per_worker", {}).values()))
        print(f"| {r['gpus']} | {r['workers']} | {r['jobs']} | {per_worker} | {r['shards']} | "
              f"{r.get('processes', '-')} ({r.get('processes_that_ran_a_job', '-')} ran a job) | "
              f"{r['wall_s']:.1f} | {r['cluster_start_s']:.1f} | "
              f"{r['probe_s']:.1f} | {r['jobs'] / r['wall_s']:.2f} | {speed:.2f}x | {speed / r['gpus']:.0%} | "
              f"{r['per_gpu_efficiency']:.0%} | {_share(busy.get('mean'))}/{_share(busy.get('max'))} | "
              f"{_threads(r)} | {r.get('prestart', '-')} | {_env(r)} | "
              f"{r.get('plans_loaded', '-')}/{r.get('plans_kept', '-')} | "
              f"{same} | "
              f"{c.get('over_10pct', '-')} of {c.get('medians', '-')} |")
    print_phases(runs)


def _env(r: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in r.get("env", {}).items()) or "-"


def print_phases(runs: list[dict[str, Any]]) -> None:
    """Where each run's GPUs x wall went: the jobs' phases summed over all jobs, and the rest (s)."""
    if not all("phases_s" in r for r in runs):
        return
    heads = " | ".join(f"{PHASE_LABELS.get(p, p)} (s)" for p in JOB_PHASES)
    print(f"\n| GPUs (prestart, env) | GPUs x wall (s) | timed GPU (s) | {heads} "
          "| other: idle, Dask, between jobs (s) |")
    print("|---|---|---|" + "---|" * (len(JOB_PHASES) + 1))
    for r in runs:
        print(f"| {r['gpus']} ({r.get('prestart', '-')}, {_env(r)}) | {r['worker_s']:.1f} | {r['timed_gpu_s']:.1f} | "
              + " | ".join(f"{r['phases_s'][p]:.1f}" for p in JOB_PHASES) + f" | {r['other_s']:.1f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("--build-dir", type=Path)
    parser.add_argument("--gpus", default="4,2,1",
                        help="GPU counts, largest first (each a prefix of the visible GPUs); 4p1: 4 GPUs with "
                             "--prestart 1 for that run alone (an A/B beside the plain count)")
    parser.add_argument("--sample", type=int, default=1, metavar="N", help="every N-th job of each executable")
    parser.add_argument("--kill-after-s", type=float, default=0.0)
    parser.add_argument("--warm-up", action="store_true",
                        help="first run the campaign once on the most GPUs, unreported: every count then finds the "
                             "runtime-compiled kernels in the disk caches and the plan cache (the first run on a "
                             "machine pays them)")
    parser.add_argument("--scheduler-file", action="store_true")
    parser.add_argument("--plan-threads", default="split", metavar="split|default|N",
                        help="each worker's --plan-threads: split the host's CPUs among the workers (default), the "
                             "harness's default (its CPUs - 1), or N each")
    parser.add_argument("--prestart", type=int, default=0, metavar="N",
                        help="each worker's first shard starts every executable's process in the background, N at "
                             "a time (run_campaign's prestart; 0, the default: each when met; 16 or more: all at once)")
    parser.add_argument("--ab-env", metavar="VAR=VALUE",
                        help="one more run on the most GPUs with VAR=VALUE in the workers' environment (e.g. "
                             "BENANZA_BUFFER_CACHE=0), its keys and statuses against that count's run")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "scaling-bench")))
    args = parser.parse_args()
    ab_env: dict[str, str] = {}
    if args.ab_env:
        name, eq, value = args.ab_env.partition("=")
        if not name or not eq:
            parser.error(f"--ab-env takes VAR=VALUE, not {args.ab_env!r}")
        ab_env[name] = value
    try:
        plan_threads = cluster.plan_threads_policy(args.plan_threads)
    except BenanzaError as exc:
        parser.error(str(exc))
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="benanza-scaling-"))
    try:  # "4p1": 4 GPUs with --prestart 1 for this run alone
        specs = (c.partition("p") for c in args.gpus.split(","))
        runs = [(int(g), int(p) if p else args.prestart) for g, _, p in specs]
    except ValueError:
        parser.error(f"--gpus: counts like 4,2,1 or 4p1 (4 GPUs, prestart 1), not {args.gpus!r}")
    try:
        visible = visible_gpus()
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"cluster_scaling.py: cannot list the GPUs with nvidia-smi ({exc})", file=sys.stderr)
        return 1
    counts = [g for g, _ in runs]
    if max(counts) > len(visible):
        print(f"cluster_scaling.py: {max(counts)} GPUs asked for, {len(visible)} visible", file=sys.stderr)
        return 1
    t0 = time.perf_counter()
    build = runner.build(args.project, args.build_dir, jobs=os.cpu_count())
    build_s = time.perf_counter() - t0
    project = args.project if args.sample <= 1 else sampled_project(args.project, args.sample)
    for entry in args.project.iterdir():  # the sample is a project too (`benanza run` checks its CMakeLists.txt)
        if project != args.project and not (project / entry.name).exists():
            (project / entry.name).symlink_to(entry.resolve())
    result: dict[str, Any] = {"project": str(args.project), "sample_every": args.sample, "build_s": build_s,
                              "prestart": args.prestart,
                              "visible_gpus": visible, "plan_threads_option": args.plan_threads, "runs": []}

    def save() -> None:  # after every run: a call cut off mid-campaign keeps what it measured
        (args.out / "scaling.json").write_text(json.dumps(result, indent=1, default=str))

    if args.warm_up:
        warm = one_run(project, build, args.out / "warm_up.db", visible[:max(counts)], plan_threads=plan_threads,
                       prestart=args.prestart)
        result["warm_up"] = {k: warm[k] for k in ("gpus", "wall_s", "phases_s", "other_s", "plans_loaded",
                                                  "plans_kept")}
        save()
        print(f"warm-up on {warm['gpus']} GPU(s): {warm['wall_s']:.1f} s, plan build "
              f"{warm['phases_s']['plan_build']:.1f} GPU-s (not reported)", flush=True)
    for i, (g, prestart) in enumerate(runs):  # a count given twice: the second run is the noise floor
        run = one_run(project, build, args.out / f"gpus{g}_{i}.db", visible[:g], plan_threads=plan_threads,
                      prestart=prestart)
        result["runs"].append(run)
        save()
        tails = " / ".join(f"{t:.1f}" for t in sorted(run["tail_s"].values()))
        print(f"{g} GPU(s): {run['jobs']} jobs in {run['wall_s']:.1f} s (start {run['cluster_start_s']:.1f} s), "
              f"workers idle at the end {tails} s, "
              f"CPUs per worker {run['worker_cpus']}, --plan-threads {run['plan_threads'] or 'default'}, "
              f"plans loaded/kept {run['plans_loaded']}/{run['plans_kept']}, "
              f"errors {run['errors'][:2]}", flush=True)
    base = next((r for r in result["runs"] if r["gpus"] == 1 and r["prestart"] == args.prestart),
                next((r for r in result["runs"] if r["gpus"] == 1), result["runs"][-1]))
    sid = system_of(Path(base["db"]))
    for run in result["runs"]:
        if run is not base:
            run["versus_one_gpu"] = row_check(Path(base["db"]), Path(run["db"]), sid)
    widest = max(result["runs"], key=lambda r: (r["gpus"], r["prestart"] == args.prestart))
    if ab_env:
        ab = one_run(project, build, args.out / "ab_env.db", widest["devices"], plan_threads=plan_threads,
                     prestart=args.prestart, env=ab_env)
        ab["versus_one_gpu"] = row_check(Path(base["db"]), Path(ab["db"]), sid)
        ab["versus_same_gpus"] = row_check(Path(widest["db"]), Path(ab["db"]), sid)
        result["runs"].append(ab)
        save()
        c = ab["versus_same_gpus"]
        print(f"{ab['gpus']} GPU(s) with {_env(ab)}: {ab['jobs']} jobs in {ab['wall_s']:.1f} s (without: "
              f"{widest['wall_s']:.1f} s), keys only left/right {c['only_a']}/{c['only_b']}, statuses differ "
              f"{c['status_differs']}, errors {ab['errors'][:2]}", flush=True)
    if args.kill_after_s:
        kill = one_run(project, build, args.out / "killed.db", widest["devices"], args.kill_after_s, plan_threads,
                       args.prestart)
        kill["versus_same_gpus"] = row_check(Path(widest["db"]), Path(kill["db"]), sid)
        kill["wall_cost_s"] = kill["wall_s"] - widest["wall_s"]
        result["killed_run"] = kill
        save()
        c = kill["versus_same_gpus"]
        print(f"\nworker {kill['killed'].get('address')} SIGKILLed at {kill['killed'].get('at_s', 0):.1f} s: "
              f"{kill['jobs']} jobs, {kill['completed_jobs_rows']} completed_jobs rows, duplicates measured "
              f"{kill['duplicates']} (written once), keys only left/right {c['only_a']}/{c['only_b']}, statuses "
              f"differ {c['status_differs']}, integrity {kill['integrity_check']}, restarts {kill['restarts']}, "
              f"wall {kill['wall_s']:.1f} s ({kill['wall_cost_s']:+.1f} s against the run without the kill), "
              f"errors {kill['errors'][:2]}", flush=True)
    if args.scheduler_file:
        sf = scheduler_file_run(project, build, args.out / "scheduler_file.db", widest["devices"], work)
        if sf["rc"] == 0:
            sf["versus_local"] = row_check(Path(widest["db"]), Path(sf["db"]), sid)
        result["scheduler_file_run"] = sf
        print(f"\n--scheduler-file, client without a GPU: rc {sf['rc']}, {sf['wall_s_with_worker_start']:.1f} s "
              f"(workers' start included); rows vs --cluster local: {sf.get('versus_local')}\n"
              f"{sf['output_tail'][-1500:]}", flush=True)
    save()
    print(f"\nbuild {build_s:.0f} s; {base['jobs']} jobs per run" + (f" (every {args.sample}th job)" if args.sample > 1
                                                                      else ""))
    print_table(sorted(result["runs"], key=lambda r: r["gpus"]), base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
