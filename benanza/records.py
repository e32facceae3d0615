"""The records every stage may import: one run record, many writers (after google/benchmark's
``BenchmarkReporter::Run``), and what a profile says a framework executed.

The C++ harness prints one JSON line per measured benchmark with exactly these
fields; the runner parses them into ``Result`` and the database stores them.
Other line kinds the harness prints: ``{"event": "start", "job": N}`` before a job
and ``{"event": "end", "job": N}`` after it, so that a crash or hang is pinned
on the job that was running; a ``--serve`` process prints ``{"event": "ready"}``
after each job list it was handed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any

from benanza import SCHEMA_VERSION
from benanza.library import L2, Fusion, Status

_OK = Status.OK.value  # Result.ok runs for every row the analyzer reads: no enum lookup each time


@dataclass(frozen=True)
class Result:
    layer_key: str
    api: str  # a benanza.library.Api value
    algorithm: str  # legacy enum spelling, cuBLAS algo id, or graph-API engine config
    dtype: str  # a benanza.library.Precision value
    math: str  # a benanza.library.Math value
    fusion: str  # a benanza.library.Fusion value
    status: str  # a benanza.library.Status value
    l2: str = L2.WARM.value
    layout: str = ""
    message: str = ""
    median_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    stddev_ms: float | None = None
    repetitions: int = 0
    host_ms: float | None = None  # host-side cost of one call (enqueue), not GPU time
    workspace_bytes: int | None = None
    # "graph" (captured CUDA graph of many calls), "stream" (back-to-back), "cupti" (--l2 cold: kernel durations)
    timing: str = ""
    max_rel_error: float | None = None
    tolerance: float | None = None
    heuristic_rank: int | None = None  # position in the library heuristic's ranking, 0 = first
    find_rank: int | None = None  # position in cudnnFind*/autotune ranking, 0 = fastest
    job: int | None = None
    notes: dict[str, Any] = field(default_factory=dict)  # numerical/behaviour notes, knobs, ...
    schema: int = SCHEMA_VERSION

    def key(self) -> tuple[str, ...]:
        """What makes a measurement unique on one system (the database's primary key)."""
        return (self.layer_key, self.api, self.algorithm, self.dtype, self.fusion, self.l2, self.layout)

    @property
    def ok(self) -> bool:
        return self.status == _OK

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        """Build from a harness line; unknown fields go to ``notes`` rather than being lost."""
        names = {f.name for f in fields(cls)}
        known = {k: v for k, v in data.items() if k in names}
        extra = {k: v for k, v in data.items() if k not in names and k != "event"}
        if extra:
            known["notes"] = {**known.get("notes", {}), **extra}
        return cls(**known)


# ------------------------------------------------------------- profile records
# What the profile readers and the mapping produce and the planner and analyzer read.


@dataclass(frozen=True)
class ExecutedCall:
    """The library call a framework made for one layer, as the cuDNN/cuBLAS logs show it.

    ``algorithm`` is spelled like the benchmarks spell it (legacy enum name, cuBLAS algo
    id, or the graph API's ``engine_config_name``). ``key`` is the layer key or, when the
    framework ran a fused call, the fusion key under which the fused benchmark is stored.
    """

    api: str
    algorithm: str
    precision: str  # a Precision value: the math actually used (TF32 for fp32 data on Hopper)
    fusion: str = Fusion.NONE.value
    key: str | None = None  # None: the layer's own key
    layout: str = ""  # "NCHW" / "NHWC" of a convolution's input as logged; "" where unknown or layout-free


# Spellings of an ExecutedCall that stands for a framework's own fused kernel (ONNX Runtime's
# contrib nodes, benanza.profile.contrib): ANY api and/or algorithm = the fastest benchmark of
# that fusion and precision; api COPY with algorithm ROOFLINE = the layer's bytes at peak bandwidth.
ANY = "*"
ROOFLINE = "roofline bytes"


@dataclass(frozen=True)
class KernelSpan:
    """One GPU kernel or copy of a measured run (times relative to the run's start)."""

    name: str
    start_us: float
    dur_us: float
    copy: bool = False  # a memcpy or memset, not a kernel


@dataclass(frozen=True)
class LayerProfile:
    """What the profile knows about one model layer; None where it does not know."""

    gpu_ms: float | None = None  # union of the layer's kernel intervals in one run
    kernel_count: int | None = None
    executed: ExecutedCall | None = None
    fused_into: int | None = None  # ran inside this other layer's (fused) call
    kernels: tuple[KernelSpan, ...] = ()
    # Calls the framework made for this layer after ``executed`` (ONNX Runtime adds a
    # conv's bias with a cudnnAddTensor of its own): as-executed counts them too.
    extra: tuple[ExecutedCall, ...] = ()


class OverheadKind(StrEnum):
    """GPU work of a run that belongs to no model layer."""

    KERNEL = "kernel"  # framework-only kernel (e.g. a cast or a fill)
    COPY = "copy"  # memcpy / memset
    EXTRA_LAYER = "extra layer"  # a layer the model does not need (inserted transpose, padding)


@dataclass(frozen=True)
class UnmappedWork:
    name: str
    ms: float
    kind: OverheadKind = OverheadKind.KERNEL


@dataclass(frozen=True)
class Profile:
    """A measured framework run, already mapped onto the model's layer indices."""

    layers: Mapping[int, LayerProfile] = field(default_factory=dict)
    e2e_ms: float | None = None  # end-to-end latency, median over runs
    gpu_busy_ms: float | None = None  # union of all kernel intervals of one run (kernels only)
    copy_ms: float | None = None  # union of the run's memcpy/memset intervals (not in gpu_busy_ms)
    kernel_count: int | None = None
    unmapped: tuple[UnmappedWork, ...] = ()
    framework: str = ""
    # The run's recorded framework settings (meta.json "extra": cudnn.benchmark, use_tf32, ...): a
    # gap's named fix must be a change the run has not already made.
    settings: Mapping[str, Any] = field(default_factory=dict)
    # the other end-to-end statistics the bundle recorded (runs, mean, p90, min, max), reported beside the median
    e2e_stats: Mapping[str, float] = field(default_factory=dict)


# ---------------------------------------------------------------- the schema of a measurement
# One definition, applied to every harness line the runner reads (``checked_result``) and to every
# benchmarks row the database reads, merges or exports (``benanza.store.db``): a row that no harness line
# could have produced is refused, never used (a negative, zero, NaN or text median once gave
# LBL_seq -999.999 ms with exit code 0).

MAX_INT = 2**63 - 1  # what SQLite's INTEGER holds
TEXT_CAP = 65_536  # characters of one text value: a longer one is no measurement's (a 10 MB GPU name)
_TEXT_FIELDS = ("layer_key", "api", "algorithm", "dtype", "math", "fusion", "status", "l2", "layout", "message",
                "timing")
_REQUIRED = ("layer_key", "api", "algorithm", "dtype", "math", "fusion", "status")
_TIME_FIELDS = ("median_ms", "min_ms", "max_ms", "stddev_ms", "host_ms", "max_rel_error", "tolerance")
_COUNT_FIELDS = ("repetitions", "workspace_bytes", "heuristic_rank", "find_rank", "job", "schema")
_STATUSES = frozenset(s.value for s in Status)


def _shown(value: Any) -> str:
    return str(value)[:40]


def result_problem(data: Mapping[str, Any]) -> str:
    """What makes ``data`` no measurement, in a few words; "" when it is one.

    Every field has its type (text at most ``TEXT_CAP`` characters, ``notes`` an object); times
    and errors are finite and >= 0; counts are integers in [0, 2^63); the status is a ``Status``;
    an ok result has a positive median. Runs for every row the analyzer reads, so it is written
    for speed (no exceptions, no per-call allocation).
    """
    for name in _REQUIRED:
        if data.get(name) is None:
            return f"no '{name}'"
    for name in _TEXT_FIELDS:
        value = data.get(name)
        if value is not None and (type(value) is not str or len(value) > TEXT_CAP):
            return (f"'{name}' is {type(value).__name__}, not text" if type(value) is not str
                    else f"'{name}' is {len(value)} characters long (at most {TEXT_CAP})")
    for name in _TIME_FIELDS:
        value = data.get(name)
        if value is not None and not ((type(value) is float or type(value) is int)
                                      and 0 <= value < math.inf):
            return f"'{name}' = {_shown(value)} is not a finite non-negative number"
    for name in _COUNT_FIELDS:
        value = data.get(name)
        if value is not None and not (type(value) is int and 0 <= value <= MAX_INT):
            return f"'{name}' = {_shown(value)} is not an integer in [0, 2^63)"
    notes = data.get("notes")
    if notes is not None and type(notes) is not dict:
        return f"'notes' is {type(notes).__name__}, not an object"
    status = data["status"]
    if status not in _STATUSES:
        return f"unknown status {str(status)[:40]!r}"
    if status == _OK and not (data.get("median_ms") or 0) > 0:
        median = data.get("median_ms")
        return "status ok without a median_ms" if median is None else f"status ok with median_ms {median!r}, not > 0"
    return ""


FIELD_NAMES = tuple(f.name for f in fields(Result))  # a Result's attributes, in the order __init__ sets them


def result_from_fields(data: dict[str, Any]) -> Result:
    """The Result whose attributes are ``data`` (every one of ``FIELD_NAMES``, in that order), which it
    keeps as they are: what ``Result(**data)`` builds, without the frozen ``__init__``'s one
    ``object.__setattr__`` per field (17 of 55 CPU us a row of ``db.results_for``). For checked values only."""
    made = object.__new__(Result)
    object.__setattr__(made, "__dict__", data)
    return made


def checked_result(data: dict[str, Any]) -> Result:
    """A ``Result`` from a harness line, or ValueError saying what is wrong with the line
    (``result_problem``). A line that fails is garbage: none of its values is kept."""
    problem = result_problem(data)
    if problem:
        raise ValueError(problem)
    return Result.from_dict(data)


# ---------------------------------------------------------------- the generated project's manifest

MANIFEST = "manifest.json"  # in every generated project: codegen writes it, the runner reads it
MANIFEST_SCHEMA = 1  # the runner refuses a manifest of another schema


@dataclass(frozen=True)
class ManifestJob:
    """One entry of a manifest's ``jobs``, as codegen writes it: where the job is (executable, its
    index in the job table) and what it measures (``db.JobKey.of`` reads the identity fields)."""

    executable: str
    job: int
    layer_key: str
    api: str  # a benanza.library.Api value
    dtype: str  # a benanza.library.Precision value
    math: str
    fusion: str
    layout: str
    shapes: Any  # the builder's readable description
    algorithms: list[str]


@dataclass(frozen=True)
class JobKey:
    """A manifest job's identity (the key of a completed job in the database); ``algorithms`` is the
    canonical JSON list."""

    layer_key: str
    api: str
    dtype: str
    fusion: str
    l2: str
    algorithms: str
    layout: str = ""

    @classmethod
    def of(cls, job: Mapping[str, Any], l2: str) -> JobKey:
        algos = json.dumps(sorted(str(a) for a in job.get("algorithms", ["*"])), separators=(",", ":"))
        return cls(str(job["layer_key"]), str(job["api"]), str(job["dtype"]), str(job.get("fusion", "none")),
                   l2, algos, str(job.get("layout") or ""))
