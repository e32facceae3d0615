"""``benanza quickstart``: the README's main job in one command."""

from __future__ import annotations

from pathlib import Path

import click

from benanza import db as perfdb
from benanza import runner, system
from benanza.cli.analyze import analyze_model
from benanza.cli.main import console, err_console, friendly_errors, main
from benanza.cli.run import generate_project, summary_table
from benanza.errors import BenanzaError
from benanza.paths import perfdb_dir, shipped_db
from benanza.report import print_report, write_html


def shipped_bundle(model: Path) -> Path | None:
    """A profile bundle shipped for this model at batch 1 (perfdb/bundles/<stem>_b1_*), if any."""
    found = sorted((perfdb_dir() / "bundles").glob(f"{model.stem}_b1_*"))
    return found[0] if found else None


@main.command("quickstart")
@click.argument("models_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
                default=Path("models/zoo"))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("out"), show_default=True,
              help="Where the generated project, the database (on a GPU) and the HTML reports go.")
@click.option("--dtype", "dtypes", default="fp32,tf32,fp16", show_default=True,
              help="Precisions to benchmark (GPU machines only).")
@friendly_errors
def quickstart(models_dir: Path, out: Path, dtypes: str) -> None:
    """Analyze every model of MODELS_DIR: with a GPU, measure first (generate, build, run);
    without one, analyze against the shipped H100 database and profile bundles."""
    models = sorted(models_dir.glob("*.onnx"))
    if not models:
        raise BenanzaError(f"{models_dir}: no *.onnx files (get some with: benanza models zoo {models_dir})")
    out.mkdir(parents=True, exist_ok=True)
    if system.fingerprint().get("usable"):
        db_path = out / "perf.db"
        project = generate_project(models, out / "project", tuple(dtypes.split(",")), None)
        runner.build(project)
        summary = runner.run(project, perfdb.open_db(db_path), timeout_s=300.0,
                             system=system.fingerprint(bandwidth=True))
        console.print(summary_table(summary, str(project)))
    else:
        db_path = shipped_db()
        err_console.print(f"no usable NVIDIA GPU here: analyzing with the shipped database {db_path}",
                          highlight=False, markup=False)
    for model in models:
        bundle = shipped_bundle(model)
        report, _ = analyze_model(model, db_path, bundle)
        print_report(report, console, top=5)
        page = write_html(report, out / f"{model.stem}.html")
        console.print(f"wrote {page}", highlight=False)
