"""Writers of a ``benanza.analyze.compare.Comparison``: terminal, CSV, HTML (they only format it)."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from benanza import atomic, csv_cells
from benanza.analyze.compare import LAYER_FIGURES, Comparison
from benanza.analyze.headline import FIGURES
from benanza.plain_text import one_line
from benanza.report import plots
from benanza.report.fmt import cell
from benanza.report.html import environment


def _change(row: dict[str, Any], comp: Comparison) -> float:
    """How much a layer changes between the sides: the largest absolute delta of any figure."""
    deltas = [row.get(f"{f.removesuffix(' (ms)')} {label} - {comp.labels[0]} (ms)")
              for f in LAYER_FIGURES for label in comp.labels[1:]]
    return max((abs(d) for d in deltas if d is not None), default=0.0)


def ranked_rows(comp: Comparison) -> list[dict[str, Any]]:
    return sorted(comp.layers.rows, key=lambda r: (-_change(r, comp), r["#"]))


def totals_row(comp: Comparison) -> dict[str, Any]:
    row: dict[str, Any] = {"#": None, "layer": "total", "op": ""}
    for figure in LAYER_FIGURES:
        unit = figure.removesuffix(" (ms)")
        for label in comp.labels:
            row[f"{unit} {label} (ms)"] = comp.totals[label][figure]
        for label in comp.labels[1:]:
            a, b = comp.totals[comp.labels[0]][figure], comp.totals[label][figure]
            row[f"{unit} {label} - {comp.labels[0]} (ms)"] = None if a is None or b is None else b - a
    return row


def print_comparison(comp: Comparison, console: Console, top: int = 15) -> None:
    head = RichTable(title=Text(one_line(comp.headline.title)), title_justify="left")
    for column in comp.headline.columns:  # the analyses' labels are bundle names: never markup
        head.add_column(Text(one_line(column)), justify="left" if column == "figure" else "right", overflow="fold")
    for row in comp.headline.rows:
        head.add_row(*(Text(one_line(cell(row.get(c), row["figure"]))) for c in comp.headline.columns))
    console.print(head)
    letters = {label: chr(ord("A") + n) for n, label in enumerate(comp.labels)}  # short headers, a key below
    first = comp.labels[0]
    shown = [("#", "#"), ("layer", "layer"), ("op", "op")]
    for figure in ("measured (ms)", "best (ms)"):
        unit = figure.removesuffix(" (ms)")
        shown += [(f"{unit} {label} (ms)", f"{unit} {letters[label]} (ms)") for label in comp.labels]
        shown += [(f"{unit} {label} - {first} (ms)", f"{unit} {letters[label]}-{letters[first]} (ms)")
                  for label in comp.labels[1:]]
    key = ", ".join(f"{v} = {k}" for k, v in letters.items())
    layers = RichTable(title=f"Top {top} layers by change (all {len(comp.layers.rows)} in --csv/--html)",
                       title_justify="left", caption=Text(one_line(key)))
    for _, header in shown:
        layers.add_column(header, justify="right" if "(" in header or header == "#" else "left", overflow="fold")
    for row in [*ranked_rows(comp)[:top], totals_row(comp)]:
        layers.add_row(*(Text(one_line(cell(row.get(c), c))) for c, _ in shown))
    console.print(layers)


def to_csv(comp: Comparison) -> str:
    out = io.StringIO()
    writer = csv_cells.writer(out)  # node names are untrusted: no formula cells, no bare CR
    writer.writerow(comp.layers.columns)
    for row in [*comp.layers.rows, totals_row(comp)]:
        writer.writerow(["" if row.get(c) is None else csv_cells.cell(row.get(c)) for c in comp.layers.columns])
    return out.getvalue()


def headline_plot(comp: Comparison) -> str:
    """The headline's latencies (ms), one bar per side."""
    latencies = {label for label, _, _ in FIGURES if label.endswith("(ms)")}
    figures = [(row["figure"], {side: row.get(side) for side in comp.labels}) for row in comp.headline.rows
               if row["figure"] in latencies]
    return plots.compare_headline(figures, comp.labels)


def layers_plot(comp: Comparison, top: int = plots.TOP_LAYERS) -> str:
    """The layers that change most, one bar per side: their measured latency, or their best benchmark
    where no side was measured (two systems of one database)."""
    rows = ranked_rows(comp)
    figure = next((f for f in ("measured (ms)", "best (ms)")
                   if any(r.get(f"{f.removesuffix(' (ms)')} {side} (ms)") is not None
                          for r in rows for side in comp.labels)), "best (ms)")
    unit = figure.removesuffix(" (ms)")
    return plots.compare_layers([(f"{r['op']} #{r['#']} {r['layer']}",
                                  [r.get(f"{unit} {side} (ms)") for side in comp.labels]) for r in rows[:top]],
                                comp.labels, figure, len(rows))


def to_html(comp: Comparison, title: str) -> str:
    template = environment().get_template("compare.html.j2")
    layers = replace(comp.layers, rows=tuple(ranked_rows(comp)))
    return template.render(title=title, headline=comp.headline, layers=layers, totals=[totals_row(comp)],
                           labels=comp.labels, headline_svg=headline_plot(comp), layers_svg=layers_plot(comp))


def write(text: str, path: Path) -> Path:
    return atomic.write_text(path, text)
