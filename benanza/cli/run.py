"""``benanza run``: build generated benchmark projects and measure them into a performance database."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from benanza.cli.generate import parse_apis
from benanza.cli.main import console, friendly_errors, main
from benanza.cli.options import CheckedPath, ExistingPath, build_cache_option, parse_precisions, seq_len_option
from benanza.cli.progress import build, generate, measuring
from benanza.errors import BenanzaError
from benanza.library import L2, Precision
from benanza.measure import cluster, runner, system
from benanza.measure.cluster import MAX_SHARD_JOBS, CampaignSummary
from benanza.plain_text import labelled, plain
from benanza.store import db as perfdb
from benanza.store.db import DatabaseSink

# Summary rows: label -> RunSummary field (jobs first, then the results' own statuses).
SUMMARY_ROWS = (
    ("jobs in manifest", "jobs"), ("skipped (already measured)", "skipped"),
    ("left out (no weights: their warm rows stand for them)", "weightless"), ("ran", "ran"),
    ("completed", "completed"), ("harness errors", "job_errors"), ("crashed", "crashed"), ("timed out", "timeout"),
    ("garbage output", "garbage"),
    ("restarts", "restarts"), ("results stored", "results"), ("ok", "ok"), ("unsupported", "not_supported"),
    ("out of memory", "out_of_memory"), ("failed", "failed"), ("check failed", "check_failed"),
)  # fmt: skip
ONLY_IF_ANY = frozenset({"weightless"})  # only --l2 cold-weights leaves jobs out


def classify(inputs: tuple[Path, ...]) -> tuple[list[Path], list[Path]]:
    """Split the inputs into generated project directories and ONNX models."""
    projects, models = [], []
    for path in inputs:
        if path.is_dir():
            if not (path / runner.MANIFEST).is_file():
                raise BenanzaError(f"{path}: not a generated benchmark project (no {runner.MANIFEST})")
            projects.append(path)
        elif path.suffix == ".onnx":
            models.append(path)
        else:
            raise BenanzaError(f"{path}: neither a generated project directory nor an .onnx model")
    return projects, models


def summary_table(summary: runner.RunSummary, title: str) -> Table:
    table = Table("", "count", title=plain(title))
    for label, name in SUMMARY_ROWS:
        if name not in ONLY_IF_ANY or getattr(summary, name):
            table.add_row(label, str(getattr(summary, name)))
    return table


def cluster_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--cluster, --scheduler-file and --shard-jobs (run, pipeline, quickstart)."""
    command = click.option("--shard-jobs", type=int,
                           help="Jobs per Dask work unit (default: about four units per GPU, at most "
                                f"{MAX_SHARD_JOBS}).")(command)
    command = click.option("--scheduler-file", type=CheckedPath(dir_okay=False, path_type=Path),
                           help="Join the Dask cluster whose scheduler wrote this file "
                                "(dask scheduler --scheduler-file).")(command)
    return click.option("--cluster", metavar="ADDRESS|local",
                        help="Run on a Dask cluster: 'local' starts one worker per visible GPU (dask-cuda); an "
                             "address (tcp://host:8786) joins a running scheduler. Needs benanza[dask].")(command)


def worker_table(summary: CampaignSummary, title: str) -> Table:
    """One row per worker (one GPU): its system (id prefix, as ``analyze --system`` takes it) and its jobs."""
    table = Table(title=title)
    for header in ("worker", "host", "GPU", "system"):
        table.add_column(header, no_wrap=True)
    for header in ("ran", "ok", "crashed", "timeout", "garbage", "restarts", "results"):
        table.add_column(header, justify="right")
    for name, report in sorted(summary.workers.items()):
        s = report.summary
        table.add_row(escape(name), escape(report.host), escape(report.gpu), report.system_id[:8], str(s.ran),
                      str(s.completed), str(s.crashed), str(s.timeout), str(s.garbage), str(s.restarts),
                      str(s.results))
    return table


