"""``benanza pipeline``: generate + build + run (+ analyze) in one command."""

from __future__ import annotations

from pathlib import Path

import click

from benanza.cli.main import console, err_console, friendly_errors, main
from benanza.cli.options import CheckedPath, ExistingPath, build_cache_option, parse_precisions, seq_len_option
from benanza.cli.progress import build, generate
from benanza.cli.run import cluster_options, run_on_cluster, summary_table
from benanza.errors import BenanzaError
from benanza.measure import runner, system
from benanza.plain_text import plain
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
@build_cache_option
@cluster_options
@friendly_errors
def pipeline_cmd(model: Path, db_path: Path, batch: int | None, seq_len: int | None, dtypes: str, project_dir: Path,
                 timeout_s: float, build_jobs: int | None, bundle: Path | None, cluster: str | None,
                 scheduler_file: Path | None, shard_jobs: int | None, no_build_cache: bool) -> None:
    """generate + build + run (+ analyze) in one command.

    Without a usable GPU it says so in one line and stops after the build.
    """
    models = sorted(model.glob("*.onnx")) if model.is_dir() else [model]
    if not models:
        raise BenanzaError(f"{model}: no *.onnx files")
    project = generate(models, project_dir, tuple(p.value for p in parse_precisions(dtypes)), batch, seq_len=seq_len)
    build(project, jobs=build_jobs, cache=False if no_build_cache else None)
    console.print(plain(f"built {project}"), highlight=False)
    if cluster or scheduler_file:  # the cluster's workers measure; this process writes --db
        if not run_on_cluster([project], db_path, cluster, scheduler_file, timeout_s=timeout_s,
                              shard_jobs=shard_jobs):
            raise SystemExit(1)
        if bundle is not None and model.is_file():
            report, _ = analyze_model(model, db_path, bundle, batch=batch, seq_len=seq_len)
            print_report(report, console)
        return
    info = system.fingerprint()
    if not info.get("usable"):
        err_console.print(plain(f"no usable NVIDIA GPU ({info.get('reason', 'unknown reason')}): "
                                "stopping after the build"), highlight=False)
        return
    db = perfdb.open_db(db_path)
    summary = runner.run(project, DatabaseSink(db), timeout_s=timeout_s, system=system.fingerprint(bandwidth=True))
    console.print(summary_table(summary, str(project)))
    if bundle is not None and model.is_file():
        report, _ = analyze_model(model, db_path, bundle, batch=batch, seq_len=seq_len)
        print_report(report, console)
