"""Reader for a PyTorch profiler (Kineto) Chrome-trace JSON, plus interval helpers.

Why: Kineto is where GPU kernel times of a PyTorch run come from (CUPTI activity
records), each linked to the CUDA runtime call that launched it (``correlation``)
and to the innermost ATen operator around that launch (``External id``). The
analyzer compares these GPU times with the layer benchmarks, and uses the union of
kernel intervals (``busy_time``) against the run's wall time to measure framework
overhead.

Format (read from a real PyTorch 2.11 trace on an H100): a JSON object with
``traceEvents`` and trace-level fields (``deviceProperties``,
``cuda_runtime_version``, ``baseTimeNanoseconds`` ...). ``X`` events with ``cat``
``cpu_op``, ``cuda_runtime``/``cuda_driver``, ``kernel``, ``gpu_memcpy``,
``gpu_memset``, ``user_annotation`` (record_function / NVTX ranges on the CPU) and
``gpu_user_annotation`` (the same ranges projected on the GPU stream). Times are
microseconds (floats). ``ac2g`` flow events and ``M`` metadata are skipped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from benanza.errors import BenanzaError
from benanza.profile._io import load_json

RUNTIME_CATS = ("cuda_runtime", "cuda_driver")
MEM_CATS = {"gpu_memcpy": "memcpy", "gpu_memset": "memset"}


@dataclass(frozen=True)
class GpuEvent:
    """A kernel, memcpy or memset on the GPU, linked to its launch call and its ATen op."""

    kind: str  # kernel, memcpy or memset
    name: str
    start_us: float
    dur_us: float
    device: int
    stream: int
    correlation: int | None
    external_id: int | None
    runtime: str | None  # the cuda_runtime / cuda_driver call that launched it
    cpu_op: str | None  # innermost cpu_op around the launch (same External id)
    grid: tuple[int, ...] = ()
    block: tuple[int, ...] = ()
    bytes: int | None = None  # memcpy/memset size

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us

    @property
    def interval(self) -> tuple[float, float]:
        return (self.start_us, self.end_us)


@dataclass(frozen=True)
class CpuEvent:
    """A host-side range: an ATen op, a CUDA runtime/driver call, or a user annotation."""

    cat: str
    name: str
    start_us: float
    dur_us: float
    tid: int
    external_id: int | None
    correlation: int | None = None
    input_dims: tuple = ()

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us


@dataclass(frozen=True)
class Annotation:
    """A record_function / NVTX range; ``gpu`` ranges are Kineto's projection on a GPU stream."""

    name: str
    start_us: float
    dur_us: float
    gpu: bool
    external_id: int | None

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us


@dataclass(frozen=True)
class KinetoTrace:
    path: Path
    kernels: tuple[GpuEvent, ...]
    memory_ops: tuple[GpuEvent, ...]  # memcpy and memset
    cpu_ops: tuple[CpuEvent, ...]
    runtime_calls: tuple[CpuEvent, ...]
    annotations: tuple[Annotation, ...]
    devices: tuple[dict[str, Any], ...]  # deviceProperties as Kineto wrote them
    cuda_runtime_version: int | None
    cuda_driver_version: int | None
    notes: tuple[str, ...] = ()

    def gpu_events(self) -> list[GpuEvent]:
        """Kernels and memory operations together, by start time."""
        return sorted(self.kernels + self.memory_ops, key=lambda e: e.start_us)

    def within(self, start_us: float, end_us: float) -> list[GpuEvent]:
        """GPU events that start inside [start_us, end_us] (e.g. a gpu_user_annotation of one run)."""
        return [e for e in self.gpu_events() if start_us <= e.start_us <= end_us]


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _dims(value: Any) -> tuple[int, ...]:
    """A shape; an op's tensor-list argument (aten::cat's inputs) gives its first tensor's shape."""
    if isinstance(value, list) and value and isinstance(value[0], list):
        return _dims(value[0])
    return tuple(int(v) for v in value) if isinstance(value, list) and all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in value) else ()


def event_times(path: Path, index: int, event: dict[str, Any]) -> tuple[float, float]:
    """(ts, dur) of a trace event, in us: both present, finite numbers >= 0.

    Why: a kernel without ``dur`` once counted 0 ms of GPU time and one with ``dur`` 1e18 made
    GPU busy 1e15 ms; every figure of the analysis adds these up, so a bad one is refused here.
    """
    times = []
    for key in ("ts", "dur"):
        value = event.get(key)
        if isinstance(value, str):  # Chrome traces may write times as strings
            try:
                value = float(value)
            except ValueError:
                pass
        if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
            raise BenanzaError(f"{path}: event {index} ({str(event.get('name', ''))[:60]!r}, cat "
                               f"{str(event.get('cat'))[:30]!r}) has no valid {key}: {value!r:.40}")
        times.append(float(value))
    for key, value in zip(("ts", "dur"), times, strict=True):  # both count from the trace's start
        if value < 0:
            raise BenanzaError(f"{path}: event {index} ({str(event.get('name', ''))[:60]!r}) has a negative {key} "
                               f"{value:g}")
    return times[0], times[1]


