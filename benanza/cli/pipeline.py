"""``benanza pipeline``: generate + build + run (+ analyze) in one command; with ``--profile-with``,
profile + generate + build + run + analyze: an unseen model's first answer from one command."""

from __future__ import annotations

import json
from pathlib import Path

import click
from sqlite_utils import Database

from benanza.cli.main import console, err_console, friendly_errors, main
from benanza.cli.options import CheckedPath, ExistingPath, build_cache_option, parse_precisions, seq_len_option
from benanza.cli.profile import FRAMEWORKS
from benanza.cli.progress import build, generate, measuring, working
from benanza.cli.run import cluster_options, run_on_cluster, summary_table
from benanza.errors import BenanzaError
from benanza.library import L2
from benanza.measure import runner, system
from benanza.plain_text import line, plain
from benanza.profile.capture import Phases
from benanza.report import print_report
from benanza.store import db as perfdb
from benanza.store.db import DatabaseSink
from benanza.workflows.analysis import analyze_model


@main.command("pipeline")
@click.argument("model", type=ExistingPath(path_type=Path))
@click.option("--db", "db_path", required=True, type=CheckedPath(dir_okay=False, path_type=Path),
              help="Performance database to fill (created if needed).")
@click.option("--batch", type=click.IntRange(min=1), help="Batch size (default: the model's own).")
@seq_len_option
@click.option("--dtype", "dtypes", default="fp32,tf32,fp16", show_default=True, help="Precisions to benchmark.")
@click.option("--project-dir", type=CheckedPath(file_okay=False, path_type=Path), default=Path("benanza-project"),
              show_default=True, help="Where the generated benchmark project goes.")
@click.option("--timeout", "timeout_s", type=float, default=300.0, show_default=True, help="Seconds per job.")
@click.option("-j", "--build-jobs", type=click.IntRange(min=1), help="Parallel compile jobs.")
@click.option("--profile", "bundle", type=CheckedPath(file_okay=False, path_type=Path),
              help="Also analyze against this profile bundle (a single MODEL file).")
@click.option("--profile-with", "profile_with", type=click.Choice(sorted(FRAMEWORKS)),
              help="First profile MODEL (one file) in this framework, at --batch (default 1) in the first --dtype, "
                   "into PROJECT_DIR-bundle; measure the calls it logged beside the plan (PROJECT_DIR-executed) and "
                   "analyze against it. Needs a GPU here (no --cluster).")
@click.option("--timings", type=CheckedPath(dir_okay=False, path_type=Path),
              help="Also write the seconds each step took, and the measuring steps' timed GPU seconds, as JSON.")
@build_cache_option
@cluster_options
@friendly_errors
def pipeline_cmd(model: Path, db_path: Path, batch: int | None, seq_len: int | None, dtypes: str, project_dir: Path,
                 timeout_s: float, build_jobs: int | None, bundle: Path | None, profile_with: str | None,
                 timings: Path | None, cluster: str | None, scheduler_file: Path | None, shard_jobs: int | None,
                 no_build_cache: bool) -> None:
    """generate + build + run (+ analyze) in one command.

    Without a usable GPU it says so in one line and stops after the build (with --profile-with, before
    anything runs). Each measuring step shows a bar with the jobs done and an estimate of the time left;
    at the end one line says where the time went.
    """
    clock = StepClock(timings)
    _pipeline(model, db_path, batch, seq_len, dtypes, project_dir, timeout_s, build_jobs, bundle, profile_with,
              cluster, scheduler_file, shard_jobs, no_build_cache, clock)
    clock.report()  # a failed step says only its one line


class StepClock:
    """Seconds per step of one pipeline (and the timed GPU seconds of its measuring steps: what the GPU
    itself needed), said in one line at the end and written to ``--timings``."""

    def __init__(self, path: Path | None) -> None:
        self.path, self.phases, self.timed_gpu_s = path, Phases(), 0.0

    def lap(self, step: str) -> None:
        self.phases.lap(step)

    def report(self) -> None:
        times = self.phases.times
        if not times:
            return
        total = sum(times.values())
        err_console.print(line(f"pipeline {total:.1f} s: " + ", ".join(f"{k} {v:.1f} s" for k, v in times.items())
                               + f" (timed GPU work {self.timed_gpu_s:.1f} s)"), highlight=False, soft_wrap=True)
        if self.path is not None:
            self.path.write_text(json.dumps({"steps_s": times, "total_s": round(total, 3),
                                             "timed_gpu_s": round(self.timed_gpu_s, 3)}, indent=1))


def measure(project: Path, db: Database, timeout_s: float, fingerprint: dict, step: str,
            clock: StepClock) -> runner.RunSummary:
    """Run one built project into ``db`` under a bar naming ``step``."""
    warm = L2.WARM.value
    total = sum(len(j) for j in runner.jobs_to_run(runner.manifest_jobs(runner.load_manifest(project), warm),
                                                  warm).values())
    with measuring(f"{step}: {project.name}", total) as bar:
        summary = runner.run(project, DatabaseSink(db), timeout_s=timeout_s, system=fingerprint, progress=bar)
    clock.timed_gpu_s += bar.timed_gpu_s
    clock.lap(step)
    return summary


