"""``benanza quickstart``: the README's main job in one command."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import click
from rich.table import Table
from rich.text import Text

from benanza.analyze.headline import figures, top_gaps
from benanza.analyze.tables import Report
from benanza.cli.main import console, err_console, friendly_errors, main
from benanza.cli.options import CheckedPath, ExistingPath, parse_precisions
from benanza.cli.progress import build, generate, working
from benanza.cli.run import cluster_options, run_on_cluster, summary_table
from benanza.errors import BenanzaError
from benanza.measure import runner, system
from benanza.measure.system import system_id
from benanza.plain_text import line, plain
from benanza.profile.bundle import Framework
from benanza.profile.capture import capture
from benanza.profile.catalog import shipped_bundle
from benanza.report import print_report, write_html
from benanza.report.fmt import cell
from benanza.store import db as perfdb
from benanza.store.db import DatabaseSink
from benanza.store.shipped import shipped_db
from benanza.store.systems import seed_database
from benanza.workflows.analysis import analyze_model

# Frameworks the quickstart profiles with on a GPU, in order of preference.
FRAMEWORKS = (Framework.ONNXRUNTIME, Framework.PYTORCH)


def record_bundle(model: Path, bundles: Path) -> Path | None:
    """Profile MODEL at batch 1 in fp32 on this GPU: ONNX Runtime's CUDA EP, else PyTorch.

    A framework that is missing or fails is reported in one line; the model is then
    analyzed without a profile (bounds only) rather than stopping the whole job.
    """
    for framework in FRAMEWORKS:
        bundle = bundles / f"{model.stem}_b1_{framework.value}_fp32"
        if bundle.is_dir() and (bundle / "meta.json").is_file():
            return bundle  # recorded by an earlier quickstart
        shutil.rmtree(bundle, ignore_errors=True)
        try:
            return capture(model, framework.value, 1, "fp32", bundle, runs=30, warmup=10, profiled_runs=5)
        except BenanzaError as exc:
            shutil.rmtree(bundle, ignore_errors=True)  # a failed capture leaves no half bundle behind
            err_console.print(line(f"{model.name}: no {framework.value} profile: {exc}"), highlight=False)
    return None


@main.command("quickstart")
@click.argument("models_dir", type=ExistingPath(file_okay=False, path_type=Path),
                default=Path("models/zoo"))
@click.option("--out", type=CheckedPath(file_okay=False, path_type=Path), default=Path("out"), show_default=True,
              help="Where the generated project, the database (on a GPU) and the HTML reports go.")
@click.option("--dtype", "dtypes", default="fp32,tf32,fp16", show_default=True,
              help="Precisions to benchmark (GPU machines only).")
@click.option("-v", "--verbose", is_flag=True,
              help="Print each model's full report in the terminal too (else one line per model; the full "
                   "report is in its HTML page).")
@cluster_options
@friendly_errors
def quickstart(models_dir: Path, out: Path, dtypes: str, verbose: bool, cluster: str | None,
               scheduler_file: Path | None, shard_jobs: int | None) -> None:
    """Analyze every model of MODELS_DIR: with a GPU, measure first (generate, build, run,
    and a profile of each model in ONNX Runtime or PyTorch; the database starts from the
    shipped one when that was measured on this same system); without one, analyze against
    the shipped H100 database and profile bundles. With --cluster or --scheduler-file the
    cluster's GPUs measure into OUT/perf.db (profiles: this machine's GPU, else shipped).

    Prints one line per model and a summary table across models; each model's full report
    goes to OUT/<model>.html (and to the terminal with --verbose)."""
    precisions = tuple(p.value for p in parse_precisions(dtypes))
    models = sorted(models_dir.glob("*.onnx"))
    if not models:
        raise BenanzaError(f"{models_dir}: no *.onnx files; get some with: benanza models zoo "
                           f"{shlex.quote(str(models_dir))}")
    out.mkdir(parents=True, exist_ok=True)
    gpu = bool(system.fingerprint().get("usable"))
    if cluster or scheduler_file:
        db_path = out / "perf.db"
        project = generate(models, out / "project", precisions, None)
        if not run_on_cluster([project], db_path, cluster, scheduler_file, timeout_s=300.0, shard_jobs=shard_jobs):
            raise SystemExit(1)
    elif gpu:
        db_path = out / "perf.db"
        here = system.fingerprint(bandwidth=True)
        if seed_database(db_path, here):
            err_console.print(plain(f"{db_path}: started from the shipped database, measured on this same system "
                                    f"(GPU, driver, CUDA, cuDNN, cuBLAS): its jobs are not measured again"),
                              highlight=False)
        db = perfdb.open_db(db_path)
        project = generate(models, out / "project", precisions, None,
                                   skip=perfdb.measured(db, system_id(here)))
        if project is None:
            console.print(plain(f"{db_path}: holds every benchmark of these models already"), highlight=False)
        else:
            build(project)
            summary = runner.run(project, DatabaseSink(db), timeout_s=300.0, system=here)
            console.print(summary_table(summary, str(project)))
    else:
        db_path = shipped_db()
        err_console.print(plain(f"no usable NVIDIA GPU here: analyzing with the shipped database {db_path}"),
                          highlight=False)
    reports = []
    for model in models:
        bundle = record_bundle(model, out / "bundles") if gpu else shipped_bundle(model)
        try:
            with working(f"analyzing {model.name}" + (f" against {bundle.name}" if bundle else "")):
                report, _ = analyze_model(model, db_path, bundle, db_label=str(out / "perf.db"))
        except BenanzaError as exc:  # one model without data must not hide the others' results
            err_console.print(line(f"{model.name}: not analyzed: {exc}"), highlight=False)
            continue
        page = write_html(report, out / f"{model.stem}.html")
        if verbose:
            print_report(report, console, top=5)
            console.print(line(f"wrote {page}"), highlight=False)
        else:
            console.print(line(headline_line(model.stem, report, page)), highlight=False, soft_wrap=True)
        reports.append((model.stem, bundle.name if bundle else "-", report))
    if reports:
        console.print(summary_across(reports))


def headline_line(name: str, report: Report, page: Path) -> str:
    """A model's headline in one line: its bound, measured share and largest gap, and where the report is."""
    s = report.summary
    gaps = top_gaps(report, 1)
    gap = f"; largest gap {gaps[0][0]} {cell(gaps[0][1], '(ms)')} ms" if gaps else ""
    return (f"{name}: LBL_seq {cell(s.lbl_seq_ms, '(ms)')} ms, "
            f"measured share {cell(s.measured_share, '')}{gap} -> {page}")


def summary_across(reports: list[tuple[str, str, Report]]) -> Table:
    """One row per model: the headline figures and the largest gap, for reading across models."""
    table = Table(title="quickstart summary", title_justify="left")
    labels = [label for label, _, _ in figures(reports[0][2])]
    for column in ("model", "profile", *labels, "largest gap"):
        table.add_column(column, justify="left" if column in ("model", "profile", "largest gap") else "right",
                         overflow="fold")
    for name, bundle, report in reports:
        gaps = top_gaps(report, 1)
        table.add_row(Text(name), Text(bundle), *(Text(cell(value, label)) for label, value, _ in figures(report)),
                      Text(f"{gaps[0][0]} {cell(gaps[0][1], '(ms)')} ms" if gaps else "-"))
    return table
