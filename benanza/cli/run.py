"""``benanza run``: build generated benchmark projects and measure them into a performance database."""

from __future__ import annotations

from pathlib import Path

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from benanza import db as perfdb
from benanza import runner, system
from benanza.cli.main import console, friendly_errors, main
from benanza.errors import BenanzaError
from benanza.library import L2, Precision
from benanza.pipeline import generate_project

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
    table = Table("", "count", title=title)
    for label, name in SUMMARY_ROWS:
        if name not in ONLY_IF_ANY or getattr(summary, name):
            table.add_row(label, str(getattr(summary, name)))
    return table


@main.command("run")
@click.argument("inputs", metavar="DIR_OR_MODEL...", nargs=-1, required=True,
                type=click.Path(exists=True, path_type=Path))
@click.option("--db", "db_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Performance database to write (created if needed).")
@click.option("--timeout", "timeout_s", default=120.0, show_default=True, type=float,
              help="Seconds a job may go without printing a result before its executable is killed and the job "
                   "recorded as timeout.")
@click.option("--force", is_flag=True, help="Re-run jobs the database already holds and replace their rows.")
@click.option("--l2", type=click.Choice([x.value for x in L2]), default=L2.WARM.value, show_default=True,
              help="warm: inputs stay in L2 (the lower bound); cold: L2 flushed before each repetition; "
                   "cold-weights: activations warm, each call's weights cold (a ring of copies), calls back to "
                   "back, as a framework runs at small batches (only the APIs with weights run: convolutions "
                   "and GEMMs).")
@click.option("--build-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Build directory (one project only; default DIR/build).")
@click.option("--dtype", "dtypes", multiple=True, type=click.Choice([p.value for p in Precision]),
              default=(Precision.FP32.value,), show_default=True, help="Precisions to benchmark ONNX models in.")
@click.option("--batch", type=int, help="Batch size for ONNX models (default: the model's own).")
@click.option("--project-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("benanza-project"),
              show_default=True, help="Where the project generated for ONNX models goes.")
@click.option("-j", "--build-jobs", type=int, help="Parallel compile jobs.")
@click.option("--max-reps", type=int, help="Cap on timed repetitions per benchmark (passed to the executables).")
@click.option("--max-engines", type=int,
              help="Cap on graph-API engine configs measured per job (default: every one the heuristics offer).")
@friendly_errors
def run_cmd(inputs: tuple[Path, ...], db_path: Path, timeout_s: float, force: bool, l2: str,
            build_dir: Path | None, dtypes: tuple[str, ...], batch: int | None, project_dir: Path,
            build_jobs: int | None, max_reps: int | None, max_engines: int | None) -> None:
    """Build each generated project DIR (or generate one for the .onnx MODELs given) and run
    its benchmarks into --db.

    Jobs the database already holds for this system are skipped (a killed run resumes
    where it stopped). A job that crashes, hangs or prints garbage is recorded as such
    and its executable restarted with the jobs it did not reach.
    """
    projects, models = classify(inputs)
    if build_dir and len(projects) + bool(models) > 1:
        raise BenanzaError(f"{build_dir}: --build-dir needs exactly one project, got {len(projects)}")
    fingerprint = system.fingerprint(bandwidth=True)
    if not fingerprint["usable"]:
        raise BenanzaError(f"no usable NVIDIA GPU ({fingerprint['reason']}); nothing was built, run or written")
    if models:
        projects.append(generate_project(models, project_dir, dtypes, batch))
    db = perfdb.open_db(db_path)
    failed = False
    for project in projects:
        out = runner.build(project, build_dir, build_jobs)
        jobs = runner.jobs_to_run(runner.manifest_jobs(runner.load_manifest(project), l2), l2)
        total = sum(len(j) for j in jobs.values())
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.fields[last]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                      console=console) as bar:
            task = bar.add_task(project.name, total=total, last="")

            def advance(outcome: runner.JobOutcome, _: runner.RunSummary, task: int = task) -> None:
                bar.update(task, advance=1, last=f"{outcome.job.executable}#{outcome.job.index} {outcome.status}")

            summary = runner.run(project, db, timeout_s=timeout_s, force=force, l2=l2, progress=advance,
                                 build_dir=out, system=fingerprint, max_reps=max_reps,
                                 max_engines=max_engines)
        console.print(summary_table(summary, f"{project} on system {summary.system_id}"))
        for error in summary.errors:
            console.print(f"[bold red]error:[/] {error}", highlight=False, soft_wrap=True)
        failed = failed or bool(summary.errors)
    if failed:
        raise SystemExit(1)
