"""What the analyzer hands to the writers: tables whose column names carry units, and a Report."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from benanza.analyze.summary import Summary

# Units a label may end with, in parentheses: "LBL_seq (ms)" is the figure LBL_seq in ms.
UNITS = ("ms", "us", "s", "x", "%", "B", "bytes", "MB", "GB/s", "FLOP/s", "GFLOP/s", "TFLOP/s")
_UNIT = re.compile(r"\s*\((" + "|".join(re.escape(u) for u in UNITS) + r")\)\s*$")
_KEY_WORDS = {"#": "index", "%": " pct "}


def machine_key(label: str) -> tuple[str, str | None]:
    """(snake_case key, unit) of a display label, for readers that are programs: the unit is taken
    from a trailing ``(unit)`` and stays in the key too (``"LBL_seq (ms)"`` -> ``("lbl_seq_ms", "ms")``),
    so that one name never means two units."""
    found = _UNIT.search(label)
    text = label
    for word, spelled in _KEY_WORDS.items():
        text = text.replace(word, spelled)
    key = re.sub(r"[^0-9a-z]+", "_", text.lower()).strip("_")
    return key or "value", found.group(1) if found else None


@dataclass(frozen=True)
class Table:
    """One result table; every writer prints the same columns in the same order."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[dict[str, Any], ...] = ()
    note: str = ""

    def column(self, name: str) -> list[Any]:
        return [row.get(name) for row in self.rows]


@dataclass(frozen=True)
class Span:
    """One box on the trace timeline: ``process`` is a timeline, ``level`` a row kind."""

    process: str  # "measured run", "lower bound (best, parallel)", "joint estimate"
    level: str  # "model", "layer", "library call", "kernel"
    lane: int  # parallel boxes of one level go to separate lanes
    name: str
    start_us: float
    dur_us: float
    args: dict[str, Any] = field(default_factory=dict)


LEVELS = ("model", "layer", "library call", "kernel")


@dataclass(frozen=True)
class Report:
    """All results of one analysis, plus the context every output must carry."""

    schema: int
    model: dict[str, Any]
    system: dict[str, Any]
    constraints: str
    ceilings: dict[str, Any]
    summary: Summary  # headline figures (their display labels: Summary.labelled)
    tables: dict[str, Table]  # name -> table, in reading order
    timeline: tuple[Span, ...] = ()
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The report as plain data, the summary under its display labels (``Summary.labelled``)."""
        return {**asdict(self), "summary": self.summary.labelled()}

    def figures(self) -> dict[str, Any]:
        """The summary keyed for programs: snake_case key -> value (``machine_key``; units in the keys)."""
        return {machine_key(label)[0]: value for label, value in self.summary.labelled().items()}

    def records(self, table: str) -> list[dict[str, Any]]:
        """Rows of one table as records a DataFrame takes, keyed like ``figures``."""
        return records(self.tables[table])


def records(table: Table) -> list[dict[str, Any]]:
    """A table's rows keyed by ``machine_key`` of their column labels."""
    keys = {col: machine_key(col)[0] for col in table.columns}
    return [{keys.get(k) or machine_key(k)[0]: v for k, v in row.items()} for row in table.rows]
