"""Chrome-trace JSON writer (Perfetto opens it directly): one process per timeline, one
thread per level and lane, so model -> layer -> library call -> kernel stack up on one time axis."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benanza import atomic
from benanza.analyze.tables import LEVELS, Report

LANE_STRIDE = 1000  # tid = level * LANE_STRIDE + lane


def trace_events(report: Report) -> dict[str, Any]:
    """``{"traceEvents": [...]}`` with complete events (ph "X", ts/dur in us) and name metadata."""
    pids: dict[str, int] = {}
    tids: set[tuple[int, int, str, int]] = set()
    events: list[dict[str, Any]] = []
    for span in report.timeline:
        pid = pids.setdefault(span.process, len(pids) + 1)
        level = LEVELS.index(span.level)
        tid = level * LANE_STRIDE + span.lane + 1
        tids.add((pid, tid, span.level, span.lane))
        events.append({"name": span.name, "cat": span.level, "ph": "X", "ts": round(span.start_us, 3),
                       "dur": round(span.dur_us, 3), "pid": pid, "tid": tid, "args": span.args})
    meta: list[dict[str, Any]] = []
    for process, pid in pids.items():
        meta.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": process}})
        meta.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
    for pid, tid, level, lane in sorted(tids):
        name = level if lane == 0 else f"{level} ({lane + 1})"
        meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
        meta.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
    return {"traceEvents": meta + events, "displayTimeUnit": "ms",
            "otherData": {"schema": report.schema, "system": report.system, "model": report.model["name"],
                          "batch": report.model["batch"], "constraints": report.constraints}}


def write_trace(report: Report, path: str | Path) -> Path:
    path = Path(path)
    atomic.write_text(path, json.dumps(trace_events(report)))
    return path
