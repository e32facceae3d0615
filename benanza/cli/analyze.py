"""``benanza analyze`` (a model against the database and a profile) and ``benanza pipeline``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import click

from benanza import db as perfdb
from benanza import guards, runner, system
from benanza.analyze import Constraints, analyze
from benanza.analyze.inputs import ApiFamily
from benanza.analyze.sources import check_same_system, inputs_from_db, pick_system, run_precisions
from benanza.cli.main import console, err_console, friendly_errors, main
from benanza.cli.options import database, parse_precisions
from benanza.cli.progress import build, working
from benanza.cli.run import cluster_options, generate_project, run_on_cluster, summary_table
from benanza.errors import BenanzaError
from benanza.guards import model_stem
from benanza.library import Precision
from benanza.model.onnx_import import load_model
from benanza.plain_text import plain
from benanza.profile.bundle import Bundle, bundle_seq_len, read_bundle
from benanza.profile.mapping import map_bundle_report
from benanza.report import print_report, write_csv, write_html, write_json, write_trace

FAMILIES = {"legacy": {ApiFamily.LEGACY}, "graph": {ApiFamily.GRAPH}, "both": {ApiFamily.LEGACY, ApiFamily.GRAPH}}


def bundle_model(models: Path, bundle: Bundle) -> Path:
    """Where the model a bundle was recorded with lies in the directory ``models`` (zoo names)."""
    return models / f"{model_stem(bundle.meta.model)}.onnx"


def analyze_model(model_path: Path, db_path: Path, bundle_path: Path | None = None, system_name: str | None = None,
                  batch: int | None = None, precisions: Iterable[Precision] | None = None,
                  apis: str = "both", db_label: str | None = None):
    """Load the model (at the bundle's batch), map the bundle, read the database, analyze.

    Without a bundle (the validation harness's per-cell call) ``precisions`` are the ones the
    framework run was allowed: ORT use_tf32=0 or PyTorch strict fp32 {fp32}; TF32 on {fp32, tf32};
    fp16 {fp16}. The summary's ``LBL_seq (ms)`` / ``LBL_par (ms)`` are the headline bound.

    Refuses (one line, guards.py) a bundle of another model, a profile that maps onto fewer
    than half of the layers, and a database without rows for this batch and precision.
    """
    bundle = read_bundle(bundle_path) if bundle_path else None
    if bundle is not None:
        guards.check_bundle_model(bundle, model_path)
        if batch is not None and batch != bundle.meta.batch:
            raise BenanzaError(f"{bundle_path}: bundle was recorded at batch {bundle.meta.batch}, not {batch}")
        batch = bundle.meta.batch
    model = load_model(model_path, batch, bundle_seq_len(bundle) if bundle is not None else None)
    mapping = map_bundle_report(model, bundle) if bundle is not None else None
    if not db_path.exists():
        raise BenanzaError(f"{db_path}: no such performance database")
    db = perfdb.open_db(db_path, readonly=True)
    sys_row = pick_system(db, system_name, str(db_path))
    if bundle is not None and mapping is not None:
        check_same_system(bundle, sys_row)  # another GPU or library first: the mapping is then moot
        guards.check_mapping(bundle, model, model_path, len(mapping.unmapped_layers))
    constraints = Constraints(families=frozenset(FAMILIES[apis]))
    if not precisions and bundle is not None:  # the precisions the run's recorded settings allowed
        precisions, _ = run_precisions(bundle.meta.framework, bundle.meta.dtype, bundle.meta.extra)
    if precisions:
        constraints = constraints.with_precisions(frozenset(precisions))
    guards.check_database(db, Path(db_label or db_path), sys_row, model, model_path, constraints.precisions)
    inputs = inputs_from_db(db, model, sys_row, mapping.profile if mapping else None, constraints=constraints)
    report = analyze(inputs)
    shapes = [" ; ".join("x".join(map(str, t.shape)) for t in layer.inputs if not t.constant) + " -> "
              + " ; ".join("x".join(map(str, t.shape)) for t in layer.outputs) for layer in model.layers]
    return replace(report, model={**report.model, "layer shapes": shapes}), mapping


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
    project = generate_project(models, project_dir, tuple(p.value for p in parse_precisions(dtypes)), batch)
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
