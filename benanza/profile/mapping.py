"""Map a profile bundle onto a model's layers: the analyzer's :class:`~benanza.records.Profile`.

Why: a framework run speaks its own names (ONNX Runtime renames and fuses nodes,
PyTorch reports ATen ops), the library logs speak shapes and engine configs, and
the kernel trace speaks kernel names and host launch times. The analyzer needs
one answer per model layer: its measured GPU time, the library call that ran it
as-executed, and whether the framework fused it into another layer. Three links,
each a pure function of the parsed bundle parts:

1. **layer <-> library call**: every layer and every logged call gets a shape
   *signature* (``conv`` x/w/y dims, pads, strides, dilations; ``gemm`` k and
   {m, n}; ``pool`` x/y dims; ...). Calls of one signature repeat once per run;
   the last run's calls are assigned to that signature's layers in order.
2. **framework node <-> layer**: ONNX Runtime: the optimized model's nodes cover
   the original layers between their input and output tensors (a Conv that
   absorbed a BatchNormalization outputs the BN's tensor); else the same node
   name, else op kind + shapes + order. PyTorch: ``benanza.node:<name>`` ranges
   written by ``benanza profile``, else the top-level ATen ops of a run aligned
   in order with the layers by op kind and input shape.
3. **GPU kernel <-> framework node**: each kernel's launching runtime call (Kineto
   correlation) has a host time; it falls inside one node's host range (PyTorch
   ranges are on the Kineto clock; ONNX Runtime's profile is aligned run by run
   to the Kineto ``model_run`` range and the launches it holds).

Layers that no link reaches are listed with the reason in :class:`Mapping`,
never dropped: every layer index appears in ``Profile.layers``.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benanza import __version__
from benanza.errors import BenanzaError
from benanza.library import NO_COPY_OPS, PRECISIONS, Api, Fusion, Precision
from benanza.model.layer import SEPARATE_BIAS_OPS, FusionCandidate, Layer, Model, bias_add
from benanza.profile.bundle import Bundle, Framework, read_bundle
from benanza.profile.contrib import ORT_CONTRIB, contrib_calls, prefilled_calls
from benanza.profile.executed import CUDNN_PRECISION, _library_calls, assign_calls, executed_call, split_bias_adds
from benanza.profile.kernel_runs import RunWork, ort_runs, torch_runs
from benanza.profile.kineto import GpuEvent, busy_time
from benanza.profile.node_layers import ORT_OVERHEAD, NodeLayers, ort_node_layers
from benanza.profile.ranges import NODE_RANGE, TORCH_MODULE_FORMATS
from benanza.profile.signatures import layer_signature
from benanza.profile.torch_module import module_of_node
from benanza.records import ExecutedCall, KernelSpan, LayerProfile, OverheadKind, Profile, UnmappedWork

# ---------------------------------------------------------------- assembling the profile


@dataclass(frozen=True)
class Mapping:
    """The mapped profile plus what could not be mapped, and why."""

    profile: Profile
    nodes: dict[int, str]  # layer index -> the framework node (or op) that ran it
    calls: dict[int, ExecutedCall]
    runs_in_logs: int | None
    unmapped_layers: tuple[tuple[int, str], ...]  # (layer index, why)
    notes: tuple[str, ...] = ()
    # why GPU work reached no layer, aggregated over the representative run: (cause, runs, ms), most ms first
    unmapped_causes: tuple[tuple[str, int, float], ...] = ()


def _fusion_key(model: Model, anchor: int, call: ExecutedCall) -> str | None:
    cand: FusionCandidate | None = next((f for f in model.fusions if f.layers and f.layers[0] == anchor
                                         and f.pattern == call.fusion), None)
    return cand.key if cand else None


def _fused_members(model: Model, nodes: dict[int, str], fused: dict[int, int]) -> None:
    """Layers no node ran that belong to a fusion candidate whose anchor ran: fused into the anchor (in place)."""
    for cand in model.fusions:
        anchor = cand.layers[0]
        if anchor in nodes:
            for member in cand.layers[1:]:
                if member not in nodes and member not in fused:
                    fused[member] = anchor


def _kind(ev: GpuEvent, node: NodeLayers | None) -> OverheadKind:
    if ev.kind != "kernel":
        return OverheadKind.COPY
    return ORT_OVERHEAD.get(node.op, OverheadKind.KERNEL) if node else OverheadKind.KERNEL


# Frameworks that add a convolution's bias in a kernel of their own after the library call
# (ATen's convolution: ``output.add_(bias)``), by the prefix of that kernel's name.  Such a
# kernel is part of the layer's measured time, and its benchmark counterpart is the layer's
# bias add (cudnnAddTensor), as for ORT's logged one.
BIAS_KERNELS: dict[str, str] = {Framework.PYTORCH.value: "void at::native::"}


def _kernel_bias_add(bundle: Bundle, layer: Layer, call: ExecutedCall | None, kernels: Sequence[KernelSpan]
                     ) -> tuple[ExecutedCall, ...]:
    """The bias add of a layer whose framework added its bias in its own kernel, else ()."""
    prefix = BIAS_KERNELS.get(bundle.meta.framework)
    has_bias = len(layer.inputs) > 2 and bool(layer.inputs[2].name)
    if call is None or prefix is None or layer.op not in SEPARATE_BIAS_OPS or not has_bias \
            or call.fusion != Fusion.NONE.value or not any(k.name.startswith(prefix) for k in kernels):
        return ()
    storage = CUDNN_PRECISION[PRECISIONS[Precision(call.precision)].cudnn_dtype]  # tf32 math: fp32 data
    return (ExecutedCall(Api.ADD_TENSOR.value, "default", storage.value, key=bias_add(layer).key),)


@dataclass(frozen=True)
class LoggedCalls:
    """What a bundle's cuDNN/cuBLAS logs say each layer ran, by layer index."""

    calls: dict[int, ExecutedCall]  # a fused call carries its fusion key
    extra: dict[int, tuple[ExecutedCall, ...]]  # calls after the main one (ORT's separate bias add)
    runs_in_logs: int
    notes: tuple[str, ...]