def _pipeline(model: Path, db_path: Path, batch: int | None, seq_len: int | None, dtypes: str, project_dir: Path,
              timeout_s: float, build_jobs: int | None, bundle: Path | None, profile_with: str | None,
              cluster: str | None, scheduler_file: Path | None, shard_jobs: int | None, no_build_cache: bool,
              clock: StepClock) -> None:
    models = sorted(model.glob("*.onnx")) if model.is_dir() else [model]
    if not models:
        raise BenanzaError(f"{model}: no *.onnx files")
    precisions = tuple(p.value for p in parse_precisions(dtypes))
    if profile_with:
        batch = batch or 1
        bundle = profile_first(model, profile_with, batch, precisions[0], seq_len, project_dir, bundle,
                               bool(cluster or scheduler_file))
        clock.lap("profile")
    project = generate(models, project_dir, precisions, batch, seq_len=seq_len)
    clock.lap("generate")
    build(project, jobs=build_jobs, cache=False if no_build_cache else None)
    console.print(plain(f"built {project}"), highlight=False)
    clock.lap("build")
    if cluster or scheduler_file:  # the cluster's workers measure; this process writes --db
        if not run_on_cluster([project], db_path, cluster, scheduler_file, timeout_s=timeout_s,
                              shard_jobs=shard_jobs):
            raise SystemExit(1)
        if bundle is not None and model.is_file():
            report, _ = analyze_model(model, db_path, bundle, batch=batch, seq_len=seq_len)
            print_report(report, console)
        return
    fingerprint = system.fingerprint(bandwidth=True)
    if not fingerprint.get("usable"):
        err_console.print(plain(f"no usable NVIDIA GPU ({fingerprint.get('reason', 'unknown reason')}): "
                                "stopping after the build"), highlight=False)
        return
    db = perfdb.open_db(db_path)
    clock.lap("system fingerprint")
    summary = measure(project, db, timeout_s, fingerprint, "measure the plan", clock)
    console.print(summary_table(summary, str(project)))
    if profile_with and bundle is not None:  # the library calls the framework ran, where the plan lacks them
        executed = generate_executed(model, bundle, db_path, project_dir.with_name(f"{project_dir.name}-executed"))
        if executed is not None:
            build(executed, jobs=build_jobs, cache=False if no_build_cache else None)
        clock.lap("generate and build the profile's calls")
        if executed is not None:
            done = measure(executed, db, timeout_s, fingerprint, "measure the profile's calls", clock)
            console.print(summary_table(done, str(executed)))
    if bundle is not None and model.is_file():
        with working(f"analyzing {model.name} against {db_path}"):
            report, _ = analyze_model(model, db_path, bundle, batch=batch, seq_len=seq_len)
        clock.lap("analyze")
        print_report(report, console)


def profile_first(model: Path, framework: str, batch: int, precision: str, seq_len: int | None, project_dir: Path,
                  given: Path | None, on_cluster: bool) -> Path:
    """``--profile-with``: the bundle of MODEL's run in ``framework`` (checked before anything is generated)."""
    from benanza.profile.capture import capture

    if given is not None:
        raise BenanzaError("--profile-with captures its own bundle: give it or --profile, not both")
    if not model.is_file():
        raise BenanzaError(f"{model}: --profile-with profiles one model file, not a directory")
    if on_cluster:
        raise BenanzaError("--profile-with profiles and measures on this machine's GPU: leave out --cluster and "
                           "--scheduler-file")
    bundle = project_dir.with_name(f"{project_dir.name}-bundle")
    if bundle.exists() and (not bundle.is_dir() or any(bundle.iterdir())):
        raise BenanzaError(f"{bundle}: an earlier --profile-with run's bundle is there: remove it, or analyze "
                           "against it with --profile instead")
    info = system.fingerprint()
    if not info.get("usable"):
        raise BenanzaError(f"--profile-with needs a usable NVIDIA GPU here ({info.get('reason', 'unknown reason')})")
    with working(f"profiling {model} in {framework} (batch {batch}, {precision}) into {bundle}"):
        capture(model, FRAMEWORKS[framework].value, batch, precision, bundle, seq_len=seq_len)
    console.print(plain(f"profiled {model} in {framework} into {bundle}"), highlight=False)
    return bundle


def generate_executed(model: Path, bundle: Path, db_path: Path, out: Path) -> Path | None:
    """The project of the library calls ``bundle`` logged that ``db_path`` lacks; None when it holds them all."""
    from benanza.store.systems import skip_predicate
    from benanza.workflows.measure import generate_executed_project

    with working(f"generating the calls {bundle} logged into {out}"):
        return generate_executed_project(model, (bundle,), out, skip_predicate(db_path, None))
