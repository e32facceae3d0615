"""How a cell of a report table is spelled as text; one place, so every writer agrees."""

from __future__ import annotations

from typing import Any

EMPTY = "-"


def cell(value: Any, column: str = "") -> str:
    """Text of one value; the column name (which carries the unit) picks the precision."""
    if value is None:
        return EMPTY
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if "(%)" in column:
            return f"{value:.1f}" if abs(value) >= 1 else f"{value:.2g}"
        if "(x)" in column or column.startswith("BR"):
            return f"{value:.3g}"
        if "FLOP" in column or column == "bytes":
            return f"{value:.3g}"
        return f"{value:.4g}" if abs(value) < 1e5 else f"{value:,.0f}"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {cell(v, column)}" for k, v in value.items()) or EMPTY
    if isinstance(value, (list, tuple)):
        return ", ".join(cell(v, column) for v in value)
    return str(value)
