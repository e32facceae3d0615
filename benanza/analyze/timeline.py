"""Timelines for the trace writer: the measured run beside the schedules the bounds imply.

Each timeline is laid out level by level (model, layer, library call, kernel); the
bound timelines start every layer as soon as its inputs are ready (the ``LBL_par``
schedule), so parallel branches show up side by side in separate lanes.
"""

from __future__ import annotations

from collections.abc import Mapping

import networkx as nx

from benanza.analyze.choose import Choice, Miss
from benanza.analyze.dag import earliest_start, lanes
from benanza.analyze.tables import Span
from benanza.model.layer import Model
from benanza.records import Profile

MEASURED = "measured run"
BOUND = "lower bound (best, parallel)"
JOINT = "joint estimate"


def measured_spans(model: Model, profile: Profile | None) -> list[Span]:
    """Layer, call and kernel boxes from the profile's kernel intervals (none when it has none)."""
    if profile is None:
        return []
    hulls: dict[int, tuple[float, float]] = {}
    spans: list[Span] = []
    names = {layer.index: layer for layer in model.layers}
    for index, prof in sorted(profile.layers.items()):
        if not prof.kernels:
            continue
        start = min(k.start_us for k in prof.kernels)
        end = max(k.start_us + k.dur_us for k in prof.kernels)
        hulls[index] = (start, end)
        spans.extend(Span(MEASURED, "kernel", 0, k.name, k.start_us, k.dur_us, {"layer": index})
                     for k in prof.kernels)
    lane = lanes(hulls)
    for index, (start, end) in hulls.items():
        layer = names.get(index)
        name = layer.name if layer else f"layer {index}"
        spans.append(Span(MEASURED, "layer", lane[index], name, start, end - start,
                          {"#": index, "op": layer.op if layer else ""}))
        call = profile.layers[index].executed
        if call is not None:
            spans.append(Span(MEASURED, "library call", lane[index], f"{call.api} / {call.algorithm}",
                              start, end - start, {"precision": call.precision, "fusion": call.fusion}))
    if hulls or profile.e2e_ms:
        end = max([e for _, e in hulls.values()] + [(profile.e2e_ms or 0.0) * 1e3])
        spans.append(Span(MEASURED, "model", 0, model.name, 0.0, end, {"batch": model.batch}))
    return spans


def schedule_spans(process: str, model: Model, graph: nx.DiGraph, calls: Mapping[int, Choice | Miss],
                   groups: Mapping[int, tuple[int, ...]] | None = None) -> list[Span]:
    """Boxes of an earliest-start schedule of ``graph`` with the chosen latencies (ms -> us)."""
    names = {layer.index: layer for layer in model.layers}
    w = {i: c.latency_ms * 1e3 for i, c in calls.items() if isinstance(c, Choice)}
    times = {n: t for n, t in earliest_start(graph, w).items() if n in w}
    lane = lanes(times)
    spans = []
    for node, (start, end) in sorted(times.items()):
        members = (groups or {}).get(node, (node,))
        label = ", ".join(names[m].name if m in names else str(m) for m in members)
        choice = calls[node]
        assert isinstance(choice, Choice)
        spans.append(Span(process, "layer", lane[node], label, start, end - start,
                          {"#": list(members), "op": "+".join(names[m].op for m in members if m in names)}))
        spans.append(Span(process, "library call", lane[node], choice.describe(), start, end - start,
                          {"source": choice.source.value}))
    if times:
        spans.append(Span(process, "model", 0, model.name, 0.0, max(e for _, e in times.values()),
                          {"batch": model.batch}))
    return spans


Schedule = tuple[nx.DiGraph, Mapping[int, Choice | Miss], Mapping[int, tuple[int, ...]]]  # graph, calls, groups


def timeline(model: Model, profile: Profile | None, bound: Schedule, joint: Schedule) -> tuple[Span, ...]:
    """The measured run beside the headline bound's and the joint estimate's schedules."""
    spans = measured_spans(model, profile)
    spans += schedule_spans(BOUND, model, *bound)
    spans += schedule_spans(JOINT, model, *joint)
    return tuple(spans)
