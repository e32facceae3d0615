"""``benanza quickstart``: the README's main job in one command."""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from benanza import db as perfdb
from benanza import runner, system
from benanza.cli.main import console, err_console, friendly_errors, main
from benanza.cli.run import summary_table
from benanza.errors import BenanzaError
from benanza.paths import shipped_db
from benanza.pipeline import analyze_model, generate_project, seed_database, shipped_bundle
from benanza.profile.bundle import Framework
from benanza.profile.capture import capture
from benanza.report import print_report, write_html

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
            err_console.print(f"{model.name}: no {framework.value} profile: {exc}", highlight=False, markup=False)
    return None


@main.command("quickstart")
@click.argument("models_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
                default=Path("models/zoo"))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("out"), show_default=True,
              help="Where the generated project, the database (on a GPU) and the HTML reports go.")
@click.option("--dtype", "dtypes", default="fp32,tf32,fp16", show_default=True,
              help="Precisions to benchmark (GPU machines only).")
@friendly_errors
def quickstart(models_dir: Path, out: Path, dtypes: str) -> None:
    """Analyze every model of MODELS_DIR: with a GPU, measure first (generate, build, run,
    and a profile of each model in ONNX Runtime or PyTorch; the database starts from the
    shipped one when that was measured on this same system); without one, analyze against
    the shipped H100 database and profile bundles."""
    models = sorted(models_dir.glob("*.onnx"))
    if not models:
        raise BenanzaError(f"{models_dir}: no *.onnx files (get some with: benanza models zoo {models_dir})")
    out.mkdir(parents=True, exist_ok=True)
    gpu = bool(system.fingerprint().get("usable"))
    if gpu:
        db_path = out / "perf.db"
        here = system.fingerprint(bandwidth=True)
        if seed_database(db_path, here):
            err_console.print(f"{db_path}: started from the shipped database, measured on this same system "
                              f"(GPU, driver, CUDA, cuDNN, cuBLAS): its jobs are not measured again",
                              highlight=False, markup=False)
        db = perfdb.open_db(db_path)
        project = generate_project(models, out / "project", tuple(dtypes.split(",")), None,
                                   skip=perfdb.measured(db, perfdb.system_id(here)))
        if project is None:
            console.print(f"{db_path}: holds every benchmark of these models already", highlight=False)
        else:
            runner.build(project)
            summary = runner.run(project, db, timeout_s=300.0, system=here)
            console.print(summary_table(summary, str(project)))
    else:
        db_path = shipped_db()
        err_console.print(f"no usable NVIDIA GPU here: analyzing with the shipped database {db_path}",
                          highlight=False, markup=False)
    for model in models:
        bundle = record_bundle(model, out / "bundles") if gpu else shipped_bundle(model)
        report, _ = analyze_model(model, db_path, bundle)
        print_report(report, console, top=5)
        page = write_html(report, out / f"{model.stem}.html")
        console.print(f"wrote {page}", highlight=False)
