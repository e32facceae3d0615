"""What the analyzer hands to the writers: tables whose column names carry units, and a Report."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


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
    summary: dict[str, Any]  # headline figures, units in the names
    tables: dict[str, Table]  # name -> table, in reading order
    timeline: tuple[Span, ...] = ()
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
