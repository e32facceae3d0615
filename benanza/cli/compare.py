"""``benanza compare`` (analyses side by side) and ``benanza bundles`` (the profile bundles here)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table
from rich.text import Text

from benanza import bundles as bundle_store
from benanza.atomic import check_output
from benanza.cli.main import console, friendly_errors, main
from benanza.cli.options import database, database_label, force_option
from benanza.cli.progress import working
from benanza.compare import compare
from benanza.errors import BenanzaError
from benanza.pipeline import analyze_model
from benanza.plain_text import line, one_line
from benanza.profile.bundle import read_bundle
from benanza.report import compare_report
from benanza.report.fmt import cell


@main.command("compare")
@click.argument("sides", metavar="BUNDLE_OR_MODEL...", nargs=-1, required=True,
                type=click.Path(exists=True, path_type=Path))
@click.option("--model", "model_path", type=click.Path(path_type=Path), default=Path("models/zoo"),
              show_default=True, help="The model file, or a directory holding it (found by content hash).")
@click.option("--db", "db_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Performance database: .db, .columns.xz or .db.xz (default: the shipped H100 database).")
@click.option("--system", "systems", multiple=True,
              help="System (id prefix or GPU name); give it twice or more with one MODEL to compare systems.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False, path_type=Path), help="Write the per-layer table.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path), help="Write an HTML page.")
@force_option
@friendly_errors
def compare_cmd(sides: tuple[Path, ...], model_path: Path, db_path: Path | None, systems: tuple[str, ...],
                csv_path: Path | None, html_path: Path | None, force: bool) -> None:
    """Analyses of one model side by side: profile BUNDLEs (e.g. the same model in ONNX Runtime
    and PyTorch), or one MODEL on several --system. The same headline for each, per-layer figures
    and their deltas to the first, and totals equal to each analysis's own."""
    for path, kind in ((csv_path, "csv"), (html_path, "html")):  # before any work
        if path:
            check_output(path, kind, (*sides, model_path if model_path.is_file() else None, db_path), force)
    db = database(db_path)
    label = database_label(db_path)
    if len(sides) == 1 and sides[0].is_file():
        if len(systems) < 2:
            raise BenanzaError(f"{sides[0]}: comparing one model needs two --system or more")
        with working(f"analyzing {sides[0].name} on {len(systems)} systems"):
            analyses = [(name, analyze_model(sides[0], db, None, name, db_label=label)[0]) for name in systems]
    else:
        bad = [str(p) for p in sides if not p.is_dir()]
        if bad:
            raise BenanzaError(f"{bad[0]}: not a profile bundle directory (give bundles, or one model and --system)")
        if len(systems) > 1:
            raise BenanzaError("--system: give at most one when comparing bundles")
        if len(sides) < 2:
            raise BenanzaError(f"compare: needs at least two analyses, got {len(sides)}")
        if not model_path.exists():  # the default models/zoo is only there once fetched
            raise BenanzaError(f"{model_path}: no such model file or directory (give --model, or fetch the zoo: "
                               f"benanza models zoo {model_path})")
        analyses = []
        for path in sides:
            model = bundle_store.find_model(read_bundle(path), model_path)
            with working(f"analyzing {model.name} against {path.name}"):
                analyses.append((path.name, analyze_model(model, db, path, systems[0] if systems else None,
                                                          db_label=label)[0]))
    with working("comparing"):
        comp = compare(analyses)
    compare_report.print_comparison(comp, console)
    if csv_path:
        console.print(line(f"wrote {compare_report.write(compare_report.to_csv(comp), csv_path)}"), highlight=False)
    if html_path:
        title = f"{analyses[0][1].model['name']}: {' vs '.join(comp.labels)}"
        console.print(line(f"wrote {compare_report.write(compare_report.to_html(comp, title), html_path)}"),
                      highlight=False)


@main.command("bundles")
@click.argument("local", nargs=-1, type=click.Path(path_type=Path))
@click.option("--tsv", is_flag=True, help="Tab-separated values with a header line (for scripts).")
@friendly_errors
def bundles_cmd(local: tuple[Path, ...], tsv: bool) -> None:
    """List the shipped profile bundles (perfdb/bundles) and those under each LOCAL directory
    (default: out/bundles when it exists, where quickstart records them)."""
    roots = list(local) or [p for p in (Path("out/bundles"),) if p.is_dir()]
    records = bundle_store.list_bundles(roots)
    columns = bundle_store.COLUMNS
    if tsv:
        click.echo("\t".join(columns))
        for r in records:  # a tab or newline in a name would shift or split the row
            click.echo("\t".join(one_line(cell(r[c], c)) for c in columns))
        return
    table = Table(title=f"{len(records)} profile bundles (use one: benanza analyze MODEL --profile PATH)")
    for column in columns:
        table.add_column(column, justify="right" if "(" in column or column == "batch" else "left", overflow="fold")
    for r in records:
        table.add_row(*(Text(one_line(cell(r[c], c))) for c in columns))
    console.print(table)
