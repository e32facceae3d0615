"""``benanza analyze`` (a model against the database and a profile) and ``benanza pipeline``."""

from __future__ import annotations

from pathlib import Path

import click

from benanza import db as perfdb
from benanza import runner, system
from benanza.cli.main import console, err_console, friendly_errors, main
from benanza.cli.options import database, parse_precisions
from benanza.cli.progress import build, generate, working
from benanza.cli.run import cluster_options, run_on_cluster, summary_table
from benanza.errors import BenanzaError
from benanza.pipeline import FAMILIES, analyze_model
from benanza.plain_text import plain
from benanza.report import print_report, write_csv, write_html, write_json, write_trace


@main.command("analyze")
@click.argument("model", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--db", "db_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Performance database, .db or .db.xz (default: the shipped H100 database, perfdb/h100.db.xz).")
@click.option("--profile", "bundle", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Profile bundle of MODEL (benanza profile); without one only the bounds are reported.")
@click.option("--system", "system_name", help="System id (prefix) or GPU name, when the database holds several.")
@click.option("--batch", type=click.IntRange(min=1), help="Batch size (default: the bundle's, else the model's).")
@click.option("--dtype", "dtypes",
              help="Precisions the bound may use, e.g. fp32,tf32 (default: the profile's recorded settings "
                   "(ORT use_tf32, PyTorch allow_tf32, fp16), else fp32,tf32).")
@click.option("--api", "apis", type=click.Choice(sorted(FAMILIES)), default="both", show_default=True,
              help="cuDNN API families the best policy may use.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), help="Write the report as JSON.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write a self-contained HTML page with plots.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the per-layer table as CSV (op, shapes, measured, as-executed, best, bound, gap, ...).")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write a Chrome/Perfetto trace: model, layers, library calls and kernels on one timeline.")
@friendly_errors
def analyze_cmd(model: Path, db_path: Path | None, bundle: Path | None, system_name: str | None, batch: int | None,
                dtypes: str | None, apis: str, json_path: Path | None, html_path: Path | None,
                csv_path: Path | None, trace_path: Path | None) -> None:
    """Lower-bound latency of MODEL on a system and where a framework run loses time.

    LBL (sequential and parallel) of the cheapest equivalent execution from measured
    implementations (the headline), layer-wise under the best, as-executed and heuristic policies,
    the Benanza ratio (lower bound over measured latency) against the measured run, and the
    algorithm-selection, API, fusion, Tensor Core, parallelism and framework-overhead gaps
    (docs/METRICS.md). Refuses a bundle of another model, a profile that maps onto fewer than
    half of the layers and a database without rows for the batch/precision.
    """
    label = str(db_path) if db_path else "perf.db"
    precisions = parse_precisions(dtypes) if dtypes is not None else None
    with working(f"analyzing {model.name}" + (f" against {bundle.name}" if bundle else "")):
        report, mapping = analyze_model(model, database(db_path), bundle, system_name, batch, precisions, apis,
                                        db_label=label)
    print_report(report, console)
    if mapping is not None:
        for index, why in mapping.unmapped_layers:
            err_console.print(plain(f"unmapped layer {index}: {why}"), highlight=False)
    for path, write in ((json_path, write_json), (html_path, write_html), (csv_path, write_csv),
                        (trace_path, write_trace)):
        if path:
            write(report, path)
            console.print(plain(f"wrote {path}"), highlight=False)


@main.command("pipeline")
@click.argument("model", type=click.Path(exists=True, path_type=Path))
@click.option("--db", "db_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Performance database to fill (created if needed).")
@click.option("--batch", type=click.IntRange(min=1), help="Batch size (default: the model's own).")
@click.option("--dtype", "dtypes", default="fp32,tf32,fp16", show_default=True, help="Precisions to benchmark.")
@click.option("--project-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("benanza-project"),
              show_default=True, help="Where the generated benchmark project goes.")
@click.option("--timeout", "timeout_s", type=float, default=300.0, show_default=True, help="Seconds per job.")
@click.option("-j", "--build-jobs", type=click.IntRange(min=1), help="Parallel compile jobs.")
@click.option("--profile", "bundle", type=click.Path(file_okay=False, path_type=Path),
              help="Also analyze against this profile bundle (a single MODEL file).")
@cluster_options
@friendly_errors
def pipeline_cmd(model: Path, db_path: Path, batch: int | None, dtypes: str, project_dir: Path, timeout_s: float,
                 build_jobs: int | None, bundle: Path | None, cluster: str | None, scheduler_file: Path | None,
                 shard_jobs: int | None) -> None:
    """generate + build + run (+ analyze) in one command.

    Without a usable GPU it says so in one line and stops after the build.
    """
    models = sorted(model.glob("*.onnx")) if model.is_dir() else [model]
    if not models:
        raise BenanzaError(f"{model}: no *.onnx files")
    project = generate(models, project_dir, tuple(p.value for p in parse_precisions(dtypes)), batch)
    build(project, jobs=build_jobs)
    console.print(plain(f"built {project}"), highlight=False)
    if cluster or scheduler_file:  # the cluster's workers measure; this process writes --db
        if not run_on_cluster([project], db_path, cluster, scheduler_file, timeout_s=timeout_s,
                              shard_jobs=shard_jobs):
            raise SystemExit(1)
        if bundle is not None and model.is_file():
            report, _ = analyze_model(model, db_path, bundle, batch=batch)
            print_report(report, console)
        return
    info = system.fingerprint()
    if not info.get("usable"):
        err_console.print(plain(f"no usable NVIDIA GPU ({info.get('reason', 'unknown reason')}): "
                                "stopping after the build"), highlight=False)
        return
    db = perfdb.open_db(db_path)
    summary = runner.run(project, db, timeout_s=timeout_s, system=system.fingerprint(bandwidth=True))
    console.print(summary_table(summary, str(project)))
    if bundle is not None and model.is_file():
        report, _ = analyze_model(model, db_path, bundle, batch=batch)
        print_report(report, console)
