"""Run a benchmark campaign and say where its time went: the instrument for campaign speed (issue 17).

    # generate, build and run the zoo at four batches in three precisions, every API and engine config
    .venv/bin/python bench/campaign.py out/zoo-project --db out/zoo.db \\
        --generate models/zoo --batch 1,8,64,256 --dtype fp32,tf32,fp16 --json out/campaign.json

    # an already generated project (built here if it is not)
    .venv/bin/python bench/campaign.py PROJECT --db perf.db [--max-engines N] [--l2 warm]

    # every 40th job of each executable, with other harness settings: the whole campaign's wall
    # estimated as 40 x each executable's jobs plus its process start once (what a timing policy
    # costs, before running it all)
    .venv/bin/python bench/campaign.py PROJECT --db sample.db --sample 40 --harness "--launch-ms 0.25"

Prints, per executable and overall: jobs, jobs/s, the GPU seconds of the timed repetitions against
the wall seconds (campaign efficiency), the time per phase, and the slowest jobs. The phases:

  generate, build       benanza generate and the CMake/Ninja build (campaign-wide);
  process start         an executable's start to its system line (CUDA context);
  handles               cuDNN/cuBLAS handle creation (once per process);
  plan build            the GPU thread waiting for graph-API execution plans (built on host threads
                        ahead of it: harness "plan_wait"; older harnesses: the results' notes.build_ms);
  host prep             the GPU thread's time on a graph-API job's host work (its operation graph,
                        heuristics, the start of its plan builds): waiting for it when a host thread
                        did it during the job before, doing it itself with --plan-threads 0 (harness
                        "prep_wait"; the work's own time is "host_prep", the part of it hidden behind
                        the job before is printed below the table);
  setup                 the rest of a job before timing: descriptors, the fp32 reference,
                        heuristics / find (harness "setup" minus plan build);
  alloc                 the job's device allocations and frees (harness "alloc"; BufferCache keeps
                        a job's buffers for the next; an older harness counted them in setup);
  warm-up, timed        Context::measure before and during the timed repetitions (timed GPU apart);
  check                 comparing outputs with the reference;
  db write              the runner recording the job's rows;
  other                 the rest of the wall time (reading lines, between jobs, process exits).

The phase times come from the harness's end lines (csrc/benanza/bench.h PhaseClock) and the
runner (JobOutcome.phases); executables built before those print none (then only process start,
db write and other are known). Results: docs/RESULTS.md §7.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benanza.library import L2
from benanza.measure import runner
from benanza.measure.campaign import JOB_PHASES, PHASE_LABELS, harness_options, job_phases, sampled_project, scaled_wall
from benanza.store import db as perfdb
from benanza.store.db import DatabaseSink

PHASES = (*JOB_PHASES, "other")
LABELS = PHASE_LABELS


class Enough(Exception):
    """Raised from the progress callback when --time-limit is reached (the job is already recorded)."""


class Recorder:
    """The runner's progress callback: each job's outcome, phases and wall time (between outcomes)."""

    def __init__(self, stop_at: float | None = None) -> None:
        self.jobs: list[dict[str, Any]] = []
        self.last = time.perf_counter()
        self.stop_at = stop_at

    def __call__(self, outcome: runner.JobOutcome, _summary: runner.RunSummary) -> None:
        self._record(outcome)
        if self.stop_at is not None and time.perf_counter() > self.stop_at:
            raise Enough

    def _record(self, outcome: runner.JobOutcome) -> None:
        now = time.perf_counter()
        wall_s, self.last = now - self.last, now
        if outcome.status == "skipped":
            return
        p = dict(outcome.phases)
        phases = job_phases(p, outcome.results)
        phases["other"] = max(0.0, wall_s * 1e3 - sum(phases.values()))
        coarse = sum(1 for r in outcome.results if isinstance(r.notes, dict) and r.notes.get("coarse"))
        self.jobs.append({"executable": outcome.job.executable, "job": outcome.job.index,
                          "layer_key": outcome.job.key.layer_key, "dtype": outcome.job.key.dtype,
                          "status": outcome.status, "results": len(outcome.results), "coarse": coarse,
                          "wall_s": wall_s,
                          "timed_gpu_s": p.get("timed_gpu", 0.0) / 1e3,
                          # host work done ahead of the job, on another thread (harness "host_prep"), and
                          # the part of it the GPU thread did not wait for
                          "host_prep_s": p.get("host_prep", 0.0) / 1e3,
                          "hidden_host_s": max(0.0, p.get("host_prep", 0.0) - p.get("prep_wait", 0.0)) / 1e3,
                          # the GPU time of its input fills and fp32 reference (graph API), part of setup
                          "inputs_gpu_s": p.get("inputs_gpu", 0.0) / 1e3,
                          "phases_s": {k: v / 1e3 for k, v in
                                                                                   phases.items()}})


def totals(jobs: list[dict[str, Any]]) -> dict[str, Any]:
    wall = sum(j["wall_s"] for j in jobs)
    gpu = sum(j["timed_gpu_s"] for j in jobs)
    return {"jobs": len(jobs), "results": sum(j["results"] for j in jobs),
            "coarse_results": sum(j["coarse"] for j in jobs), "wall_s": wall, "timed_gpu_s": gpu,
            "jobs_per_s": len(jobs) / wall if wall else 0.0, "efficiency": gpu / wall if wall else 0.0,
            "phases_s": {p: sum(j["phases_s"][p] for j in jobs) for p in PHASES},
            "host_prep_s": sum(j.get("host_prep_s", 0.0) for j in jobs),
            "hidden_host_s": sum(j.get("hidden_host_s", 0.0) for j in jobs),
            "inputs_gpu_s": sum(j.get("inputs_gpu_s", 0.0) for j in jobs),
            "max_job_s": max((j["wall_s"] for j in jobs), default=0.0)}


def print_report(per_exe: dict[str, dict[str, Any]], overall: dict[str, Any], campaign: dict[str, float],
                 slowest: list[dict[str, Any]]) -> None:
    head = f"{'executable':<20} {'jobs':>6} {'jobs/s':>7} {'GPU s':>8} {'wall s':>8} {'eff':>5} {'max job':>8}"
    print(head + "".join(f" {LABELS.get(p, p):>13}" for p in PHASES))
    for name, t in [*sorted(per_exe.items()), ("overall", overall)]:
        print(f"{name:<20} {t['jobs']:>6} {t['jobs_per_s']:>7.2f} {t['timed_gpu_s']:>8.1f} {t['wall_s']:>8.1f} "
              f"{t['efficiency']:>5.0%} {t['max_job_s']:>8.1f}" + "".join(f" {t['phases_s'][p]:>13.1f}"
                                                                        for p in PHASES))
    if overall["host_prep_s"]:
        print(f"graph-API host work (operation graphs, heuristics, plan-build starts): {overall['host_prep_s']:.1f} s, "
              f"of which {overall['hidden_host_s']:.1f} s hidden behind the job before (done on another thread); "
              f"GPU time of their inputs and fp32 references: {overall['inputs_gpu_s']:.1f} s")
    if campaign:
        print("campaign: " + ", ".join(f"{k} {v:.1f} s" for k, v in campaign.items()))
    print(f"results: {overall['results']}, of which timed coarsely (--race / --job-budget-s): "
          f"{overall['coarse_results']}")
    print(f"slowest {len(slowest)} jobs:")
    for j in slowest:
        top = max(j["phases_s"], key=j["phases_s"].get)
        print(f"  {j['wall_s']:7.2f} s  {j['executable']} job {j['job']} ({j['dtype']}, {j['results']} results, "
              f"{j['status']}; most in {LABELS.get(top, top)}: {j['phases_s'][top]:.2f} s)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("project", type=Path, help="generated benchmark project (written with --generate)")
    parser.add_argument("--db", type=Path, required=True, help="performance database to fill")
    parser.add_argument("--generate", type=Path, metavar="MODELS", help="benanza generate MODELS into PROJECT first")
    parser.add_argument("--batch", default="1", help="with --generate: comma-separated batch sizes")
    parser.add_argument("--dtype", default="fp32", help="with --generate: comma-separated precisions")
    parser.add_argument("--api", help="with --generate: comma-separated APIs (default all)")
    parser.add_argument("--l2", default=L2.WARM.value, choices=[x.value for x in L2])
    parser.add_argument("--max-engines", type=int, help="engine configs per graph-API job (default: every one)")
    parser.add_argument("--max-reps", type=int)
    parser.add_argument("--race", type=float,
                        help="harness --race R: time coarsely what is estimated >= R x the job's best (0: off; "
                             "default: the harness's, 1.5)")
    parser.add_argument("--job-budget-s", type=float,
                        help="harness --job-budget-s S: past S s a job's remaining algorithms are timed coarsely "
                             "(0: off; default: the harness's, 4)")
    parser.add_argument("--plan-threads", type=int,
                        help="harness --plan-threads N: graph-API plans built on N host threads, and each job's "
                             "host work done during the job before (default: the harness's, the CPUs it may run "
                             "on - 1; 0: all on the GPU thread, in order)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds of silence before a job is killed")
    parser.add_argument("--build-jobs", type=int)
    parser.add_argument("--force", action="store_true", help="re-run jobs the database already holds")
    parser.add_argument("--slowest", type=int, default=15)
    parser.add_argument("--time-limit", type=float, metavar="S",
                        help="stop after the job that ends past S seconds of running (report what ran; a later "
                             "call resumes: completed jobs are skipped)")
    parser.add_argument("--json", type=Path, help="write every job's times and the totals here")
    parser.add_argument("--sample", type=int, default=1, metavar="N",
                        help="run every N-th job of each executable and also print the whole campaign's "
                             "estimate (N x each executable's jobs, its process start once)")
    parser.add_argument("--sample-offset", type=int, default=0, metavar="K",
                        help="with --sample N: start from each executable's K-th job (another, disjoint sample)")
    parser.add_argument("--harness", default="", metavar="ARGS",
                        help="more harness options, as one string (e.g. \"--launch-ms 0.25 --slow-call-ms 1\")")
    args = parser.parse_args()

    campaign: dict[str, float] = {}
    started = time.perf_counter()
    if args.generate:
        t0 = time.perf_counter()
        command = [sys.executable, "-m", "benanza", "generate", str(args.generate), "--batch", args.batch,
                   "--dtype", args.dtype, "--out", str(args.project)] + (["--api", args.api] if args.api else [])
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        campaign["generate"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    build = runner.build(args.project, jobs=args.build_jobs)
    campaign["build"] = time.perf_counter() - t0
    recorder = Recorder(None if args.time_limit is None else time.perf_counter() + args.time_limit)
    try:
        run_dir = args.project if args.sample <= 1 else sampled_project(args.project, args.sample,
                                                                          args.sample_offset)
        summary = runner.run(run_dir, DatabaseSink(perfdb.open_db(args.db)), timeout_s=args.timeout, force=args.force,
                             l2=args.l2, progress=recorder, build_dir=build, max_reps=args.max_reps,
                             max_engines=args.max_engines,
                             harness_args=harness_options(args.race, args.job_budget_s,
                                                          args.plan_threads) + shlex.split(args.harness))
    except Enough:
        summary = None
        print(f"--time-limit {args.time_limit:g} s reached: stopped after {len(recorder.jobs)} jobs")
    campaign["run"] = time.perf_counter() - t0 - campaign["build"]
    campaign["total"] = time.perf_counter() - started
    by_exe: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for j in recorder.jobs:
        by_exe[j["executable"]].append(j)
    per_exe = {name: totals(jobs) for name, jobs in by_exe.items()}
    overall = totals(recorder.jobs)
    slowest = sorted(recorder.jobs, key=lambda j: -j["wall_s"])[:args.slowest]
    print_report(per_exe, overall, campaign, slowest)
    if args.sample > 1:
        walls = {name: scaled_wall(t, args.sample) for name, t in per_exe.items()}
        gpu, wall = overall["timed_gpu_s"] * args.sample, sum(walls.values())
        print(f"whole campaign estimated from this 1/{args.sample} sample: run {wall:.0f} s wall, {gpu:.0f} s "
              f"timed GPU (efficiency {gpu / wall if wall else 0:.0%}); per executable: "
              + ", ".join(f"{name} {w:.0f} s" for name, w in sorted(walls.items(), key=lambda kv: -kv[1])))
    if summary is not None:
        print(f"runner: {summary.ran} jobs ran, {summary.skipped} skipped, {summary.results} results, "
              f"{summary.crashed} crashed, {summary.timeout} timed out; errors: {summary.errors or 'none'}")
    if args.json:
        args.json.write_text(json.dumps({"sample_every": args.sample, "sample_offset": args.sample_offset,
                                         "campaign_s": campaign, "overall": overall,
                                         "executables": per_exe, "jobs": recorder.jobs}, indent=1) + "\n")
    return 0 if summary is None or not summary.errors else 1


if __name__ == "__main__":
    sys.exit(main())
