"""Side-by-side comparison of analyses of one model (two bundles, or two systems): the same
headline for each, and per-layer figures with the deltas to the first. A data step only;
``benanza.report.compare_report`` prints it (terminal, CSV, HTML)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benanza.analyze.headline import FIGURES, top_gaps
from benanza.analyze.tables import Report, Table, records
from benanza.errors import BenanzaError

# Per-layer figures compared (layer-table columns); each side gets one column per figure.
LAYER_FIGURES = ("measured (ms)", "as-executed (ms)", "best (ms)", "gap (ms)")


@dataclass(frozen=True)
class Comparison:
    labels: tuple[str, ...]
    headline: Table  # one row per headline figure, one column per side
    layers: Table  # one row per layer: figures per side, deltas of each side to the first
    totals: dict[str, dict[str, float | None]]  # side -> figure -> sum over layers (None: no layer has it)
    model: str = ""  # the model's name

    def records(self) -> list[dict]:
        """The per-layer table as records a DataFrame takes (snake_case keys, units in the names)."""
        return records(self.layers)


def _total(rows: Sequence[dict], column: str) -> float | None:
    values = [r[column] for r in rows if r.get(column) is not None]
    return sum(values) if values else None


def compare(sides: Sequence[tuple[str, Report]]) -> Comparison:
    """Join the layer tables on the layer index (the same model, so the same layers in the same order)."""
    if len(sides) < 2:
        raise BenanzaError(f"compare: needs at least two analyses, got {len(sides)}")
    labels = tuple(label for label, _ in sides)
    if len(set(labels)) != len(labels):
        raise BenanzaError(f"compare: two sides share a label ({', '.join(labels)})")
    first = sides[0][1]
    for label, report in sides[1:]:
        a, b = first.tables["layers"].rows, report.tables["layers"].rows
        if [(r["#"], r["op"]) for r in a] != [(r["#"], r["op"]) for r in b]:
            raise BenanzaError(f"compare: {label} is an analysis of another model than {labels[0]} "
                               f"({report.model['name']} vs {first.model['name']}): layers differ")
    headline_rows = [{"figure": name, **{label: getattr(report.summary, attribute) for label, report in sides}}
                     for name, attribute, _ in FIGURES]
    for rank in range(3):
        row = {"figure": f"gap #{rank + 1}"}
        for label, report in sides:
            gaps = top_gaps(report)
            row[label] = f"{gaps[rank][0]} {gaps[rank][1]:.3g} ms" if rank < len(gaps) else None
        headline_rows.append(row)
    headline = Table("Headline", ("figure", *labels), tuple(headline_rows))

    columns = ["#", "layer", "op"]
    for figure in LAYER_FIGURES:
        unit = figure.removesuffix(" (ms)")
        columns += [f"{unit} {label} (ms)" for label in labels]
        columns += [f"{unit} {label} - {labels[0]} (ms)" for label in labels[1:]]
    rows = []
    per_side = [report.tables["layers"].rows for _, report in sides]
    for n, base in enumerate(per_side[0]):
        row = {"#": base["#"], "layer": base["layer"], "op": base["op"]}
        for figure in LAYER_FIGURES:
            unit = figure.removesuffix(" (ms)")
            values = [side[n].get(figure) for side in per_side]
            for label, value in zip(labels, values, strict=True):
                row[f"{unit} {label} (ms)"] = value
            for label, value in zip(labels[1:], values[1:], strict=True):
                row[f"{unit} {label} - {labels[0]} (ms)"] = (None if value is None or values[0] is None
                                                             else value - values[0])
        rows.append(row)
    totals = {label: {figure: _total(side, figure) for figure in LAYER_FIGURES}
              for label, side in zip(labels, per_side, strict=True)}
    layers = Table("Per layer, sorted by the largest change", tuple(columns), tuple(rows),
                   note="deltas are each side minus the first; totals are sums over the layers with a value")
    return Comparison(labels, headline, layers, totals, str(first.model.get("name", "")))
