"""JSON writer: the whole Report, with its schema version and system, as one document whose keys are
snake_case with units as data (docs/analysis.schema.json), display labels beside them."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from benanza import atomic
from benanza.analyze.tables import Report, Table, machine_key, records


def _finite(value: Any) -> Any:
    """JSON has no NaN/inf: write them as null rather than emit invalid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


# The JSON document's own version (docs/analysis.schema.json); 2: snake_case keys with units as data
# ("figures", table "columns" and rows), display labels kept beside them for people ("summary", "label").
REPORT_SCHEMA = 2
SCHEMA_FILE = "docs/analysis.schema.json"


def _table(table: Table) -> dict[str, Any]:
    columns = [{"key": key, "label": col, "unit": unit} for col in table.columns for key, unit in [machine_key(col)]]
    return {"title": table.title, "note": table.note, "columns": columns, "rows": records(table)}


def _keyed(value: Any) -> Any:
    """``value`` with every dict key, at any depth, a ``machine_key``."""
    if isinstance(value, dict):
        return {machine_key(str(k))[0]: _keyed(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_keyed(v) for v in value]
    return value


def _figures(labelled: dict[str, Any]) -> dict[str, Any]:
    return {key: {"value": _keyed(value), "unit": unit, "label": label}
            for label, value in labelled.items() for key, unit in [machine_key(label)]}


def to_dict(report: Report) -> dict[str, Any]:
    """The document (docs/analysis.schema.json): schema version and system first, then the model, the
    ceilings and figures (snake_case key -> value, unit, label), the same summary under its display
    labels, every table (columns with key, label and unit; rows by key)."""
    data = report.to_dict()
    return {"schema": REPORT_SCHEMA, "schema_file": SCHEMA_FILE, "system": _keyed(data["system"]),
            "model": _keyed(data["model"]), "constraints": data["constraints"], "ceilings": _figures(data["ceilings"]),
            "figures": _figures(data["summary"]), "summary": data["summary"],
            "tables": {machine_key(name)[0]: _table(t) for name, t in report.tables.items()},
            "timeline": _keyed(data["timeline"]),
            "notes": data["notes"]}


def to_json(report: Report) -> str:
    return json.dumps(_finite(to_dict(report)), indent=1, allow_nan=False)


def write_json(report: Report, path: str | Path) -> Path:
    path = Path(path)
    atomic.write_text(path, to_json(report) + "\n")
    return path
