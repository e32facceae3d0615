"""``benanza run``: build generated benchmark projects and measure them into a performance database."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from benanza.cli.generate import parse_apis
from benanza.cli.main import friendly_errors, main
from benanza.cli.options import (
    CheckedPath,
    ExistingPath,
    build_cache_option,
    max_engines_option,
    parse_precisions,
    seq_len_option,
)
from benanza.cli.progress import ConsoleProgress
from benanza.errors import BenanzaError
from benanza.library import L2, Precision
from benanza.measure import runner
from benanza.measure.cluster import MAX_SHARD_JOBS
from benanza.workflows import measure


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
@max_engines_option
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
    if db_path.suffix == ".xz":
        raise BenanzaError(f"{db_path}: a compressed database is read-only; measure into a .db file "
                           "(e.g. --db perf.db)")
    projects, models = classify(inputs)
    apis = parse_apis(api_list)
    if build_dir and len(projects) + bool(models) > 1:
        raise BenanzaError(f"{build_dir}: --build-dir needs exactly one project, got {len(projects)}")
    progress = ConsoleProgress(bars=True, errors=True,
                               title=lambda project, summary: f"{project} on system {summary.system_id}")
    summaries = measure.measure(projects, models, db_path, precisions, batch, project_dir, progress, cluster,
                                scheduler_file, shard_jobs, build_dir, build_jobs, False if no_build_cache else None,
                                apis=apis, seq_len=seq_len, timeout_s=timeout_s, force=force, l2=l2,
                                max_reps=max_reps, max_engines=max_engines)
    if measure.failed(summaries):
        raise SystemExit(1)