def logged_calls(model: Model, bundle: Bundle) -> LoggedCalls:
    """The library calls of a bundle assigned to the model's layers (no kernel trace needed)."""
    raw_calls, notes = _library_calls(bundle)
    lib_calls, bias_of = split_bias_adds(raw_calls)
    assigned, runs_in_logs, assign_notes = assign_calls(model.layers, lib_calls)
    calls = {}
    for i, c in assigned.items():
        call = executed_call(c)
        calls[i] = call if call.fusion == Fusion.NONE.value else replace(call, key=_fusion_key(model, i, call))
    extra = {i: (replace(executed_call(bias_of[id(c)]), key=bias_add(model.layers[i]).key),)
             for i, c in assigned.items() if id(c) in bias_of}
    return LoggedCalls(calls, extra, runs_in_logs, (*notes, *assign_notes))


def executed_calls(model: Model, bundle: Bundle) -> list[tuple[str, ExecutedCall]]:
    """(layer key, call) of every call the bundle's logs assign to a layer, its bias adds included;
    an ORT node's plain GEMM call that runs a MatMul + bias Add as one (``contrib.prefilled_calls``)
    as the as-executed mapping charges it: that fusion's call, under the candidate's key."""
    logged = logged_calls(model, bundle)
    calls = dict(logged.calls)
    if bundle.ort_profile is not None and bundle.ort_profile.runs:
        for node in ort_node_layers(model, bundle.ort_profile.runs[-1].nodes, bundle.optimized_model):
            if node.op in ORT_CONTRIB and len(node.layers) > 1:
                calls.update({i: call for i, (_, call) in prefilled_calls(model, node.layers, logged.calls).items()})
    return [(model.layers[i].key, call) for i in sorted(calls) for call in (calls[i], *logged.extra.get(i, ()))]


def contrib_charges(model: Model, framework_nodes: Sequence[NodeLayers], precision: str,
                    calls: dict[int, ExecutedCall]) -> dict[int, tuple[ExecutedCall, ...]]:
    """Layer -> the benchmarks standing for it, for the layers of ORT's fused contrib nodes
    (``contrib.contrib_calls``): the anchor holds the whole group's, each other member ()."""
    out: dict[int, tuple[ExecutedCall, ...]] = {}
    for node in framework_nodes:
        got = contrib_calls(model, node.op, node.layers, precision, calls)
        if not got:
            continue
        out[node.layers[0]] = got
        for member in node.layers[1:]:
            out[member] = ()
    return out


