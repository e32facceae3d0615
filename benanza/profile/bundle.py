"""The profile bundle: one directory per framework run, read lazily part by part.

Why: a framework run leaves several files (framework profile, kernel trace, cuDNN
and cuBLAS API logs, ORT's optimized model) that only mean something together and
with the run's context (framework, version, batch, dtype, system, end-to-end
latency). The bundle keeps them side by side; ``meta.json`` is the one required
file. The layout is documented in docs/PROFILES.md.

Every part may be compressed (``name``, ``name.gz`` or ``name.xz``); parts are parsed only when
asked for, since API logs can be large.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from benanza import SCHEMA_VERSION
from benanza.errors import BenanzaError
from benanza.library import Precision
from benanza.profile._io import OPENERS, load_json
from benanza.profile.capture_protocol import Framework
from benanza.profile.cublas_log import CublasLog, read_cublas_log
from benanza.profile.cudnn_log import CudnnLog, read_cudnn_log
from benanza.profile.kineto import KinetoTrace, read_kineto_trace
from benanza.profile.ort_profile import OrtProfile, read_ort_profile
from benanza.profile.parse_cache import cached_read

META = "meta.json"
COMPRESSED = tuple(OPENERS)  # suffixes a part may carry


# Bundle part -> file names it may have (each also with ".gz" or ".xz"), first match wins.
PARTS: dict[str, tuple[str, ...]] = {
    "ort_profile": ("ort_profile.json",),
    "torch_trace": ("torch_trace.json",),
    "kernels": ("kernels.json",),
    "cudnn_log": ("cudnn_api.log",),
    "cublas_log": ("cublas_api.log",),
    "cublaslt_log": ("cublaslt_api.log",),
    "optimized_model": ("optimized_model.onnx",),
}
# Parts a bundle of each framework is expected to have; the others are not looked for in notes.
EXPECTED: dict[Framework, tuple[str, ...]] = {
    Framework.ONNXRUNTIME: ("ort_profile", "kernels", "cudnn_log", "cublas_log", "cublaslt_log", "optimized_model"),
    Framework.PYTORCH: ("torch_trace", "cudnn_log", "cublas_log", "cublaslt_log"),
}


@dataclass(frozen=True)
class LatencyStats:
    """End-to-end latency of the framework's runs (host wall time of one inference), in ms."""

    runs: int
    median: float
    mean: float
    p90: float
    min: float
    max: float

    @classmethod
    def from_samples(cls, samples_ms: Sequence[float]) -> LatencyStats:
        values = [float(v) for v in samples_ms]
        if not values:
            raise ValueError("no latency samples")
        p90 = values[0] if len(values) == 1 else statistics.quantiles(values, n=10, method="inclusive")[8]
        return cls(runs=len(values), median=statistics.median(values), mean=statistics.fmean(values), p90=p90,
                   min=min(values), max=max(values))


@dataclass(frozen=True)
class BundleMeta:
    framework: str  # a Framework value
    framework_version: str
    model: str
    batch: int
    dtype: str  # a benanza.library.Precision value
    latency_ms: LatencyStats
    system: dict[str, Any] = field(default_factory=dict)  # GPU, clocks, driver, CUDA, cuDNN, cuBLAS
    timestamp: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # framework settings, e.g. cudnn_conv_algo_search
    schema: int = SCHEMA_VERSION
    model_sha256: str = ""  # content hash of the ONNX file profiled: the bundle's identity, not its name


@dataclass(frozen=True)
class KernelRecord:
    """One GPU activity in ``kernels.json`` (benanza's own trace format, written from CUPTI)."""

    name: str
    start_ns: int
    end_ns: int
    stream: int
    correlation: int | None
    api: str | None  # the launching runtime/driver call, when known

    @property
    def dur_ns(self) -> int:
        return self.end_ns - self.start_ns


MAX_BATCH = 1 << 16  # a larger batch is a typo or an edit: no framework run of one fits a GPU
MAX_NESTING = 8  # levels of objects/lists in meta.json's system and extra (real ones: 2)
TEXT_FIELDS = ("framework", "framework_version", "model", "dtype")
LATENCY_FIELDS = ("median", "mean", "p90", "min", "max")
# meta.json extra fields the analysis reads, with the JSON types they must have.
EXTRA_TYPES: dict[str, tuple[type, ...]] = {"seq_len": (int,), "use_tf32": (int, bool), "allow_tf32": (int, bool)}


def _is_number(value: Any) -> bool:
    """A JSON number that is a real, finite figure (booleans are JSON's true/false, not numbers)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of a JSON value, counted no further than ``limit + 1`` (no recursion limit to hit)."""
    level, todo = 0, [value]
    while todo and level <= limit:
        nxt: list[Any] = []
        for item in todo:
            if isinstance(item, dict):
                nxt.extend(item.values())
            elif isinstance(item, list):
                nxt.extend(item)
        todo = nxt
        level += 1 if nxt else 0
    return level