def run_on_cluster(projects: list[Path], db_path: Path, address: str | None, scheduler_file: Path | None,
                   build_dir: Path | None = None, build_jobs: int | None = None, build_cache: bool | None = None,
                   **options: Any) -> bool:
    """Build each project here and run it on a Dask cluster into ``db_path`` (written by this process
    only); prints a summary per project and per worker. True when every executable could run."""
    cluster.require_dask(local=address == "local")  # before building anything
    dask = cluster.connect(address, scheduler_file)  # no GPU or no scheduler: said before a long build
    failed = False
    try:
        db = perfdb.open_db(db_path)
        built = [(project, build(project, build_dir, build_jobs, build_cache)) for project in projects]
        for project, out in built:
            with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("{task.fields[last]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                          console=console) as bar:
                task = bar.add_task(f"{project.name} (probing workers)", total=None, last="")

                def planned(total: int, task: int = task, name: str = project.name) -> None:
                    bar.update(task, total=total, description=name)

                def advance(outcome: runner.JobOutcome, worker: cluster.WorkerReport, task: int = task) -> None:
                    bar.update(task, advance=1, last=escape(f"{worker.name}: {outcome.job.executable}"
                                                            f"#{outcome.job.index} {outcome.status}"))

                summary = cluster.run_campaign(project, DatabaseSink(db), dask.client, build_dir=out, progress=advance,
                                               on_planned=planned, **options)
            console.print(summary_table(summary.total, f"{project} on {len(summary.systems)} system(s), "
                                                       f"{summary.shards} shards"))
            console.print(worker_table(summary, "per worker (one GPU each)"))
            for error in summary.errors:
                console.print(f"[bold red]error:[/] {escape(error)}", highlight=False, soft_wrap=True)
            failed = failed or bool(summary.errors)
    finally:
        dask.close()
    return not failed


@main.command("run")
@click.argument("inputs", metavar="DIR_OR_MODEL...", nargs=-1, required=True,
                type=ExistingPath(path_type=Path))
@click.option("--db", "db_path", required=True, type=CheckedPath(dir_okay=False, path_type=Path),
              help="Performance database to write (created if needed).")
@click.option("--timeout", "timeout_s", default=120.0, show_default=True, type=float,
              help="Seconds a job may go without printing a result before its executable is killed and the job "
                   "recorded as timeout.")
@click.option("--force", is_flag=True, help="Re-run jobs the database already holds and replace their rows.")
@click.option("--l2", type=click.Choice([x.value for x in L2]), default=L2.WARM.value, show_default=True,
              help="warm: inputs stay in L2 (the lower bound); cold: L2 flushed by a write before each "
                   "repetition of one call, timed by its kernels' CUPTI durations; "
                   "cold-weights: activations warm, each call's weights cold (a ring of copies), calls back to "
                   "back, as a framework runs at small batches (only the APIs with weights run: convolutions "
                   "and GEMMs).")
@click.option("--build-dir", type=CheckedPath(file_okay=False, path_type=Path),
              help="Build directory (one project only; default DIR/build).")
@click.option("--dtype", "dtypes", multiple=True, default=(Precision.FP32.value,), show_default=True,
              help="Precisions to benchmark ONNX models in: comma-separated and/or repeated (e.g. fp32,tf32).")
@click.option("--batch", type=click.IntRange(min=1), help="Batch size for ONNX models (default: the model's own).")
@seq_len_option
@click.option("--project-dir", type=CheckedPath(file_okay=False, path_type=Path), default=Path("benanza-project"),
              show_default=True, help="Where the project generated for ONNX models goes.")
@click.option("-j", "--build-jobs", type=int, help="Parallel compile jobs.")
@click.option("--max-reps", type=int, help="Cap on timed repetitions per benchmark (passed to the executables).")
@click.option("--max-engines", type=int,
              help="Cap on graph-API engine configs measured per job (default: every one the heuristics offer).")
@click.option("--api", "api_list", help="Comma-separated APIs to generate for ONNX models (e.g. conv_fwd); "
                                        "default all, with the system ceilings.")
@build_cache_option
@cluster_options
@friendly_errors
def run_cmd(inputs: tuple[Path, ...], db_path: Path, timeout_s: float, force: bool, l2: str,
            build_dir: Path | None, dtypes: tuple[str, ...], batch: int | None, seq_len: int | None, project_dir: Path,
            build_jobs: int | None, max_reps: int | None, max_engines: int | None, cluster: str | None,
            scheduler_file: Path | None, shard_jobs: int | None, api_list: str | None, no_build_cache: bool) -> None:
    """Build each generated project DIR (or generate one for the .onnx MODELs given) and run
    its benchmarks into --db.

    Jobs the database already holds for this system are skipped (a killed run resumes
    where it stopped). A job that crashes, hangs or prints garbage is recorded as such
    and its executable restarted with the jobs it did not reach.

    The executables race a job's algorithms (their defaults: --race 1.3 --job-budget-s 4):
    one clearly slower than the best so far keeps a coarse median (notes.coarse); run an
    executable with --race 0 --job-budget-s 0 to time every algorithm fully (docs/GENERATOR.md).

    With --cluster or --scheduler-file the jobs run on the GPUs of a Dask cluster (one
    worker per GPU), each worker's system separately, and this process alone writes --db.
    """
    precisions = tuple(p.value for p in parse_precisions(dtypes))
    cache = False if no_build_cache else None
    if db_path.suffix == ".xz":
        raise BenanzaError(f"{db_path}: a compressed database is read-only; measure into a .db file "
                           "(e.g. --db perf.db)")
    projects, models = classify(inputs)
    apis = parse_apis(api_list)
    if build_dir and len(projects) + bool(models) > 1:
        raise BenanzaError(f"{build_dir}: --build-dir needs exactly one project, got {len(projects)}")
    if cluster or scheduler_file:
        if models:
            projects.append(generate(models, project_dir, precisions, batch, apis=apis, seq_len=seq_len))
        if not run_on_cluster(projects, db_path, cluster, scheduler_file, build_dir=build_dir,
                              build_jobs=build_jobs, build_cache=cache, timeout_s=timeout_s, force=force, l2=l2,
                              max_reps=max_reps, max_engines=max_engines, shard_jobs=shard_jobs):
            raise SystemExit(1)
        return
    fingerprint = system.fingerprint(bandwidth=True)
    if not fingerprint["usable"]:
        raise BenanzaError(f"no usable NVIDIA GPU ({fingerprint['reason']}); nothing was built, run or written")
    if models:
        projects.append(generate(models, project_dir, precisions, batch, apis=apis, seq_len=seq_len))
    db = perfdb.open_db(db_path)
    failed = False
    for project in projects:
        out = build(project, build_dir, build_jobs, cache)
        jobs = runner.jobs_to_run(runner.manifest_jobs(runner.load_manifest(project), l2), l2)
        total = sum(len(j) for j in jobs.values())
        with measuring(project.name, total) as advance:
            summary = runner.run(project, DatabaseSink(db), timeout_s=timeout_s, force=force, l2=l2, progress=advance,
                                 build_dir=out, system=fingerprint, max_reps=max_reps,
                                 max_engines=max_engines)
        console.print(summary_table(summary, f"{project} on system {summary.system_id}"))
        for error in summary.errors:
            console.print(labelled("error:", "bold red", error), highlight=False, soft_wrap=True)
        failed = failed or bool(summary.errors)
    if failed:
        raise SystemExit(1)
