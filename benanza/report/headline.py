"""The headline's formatting: the timed runs' spread and the roofline ceilings as every writer
(terminal, HTML) shows them; the figures themselves and the largest gaps are
``benanza.analyze.headline``'s."""

from __future__ import annotations

from typing import Any

from benanza.analyze.tables import Report
from benanza.report.fmt import cell


def latency_spread(report: Report) -> str | None:
    """The timed runs' spread beside their median, as the bundle recorded it (it records no p99):
    'mean 2.576, p90 2.723, min 2.455, max 2.759 ms over 30 runs'; None without a profile."""
    s = report.summary
    stats = [("mean", s.e2e_mean_ms), ("p90", s.e2e_p90_ms), ("min", s.e2e_min_ms), ("max", s.e2e_max_ms)]
    shown = [f"{k} {cell(v, '(ms)')}" for k, v in stats if v is not None]
    if not shown:
        return None
    runs = s.e2e_runs
    return ", ".join(shown) + " ms" + (f" over {runs} runs" if runs else "")


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
