"""``benanza db``: inspect, export and merge performance databases (each command one library call)."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table
from rich.text import Text

from benanza.atomic import check_output
from benanza.cli.main import console, friendly_errors, main
from benanza.cli.options import CheckedPath, ExistingPath, database, force_option
from benanza.cli.progress import working
from benanza.errors import BenanzaError
from benanza.plain_text import plain
from benanza.store import db as perfdb
from benanza.store.packed import pack, unpack

EXISTING_DB = ExistingPath(dir_okay=False, path_type=Path)  # .db, or .columns.xz / .db.xz for reading


@main.group("db")
def db_group() -> None:
    """Inspect, export, merge and pack performance databases."""


@db_group.command("info")
@click.argument("path", type=EXISTING_DB)
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
@friendly_errors
def info_cmd(path: Path, as_json: bool) -> None:
    """Row counts per table, benchmarks and jobs per status, benchmarks per system."""
    data = perfdb.info(perfdb.open_db(database(path), readonly=True))
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    console.print(Text.assemble(plain(path, "bold"), f" (schema {data['schema_version']})"))
    counts = Table("table", "rows", title="tables")
    for table, rows in data["tables"].items():
        counts.add_row(table, str(rows))
    console.print(counts)
    for title, key in (("benchmarks by status", "benchmarks_by_status"), ("jobs by status", "jobs_by_status")):
        table = Table("status", "count", title=title)
        for status, count in data[key].items():
            table.add_row(plain(status), str(count))  # a stored string, never markup
        console.print(table)
    per_system = Table("system", "gpu", "cuDNN", "cuBLAS", "benchmarks", "ok", title="systems")
    for row in data["systems"]:
        per_system.add_row(plain(row["system_id"]), plain(row["gpu"] or "?"), plain(row["cudnn_version"] or "?"),
                           plain(row["cublas_version"] or "?"), str(row["benchmarks"]), str(row["ok"] or 0))
    console.print(per_system)


SYSTEM_COLUMNS = ("id", "gpu", "sm_count", "cc", "sm_clock_khz", "mem_clock_khz", "memory_bytes", "bandwidth_gbs",
                  "cuda_driver", "cuda_runtime", "cudnn_version", "cublas_version", "first_seen")


@db_group.command("systems")
@click.argument("path", type=EXISTING_DB)
@click.option("--json", "as_json", is_flag=True, help="Print the systems as JSON.")
@friendly_errors
def systems_cmd(path: Path, as_json: bool) -> None:
    """The systems (GPU, clocks, driver, CUDA, cuDNN, cuBLAS) the database holds measurements of."""
    rows = perfdb.systems(perfdb.open_db(database(path), readonly=True))
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    table = Table(title=plain(f"systems in {path}"))
    for column in SYSTEM_COLUMNS:  # fold, never elide: a cut-off id or version is a wrong one
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(plain("" if row[c] is None else row[c]) for c in SYSTEM_COLUMNS))
    console.print(table)


@db_group.command("export")
@click.argument("path", type=EXISTING_DB)
@click.option("--csv", "csv_out", required=True, type=CheckedPath(dir_okay=False, path_type=Path),
              help="CSV file to write: one row per benchmark, with its GPU and layer op.")
@force_option
@friendly_errors
def export_cmd(path: Path, csv_out: Path, force: bool) -> None:
    """Export every benchmark as CSV (text a spreadsheet would run as a formula gets a leading ')."""
    check_output(csv_out, "csv", (path,), force)
    with working(f"exporting {path}"):
        rows = perfdb.export_csv(perfdb.open_db(database(path), readonly=True), csv_out)
    console.print(plain(f"wrote {rows} benchmarks to {csv_out}"))


@db_group.command("merge")
@click.argument("out", type=CheckedPath(dir_okay=False, path_type=Path))
@click.argument("inputs", nargs=-1, required=True, type=EXISTING_DB)
@friendly_errors
def merge_cmd(out: Path, inputs: tuple[Path, ...]) -> None:
    """Keyed union of INPUTS into OUT (created if needed); rows OUT already has are kept.

    Inputs are read as data (tables only) and every row is checked first: an input with a view,
    trigger or a row no benchmark could have produced is refused, and OUT is left as it was."""
    added = perfdb.merge(out, inputs)
    console.print(plain(f"merged {len(inputs)} database(s) into {out}: "
                        + ", ".join(f"{n} {table}" for table, n in added.items() if n) if any(added.values())
                        else f"merged {len(inputs)} database(s) into {out}: nothing new"))


@db_group.command("pack")
@click.argument("path", type=EXISTING_DB)
@click.argument("out", type=CheckedPath(dir_okay=False, path_type=Path))
@friendly_errors
def pack_cmd(path: Path, out: Path) -> None:
    """Write the database PATH in the compact form perfdb/ ships (OUT ends in .columns.xz).

    Every table column by column, xz-compressed: exact, and about a fiftieth of the SQLite file.
    """
    with working(f"packing {path}"):
        counts = pack(database(path), out)
    console.print(plain(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB): {counts['benchmarks']} benchmarks, "
                        f"{counts['completed_jobs']} completed jobs"))


@db_group.command("unpack")
@click.argument("packed", type=EXISTING_DB)
@click.argument("out", type=CheckedPath(dir_okay=False, path_type=Path))
@friendly_errors
def unpack_cmd(packed: Path, out: Path) -> None:
    """Write the SQLite database of PACKED (a .columns.xz file, e.g. perfdb/h100.columns.xz) as OUT."""
    if out.exists():
        raise BenanzaError(f"{out}: already exists; unpack writes a new database")
    with working(f"unpacking {packed}"):
        counts = unpack(packed, out)
    console.print(plain(f"wrote {out}: {counts['benchmarks']} benchmarks, {counts['completed_jobs']} completed jobs"))