def _meta_from_json(path: Path, data: Any) -> BundleMeta:
    """Check meta.json against its schema (types, ranges, figures that agree) and build the meta.

    Why: every figure of an analysis is relative to these fields; a negative median once gave a
    Benanza ratio of -0.42 and a batch of 1e30 an OverflowError deep inside the analysis.
    """
    if not isinstance(data, dict):
        raise BenanzaError(f"{path}: expected a JSON object")
    missing = [k for k in ("framework", "framework_version", "model", "batch", "dtype", "latency_ms") if k not in data]
    if missing:
        raise BenanzaError(f"{path}: missing field(s): {', '.join(missing)}")
    for key in TEXT_FIELDS:
        if not isinstance(data[key], str):
            raise BenanzaError(f"{path}: {key} must be a string, got {type(data[key]).__name__}")
    try:
        framework = Framework(data["framework"]).value
    except ValueError:
        raise BenanzaError(f"{path}: unknown framework {data['framework']!r:.60} "
                           f"(one of {', '.join(f.value for f in Framework)})") from None
    try:
        precision = Precision(data["dtype"]).value
    except ValueError:
        raise BenanzaError(f"{path}: unknown dtype {data['dtype']!r:.60} "
                           f"(one of {', '.join(p.value for p in Precision)})") from None
    batch = data["batch"]
    if not isinstance(batch, int) or isinstance(batch, bool) or not 1 <= batch <= MAX_BATCH:
        raise BenanzaError(f"{path}: batch must be a whole number from 1 to {MAX_BATCH}, got {batch!r:.40}")
    latency = _latency(path, data["latency_ms"])
    schema = data.get("schema", SCHEMA_VERSION)
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise BenanzaError(f"{path}: schema must be a positive whole number, got {schema!r:.40}")
    if schema > SCHEMA_VERSION:
        raise BenanzaError(f"{path}: schema {schema} is newer than this benanza reads ({SCHEMA_VERSION})")
    parts: dict[str, dict[str, Any]] = {}
    for key in ("system", "extra"):
        value = data.get(key) or {}
        if not isinstance(value, dict):
            raise BenanzaError(f"{path}: {key} must be a JSON object, got {type(value).__name__}")
        if _depth(value, MAX_NESTING) > MAX_NESTING:
            raise BenanzaError(f"{path}: {key} is nested more than {MAX_NESTING} levels deep")
        parts[key] = value
    for key, types in EXTRA_TYPES.items():
        value = parts["extra"].get(key)
        if value is not None and (not isinstance(value, types) or (key == "seq_len" and not 1 <= value <= 1 << 24)):
            raise BenanzaError(f"{path}: extra.{key} must be {' or '.join(t.__name__ for t in types)}"
                               f"{' from 1 to 2^24' if key == 'seq_len' else ''}, got {value!r:.40}")
    for key in ("timestamp", "model_sha256"):
        if not isinstance(data.get(key) or "", str):
            raise BenanzaError(f"{path}: {key} must be a string, got {type(data[key]).__name__}")
    return BundleMeta(framework=framework, framework_version=data["framework_version"], model=data["model"],
                      batch=batch, dtype=precision, latency_ms=latency, system=dict(parts["system"]),
                      timestamp=data.get("timestamp") or "", extra=dict(parts["extra"]), schema=schema,
                      model_sha256=data.get("model_sha256") or "")


def _latency(path: Path, lat: Any) -> LatencyStats:
    """latency_ms: runs >= 1, five finite positive figures with min <= median, mean, p90 <= max."""
    need = "latency_ms needs runs, median, mean, p90, min, max"
    if not isinstance(lat, dict):
        raise BenanzaError(f"{path}: latency_ms must be a JSON object; {need}")
    missing = [k for k in ("runs", *LATENCY_FIELDS) if k not in lat]
    if missing:
        raise BenanzaError(f"{path}: latency_ms lacks {', '.join(missing)}; {need}")
    runs = lat["runs"]
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
        raise BenanzaError(f"{path}: latency_ms.runs must be a whole number >= 1, got {runs!r:.40}")
    for key in LATENCY_FIELDS:
        if not _is_number(lat[key]) or lat[key] <= 0:
            raise BenanzaError(f"{path}: latency_ms.{key} must be a finite number of ms > 0, got {lat[key]!r:.40}")
    stats = LatencyStats(runs=runs, **{k: float(lat[k]) for k in LATENCY_FIELDS})
    slack = 1e-9 * stats.max  # the figures were rounded when written
    for key in ("median", "mean", "p90"):
        if not stats.min - slack <= getattr(stats, key) <= stats.max + slack:
            raise BenanzaError(f"{path}: latency_ms.{key} {getattr(stats, key):g} lies outside min {stats.min:g} .. "
                               f"max {stats.max:g}: the figures contradict each other")
    return stats


