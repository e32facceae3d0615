"""How busy the host's CPUs were while a campaign ran (bench/cluster_scaling.py, issue 35): ``/proc/stat``
sampled once a second on a thread, the busy fraction of all CPUs over the run (mean) and over each
second (max). Linux only; elsewhere the sampler records nothing."""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROC_STAT = Path("/proc/stat")
IDLE_FIELDS = (3, 4)  # idle, iowait: of user nice system idle iowait irq softirq steal (guest is in user)
COUNTED_FIELDS = 8  # guest and guest_nice are already counted in user and nice


@dataclass(frozen=True)
class CpuTimes:
    """The all-CPU line of ``/proc/stat``: busy and total clock ticks since boot, and the CPUs counted."""

    busy: int
    total: int
    cpus: int


def cpu_times(text: str) -> CpuTimes:
    """``/proc/stat``'s text -> its all-CPU ticks (busy: everything but idle and iowait) and the number of
    ``cpuN`` lines (the CPUs online)."""
    lines = text.splitlines()
    head = next((line.split() for line in lines if line.startswith("cpu ")), None)
    if head is None:
        raise ValueError("no 'cpu ' line in /proc/stat text")
    ticks = [int(x) for x in head[1:1 + COUNTED_FIELDS]]
    idle = sum(ticks[i] for i in IDLE_FIELDS if i < len(ticks))
    cpus = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    return CpuTimes(busy=sum(ticks) - idle, total=sum(ticks), cpus=cpus)


def busy_fraction(before: CpuTimes, after: CpuTimes) -> float:
    """The busy fraction of all CPUs between two readings (0 when no tick passed)."""
    total = after.total - before.total
    return (after.busy - before.busy) / total if total > 0 else 0.0


@dataclass
class CpuSampler:
    """Reads ``/proc/stat`` at ``start``, every ``interval_s`` on a daemon thread, and at ``stop`` (or as a
    context manager); ``summary()`` gives the mean busy fraction (start to stop), the largest
    one-interval fraction and the per-interval series (whole intervals only)."""

    interval_s: float = 1.0
    path: Path = PROC_STAT
    readings: list[CpuTimes] = field(default_factory=list)  # at start, then every interval
    final: CpuTimes | None = None  # at stop
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    def _read(self) -> CpuTimes | None:
        try:
            return cpu_times(self.path.read_text())
        except (OSError, ValueError):  # not Linux: nothing to sample
            return None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            if (now := self._read()) is not None:
                self.readings.append(now)

    def start(self) -> CpuSampler:
        if (now := self._read()) is not None:
            self.readings.append(now)
        self._thread = threading.Thread(target=self._loop, name="cpu-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.final = self._read()

    def __enter__(self) -> CpuSampler:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def summary(self) -> dict[str, Any]:
        """``mean``: busy fraction of all CPUs over the whole run; ``max``: of the busiest interval;
        ``series``: each whole interval's; None where nothing was read."""
        r = self.readings
        last = self.final or (r[-1] if r else None)
        series = [busy_fraction(a, b) for a, b in itertools.pairwise(r)]
        return {"mean": busy_fraction(r[0], last) if r and last is not r[0] else None,
                "max": max(series) if series else None, "samples": len(series),
                "cpus": last.cpus if last else None, "interval_s": self.interval_s,
                "series": [round(x, 3) for x in series]}
