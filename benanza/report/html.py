"""HTML writer: one self-contained page (inline CSS and SVG, no script, no external asset).

Jinja with autoescape and StrictUndefined: every model-derived string (layer names,
algorithm names) is escaped; the SVG plots escape their own text (``report.svg``).
"""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from benanza import atomic
from benanza.analyze.tables import Report
from benanza.report import svg
from benanza.report.fmt import cell

TEMPLATES = Path(__file__).resolve().parent / "templates"
OPEN_TABLES = ("policies", "execution", "gaps", "missing", "api totals", "fusion patterns", "overhead", "layers")


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), undefined=StrictUndefined,
                      autoescape=select_autoescape(["html", "j2"], default=True), keep_trailing_newline=True)
    env.filters["cell"] = cell
    return env


def to_html(report: Report) -> str:
    """The page as text; plots are drawn from the report's tables only."""
    layers = report.tables["layers"].rows
    bars = svg.layer_bars([(f"{r['#']} {r['layer']}", r["measured (ms)"], r["best (ms)"], r["bound (ms)"])
                           for r in layers])
    points = [(f"{r['#']} {r['layer']} ({r['op']}, {r['precision']})", r["intensity (FLOP/B)"],
               r["achieved (FLOP/s)"]) for r in report.tables["roofline"].rows
              if r["intensity (FLOP/B)"] and r["achieved (FLOP/s)"]]
    roof = svg.roofline(points, report.ceilings["bandwidth (GB/s)"], report.ceilings["peak (FLOP/s)"])
    fall = svg.waterfall([(r["step"], r["kind"], r["ms"]) for r in report.tables["gaps"].rows])
    template = _environment().get_template("report.html.j2")
    return template.render(report=report, tables=list(report.tables.items()), open_tables=OPEN_TABLES,
                           bars_svg=bars, roofline_svg=roof, waterfall_svg=fall)


def write_html(report: Report, path: str | Path) -> Path:
    path = Path(path)
    atomic.write_text(path, to_html(report))
    return path
