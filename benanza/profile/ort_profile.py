"""Reader for an ONNX Runtime profile (``SessionOptions.enable_profiling``).

Why: the profile names every node ORT ran in its *optimized* graph (after its own
fusions, e.g. BatchNormalization folded into Conv), with op type, provider and
concrete shapes, per run. That is the framework's view of a run that the analyzer
sets against the layer-by-layer lower bound.

Important: a node event's ``dur`` is HOST time around the node's launch on the CPU
thread, not GPU time. With the CUDA execution provider the kernels run
asynchronously, so GPU kernel times must come from a kernel trace (CUPTI, Kineto)
beside the profile; stock ``onnxruntime-gpu`` wheels do not put them here.

Format (read from a real ORT 1.31 profile): a JSON array of Chrome-trace ``X``
events. ``cat: "Session"`` events are ``model_loading_uri``,
``session_initialization``, and per run ``model_run`` and
``SequentialExecutor::Execute``; ``cat: "Node"`` events are named
``<node>_kernel_time`` (and ``<node>_fence_before``/``_fence_after`` in some
builds) with ``args`` op_name, provider, node_index, input_type_shape and
output_type_shape (a list of ``{dtype: [dims]}``). Times are microseconds from
profiling start. The profile itself carries no ORT version: the bundle's meta.json does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benanza.errors import BenanzaError
from benanza.profile._io import load_json
from benanza.profile.kineto import event_times

NODE_PHASES = ("kernel_time", "fence_before", "fence_after")


@dataclass(frozen=True)
class NodeEvent:
    """One node's host-side event in one run (``dur_us`` is HOST time around the launch, not GPU time)."""

    name: str  # node name in ORT's optimized graph, without the _kernel_time suffix
    phase: str  # kernel_time, fence_before or fence_after
    op: str
    provider: str
    node_index: int | None
    inputs: tuple[tuple[str, tuple[int, ...]], ...]  # (dtype, shape) per input
    outputs: tuple[tuple[str, tuple[int, ...]], ...]
    ts_us: float
    dur_us: float
    tid: int


@dataclass(frozen=True)
class OrtRun:
    """One ``model_run``: its host wall time and its nodes' kernel_time events in launch order."""

    index: int
    ts_us: float
    dur_us: float  # host time of the whole Run() call
    executor_dur_us: float | None  # SequentialExecutor::Execute inside it
    nodes: tuple[NodeEvent, ...]
    fences: tuple[NodeEvent, ...] = ()

    def ops(self) -> list[str]:
        return [n.op for n in self.nodes]


@dataclass(frozen=True)
class OrtProfile:
    path: Path
    version: str | None
    runs: tuple[OrtRun, ...]
    session: dict[str, float]  # other Session events (model_loading_uri, session_initialization) -> dur us
    unassigned: tuple[NodeEvent, ...] = ()  # node events outside every model_run
    notes: tuple[str, ...] = ()


def _shapes(value: Any) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """(dtype, dims) per tensor; dims that are not whole numbers (a damaged profile) read as no shape."""
    out: list[tuple[str, tuple[int, ...]]] = []
    for item in value if isinstance(value, list) else []:
        if isinstance(item, dict):
            for dtype, dims in item.items():
                whole = isinstance(dims, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in dims)
                out.append((str(dtype), tuple(dims) if whole else ()))
    return tuple(out)


def _whole(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _node(path: Path, index: int, ev: dict[str, Any]) -> NodeEvent | None:
    name = str(ev.get("name", ""))
    for phase in NODE_PHASES:
        if name.endswith("_" + phase):
            args = ev.get("args") or {}
            if not isinstance(args, dict):
                raise BenanzaError(f"{path}: event {index} ({name[:60]!r}) has args that are not an object")
            idx = args.get("node_index")
            ts, dur = event_times(path, index, ev)
            return NodeEvent(
                name=name[: -len(phase) - 1], phase=phase, op=str(args.get("op_name", "")),
                provider=str(args.get("provider", "")),
                node_index=int(idx) if str(idx).lstrip("-").isdigit() and len(str(idx)) < 19 else None,
                inputs=_shapes(args.get("input_type_shape")), outputs=_shapes(args.get("output_type_shape")),
                ts_us=ts, dur_us=dur, tid=_whole(ev.get("tid"), 0))
    return None


def read_ort_profile(path: str | Path) -> OrtProfile:
    """Parse an ORT profile JSON (plain or .gz) into runs of node events."""
    path = Path(path)
    data = load_json(path)
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise BenanzaError(f"{path}: not an ONNX Runtime profile (expected a JSON array of trace events)")
    sessions = {i: event_times(path, i, e) for i, e in enumerate(events) if e.get("cat") == "Session"}
    runs_raw = sorted(((sessions[i], e) for i, e in enumerate(events)
                       if e.get("cat") == "Session" and e.get("name") == "model_run"), key=lambda te: te[0][0])
    executors = [sessions[i] for i, e in enumerate(events)
                 if e.get("cat") == "Session" and e.get("name") == "SequentialExecutor::Execute"]
    nodes = sorted((n for i, e in enumerate(events) if e.get("cat") == "Node" and (n := _node(path, i, e)) is not None),
                   key=lambda n: n.ts_us)
    if not runs_raw and not nodes:
        raise BenanzaError(f"{path}: not an ONNX Runtime profile (no 'model_run' Session event and no Node event)")
    session = {str(e.get("name")): sessions[i][1] for i, e in enumerate(events)
               if e.get("cat") == "Session" and e.get("name") not in ("model_run", "SequentialExecutor::Execute")}
    runs: list[OrtRun] = []
    taken: set[int] = set()
    for i, ((start, dur), _) in enumerate(runs_raw):
        inside = [(j, n) for j, n in enumerate(nodes) if start <= n.ts_us <= start + dur and j not in taken]
        taken.update(j for j, _ in inside)
        exe = next((x_dur for x_ts, x_dur in executors if start <= x_ts <= start + dur), None)
        runs.append(OrtRun(index=i, ts_us=start, dur_us=dur, executor_dur_us=exe,
                           nodes=tuple(n for _, n in inside if n.phase == "kernel_time"),
                           fences=tuple(n for _, n in inside if n.phase != "kernel_time")))
    unassigned = tuple(n for j, n in enumerate(nodes) if j not in taken)
    notes: list[str] = []
    if unassigned:
        notes.append(f"{path}: {len(unassigned)} node event(s) outside every model_run")
    counts = {len(r.nodes) for r in runs}
    if len(counts) > 1:
        notes.append(f"{path}: runs have different node counts: {sorted(counts)}")
    return OrtProfile(path=path, version=None, runs=tuple(runs), session=session, unassigned=unassigned,
                      notes=tuple(notes))
