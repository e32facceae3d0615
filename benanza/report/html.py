"""HTML writer: one self-contained page (inline CSS, SVG and a small sorting script, no external asset).

The headline card comes first (``report.headline``), then the plots, then sortable tables.
Jinja with autoescape and StrictUndefined: every model-derived string (layer names,
algorithm names) is escaped; the plots (matplotlib, inline SVG) escape their own text (``report.plots``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from benanza import atomic
from benanza.analyze.core import FEWER_FLOPS
from benanza.analyze.headline import MEDIAN, figures, top_gaps
from benanza.analyze.tables import Report
from benanza.report import plots
from benanza.report.fmt import cell
from benanza.report.headline import ceiling_kind, ceilings, latency_spread

if TYPE_CHECKING:
    from jinja2 import Environment

TEMPLATES = Path(__file__).resolve().parent / "templates"
OPEN_TABLES = ("policies", "execution", "gaps", "what-if", "missing", "api totals", "fusion patterns", "overhead",
               "layers")


def environment() -> Environment:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape  # only when writing HTML

    env = Environment(loader=FileSystemLoader(TEMPLATES), undefined=StrictUndefined,
                      autoescape=select_autoescape(["html", "j2"], default=True), keep_trailing_newline=True)
    env.filters["cell"] = cell
    return env


def profiled(report: Report) -> bool:
    """Whether the analysis had a measured run (a profile): only then are gaps and ratios defined."""
    return any(row.get("kind") == "total" and row.get("step") == "measured" for row in report.tables["gaps"].rows)


def system_line(system: dict[str, Any]) -> str:
    parts = [system.get("gpu") or system.get("name") or "unknown system"]
    parts += [f"{name} {system[key]}" for name, key in (("cuDNN", "cudnn_version"), ("cuBLAS", "cublas_version"),
                                                         ("CUDA", "cuda_runtime")) if system.get(key)]
    return ", ".join(parts)


def layer_order(rows: tuple[dict[str, Any], ...], by_gap: bool) -> list[dict[str, Any]]:
    """Layers for the per-layer plot: largest gap first (with a profile), else largest best latency."""
    key = "gap (ms)" if by_gap else "best (ms)"
    return sorted(rows, key=lambda r: (r.get(key) is None, -(r.get(key) or 0.0), r["#"]))


def to_html(report: Report) -> str:
    """The page as text; plots are drawn from the report's tables only."""
    with_profile = profiled(report)
    layers = layer_order(report.tables["layers"].rows, with_profile)
    bars = plots.layer_bars([(f"{r['op']} #{r['#']} {r['layer']}", r["measured (ms)"], r["best (ms)"],
                              r["bound (ms)"]) for r in layers], "gap" if with_profile else "best latency")
    points = [(f"{r['#']} {r['layer']} ({r['op']}, {r['precision']}"
               f"{', ' + FEWER_FLOPS + ': direct-count FLOP/s' if r['limit'] == FEWER_FLOPS else ''})",
               r["intensity (FLOP/B)"], r["achieved (FLOP/s)"], r["precision"] or "-")
              for r in report.tables["roofline"].rows if r["intensity (FLOP/B)"] and r["achieved (FLOP/s)"]]
    sources = report.ceilings.get("source") or {}
    kinds = {p: ceiling_kind(s) for p, s in (sources.get("peak (FLOP/s)") or {}).items() if s}
    if sources.get("bandwidth (GB/s)"):
        kinds["bandwidth"] = ceiling_kind(sources["bandwidth (GB/s)"])
    roof = plots.roofline(points, report.ceilings["bandwidth (GB/s)"], report.ceilings["peak (FLOP/s)"],
                          kinds=kinds)
    fall = plots.waterfall([(r["step"], r["kind"], r["ms"]) for r in report.tables["gaps"].rows])
    template = environment().get_template("report.html.j2")
    return template.render(report=report, tables=list(report.tables.items()), open_tables=OPEN_TABLES,
                           bars_svg=bars, roofline_svg=roof, waterfall_svg=fall, figures=figures(report),
                           ceilings=ceilings(report), summary=report.summary.labelled(),
                           gaps=top_gaps(report), profiled=with_profile, median=MEDIAN,
                           spread=latency_spread(report), system_line=system_line(report.system))


def write_html(report: Report, path: str | Path) -> Path:
    path = Path(path)
    atomic.write_text(path, to_html(report))
    return path
