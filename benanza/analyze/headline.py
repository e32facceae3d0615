"""The headline of an analysis: the few figures a performance engineer reads first, and the
largest gaps with what fixes each. Built only on ``Report.summary`` and its tables, so every
writer (terminal, HTML, compare) and the comparison's data step show the same figures."""

from __future__ import annotations

from typing import Any

from benanza.analyze.tables import Report

# (label shown, Summary attribute, what it means); a figure that is None is shown as "-".
FIGURES: tuple[tuple[str, str, str], ...] = (
    ("LBL sequential (ms)", "lbl_seq_ms",
     "lower-bound latency: the cheapest equivalent execution from measured implementations, one call after "
     "another, under the run's own numerics (docs/METRICS.md)"),
    ("LBL parallel (ms)", "lbl_par_ms", "the same execution along the critical path of the layer graph"),
    ("LBL measured share", "measured_share",
     "share of LBL_seq charged measured calls; the rest is charged bytes at the measured bandwidth (a roofline)"),
    ("measured end-to-end (ms)", "e2e_ms",
     "the framework's own latency, without profiler: the median of the timed runs"),
    ("GPU time, kernels only (ms)", "gpu_busy_ms", "time the GPU ran kernels during the profiled run"),
    ("Benanza ratio (LBL_seq / GPU kernel time)", "benanza_ratio",
     "lower-bound latency over the run's kernel-only GPU time; 1 means the GPU work is as fast as the vendor "
     "libraries allow"),
    ("predicted speedup (x)", "speedup_e2e",
     "measured latency over the joint estimate: every fix applied under the run's numerics (= LBL parallel)"),
)


MEDIAN = "measured end-to-end (ms)"  # the figure the timed runs' spread (latency_spread) stands beside


def figures(report: Report) -> list[tuple[str, Any, str]]:
    """(label, value or None, explanation) for each headline figure, in reading order."""
    return [(label, getattr(report.summary, name), why) for label, name, why in FIGURES]


def top_gaps(report: Report, n: int = 3) -> list[tuple[str, float, str]]:
    """The ``n`` largest positive gaps of the waterfall: (step, ms, the fix the analysis named)."""
    table = report.tables.get("gaps")
    rows = [r for r in (table.rows if table else ()) if r.get("kind") == "gap" and (r.get("ms") or 0) > 0]
    rows.sort(key=lambda r: -r["ms"])
    return [(r["step"], r["ms"], r.get("fix") or "see docs/METRICS.md") for r in rows[:n]]


def library_call_ratio(batch: int, summary: dict[str, Any]) -> tuple[Any, Any]:
    """The library-call check a campaign table shows: at batch 1 under cold L2 (each call after kernels
    that left L2 full of dirty lines, timed by its kernels' durations: docs/METRICS.md), warm
    otherwise; (ratio, layers)."""
    if batch == 1:
        return summary.get("as-executed cold L2 / measured, library calls"), summary.get("library-call layers, cold L2")
    return (summary.get("as-executed / measured, library calls"),
            summary.get("library-call layers (as-executed check)"))
