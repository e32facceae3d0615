"""Reader for the cuDNN API log (``CUDNN_LOGLEVEL_DBG=3``, ``CUDNN_LOGDEST_DBG=<file>``).

Why: the log is the only place that says what a framework really ran: which engine
and knobs (graph API) or which algorithm and math type (legacy API) each
convolution got, whether TF32 was on, and which heuristic mode chose it. The
analyzer's ``as-executed`` policy joins these calls to benchmarks through
:func:`engine_config_name`, which the benchmark generator calls too.

Format (cuDNN 9, read from real H100 logs): a record starts with
``I! CuDNN (v91900 56) function NAME() called:`` (``W!``/``E!`` for warnings and
errors), then ``i!`` lines ``name: type=T; val=V;`` nested by indentation (4 spaces
a level; ``name: type=T:`` opens a nested descriptor), then ``i! Time: ...`` and
``i! Process=...; Thread=...; GPU=...; Handle=...; StreamId=....``, which ends it.
Graph-API calls log a second record on return, holding only ``status``. The log is
read as a stream, a block of text at a time: a 3-million-line log never sits in memory
whole. Most of its records are read by nothing here (descriptor creation and
destruction, attribute dumps): ``read_cudnn_log`` skips them on their function name.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache
from pathlib import Path

from benanza.apis import REGISTRY, graph_api
from benanza.apis.engine_config import engine_config_name
from benanza.apis.log_side import int_list
from benanza.library import Api
from benanza.profile.cudnn_records import Field, Record, RecordReader, Wanted, tree

_ENUM_SUFFIX = re.compile(r"\s*\(-?\d+\)$")

# CUDNN_HEUR_MODE_* values in cudnn_graph.h (cuDNN 9.19)
HEUR_MODES: dict[int, str] = {0: "INSTANT", 1: "B", 2: "FALLBACK", 3: "A"}

# Legacy (pre-graph) calls that do a layer's work; the value is the vocabulary's Api (ApiDef.log.cudnn_call).
LEGACY_APIS: dict[str, Api] = {api.value: api for api, d in REGISTRY.items() if d.log.cudnn_call}
# Graph-API calls whose records read_cudnn_log reads (with LEGACY_APIS and the support checks), each with a word
# its record must hold to be read (None: any record). Attribute records are read for two attributes only: one
# without the word, its return record included, changes nothing. Every other record (descriptor creation and
# destruction: most of a log) gives only its version and device (CI time, docs/RESULTS.md §16).
GRAPH_CALLS: dict[str, str | None] = {
    "cudnnBackendExecute": None, "cudnnBackendExecuteInternal": None, "cudnnBackendFinalize": None,
    "cudnnBackendSetAttribute": "CUDNN_ATTR_ENGINEHEUR_MODE",
    "cudnnBackendGetAttribute": "CUDNN_ATTR_ENGINEHEUR_RESULTS", "cudnnBackendFinalizeEngineCfgVisualize": None}
_SUPPORT_CHECKS = "_engine_config_support_checks"  # the end of a support-check record's function name
# The records read_cudnn_log looks at once it has the device (before, any record may hold the deviceProp it reads):
# the record reader makes no Record of the others (cudnn_records.RecordReader.wanted). Of every severity: a
# warning's engine config, though not read, does not end a heuristic query's results as another record does.
WANTED = Wanted({**GRAPH_CALLS, **dict.fromkeys(LEGACY_APIS)}, (_SUPPORT_CHECKS,))


def cudnn_version_string(version: int) -> str:
    """``91900`` -> ``"9.19.0"`` (cuDNN 9: major*10000 + minor*100 + patch; cuDNN <= 8: major*1000 + ...)."""
    if version >= 90000:
        return f"{version // 10000}.{version % 10000 // 100}.{version % 100}"
    return f"{version // 1000}.{version % 1000 // 100}.{version % 100}"


# ---------------------------------------------------------------- typed output


@dataclass(frozen=True)
class DeviceProps:
    """The GPU as cuDNN saw it (from a handle's deviceProp descriptor)."""

    name: str
    cuda_device_id: int
    device_ver: int  # e.g. 900 for sm_90
    sm_count: int
    driver_version: int  # e.g. 13000 for CUDA 13.0
    max_shared_memory_per_block_optin: int
    total_global_mem: int

    @property
    def compute_capability(self) -> str:
        return f"{self.device_ver // 100}.{self.device_ver % 100 // 10}"


@dataclass(frozen=True)
class TensorDesc:
    """A tensor as an operation or legacy call sees it; ``role`` is the log's name (xDesc, wDesc, ...)."""

    role: str
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str  # cuDNN spelling, e.g. CUDNN_DATA_FLOAT
    uid: int | None = None
    is_virtual: bool = False
    alignment: int | None = None
    layout: str | None = None  # filter format of legacy filter descriptors, e.g. CUDNN_TENSOR_NCHW


@dataclass(frozen=True)
class Operation:
    """One operation of a graph-API op graph (convolution, pointwise, matmul, ...)."""

    kind: str  # CUDNN_BACKEND_OPERATION_<kind>_DESCRIPTOR, e.g. CONVOLUTION_FORWARD, POINTWISE, MATMUL
    mode: str | None  # pointwise mode without CUDNN_POINTWISE_ (ADD, RELU_FWD), conv mode (CROSS_CORRELATION)
    tensors: tuple[TensorDesc, ...]
    compute_type: str | None = None
    pre_padding: tuple[int, ...] = ()  # lowerPadA
    post_padding: tuple[int, ...] = ()  # upperPadA
    strides: tuple[int, ...] = ()
    dilations: tuple[int, ...] = ()
    params: dict[str, str] = field(default_factory=dict)  # every other scalar the log gave

    def tensor(self, role: str) -> TensorDesc | None:
        return next((t for t in self.tensors if t.role == role), None)


@dataclass(frozen=True)
class ExecutedCall:
    """One library call that did work on the GPU, in log order.

    Graph API (``cudnnBackendExecute``): ``operations``, ``engine_id``, ``knobs``, notes and
    ``enable_tf32`` (from the ``cudnnBackendExecuteInternal`` record that follows).
    Legacy calls: ``tensors``, ``descriptors`` (e.g. convDesc fields), ``args``, ``algo``
    and ``math_type``. Times are host times of the call as logged, in microseconds
    since the log's first record; ``end_us`` (graph API only) is the return record's.
    """

    function: str
    api: str | None  # a benanza.library.Api value, None when no table entry matches
    line: int
    time: str
    time_us: float
    thread: str
    stream: str
    handle: str
    cudnn_version: str
    end_us: float | None = None
    status: str | None = None
    operations: tuple[Operation, ...] = ()
    engine_id: int | None = None
    knobs: dict[str, int] = field(default_factory=dict)  # full knob type -> value
    numerical_notes: tuple[str, ...] = ()
    behavior_notes: tuple[str, ...] = ()
    enable_tf32: bool | None = None
    during_heuristic: bool = False  # run inside an engine-heuristic finalize (a probe, not a layer)
    tensors: tuple[TensorDesc, ...] = ()
    descriptors: dict[str, dict[str, str]] = field(default_factory=dict)
    args: dict[str, str] = field(default_factory=dict)
    algo: str | None = None
    math_type: str | None = None

    @property
    def engine_config(self) -> str | None:
        """The canonical engine config name (graph API), see :func:`engine_config_name`."""
        return None if self.engine_id is None else engine_config_name(self.engine_id, self.knobs)

    @property
    def tensor_core(self) -> bool:
        """Whether the call used Tensor Cores as far as the log says (graph-API numerical note)."""
        return "CUDNN_NUMERICAL_NOTE_TENSOR_CORE" in self.numerical_notes or (
            self.math_type in ("CUDNN_TENSOR_OP_MATH", "CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION"))


@dataclass(frozen=True)
class HeuristicQuery:
    """One engine-heuristic query (``cudnnBackendFinalize`` of an ENGINEHEUR descriptor).

    ``engine_configs`` are the results in the heuristic's order (from the engine-config
    records cuDNN logs while handing them out); ``unsupported`` those that its support
    check rejected. ``time_us``..``end_us`` is the host time the query took.
    """

    mode: str  # INSTANT, B, FALLBACK or A (cudnnBackendHeurMode_t)
    line: int
    time: str
    time_us: float
    thread: str
    end_us: float | None = None
    requested: int = 0
    engine_configs: tuple[str, ...] = ()
    unsupported: tuple[str, ...] = ()
    graph: dict = field(default_factory=dict)  # the operationGraph of the first result, as cuDNN's JSON gives it


@dataclass(frozen=True)
class CudnnLog:
    path: Path
    version: str  # of the first record, e.g. "9.19.0"
    versions: tuple[str, ...]  # every version seen, in order of appearance
    device: DeviceProps | None
    calls: tuple[ExecutedCall, ...]
    heuristics: tuple[HeuristicQuery, ...]
    truncated: bool = False
    notes: tuple[str, ...] = ()

    def executes(self, include_heuristic_probes: bool = False) -> list[ExecutedCall]:
        """Graph-API executes in order, without heuristic probes unless asked for."""
        return [c for c in self.calls if c.engine_id is not None
                and (include_heuristic_probes or not c.during_heuristic)]


# ---------------------------------------------------------------- field helpers


def _enum(val: str | None) -> str | None:
    return None if val is None else _ENUM_SUFFIX.sub("", val.strip())


def _int(val: str | None) -> int | None:
    try:
        return int(_enum(val) or "")
    except ValueError:
        return None


def _bool(val: str | None) -> bool | None:
    return {"true": True, "false": False}.get((val or "").strip().lower())


def _scalars(node: Field) -> dict[str, str]:
    """Leaf fields of a descriptor (one level) as name -> value, enum suffixes stripped."""
    return {c.name: _enum(c.val) or "" for c in node.children if c.val is not None and not c.children}


def _tensor(node: Field) -> TensorDesc:
    dims = int_list(node.get("dimA").val if node.get("dimA") else None)
    strides_field = node.get("strideA")
    dtype_field = node.get("type") or node.get("dataType")
    uid = node.get("uid")
    virtual = node.get("isVirtual")
    align = node.get("alignmentInBytes")
    fmt = node.get("format")
    return TensorDesc(
        role=node.name, dims=dims, strides=int_list(strides_field.val) if strides_field else (),
        dtype=(_enum(dtype_field.val) or "") if dtype_field else "",
        uid=_int(uid.val) if uid else None, is_virtual=bool(_bool(virtual.val)) if virtual else False,
        alignment=_int(align.val) if align else None, layout=_enum(fmt.val) if fmt else None)


def _is_tensor(node: Field) -> bool:
    return node.type in ("CUDNN_BACKEND_TENSOR_DESCRIPTOR", "cudnnTensorDescriptor_t", "cudnnFilterDescriptor_t")


def _operation(node: Field) -> Operation:
    kind = (node.type or "").removeprefix("CUDNN_BACKEND_OPERATION_").removesuffix("_DESCRIPTOR")
    tensors: list[TensorDesc] = []
    params: dict[str, str] = {}
    for child in node.children:
        if _is_tensor(child):
            tensors.append(_tensor(child))
        elif child.children:  # convDesc, pwDesc, matmulDesc, ...
            params.update(_scalars(child))
        elif child.val is not None:
            params[child.name] = _enum(child.val) or ""
    mode = params.pop("mode", None)
    if mode is not None:
        mode = mode.removeprefix("CUDNN_POINTWISE_").removeprefix("CUDNN_")
    compute = next((params.pop(k) for k in ("computeType", "mathPrec", "compType") if k in params), None)
    return Operation(
        kind=kind, mode=mode, tensors=tuple(tensors), compute_type=compute,
        pre_padding=int_list(params.pop("lowerPadA", None)), post_padding=int_list(params.pop("upperPadA", None)),
        strides=int_list(params.pop("strideA", None)), dilations=int_list(params.pop("dilationA", None)), params=params)


def _notes(node: Field | None) -> tuple[str, ...]:
    if node is None:
        return ()
    return tuple(c.name for c in node.children if _bool(c.val))


def _device(node: Field) -> DeviceProps:
    def num(name: str) -> int:
        f = node.get(name)
        return (_int(f.val) or 0) if f else 0

    name_field = node.get("deviceName")
    return DeviceProps(
        name=(name_field.val or "").strip('"') if name_field else "", cuda_device_id=num("cudaDeviceId"),
        device_ver=num("deviceVer"), sm_count=num("multiProcessorCount"), driver_version=num("driverVer"),
        max_shared_memory_per_block_optin=num("maxSharedMemoryPerBlockOptin"), total_global_mem=num("totalGlobalMem"))


# ---------------------------------------------------------------- the reader


class _Clock:
    """Microseconds since the first record (the log's clock is local time, so keep it relative)."""

    def __init__(self) -> None:
        self.origin: datetime | None = None

    def us(self, iso: str) -> float:
        try:
            t = datetime.fromisoformat(iso)
        except ValueError:
            return float("nan")
        if self.origin is None:
            self.origin = t
        return (t - self.origin).total_seconds() * 1e6


def _graph_execute(rec: Record, version: str, clock: _Clock, probe: bool) -> ExecutedCall:
    ops, api, engine_id, knobs, numerical, behavior = _engine(rec.subtree_text("engine"))
    return ExecutedCall(
        function=rec.function, api=api, line=rec.line, time=rec.time,
        time_us=clock.us(rec.time), thread=rec.context.get("Thread", ""), stream=rec.context.get("StreamId", ""),
        handle=rec.context.get("Handle", ""), cudnn_version=version,
        operations=tuple(replace(op, params=dict(op.params)) for op in ops),  # no call shares a dict with another
        engine_id=engine_id, knobs=dict(knobs), numerical_notes=numerical, behavior_notes=behavior,
        during_heuristic=probe)


@lru_cache(maxsize=1024)
def _engine(text: str | None) -> tuple[tuple[Operation, ...], str | None, int | None, tuple[tuple[str, int], ...],
                                       tuple[str, ...], tuple[str, ...]]:
    """Operations, API, engine id, knobs and notes of an execute's engine (``Record.subtree_text``), read once
    per distinct engine: a model's executes repeat a few hundred engines (CI time, docs/RESULTS.md §16)."""
    engine = tree(text).children[0] if text else None
    graph = engine.get("opGraph") if engine else None
    ops = tuple(_operation(op) for op in graph.all("operation")) if graph else ()
    engine_id = engine.get("engine_id") if engine else None
    knob_desc = engine.get("knobDesc") if engine else None
    knobs = {c.name: _int(c.val) for c in knob_desc.children} if knob_desc else {}
    api = graph_api([(op.kind, op.mode) for op in ops])  # from the whole graph (ApiDef.log.graph_recogniser)
    return (ops, api.value if api else None, _int(engine_id.val) if engine_id else None,
            tuple((k, v) for k, v in knobs.items() if v is not None),
            _notes(engine.get("numericalNotes") if engine else None),
            _notes(engine.get("behaviorNotes") if engine else None))


def _legacy_call(rec: Record, api: Api, version: str, clock: _Clock) -> ExecutedCall:
    tensors: list[TensorDesc] = []
    descriptors: dict[str, dict[str, str]] = {}
    args: dict[str, str] = {}
    for child in rec.root.children:
        if child.name == "handle":
            continue
        if _is_tensor(child):
            tensors.append(_tensor(child))
        elif child.children:
            descriptors[child.name] = _scalars(child)
        elif child.val is not None:
            args[child.name] = _enum(child.val) or ""
    math = next((d["mathType"] for d in descriptors.values() if "mathType" in d), None)
    return ExecutedCall(
        function=rec.function, api=api.value, line=rec.line, time=rec.time, time_us=clock.us(rec.time),
        thread=rec.context.get("Thread", ""), stream=rec.context.get("StreamId", ""),
        handle=rec.context.get("Handle", ""), cudnn_version=version, tensors=tuple(tensors),
        descriptors=descriptors, args=args, algo=args.get("algo"), math_type=math)


def _visualized_config(rec: Record) -> tuple[str, dict] | None:
    text = rec.value("apiLog")  # the JSON is the field's own line: no tree to build
    try:
        data = json.loads(text or "")
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict) or "engine" not in data:
        return None
    eng = data["engine"]
    try:
        name = engine_config_name(int(eng["engineId"]), dict(eng.get("knobChoices", {})))
    except (KeyError, TypeError, ValueError):
        return None
    return name, data.get("operationGraph", {})


