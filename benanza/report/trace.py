"""Chrome-trace JSON writer (Perfetto opens it directly): one process per timeline, one
thread per level and lane, so model -> layer -> library call -> kernel stack up on one time axis.

The analysis's "measured run" is the *profiled* run: its kernels were traced under the profiler
with the cuDNN/cuBLAS API logs on, which slows it down. It is named so here, and the timed runs
(no profiler, no logs: the bundle's end-to-end statistics, the latency every ratio uses) get a
process of their own beside it, so that nobody reads the profiled run's length as the latency.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benanza import atomic
from benanza.analyze.tables import LEVELS, Report
from benanza.analyze.timeline import MEASURED

LANE_STRIDE = 1000  # tid = level * LANE_STRIDE + lane
PROFILED = "profiled run (kernel trace under the profiler and API logs: slower than the timed runs)"
TIMED = "timed runs (no profiler, no API logs): median end-to-end"


def timed_span(report: Report) -> dict[str, Any] | None:
    """The timed runs' median end-to-end latency as one model box, its statistics as args (None without)."""
    s = report.summary
    median = s.e2e_ms
    if not median:
        return None
    args: dict[str, Any] = {"median (ms)": median, "runs": s.e2e_runs, "mean (ms)": s.e2e_mean_ms,
                            "p90 (ms)": s.e2e_p90_ms, "min (ms)": s.e2e_min_ms, "max (ms)": s.e2e_max_ms}
    return {"name": report.model["name"], "cat": "model", "ph": "X", "ts": 0.0, "dur": round(median * 1e3, 3),
            "tid": 1, "args": {k: v for k, v in args.items() if v is not None}}


def trace_events(report: Report) -> dict[str, Any]:
    """``{"traceEvents": [...]}`` with complete events (ph "X", ts/dur in us) and name metadata."""
    pids: dict[str, int] = {}
    tids: set[tuple[int, int, str, int]] = set()
    events: list[dict[str, Any]] = []
    timed = timed_span(report)
    if timed is not None and any(span.process == MEASURED for span in report.timeline):
        pids[TIMED] = 1
        events.append({**timed, "pid": 1})
        tids.add((1, 1, "model", 0))
    for span in report.timeline:
        pid = pids.setdefault(PROFILED if span.process == MEASURED else span.process, len(pids) + 1)
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