def read_kernels(path: str | Path) -> list[KernelRecord]:
    """Read ``kernels.json[.gz]``: a JSON list of {name, start_ns, end_ns, stream, correlation, api}."""
    path = Path(path)
    data = load_json(path)
    if not isinstance(data, list):
        raise BenanzaError(f"{path}: expected a JSON list of kernel records")
    out: list[KernelRecord] = []
    for i, item in enumerate(data):
        try:
            rec = KernelRecord(name=str(item["name"]), start_ns=int(item["start_ns"]), end_ns=int(item["end_ns"]),
                               stream=int(item["stream"]),
                               correlation=None if item.get("correlation") is None else int(item["correlation"]),
                               api=None if item.get("api") is None else str(item["api"]))
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise BenanzaError(f"{path}: kernel record {i} is malformed ({exc!r}); needs name, start_ns, end_ns, "
                               "stream") from None
        if rec.end_ns < rec.start_ns:
            raise BenanzaError(f"{path}: kernel record {i} ({rec.name}) ends before it starts")
        out.append(rec)
    return out


def write_kernels(path: str | Path, records: Iterable[KernelRecord]) -> Path:
    """Write ``kernels.json`` (the format :func:`read_kernels` reads)."""
    path = Path(path)
    path.write_text(json.dumps([asdict(r) for r in records], indent=0) + "\n")
    return path


class Bundle:
    """A profile bundle directory: ``meta`` at once, every other part parsed on first use (None if absent)."""

    def __init__(self, path: Path, meta: BundleMeta, files: dict[str, Path | None], notes: tuple[str, ...]) -> None:
        self.path = path
        self.meta = meta
        self.files = files
        self.notes = notes

    def _read(self, part: str, reader: Any) -> Any:
        """Parse a part once per bundle file content (benanza.profile.parse_cache), then per object."""
        file = self.files.get(part)
        return None if file is None else cached_read(file, reader, part)

    @cached_property
    def ort_profile(self) -> OrtProfile | None:
        return self._read("ort_profile", read_ort_profile)

    @cached_property
    def torch_trace(self) -> KinetoTrace | None:
        return self._read("torch_trace", read_kineto_trace)

    @cached_property
    def kernels(self) -> list[KernelRecord] | None:
        """GPU kernel trace in benanza's format; for PyTorch bundles use ``torch_trace`` (Kineto) instead."""
        return self._read("kernels", read_kernels)

    @cached_property
    def cudnn_log(self) -> CudnnLog | None:
        return self._read("cudnn_log", read_cudnn_log)

    @cached_property
    def cublas_log(self) -> CublasLog | None:
        return self._read("cublas_log", read_cublas_log)

    @cached_property
    def cublaslt_log(self) -> CublasLog | None:
        return self._read("cublaslt_log", read_cublas_log)

    @property
    def optimized_model(self) -> Path | None:
        """Path of ORT's optimized graph (parsing ONNX is the model processor's job, not this module's)."""
        return self.files.get("optimized_model")


def _find(directory: Path, names: tuple[str, ...]) -> Path | None:
    for name in names:
        for candidate in (directory / name, *(directory / f"{name}{z}" for z in COMPRESSED)):
            if candidate.is_file():
                return candidate
    return None


def read_bundle(path: str | Path) -> Bundle:
    """Open a profile bundle: read and check ``meta.json``, locate the other parts (parsed lazily)."""
    path = Path(path)
    if not path.is_dir():
        raise BenanzaError(f"{path}: profile bundle directory not found")
    meta_file = _find(path, (META,))
    if meta_file is None:
        raise BenanzaError(f"{path}: not a profile bundle (no {META})")
    meta = _meta_from_json(meta_file, load_json(meta_file))
    files = {part: _find(path, names) for part, names in PARTS.items()}
    expected = EXPECTED[Framework(meta.framework)]
    notes = tuple(f"{path}: no {' or '.join(PARTS[p])}[.gz|.xz] ({p} not available)"
                  for p in expected if files[p] is None)
    return Bundle(path=path, meta=meta, files=files, notes=notes)


def model_digest(path: str | Path) -> str:
    """SHA-256 of an ONNX file's bytes: what ties a bundle to its model whatever the file is called."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def bundle_seq_len(bundle: Bundle) -> int | None:
    """The sequence length a bundle's model ran at (``benanza profile --seq-len``), None for fixed shapes."""
    value = bundle.meta.extra.get("seq_len")
    return int(value) if value is not None else None


def write_meta(bundle_dir: str | Path, *, framework: str, framework_version: str, model: str, batch: int, dtype: str,
               latencies_ms: Sequence[float], system: dict[str, Any] | None = None, timestamp: str | None = None,
               extra: dict[str, Any] | None = None, model_sha256: str = "") -> Path:
    """Write ``meta.json`` into a bundle directory (created if needed) from raw per-run latencies."""
    directory = Path(bundle_dir)
    directory.mkdir(parents=True, exist_ok=True)
    meta = BundleMeta(framework=Framework(framework).value, framework_version=framework_version, model=model,
                      batch=int(batch), dtype=Precision(dtype).value,
                      latency_ms=LatencyStats.from_samples(latencies_ms), system=dict(system or {}),
                      timestamp=timestamp or datetime.now(UTC).isoformat(timespec="seconds"), extra=dict(extra or {}),
                      model_sha256=model_sha256)
    out = directory / META
    out.write_text(json.dumps(asdict(meta), indent=2, sort_keys=True) + "\n")
    return out