def _unsupported_configs(rec: Record) -> tuple[str, ...]:
    """Configs of a support-check record that are followed by a NOT_SUPPORTED warning."""
    out: list[str] = []
    current: str | None = None
    for child in rec.root.children:
        if child.name == "engineConfig":
            try:
                eng = json.loads(child.val or "")
                current = engine_config_name(int(eng["engineId"]), dict(eng.get("knobChoices", {})))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                current = None
        elif child.name == "Warning" and current is not None and "NOT_SUPPORTED" in child.raw:
            out.append(current)
            current = None
    return tuple(out)


def read_cudnn_log(path: str | Path) -> CudnnLog:
    """Parse a cuDNN API log into executed calls, heuristic queries, version and device."""
    path = Path(path)
    reader = RecordReader(path)
    clock = _Clock()
    versions: list[str] = []
    device: DeviceProps | None = None
    calls: list[ExecutedCall | dict] = []  # graph-API executes stay dicts until their return record
    queries: list[dict] = []
    # Per (thread, function): open calls awaiting their return record (LIFO; calls nest per thread).
    open_calls: dict[tuple[str, str], list[dict]] = {}
    heur_mode: dict[str, int] = {}
    collecting: dict | None = None  # heuristic query whose result configs are being logged
    version_names: dict[int, str] = {}
    read = 0  # reader.records after the last record read
    for rec in reader:
        version = version_names.get(rec.version)
        if version is None:
            version = version_names[rec.version] = cudnn_version_string(rec.version)
        # a record without the word builds no tree to look for it: most records of a log, before the device's
        if device is None and "deviceProp" in rec.body and (dp := rec.root.find("deviceProp")) is not None \
                and dp.children:
            device = _device(dp)
            reader.wanted = WANTED  # from here on, the records below skip are not even made
        fn = rec.function
        if collecting is not None and (fn != "cudnnBackendFinalizeEngineCfgVisualize" or reader.records > read + 1):
            collecting = None  # another record came (one the reader skipped, too)
        read = reader.records
        if rec.severity != "I":
            continue
        if fn in GRAPH_CALLS:
            word = GRAPH_CALLS[fn]
            if (word is not None and word not in rec.body) or (
                    collecting is None and fn == "cudnnBackendFinalizeEngineCfgVisualize"):
                continue  # nothing below reads it, a return record or not (only Execute and Finalize keep stacks)
        elif fn not in LEGACY_APIS and not fn.endswith(_SUPPORT_CHECKS):
            continue
        thread = rec.context.get("Thread", "")
        key = (thread, fn)
        if rec.is_return:
            stack = open_calls.get(key)
            if stack:
                entry = stack.pop()
                target = entry["query"] if entry.get("query") is not None else entry
                target["end_us"] = clock.us(rec.time)
                target["status"] = _enum(rec.root.children[0].val)
            continue
        if fn == "cudnnBackendExecute":
            probe = any(e.get("query") is not None for e in open_calls.get((thread, "cudnnBackendFinalize"), []))
            entry = {"call": _graph_execute(rec, version, clock, probe), "internal": None}
            open_calls.setdefault(key, []).append(entry)
            calls.append(entry)
        elif fn == "cudnnBackendExecuteInternal":
            pending = open_calls.get((thread, "cudnnBackendExecute"))
            if pending and pending[-1]["internal"] is None:
                pending[-1]["internal"] = _bool(rec.value("enable_tf32"))  # None without the field, as _bool(None)
        elif fn == "cudnnBackendFinalize":
            desc = rec.top("descriptor")  # only its type is read
            query = None
            if desc is not None and desc.type == "CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR":
                mode = heur_mode.get(thread, -1)
                query = {"mode": HEUR_MODES.get(mode, str(mode)), "line": rec.line, "time": rec.time,
                         "time_us": clock.us(rec.time), "thread": thread, "configs": [], "graph": {}}
                queries.append(query)
            open_calls.setdefault(key, []).append({"query": query})
        # Attribute records are most of a log: their fields are built only for the attributes read here.
        elif fn == "cudnnBackendSetAttribute":
            if _enum(rec.value("attributeName")) == "CUDNN_ATTR_ENGINEHEUR_MODE":
                first = rec.root.get("[0]")
                heur_mode[thread] = _int(first.val) if first else -1
        elif fn == "cudnnBackendGetAttribute":
            if _enum(rec.value("attributeName")) == "CUDNN_ATTR_ENGINEHEUR_RESULTS" and queries:
                count = rec.root.get("requestedElementCount")
                requested = _int(count.val) if count else 0
                if requested:
                    queries[-1]["requested"] = requested
                    collecting = queries[-1]
        elif fn == "cudnnBackendFinalizeEngineCfgVisualize" and collecting is not None:
            vis = _visualized_config(rec)
            if vis is not None:
                collecting["configs"].append(vis[0])
                if not collecting["graph"]:
                    collecting["graph"] = vis[1]
        elif fn.endswith(_SUPPORT_CHECKS) and queries:
            queries[-1].setdefault("unsupported", []).extend(_unsupported_configs(rec))
        elif fn in LEGACY_APIS:
            calls.append(_legacy_call(rec, LEGACY_APIS[fn], version, clock))
    for number in reader.versions:  # of every record read or skipped, in order
        version = cudnn_version_string(number)
        if version not in versions:
            versions.append(version)
    notes: list[str] = []
    if reader.truncated:
        notes.append(f"{path}: file ends inside a record (cut short); the complete records before it were read")
    if reader.dropped:
        notes.append(f"{path}: {len(reader.dropped)} record(s) cut short mid-file, first at line {reader.dropped[0]}")
    if len(versions) > 1:
        notes.append(f"{path}: records from several cuDNN versions: {', '.join(versions)}")
    return CudnnLog(
        path=path, version=versions[0], versions=tuple(versions), device=device,
        calls=tuple(_finish(c) for c in calls), heuristics=tuple(_query(q) for q in queries),
        truncated=reader.truncated, notes=tuple(notes))


def _finish(item: ExecutedCall | dict) -> ExecutedCall:
    if isinstance(item, ExecutedCall):
        return item
    return replace(item["call"], enable_tf32=item["internal"], end_us=item.get("end_us"), status=item.get("status"))


def _query(q: dict) -> HeuristicQuery:
    return HeuristicQuery(
        mode=q["mode"], line=q["line"], time=q["time"], time_us=q["time_us"], thread=q["thread"],
        end_us=q.get("end_us"), requested=q.get("requested", 0), engine_configs=tuple(q["configs"]),
        unsupported=tuple(dict.fromkeys(q.get("unsupported", []))), graph=q["graph"])
