"""CSV writer: the per-layer table of one analysis, for a spreadsheet or pandas."""

from __future__ import annotations

import io
from pathlib import Path

from benanza import atomic, csv_cells
from benanza.analyze.tables import Report

# (CSV column, layer-table column); "shapes" comes from the report's model record.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("#", "#"), ("layer", "layer"), ("op", "op"), ("shapes", ""), ("measured (ms)", "measured (ms)"),
    ("as-executed (ms)", "as-executed (ms)"), ("best (ms)", "best (ms)"), ("bound (ms)", "bound (ms)"),
    ("bound type", "source"), ("gap (ms)", "gap (ms)"), ("as-executed call", "as-executed call"),
    ("best benchmark", "best benchmark"), ("efficiency (%)", "efficiency (%)"),
)


# The run every row belongs to, first in each row, so that the CSVs of many runs concatenate.
RUN_COLUMNS = ("model", "batch", "precisions", "framework", "system", "gpu")


def run_context(report: Report) -> tuple[object, ...]:
    """RUN_COLUMNS' values: the model at its batch, the bound's precisions, the profiled framework
    (empty without a profile) and the system the database measured."""
    return (report.model.get("name"), report.model.get("batch"), report.summary.bound_precisions,
            report.model.get("framework", ""), report.system.get("id"), report.system.get("gpu"))


def to_csv(report: Report) -> str:
    """One row per layer, each starting with the run it belongs to (``RUN_COLUMNS``); numbers
    unrounded, empty cells where a figure does not exist; a node name that a spreadsheet would run as
    a formula gets a leading ``'`` (``csv_cells``)."""
    shapes = report.model.get("layer shapes") or []
    run = run_context(report)
    out = io.StringIO()
    writer = csv_cells.writer(out)
    writer.writerow([*RUN_COLUMNS, *(name for name, _ in COLUMNS)])
    for row in report.tables["layers"].rows:
        index = row["#"]
        values = [(shapes[index] if index < len(shapes) else "") if name == "shapes" else row.get(source)
                  for name, source in COLUMNS]
        writer.writerow(["" if v is None else csv_cells.cell(v) for v in (*run, *values)])
    return out.getvalue()


def write_csv(report: Report, path: str | Path) -> Path:
    return atomic.write_text(path, to_csv(report))
