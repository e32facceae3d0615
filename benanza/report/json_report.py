"""JSON writer: the whole Report, with its schema version and system, as one document."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from benanza import atomic
from benanza.analyze.tables import Report


def _finite(value: Any) -> Any:
    """JSON has no NaN/inf: write them as null rather than emit invalid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def to_json(report: Report) -> str:
    """Schema version and system first, then the model, the summary and every table."""
    data = report.to_dict()
    ordered = {"schema": data.pop("schema"), "system": data.pop("system"), **data}
    return json.dumps(_finite(ordered), indent=1, allow_nan=False)


def write_json(report: Report, path: str | Path) -> Path:
    path = Path(path)
    atomic.write_text(path, to_json(report) + "\n")
    return path
