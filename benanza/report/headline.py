"""The headline of an analysis: the few figures a performance engineer reads first, and the
largest gaps with what fixes each. Built only on ``Report.summary`` and its tables, so every
writer (terminal, HTML, compare) shows the same figures."""

from __future__ import annotations

from typing import Any

from benanza.analyze.tables import Report
from benanza.report.fmt import cell

# (label shown, summary key, what it means); a key a report lacks is shown as "-".
FIGURES: tuple[tuple[str, str, str], ...] = (
    ("LBL sequential (ms)", "LBL_seq (ms)",
     "lower-bound latency: the cheapest equivalent execution from measured implementations, one call after "
     "another, under the run's own numerics (docs/METRICS.md)"),
    ("LBL parallel (ms)", "LBL_par (ms)", "the same execution along the critical path of the layer graph"),
    ("LBL measured share", "LBL_seq measured share",
     "share of LBL_seq charged measured calls; the rest is charged bytes at the measured bandwidth (a roofline)"),
    ("measured end-to-end (ms)", "measured end-to-end (ms)",
     "the framework's own latency, without profiler: the median of the timed runs"),
    ("GPU time, kernels only (ms)", "GPU busy (ms)", "time the GPU ran kernels during the profiled run"),
    ("Benanza ratio (LBL_seq / GPU kernel time)", "Benanza ratio",
     "lower-bound latency over the run's kernel-only GPU time; 1 means the GPU work is as fast as the vendor "
     "libraries allow"),
    ("predicted speedup (x)", "predicted speedup vs end-to-end (x)",
     "measured latency over the joint estimate: every fix applied under the run's numerics (= LBL parallel)"),
)


MEDIAN = "measured end-to-end (ms)"  # the figure the timed runs' spread (latency_spread) stands beside


def figures(report: Report) -> list[tuple[str, Any, str]]:
    """(label, value or None, explanation) for each headline figure, in reading order."""
    return [(label, report.summary.get(key), why) for label, key, why in FIGURES]


def latency_spread(report: Report) -> str | None:
    """The timed runs' spread beside their median, as the bundle recorded it (it records no p99):
    'mean 2.576, p90 2.723, min 2.455, max 2.759 ms over 30 runs'; None without a profile."""
    s = report.summary
    stats = [(k, s.get(f"end-to-end {k} (ms)")) for k in ("mean", "p90", "min", "max")]
    shown = [f"{k} {cell(v, '(ms)')}" for k, v in stats if v is not None]
    if not shown:
        return None
    runs = s.get("end-to-end runs")
    return ", ".join(shown) + " ms" + (f" over {runs} runs" if runs else "")


def top_gaps(report: Report, n: int = 3) -> list[tuple[str, float, str]]:
    """The ``n`` largest positive gaps of the waterfall: (step, ms, the fix the analysis named)."""
    table = report.tables.get("gaps")
    rows = [r for r in (table.rows if table else ()) if r.get("kind") == "gap" and (r.get("ms") or 0) > 0]
    rows.sort(key=lambda r: -r["ms"])
    return [(r["step"], r["ms"], r.get("fix") or "see docs/METRICS.md") for r in rows[:n]]


BANDWIDTHS = ("bandwidth (GB/s)", "L2-resident bandwidth (GB/s)")


def ceilings(report: Report) -> list[tuple[str, Any, str, Any]]:
    """(ceiling, value, where it comes from, the GPU's physical peak or None) for each roofline
    ceiling: the bandwidths, then one peak FLOP/s per precision (docs/METRICS.md, Ceilings)."""
    c = report.ceilings
    source, physical = c.get("source") or {}, c.get("physical peak") or {}
    rows = [(name, c.get(name), source.get(name) or "", physical.get(name)) for name in BANDWIDTHS]
    peaks, physical_peaks = source.get("peak (FLOP/s)") or {}, physical.get("peak (FLOP/s)") or {}
    rows += [(f"{p} peak (FLOP/s)", v, peaks.get(p) or "", physical_peaks.get(p))
             for p, v in (c.get("peak (FLOP/s)") or {}).items()]
    return rows


def ceiling_kind(source: str) -> str:
    """The one word of a ceiling's source a plot has room for: measured, raised or physical."""
    first = source.split(" ", 1)[0].rstrip(":")
    return first if first in ("measured", "raised", "physical") else "given"