def read_kineto_trace(path: str | Path) -> KinetoTrace:
    """Parse a Kineto trace JSON (plain or .gz) into GPU events, host events and annotations."""
    path = Path(path)
    data = load_json(path)
    events = data.get("traceEvents") if isinstance(data, dict) else None
    if not isinstance(events, list):
        raise BenanzaError(f"{path}: not a PyTorch/Kineto trace (no 'traceEvents' list)")
    read = ("cpu_op", "user_annotation", "gpu_user_annotation", "kernel", *RUNTIME_CATS, *MEM_CATS)
    xs = [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in read]
    times = [event_times(path, i, e) for i, e in enumerate(xs)]
    for e in xs:
        if not isinstance(e.get("args") or {}, dict):
            raise BenanzaError(f"{path}: event {str(e.get('name', ''))[:60]!r} has args that are not an object")
    cpu_ops: list[CpuEvent] = []
    runtime: list[CpuEvent] = []
    annotations: list[Annotation] = []
    for e, (ts, dur) in zip(xs, times, strict=True):
        cat, args = e.get("cat"), e.get("args") or {}
        if cat == "cpu_op" or cat in RUNTIME_CATS:
            dims = args.get("Input Dims")
            ev = CpuEvent(cat=cat, name=str(e.get("name", "")), start_us=ts, dur_us=dur, tid=_int(e.get("tid")) or 0,
                          external_id=_int(args.get("External id")), correlation=_int(args.get("correlation")),
                          input_dims=tuple(_dims(d) for d in (dims if isinstance(dims, list) else [])
                                           if isinstance(d, list)))
            (cpu_ops if cat == "cpu_op" else runtime).append(ev)
        elif cat in ("user_annotation", "gpu_user_annotation"):
            annotations.append(Annotation(name=str(e.get("name", "")), start_us=ts,
                                          dur_us=dur, gpu=cat == "gpu_user_annotation",
                                          external_id=_int(args.get("External id"))))
    by_correlation = {c.correlation: c for c in runtime if c.correlation is not None}
    by_external: dict[int, CpuEvent] = {}
    for op in sorted(cpu_ops, key=lambda o: o.start_us):
        if op.external_id is not None:
            by_external.setdefault(op.external_id, op)
    kernels: list[GpuEvent] = []
    memory: list[GpuEvent] = []
    for e, (ts, dur) in zip(xs, times, strict=True):
        cat, args = e.get("cat"), e.get("args") or {}
        if cat != "kernel" and cat not in MEM_CATS:
            continue
        corr, ext = _int(args.get("correlation")), _int(args.get("External id"))
        launch = by_correlation.get(corr)
        op = by_external.get(ext) if ext is not None else None
        ev = GpuEvent(kind="kernel" if cat == "kernel" else MEM_CATS[cat], name=str(e.get("name", "")),
                      start_us=ts, dur_us=dur,
                      device=_int(args.get("device", e.get("pid"))) or 0,
                      stream=_int(args.get("stream", e.get("tid"))) or 0, correlation=corr, external_id=ext,
                      runtime=launch.name if launch else None, cpu_op=op.name if op else None,
                      grid=_dims(args.get("grid")), block=_dims(args.get("block")), bytes=_int(args.get("bytes")))
        (kernels if cat == "kernel" else memory).append(ev)
    if not (kernels or memory or cpu_ops or runtime):
        raise BenanzaError(f"{path}: Kineto trace holds no cpu_op, CUDA runtime or GPU event")
    notes: list[str] = []
    if cpu_ops and not kernels:
        notes.append(f"{path}: no GPU kernel events (a CPU-only trace, or CUDA activity was not recorded)")
    unlinked = sum(1 for k in kernels if k.runtime is None)
    if unlinked:
        notes.append(f"{path}: {unlinked} kernel(s) without a matching runtime launch (correlation)")
    meta = data if isinstance(data, dict) else {}
    return KinetoTrace(
        path=path, kernels=tuple(sorted(kernels, key=lambda k: k.start_us)),
        memory_ops=tuple(sorted(memory, key=lambda k: k.start_us)),
        cpu_ops=tuple(sorted(cpu_ops, key=lambda o: o.start_us)),
        runtime_calls=tuple(sorted(runtime, key=lambda o: o.start_us)),
        annotations=tuple(sorted(annotations, key=lambda a: a.start_us)),
        devices=tuple(d for d in (meta.get("deviceProperties") if isinstance(meta.get("deviceProperties"), list)
                                  else []) if isinstance(d, dict)),
        cuda_runtime_version=_int(meta.get("cuda_runtime_version")),
        cuda_driver_version=_int(meta.get("cuda_driver_version")), notes=tuple(notes))


def _merged(intervals: Iterable[tuple[float, float]]) -> tuple[float, list[tuple[float, float]]]:
    """Sorted union of intervals, relative to the earliest start (trace clocks are ~1e12 us: keep precision)."""
    items = sorted((float(s), float(e)) for s, e in intervals)
    for start, end in items:
        if end < start:
            raise ValueError(f"interval ends before it starts: ({start}, {end})")
    origin = items[0][0] if items else 0.0
    out: list[tuple[float, float]] = []
    for start, end in ((s - origin, e - origin) for s, e in items):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return origin, out


def busy_time(intervals: Iterable[tuple[float, float]]) -> float:
    """Length of the union of (start, end) intervals: the GPU time of a run whose kernels may overlap.

    Never the sum of durations: overlapping kernels (several streams) are counted once.
    """
    return sum(end - start for start, end in _merged(intervals)[1])


def gaps(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Idle stretches (start, end) between the merged intervals, in time order."""
    origin, merged = _merged(intervals)
    return [(a[1] + origin, b[0] + origin) for a, b in pairwise(merged) if b[0] > a[1]]