def map_bundle_report(model: Model, bundle: Bundle | str | Path) -> Mapping:
    """Map every part of a bundle that is there onto the model's layers (see the module doc)."""
    if not isinstance(bundle, Bundle):
        bundle = read_bundle(bundle)
    check_capture_format(bundle)
    logged = logged_calls(model, bundle)
    notes = [*bundle.notes, *logged.notes]
    calls, bias_calls, runs_in_logs = dict(logged.calls), logged.extra, logged.runs_in_logs

    trace = bundle.torch_trace
    work: list[RunWork] = []
    if trace is None:
        notes.append(f"{bundle.path}: no kernel trace (torch_trace.json): no measured GPU times")
    elif bundle.meta.framework == Framework.PYTORCH.value:
        work, more = torch_runs(model, trace, modules=is_module_bundle(bundle))
        notes += more
    elif bundle.ort_profile is not None:
        work, more = ort_runs(model, trace, bundle.ort_profile, bundle.optimized_model)
        notes += more
    else:
        notes.append(f"{bundle.path}: no ORT profile: kernels cannot be linked to nodes")

    nodes: dict[int, str] = {}
    fused: dict[int, int] = {}
    if bundle.ort_profile is not None and bundle.ort_profile.runs:
        framework_nodes: list[NodeLayers] = ort_node_layers(model, bundle.ort_profile.runs[-1].nodes,
                                                            bundle.optimized_model)
    else:
        framework_nodes = work[-1].nodes if work else []
    for node in framework_nodes:
        if node.layers:
            nodes.setdefault(node.layers[0], node.name)
            for member in node.layers[1:]:
                fused.setdefault(member, node.layers[0])
    _fused_members(model, nodes, fused)
    charged = contrib_charges(model, framework_nodes, bundle.meta.dtype, calls) \
        if bundle.ort_profile is not None else {}

    per_layer: dict[int, list[list[GpuEvent]]] = defaultdict(list)
    run_busy: list[float] = []
    run_copy: list[float] = []
    for w in work:
        mine: dict[int, list[GpuEvent]] = defaultdict(list)
        for ev, node in w.events:
            if node and node.layers:
                mine[node.layers[0]].append(ev)
        for index, evs in mine.items():
            per_layer[index].append(evs)
        # GPU busy is kernels only: a pageable input copy is the framework's host-side choice,
        # no layer's work, and it would deflate the Benanza ratio (it is reported on its own line).
        run_busy.append(busy_time(ev.interval for ev, _ in w.events if ev.kind == "kernel") / 1e3)
        run_copy.append(busy_time(ev.interval for ev, _ in w.events if ev.kind != "kernel") / 1e3)
    rep = None
    if work:
        median = statistics.median_low(run_busy)
        rep = work[run_busy.index(median)]

    layers: dict[int, LayerProfile] = {}
    for layer in model.layers:
        i = layer.index
        call = calls.get(i)
        if i in charged:  # a contrib node: its anchor carries every member's benchmark, the members none
            call = charged[i][0] if charged[i] else None
        runs = per_layer.get(i, [])
        gpu_ms = statistics.median(busy_time(e.interval for e in evs) / 1e3 for evs in runs) if runs else None
        spans: tuple[KernelSpan, ...] = ()
        count = None
        if rep is not None:
            mine = [ev for ev, node in rep.events if node and node.layers and node.layers[0] == i]
            spans = tuple(KernelSpan(ev.name, ev.start_us - rep.origin_us, ev.dur_us, ev.kind != "kernel")
                          for ev in mine)
            count = len(mine) if (mine or i in nodes) else None
        extra = charged[i][1:] if i in charged else \
            (bias_calls.get(i, ()) or _kernel_bias_add(bundle, layer, call, spans))
        layers[i] = LayerProfile(gpu_ms=gpu_ms, kernel_count=count, executed=call, fused_into=fused.get(i),
                                 kernels=spans, extra=extra)

    unmapped_work: tuple[UnmappedWork, ...] = ()
    causes: tuple[tuple[str, int, float], ...] = ()
    if rep is not None:
        unmapped_work = tuple(UnmappedWork(ev.name, ev.dur_us / 1e3, _kind(ev, node))
                              for ev, node in rep.events if not (node and node.layers))
        causes = unmapped_causes(rep)
        notes += [f"{runs} unmapped GPU run(s), {ms:.3f} ms: {cause}" for cause, runs, ms in causes]
    ran = {a.name.removeprefix(NODE_RANGE) for a in trace.annotations if a.name.startswith(NODE_RANGE)} \
        if trace is not None and is_module_bundle(bundle) else None
    missing, elided = [], []
    for layer in model.layers:
        i = layer.index
        if i in nodes or i in fused:
            continue
        if i in calls and not work:
            continue  # the library logs place it; with no kernel trace there is no node to find
        if layer.op in NO_COPY_OPS and work:
            elided.append(layer.name)  # inference no-op (Dropout, Reshape...): frameworks drop it
            continue
        why = "no framework node or op matched it" if work or bundle.ort_profile is not None else \
            "no library call matched it" if layer_signature(layer) is not None else "no part of the bundle names it"
        module = (module_of_node(layer.name, ran) or "") if ran is not None else None
        if module is not None and module not in ran:
            why = f"its module {module or '<root>'!r} ran no range (never called through its forward)"
        missing.append((i, f"{layer.op} '{layer.name}': {why}"))
    if elided:
        notes.append(f"{len(elided)} alias layer(s) ran as no framework node (elided, no GPU work): "
                     f"{', '.join(elided[:5])}{' ...' if len(elided) > 5 else ''}")
    lat = bundle.meta.latency_ms
    profile = Profile(layers=layers, e2e_ms=lat.median,
                      e2e_stats={"runs": lat.runs, "mean": lat.mean, "p90": lat.p90, "min": lat.min, "max": lat.max},
                      gpu_busy_ms=statistics.median(run_busy) if run_busy else None,
                      copy_ms=statistics.median(run_copy) if run_copy else None,
                      kernel_count=sum(1 for ev, _ in rep.events if ev.kind == "kernel") if rep else None,
                      unmapped=unmapped_work, framework=bundle.meta.framework,
                      settings=dict(bundle.meta.extra))
    return Mapping(profile=profile, nodes=nodes, calls=calls, runs_in_logs=runs_in_logs,
                   unmapped_layers=tuple(missing), notes=tuple(notes), unmapped_causes=causes)


