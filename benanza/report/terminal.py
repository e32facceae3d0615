"""Terminal writer: summary, the gaps as a text waterfall, the layers that lose most, what is missing."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from benanza.analyze.headline import MEDIAN, figures, top_gaps
from benanza.analyze.tables import Report, Table
from benanza.plain_text import line, plain
from benanza.report.fmt import cell
from benanza.report.headline import ceilings, latency_spread

BAR_WIDTH = 40
DETAIL_TABLES = ("what-if", "api totals", "fusion patterns", "overhead")


def _rich(table: Table, limit: int | None = None, columns: tuple[str, ...] | None = None) -> RichTable:
    cols = columns or table.columns
    out = RichTable(title=plain(table.title), title_justify="left", show_lines=False)
    for c in cols:
        out.add_column(c, justify="right" if ("(" in c or c == "#") else "left", overflow="fold")
    rows = table.rows if limit is None else table.rows[:limit]
    for row in rows:
        # Text objects: model text (node names) is shown literally, never read as rich markup.
        out.add_row(*(plain(cell(row.get(c), c)) for c in cols))
    if limit is not None and len(table.rows) > limit:
        out.caption = f"{len(table.rows) - limit} more rows in the JSON/HTML report"
    elif table.note:
        out.caption = table.note
    return out


def waterfall_lines(gaps: Table) -> list[str]:
    """One line per step: name, ms, and a bar scaled to the largest step."""
    scale = max((abs(r["ms"]) for r in gaps.rows), default=0.0) or 1.0
    width = max((len(r["step"]) for r in gaps.rows), default=0)
    lines = []
    for r in gaps.rows:
        n = round(BAR_WIDTH * abs(r["ms"]) / scale)
        bar = ("█" if r["kind"] == "total" else "▒" if r["kind"] == "gap" else "░") * n
        sign = "-" if r["kind"] != "total" and r["ms"] >= 0 else "+" if r["kind"] != "total" else " "
        lines.append(f"{r['step']:<{width}}  {sign}{abs(r['ms']):>9.4f} ms  {bar}")
    return lines


def _ceilings(report: Report) -> RichTable:
    """The roofline's ceilings, each with where it comes from and the GPU's physical peak."""
    physical = report.ceilings.get("physical peak") or {}
    out = RichTable(title="Roofline ceilings", title_justify="left")
    for c in ("ceiling", "value", "source", "physical peak"):
        out.add_column(c, justify="right" if c in ("value", "physical peak") else "left", overflow="fold")
    for name, value, source, peak in ceilings(report):
        out.add_row(plain(name), plain(cell(value, name)), plain(source or "-"), plain(cell(peak, name)))
    out.caption = (f"physical peaks: {physical['source']}" if physical.get("source")
                   else "no physical peaks known for this GPU (benanza/analyze/physical.py)")
    return out


def print_report(report: Report, console: Console | None = None, top: int = 10) -> None:
    """Print the headline figures and the tables a user reads first; the rest is in JSON/HTML."""
    console = console or Console()
    system = report.system.get("gpu") or report.system.get("name") or "unknown system"
    console.print(line(f"{report.model['name']} (batch {report.model['batch']}, {report.model['layers']} layers) "
                       f"on {system}; {report.constraints}", style="bold"))
    headline = RichTable(title="Headline", title_justify="left", show_header=False)
    headline.add_column("figure")
    headline.add_column("value", justify="right")
    spread = latency_spread(report)
    for label, value, _ in figures(report):
        headline.add_row(Text(label), Text(cell(value, label)))
        if label == MEDIAN and spread:
            headline.add_row(Text("  timed runs' spread"), Text(spread))
    for rank, (step, ms, fix) in enumerate(top_gaps(report), 1):
        headline.add_row(Text(f"gap #{rank}: {step} ({cell(ms, '(ms)')} ms)"), Text(fix))
    console.print(headline)
    summary = RichTable(title="Summary", title_justify="left", show_header=False)
    summary.add_column("figure")
    summary.add_column("value", justify="right")
    for key, value in report.summary.labelled().items():
        summary.add_row(plain(key), plain(cell(value, key)))
    console.print(summary)
    console.print(_rich(report.tables["policies"]))
    execution = report.tables["execution"]
    heaviest = sorted(execution.rows, key=lambda r: -(r["charged (ms)"] or 0.0))[:top]
    console.print(_rich(Table(f"Best execution (the headline LBL): the {top} costliest of {len(execution.rows)} "
                              "groups", execution.columns, tuple(heaviest), execution.note)))
    console.print(Text(report.tables["gaps"].title, style="bold"))
    for text in waterfall_lines(report.tables["gaps"]):
        console.print(plain(text))
    layers = report.tables["layers"]
    ranked = sorted((r for r in layers.rows if (r.get("gap (ms)") or 0.0) > 0.0), key=lambda r: -r["gap (ms)"])
    if ranked:
        console.print(_rich(Table(f"Top {top} layers by gap", layers.columns, tuple(ranked[:top]), layers.note),
                            columns=("#", "layer", "op", "measured (ms)", "as-executed (ms)", "best (ms)",
                                     "best benchmark", "efficiency (%)", "gap (ms)")))
    else:
        console.print(Text("no layer with a gap above zero (a gap needs a profile: --profile BUNDLE)"))
    for name in DETAIL_TABLES:
        if report.tables[name].rows:
            console.print(_rich(report.tables[name]))
    missing = report.tables["missing"]
    if missing.rows:
        console.print(_rich(missing, limit=top))
    console.print(_ceilings(report))
    for note in report.notes:
        console.print(line(f"note: {note}", style="yellow"), soft_wrap=True)  # a command in it stays one line
