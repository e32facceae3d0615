"""GPU kernels -> framework nodes, run by run (link 3 of the mapping), through launch times on the
Kineto clock."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benanza.model.layer import Model
from benanza.profile.kineto import Annotation, GpuEvent, KinetoTrace
from benanza.profile.module_spans import innermost, module_spans
from benanza.profile.node_layers import (
    ORT_OPS,
    NodeLayers,
    ort_node_layers,
    top_level_ops,
    torch_op_layers,
    torch_range_layers,
)
from benanza.profile.ort_profile import OrtProfile, OrtRun
from benanza.profile.ranges import NODE_RANGE, RUN_RANGE


@dataclass
class RunWork:
    """One run's GPU events, each with the framework node that launched it (None: before any node)."""

    origin_us: float  # the run's start (host range), kernel spans are relative to it
    nodes: list[NodeLayers] = field(default_factory=list)  # every node of the run, with or without kernels
    events: list[tuple[GpuEvent, NodeLayers | None]] = field(default_factory=list)
    approximate: int = 0  # launches that fell between node ranges (given to the node before them)


def _launch_times(trace: KinetoTrace) -> dict[int, float]:
    return {c.correlation: c.start_us for c in trace.runtime_calls if c.correlation is not None}


def _run_ranges(trace: KinetoTrace) -> list[Annotation]:
    return [a for a in trace.annotations if a.name == RUN_RANGE and not a.gpu]


def _events_by_run(trace: KinetoTrace, runs: Sequence[Annotation]) -> list[list[tuple[GpuEvent, float]]]:
    """GPU events of each run with their host launch time (events with no launch record use their GPU start)."""
    launch = _launch_times(trace)
    out: list[list[tuple[GpuEvent, float]]] = [[] for _ in runs]
    gpu_ranges = [a for a in trace.annotations if a.name == RUN_RANGE and a.gpu]
    for ev in trace.gpu_events():
        t = launch.get(ev.correlation) if ev.correlation is not None else None
        for i, r in enumerate(runs):
            if t is not None and r.start_us <= t <= r.end_us:
                out[i].append((ev, t))
                break
            if t is None and any(g.external_id == r.external_id and g.start_us <= ev.start_us <= g.end_us
                                 for g in gpu_ranges):
                out[i].append((ev, ev.start_us))
                break
    return out


def _node_at(t: float, spans: Sequence[tuple[float, float, NodeLayers]]) -> tuple[NodeLayers | None, bool]:
    """The node whose host range holds ``t``; else the last one that started before it (approximate)."""
    before = None
    for start, end, node in spans:
        if start <= t <= end:
            return node, False
        if start <= t:
            before = node
    return before, before is not None


def torch_runs(model: Model, trace: KinetoTrace, modules: bool = False) -> tuple[list[RunWork], list[str]]:
    """Each run's GPU events with the node that launched them: ``modules`` (a ``--torch-module``
    capture) reads the ranges as module calls (``module_spans``), else as ONNX nodes (onnx2torch)."""
    runs = _run_ranges(trace)
    ranges = [a for a in trace.annotations if a.name.startswith(NODE_RANGE) and not a.gpu]
    notes = [] if ranges else ["no benanza.node ranges in the trace: layers matched to top-level ATen ops by "
                               "op kind, input shape and order"]
    out = []
    for r, events in zip(runs, _events_by_run(trace, runs), strict=True):
        if ranges and modules:
            spans = module_spans(model, [a for a in ranges if r.start_us <= a.start_us <= r.end_us],
                                 [o for o in trace.cpu_ops if r.start_us <= o.start_us <= r.end_us])
        elif ranges:
            inside = [a for a in ranges if r.start_us <= a.start_us <= r.end_us]
            spans = [(a.start_us, a.end_us, n) for a, n in zip(inside, torch_range_layers(model, inside),
                                                                 strict=True)]
        else:
            ops = top_level_ops([o for o in trace.cpu_ops if r.start_us <= o.start_us <= r.end_us])
            spans = [(o.start_us, o.end_us, n) for o, n in zip(ops, torch_op_layers(model, ops), strict=True)]
        work = RunWork(r.start_us, list({id(n): n for _, _, n in spans}.values()))
        at = innermost(spans)
        for ev, t in events:
            node = at(t)
            work.events.append((ev, node if node is not None else NodeLayers("", "", (), OUTSIDE)))
        out.append(work)
    return out, notes


OUTSIDE = "launched outside every node range (before or after the model's forward)"


