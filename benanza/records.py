"""One run record, many writers (after google/benchmark's ``BenchmarkReporter::Run``).

The C++ harness prints one JSON line per measured benchmark with exactly these
fields; the runner parses them into ``Result`` and the database stores them.
Other line kinds the harness prints: ``{"event": "start", "job": N}`` before a job
and ``{"event": "end", "job": N}`` after it, so that a crash or hang is pinned
on the job that was running.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from benanza import SCHEMA_VERSION
from benanza.library import L2, Status

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
    timing: str = ""  # "graph" (captured CUDA graph of many calls) or "stream" (back-to-back)
    max_rel_error: float | None = None
    tolerance: float | None = None
    heuristic_rank: int | None = None  # position in the library heuristic's ranking, 0 = first
    find_rank: int | None = None  # position in cudnnFind*/autotune ranking, 0 = fastest
    job: int | None = None
    notes: dict[str, Any] = field(default_factory=dict)  # numerical/behaviour notes, knobs, ...
    schema: int = SCHEMA_VERSION

    def key(self) -> tuple[str, ...]:
        """What makes a measurement unique on one system (the database's primary key)."""
        return (self.layer_key, self.api, self.algorithm, self.dtype, self.fusion, self.l2)

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
