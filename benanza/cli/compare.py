"""``benanza compare`` (analyses side by side) and ``benanza bundles`` (the profile bundles here)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table
from rich.text import Text

from benanza import api
from benanza.atomic import check_output
from benanza.cli.main import console, friendly_errors, main
from benanza.cli.options import CheckedPath, ExistingPath, force_option
from benanza.cli.progress import working
from benanza.errors import BenanzaError
from benanza.plain_text import line, one_line
from benanza.profile import catalog
from benanza.report import compare_report
from benanza.report.fmt import cell


@main.command("compare")
@click.argument("sides", metavar="BUNDLE_OR_MODEL...", nargs=-1, required=True,
                type=ExistingPath(path_type=Path))
@click.option("--model", "model_path", type=CheckedPath(path_type=Path), default=None,
              help="The model file, or a directory holding it (found by content hash; default: the bundle itself, "
                   "./models/zoo, the checkout's models/zoo, then the zoo inside the onnx package).")
@click.option("--db", "db_path", type=CheckedPath(dir_okay=False, path_type=Path),
              help="Performance database: .db, .columns.xz or .db.xz (default: the shipped H100 database).")
@click.option("--system", "systems", multiple=True,
              help="System (id prefix or GPU name); give it twice or more with one MODEL to compare systems.")
@click.option("--csv", "csv_path", type=CheckedPath(dir_okay=False, path_type=Path), help="Write the per-layer table.")
@click.option("--html", "html_path", type=CheckedPath(dir_okay=False, path_type=Path),
              help="Write a self-contained HTML page: the headline, plots of the latencies side by side and of "
                   "the layers that change most, the per-layer table.")
@force_option
@friendly_errors
def compare_cmd(sides: tuple[Path, ...], model_path: Path | None, db_path: Path | None, systems: tuple[str, ...],
                csv_path: Path | None, html_path: Path | None, force: bool) -> None:
    """Analyses of one model side by side: profile BUNDLEs (e.g. the same model in ONNX Runtime
    and PyTorch), or one MODEL on several --system. The same headline for each, per-layer figures
    and their deltas to the first, and totals equal to each analysis's own."""
    for path, kind in ((csv_path, "csv"), (html_path, "html")):  # before any work
        if path:
            check_output(path, kind, (*sides, model_path if model_path and model_path.is_file() else None, db_path),
                         force)
    if len(sides) == 1 and sides[0].is_file():
        with working(f"analyzing {sides[0].name} on {len(systems)} systems"):
            comp = api.compare_systems(sides[0], systems, db_path)
    else:
        if len(systems) > 1:
            raise BenanzaError("--system: give at most one when comparing bundles")
        with working(f"analyzing {len(sides)} bundles"):
            comp = api.compare(sides, model_path, db_path, systems[0] if systems else None)
    compare_report.print_comparison(comp, console)
    if csv_path:
        console.print(line(f"wrote {compare_report.write(compare_report.to_csv(comp), csv_path)}"), highlight=False)
    if html_path:
        title = f"{comp.model}: {' vs '.join(comp.labels)}"
        console.print(line(f"wrote {compare_report.write(compare_report.to_html(comp, title), html_path)}"),
                      highlight=False)


@main.command("bundles")
@click.argument("local", nargs=-1, type=CheckedPath(path_type=Path))
@click.option("--tsv", is_flag=True, help="Tab-separated values with a header line (for scripts).")
@friendly_errors
def bundles_cmd(local: tuple[Path, ...], tsv: bool) -> None:
    """List the shipped profile bundles (perfdb/bundles) and those under each LOCAL directory
    (default: out/bundles when it exists, where quickstart records them)."""
    roots = list(local) or [p for p in (Path("out/bundles"),) if p.is_dir()]
    records = catalog.list_bundles(roots)
    columns = catalog.COLUMNS
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