# What kernels an ONNX Runtime node of each op launches (substrings of their names): the
# evidence that aligns ORT's clock with the kernel trace's (_ort_offset).  A node whose op
# is missing here still gets its kernels; it only adds no evidence.
ORT_KERNELS: dict[str, tuple[str, ...]] = {
    "Conv": ("fprop", "convolve", "fft2d", "flip_filter", "winograd", "op_generic_tensor", "xmma_gemm"),
    "Gemm": ("gemm", "gemv", "splitKreduce", "BroadcastBias"),
    "MatMul": ("gemm", "gemv", "splitKreduce"),
    "Relu": ("OP_Relu",), "Concat": ("Concat",), "BatchNormalization": ("bn_fw",),
    "Add": ("BinaryElementWise",), "Mul": ("BinaryElementWise",), "Sum": ("BinaryElementWise", "Variadic"),
    "MaxPool": ("pool",), "AveragePool": ("pool", "Pool"), "GlobalAveragePool": ("pool", "Pool"),
    "Softmax": ("softmax",), "LRN": ("lrn",),
}


def _ort_offset(run_range: Annotation, run: OrtRun, events: Sequence[tuple[GpuEvent, float]]) -> float:
    """Kineto time minus ORT time for one run.

    The two clocks are unrelated; ORT's Run() lies inside the Kineto range and holds every
    launch, which bounds the offset to an interval hundreds of microseconds wide, many
    nodes long.  Inside it, take the middle of the stretch where the most launches fall in
    a node of an op that launches such kernels (``ORT_KERNELS``): a Concat kernel in a
    Concat node, a convolution kernel in a Conv node.
    """
    lo, hi = run_range.start_us - run.ts_us, run_range.end_us - (run.ts_us + run.dur_us)
    launches = [t for _, t in events]
    if launches:
        lo2, hi2 = max(lo, max(launches) - (run.ts_us + run.dur_us)), min(hi, min(launches) - run.ts_us)
        if lo2 <= hi2:
            lo, hi = lo2, hi2
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for n in run.nodes:
        spans[ORT_OPS.get(n.op, n.op)].append((n.ts_us, n.ts_us + n.dur_us))
    marks: list[tuple[float, int]] = []  # +1 where an offset puts a launch in a node of its op, -1 where it stops
    for ev, t in events:
        for op, hints in ORT_KERNELS.items():
            if any(h in ev.name for h in hints):
                for start, end in spans.get(op, ()):
                    a, b = max(lo, t - end), min(hi, t - start)
                    if a <= b:
                        marks += [(a, 1), (b, -1)]
    if not marks:
        return (lo + hi) / 2
    marks.sort(key=lambda m: (m[0], -m[1]))  # closed intervals: a start before an end at the same offset
    best, best_span, count = 0, (lo, hi), 0
    for (x, delta), (nxt, _) in itertools.pairwise(marks):  # count holds from x to the next mark
        count += delta
        if count > best or (count == best and nxt - x > best_span[1] - best_span[0]):
            best, best_span = count, (x, nxt)
    return (best_span[0] + best_span[1]) / 2


def ort_runs(model: Model, trace: KinetoTrace, profile: OrtProfile, optimized: Path | None
             ) -> tuple[list[RunWork], list[str]]:
    runs = _run_ranges(trace)
    notes: list[str] = []
    if len(profile.runs) < len(runs):
        return [], [f"{profile.path}: {len(profile.runs)} ORT runs but {len(runs)} model_run ranges in the "
                    "kernel trace: kernels not linked to nodes"]
    ort = profile.runs[len(profile.runs) - len(runs):]  # the profiled runs are the last ones (warm-up first)
    node_layers = ort_node_layers(model, ort[-1].nodes, optimized) if ort else []
    by_name = {n.name: n for n in node_layers}
    out = []
    for r, o, events in zip(runs, ort, _events_by_run(trace, runs), strict=True):
        c = _ort_offset(r, o, events)
        spans = [(n.ts_us + c, n.ts_us + n.dur_us + c, by_name.get(n.name, NodeLayers(n.name, n.op, ())))
                 for n in o.nodes]
        work = RunWork(r.start_us, [n for _, _, n in spans])
        for ev, t in events:
            node, approx = _node_at(t, spans)
            work.approximate += approx
            work.events.append((ev, node))
        out.append(work)
    approx = sum(w.approximate for w in out)
    if approx:
        notes.append(f"{approx} kernel launch(es) fell between ORT node ranges: given to the node before them")
    return out, notes