def unmapped_causes(run: RunWork) -> tuple[tuple[str, int, float], ...]:
    """Why each GPU event of a run that reached no layer did not, aggregated: (cause with the ops that
    launched it, event count, ms), most time first. The cause names the node range it fell in."""
    runs: dict[str, list[GpuEvent]] = defaultdict(list)
    for ev, node in run.events:
        if node and node.layers:
            continue
        if ev.kind != "kernel":
            cause = f"{ev.kind} (no layer's work: a copy the framework or the harness made)"
        elif node is None or not (node.why or node.name):
            cause = "launched outside every node range"
        else:
            cause = node.why or f"in framework node {node.name!r} ({node.op}): no layer of the model matched it"
        runs[cause].append(ev)
    out = []
    for cause, evs in runs.items():
        ops = Counter(ev.cpu_op or "no ATen op" for ev in evs).most_common(3)
        launched = ", ".join(f"{op} x{n}" for op, n in ops)
        out.append((f"{cause} [{launched}]", len(evs), sum(ev.dur_us for ev in evs) / 1e3))
    return tuple(sorted(out, key=lambda c: -c[2]))


def is_module_bundle(bundle: Bundle) -> bool:
    """A ``benanza profile --torch-module`` bundle: ranges name module calls, not ONNX nodes."""
    return bundle.meta.framework == Framework.PYTORCH.value and bool(bundle.meta.extra.get("torch_module"))


def check_capture_format(bundle: Bundle) -> None:
    """Refuse, in one line naming it, a ``--torch-module`` bundle whose capture format this mapping does not
    read (a bundle without the field is format 1, which benanza wrote before it recorded one): mapping
    one anyway gives ~0 layers with no word why."""
    if not is_module_bundle(bundle):
        return
    found = bundle.meta.extra.get("capture_format", 1)
    if found not in TORCH_MODULE_FORMATS:
        by = bundle.meta.extra.get("benanza_version")
        raise BenanzaError(f"{bundle.path}: --torch-module capture format {str(found)[:20]!r}"
                           f"{f' (benanza {str(by)[:20]})' if by else ''}; this benanza {__version__} maps format(s) "
                           f"{', '.join(map(str, sorted(TORCH_MODULE_FORMATS)))}: record the profile again")


def map_bundle(model: Model, bundle: Bundle | str | Path) -> Profile:
    """The analyzer's Profile of a bundle (use :func:`map_bundle_report` for what could not be mapped)."""
    return map_bundle_report(model, bundle).profile


def kernel_time_mapped(profile: Profile) -> tuple[float | None, float]:
    """The share of the run's kernel time that maps onto model layers, and the memcpy/memset time
    apart: copies are no kernels (the input upload of a batch-32 ViT is 3 ms), so counting them as
    unmapped kernel time understates the mapping. (share or None without kernels, copy ms)."""
    kernel_ms = sum(lp.gpu_ms or 0.0 for lp in profile.layers.values())
    unmapped_ms = sum(w.ms for w in profile.unmapped if w.kind is not OverheadKind.COPY)
    copy_ms = sum(w.ms for w in profile.unmapped if w.kind is OverheadKind.COPY)
    total = kernel_ms + unmapped_ms
    return (kernel_ms / total if total else None), copy_ms


def summary(mapping: Mapping) -> dict[str, Any]:
    """Counts for the CLI: layers with a node, a call, GPU time; unmapped layers and GPU work."""
    p = mapping.profile
    return {"layers": len(p.layers), "with node": len(mapping.nodes),
            "fused into another": sum(1 for lp in p.layers.values() if lp.fused_into is not None),
            "with library call": sum(1 for lp in p.layers.values() if lp.executed is not None),
            "with GPU time": sum(1 for lp in p.layers.values() if lp.gpu_ms is not None),
            "unmapped layers": len(mapping.unmapped_layers), "unmapped GPU work": len(p.unmapped),
            "unmapped GPU time (ms)": sum(ms for _, _, ms in mapping.unmapped_causes) if p.unmapped else None,
            "end-to-end (ms)": p.e2e_ms, "GPU busy (ms)": p.gpu_busy_ms}
