"""``analyze(inputs) -> Report``: the one facade that computes every table once."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from benanza import SCHEMA_VERSION
from benanza.analyze import gaps
from benanza.analyze.choose import Choice, Miss, Policy, Source, call_l2, choose, executed_ms, fusion_key, usable
from benanza.analyze.dag import critical_path, layer_graph
from benanza.analyze.execution import Bounds, Execution, GroupKind
from benanza.analyze.fixes import fix_for
from benanza.analyze.inputs import Ceilings, Inputs, StoredReplay
from benanza.analyze.peaks import HBM, L2_LEVEL, effective_ceilings, fewer_flops
from benanza.analyze.physical import physical_peaks
from benanza.analyze.roofline import achieved_flops, bound_ms, efficiency_pct, intensity, layer_bytes, speed_of_light
from benanza.analyze.summary import Check, Summary, ratio
from benanza.analyze.tables import Report, Table
from benanza.analyze.timeline import timeline
from benanza.library import L2, Fusion, Precision
from benanza.model.layer import Layer, Model
from benanza.records import ANY, ROOFLINE, ExecutedCall, LayerProfile

AllChoices = dict[Policy, dict[int, Choice | Miss]]
Mapped = list[tuple[Layer, LayerProfile, float]]  # layer, its profile, as-executed ms

POLICY_COLUMNS = ("policy", "layers with data", "LBL_seq (ms)", "LBL_par (ms)", "BR_seq vs end-to-end",
                  "BR_par vs end-to-end", "BR_seq vs GPU busy", "BR_par vs GPU busy")
LAYER_COLUMNS = ("#", "layer", "op", "measured (ms)", "kernels", "as-executed (ms)", "as-executed call",
                 "heuristic (ms)", "best (ms)", "best benchmark", "source", "bound (ms)", "efficiency (%)", "gap (ms)")
MISSING_COLUMNS = ("policy", "kind", "#", "layer", "op", "key", "reason")
ROOFLINE_COLUMNS = ("#", "layer", "op", "precision", "FLOPs", "bytes", "intensity (FLOP/B)", "achieved (FLOP/s)",
                    "bound (ms)", "best (ms)", "efficiency (%)", "limit")
FEWER_FLOPS = "fewer FLOPs (Winograd/FFT)"  # the roofline table's limit of a best row the direct count does not fit
# Kernel-name markers of a framework's own kernels (not a library call's): a layer's such
# kernels (ONNX Runtime's activation after a cuDNN conv, PyTorch's fills) are framework work.
FRAMEWORK_KERNELS = ("onnxruntime::", "at::native::")
# The command that benchmarks a run's calls the database lacks, in a note; the caller that knows the
# files (workflows.analysis.analyze_model) writes the concrete command in its place (executed_calls_command).
MEASURE_EXECUTED_CALLS = "benanza generate MODEL --from-profile BUNDLE --db DB --out DIR"
E2E_STATS = ("mean", "p90", "min", "max", "runs")  # beside the median, as the bundle recorded them (no p99 there)
# Groups charged their bytes at the measured bandwidth (or FLOPs at the peak), not a measured row.
ROOFLINE_KINDS = frozenset({GroupKind.UNMEASURED, GroupKind.FAILED, GroupKind.MEMORY, GroupKind.CHAIN})
EXECUTION_POLICY = "best execution"  # the headline bound: docs/METRICS.md, "Execution bound"
EXECUTION_COLUMNS = ("#", "layers", "ops", "kind", "charged (ms)", "call", "folded")
BENCHMARK_COLUMNS = ("#", "layer", "api", "algorithm", "dtype", "latency (ms)", "bound (ms)", "efficiency (%)")


def _val(choice: Choice | Miss | None) -> float | None:
    return choice.latency_ms if isinstance(choice, Choice) else None


def analyze(inputs: Inputs) -> Report:
    """Every metric of docs/METRICS.md for one model on one system, as tables."""
    model, prof = inputs.model, inputs.profile
    graph = layer_graph(model.graph, (layer.index for layer in model.layers))
    ceil, ceiling_notes = effective_ceilings(model, inputs)
    inputs = replace(inputs, ceilings=ceil)
    choices = {policy: {layer.index: choose(layer, inputs, policy) for layer in model.layers} for policy in Policy}
    best = choices[Policy.BEST]
    e2e = prof.e2e_ms if prof else None
    busy = prof.gpu_busy_ms if prof else None
    notes: list[str] = list(ceiling_notes)
    bounds = Bounds.of(model, inputs, graph)
    exe = bounds.headline

    lbl: dict[Policy, tuple[float, float, int]] = {}
    charged = sum(len(g.layers) for g in exe.groups)
    policy_rows = [{"policy": EXECUTION_POLICY, "layers with data": f"{charged}/{len(model.layers)}",
                    "LBL_seq (ms)": exe.seq_ms, "LBL_par (ms)": exe.par_ms,
                    "BR_seq vs end-to-end": ratio(exe.seq_ms, e2e), "BR_par vs end-to-end": ratio(exe.par_ms, e2e),
                    "BR_seq vs GPU busy": ratio(exe.seq_ms, busy), "BR_par vs GPU busy": ratio(exe.par_ms, busy)}]
    roofed: dict[int, float] = {}  # layer-wise: layers without a row, charged their roofline (never 0)
    for policy, chosen in choices.items():
        if policy is Policy.AS_EXECUTED and prof is None:
            notes.append("no profile: the as-executed policy, measured times and overhead are not evaluated")
            continue
        w = gaps.weights(chosen)
        with_data = len(w)
        if policy is Policy.BEST:
            roofed = {layer.index: ms for layer in model.layers if isinstance(chosen[layer.index], Miss)
                      and (ms := speed_of_light(layer, inputs.constraints, inputs.ceilings)) is not None}
            w |= roofed
        seq, (par, _) = sum(w.values()), critical_path(graph, w)
        lbl[policy] = (seq, par, with_data)
        policy_rows.append({"policy": f"{policy.value}, layer-wise" if policy is Policy.BEST else policy.value,
                            "layers with data": f"{with_data}/{len(model.layers)}",
                            "LBL_seq (ms)": seq, "LBL_par (ms)": par,
                            "BR_seq vs end-to-end": ratio(seq, e2e), "BR_par vs end-to-end": ratio(par, e2e),
                            "BR_seq vs GPU busy": ratio(seq, busy), "BR_par vs GPU busy": ratio(par, busy)})
    seq, par, covered = lbl[Policy.BEST]
    if covered < len(model.layers):
        notes.append(f"{len(model.layers) - covered} of {len(model.layers)} layers have no data under the best "
                     f"policy (see the missing table); the layer-wise LBL charges {len(roofed)} of them their "
                     "roofline and leaves out the rest (no measured peak)")
    if exe.unmeasured:
        names = ", ".join(model.layers[i].name for i, _ in exe.unmeasured[:5])
        notes.append(f"{len(exe.unmeasured)} layer(s) lack a benchmark of what they run: the bound charges that "
                     f"part its roofline at the measured peaks, never 0 (see the missing table): {names}"
                     f"{' ...' if len(exe.unmeasured) > 5 else ''}")
    if exe.uncharged:
        notes.append(f"{len(exe.uncharged)} layer(s) could not be charged at all (no measured peak): "
                     "LBL leaves them out and is looser; see the missing table")

    algo = gaps.algorithm_selection(model, inputs, choices[Policy.AS_EXECUTED])
    layout_table, layout_gap = gaps.layout(model, inputs, choices[Policy.AS_EXECUTED])
    api_layers, api_totals = gaps.api_comparison(model, inputs)
    outcomes = gaps.fusion_outcomes(model, inputs, best, inputs.constraints)
    fusion_cands, fusion_patterns = gaps.fusion_tables(model, outcomes)
    what_if = gaps.what_if_table(model, inputs, exe, bounds.what_ifs)
    overhead, overhead_ms = gaps.framework_overhead(inputs)

    algo_gap = sum(algo.column("gap (ms)")) if algo.rows else None
    base = bounds.baseline.seq_ms
    fusion_gap, par_gap = bounds.fusion_gap, bounds.parallelism_gap
    joint_ms = bounds.joint.par_ms
    roofed_heads = {i for i, _ in exe.unmeasured}  # once: the sum below runs over every group
    roofline_ms = sum(g.ms for g in exe.groups if g.kind in ROOFLINE_KINDS or g.layers[0] in roofed_heads)
    measured = e2e if e2e is not None else busy
    mapped_layers = mapped_rows(model, inputs, choices[Policy.AS_EXECUTED])
    mapped, mapped_measured, mapped_library, mapped_executed = _as_executed_check(mapped_layers)
    lib_layers, lib_measured, lib_executed = _library_call_check(mapped_layers, choices[Policy.AS_EXECUTED])
    lcw_layers, lcw_measured, lcw_executed = _library_call_check(mapped_layers, choices[Policy.AS_EXECUTED], inputs,
                                                                 L2.COLD_WEIGHTS)
    lcold_layers, lcold_measured, lcold_executed = _library_call_check(mapped_layers, choices[Policy.AS_EXECUTED],
                                                                       inputs, L2.COLD)
    cold_layers, cold_measured, cold_executed = _l2_check(mapped_layers, inputs, L2.COLD)
    cw_layers, cw_measured, cw_executed = _l2_check(mapped_layers, inputs, L2.COLD_WEIGHTS)
    executed = [c for c in choices[Policy.AS_EXECUTED].values() if isinstance(c, Choice)]
    extra_ms = sum(r.median_ms or 0.0 for c in executed for r in c.extra) if any(c.extra for c in executed) else None
    lacking = sorted({d for c in executed for d in c.unbenchmarked})
    if lacking:
        notes.append(f"{sum(len(c.unbenchmarked) for c in executed)} further as-executed call(s) (separate bias "
                     f"adds) have no benchmark, so as-executed leaves them out: {'; '.join(lacking[:3])}"
                     f"{' ...' if len(lacking) > 3 else ''}; benchmark them: {MEASURE_EXECUTED_CALLS}")
    summary = Summary(
        layers=len(model.layers), layers_with_data=covered, lbl_seq_ms=exe.seq_ms, lbl_par_ms=exe.par_ms,
        bound_precisions=",".join(sorted(p.value for p in inputs.constraints.precisions)),
        approximate_algorithms=inputs.constraints.approximate, roofline_charged_ms=roofline_ms,
        roofline_layers=len(exe.unmeasured), uncharged_layers=len(exe.uncharged),
        e2e_ms=e2e, **{f"e2e_{k}_ms" if k != "runs" else "e2e_runs": (prof.e2e_stats.get(k) if prof else None)
                       for k in E2E_STATS},
        gpu_busy_ms=busy, gpu_copy_ms=prof.copy_ms if prof else None,
        layerwise_seq_ms=seq, layerwise_par_ms=par,
        mapped=Check(mapped, mapped_measured, mapped_executed), mapped_library_ms=mapped_library,
        library_calls=Check(lib_layers, lib_measured, lib_executed),
        library_calls_cold_weights=Check(lcw_layers, lcw_measured, lcw_executed),
        library_calls_cold_l2=Check(lcold_layers, lcold_measured, lcold_executed),
        cold_l2=Check(cold_layers, cold_measured, cold_executed),
        cold_weights=Check(cw_layers, cw_measured, cw_executed),
        bias_adds_ms=extra_ms, algorithm_gap_ms=algo_gap, layout_gap_ms=layout_gap,
        api_gap_ms={r["precision"]: r["legacy - graph (ms)"] for r in api_totals.rows},
        gap_baseline_ms=base, fusion_gap_ms=fusion_gap, parallelism_gap_ms=par_gap,
        what_if_ms={r["what-if"]: r["LBL_seq (ms)"] for r in what_if.rows},
        framework_overhead_ms=overhead_ms, joint_ms=joint_ms,
        joint_fusions=sum(1 for g in bounds.joint.groups if g.kind == GroupKind.FUSED),
        replay=replay_of(inputs.replays, exe.seq_ms, notes),
    )
    framework, settings = (prof.framework, prof.settings) if prof else ("", {})
    details = {"fusion": gaps.dominant_fusion(exe),  # which list of fixes each gap takes (analyze.fixes)
               "algorithm selection": gaps.algorithm_family(choices[Policy.AS_EXECUTED], algo)}
    waterfall = _waterfall(measured, joint_ms, [
        ("framework overhead", overhead_ms), ("algorithm selection", algo_gap), ("layout", layout_gap),
        ("fusion", fusion_gap), ("parallelism", par_gap)],
        lambda step: fix_for(step, framework, settings, details.get(step, "")))

    roof, bench = _roofline(model, inputs, best, notes)
    tables = {
        "policies": Table("Lower-bound latency per policy", POLICY_COLUMNS, tuple(policy_rows)),
        "gaps": waterfall,
        "layers": _layer_table(model, inputs, choices),
        "missing": _missing_table(model, inputs, choices, outcomes, exe),
        "algorithm": algo,
        "api": api_layers, "api totals": api_totals,
        "fusion": fusion_cands, "fusion patterns": fusion_patterns,
        "layout": layout_table,
        "what-if": what_if,
        "overhead": overhead,
        "execution": _execution_table(model, exe),
        "joint": Table("Joint estimate: fused calls of its execution", ("layers", "ops", "fused call", "ms"),
                       tuple({"layers": ", ".join(map(str, g.layers)),
                              "ops": "+".join(model.layers[i].op for i in g.layers), "fused call": g.call,
                              "ms": g.ms} for g in bounds.joint.groups if g.kind == GroupKind.FUSED)),
        "roofline": roof, "benchmarks": bench,
    }
    return Report(
        schema=SCHEMA_VERSION,
        model={"name": model.name, "path": model.path, "batch": model.batch, "layers": len(model.layers),
               "fusion candidates": len(model.fusions), "edges": graph.number_of_edges(),
               "framework": prof.framework if prof else ""},
        system=dict(inputs.system),
        constraints=inputs.constraints.describe(),
        ceilings=_ceilings(inputs.ceilings, inputs.system),
        summary=summary, tables=tables,
        timeline=timeline(model, prof, _spans_of(exe), _spans_of(bounds.joint)), notes=tuple(notes))


def replay_of(replays: tuple[StoredReplay, ...], lbl_seq_ms: float, notes: list[str]) -> StoredReplay | None:
    """The stored replay the summary shows beside LBL: the newest of the headline's own plan (its LBL_seq),
    else the newest, with a note that the database has changed since it ran; a note says where the
    time of a replay that needs a reason goes (``StoredReplay.reason``)."""
    same = [r for r in replays if r.lbl_seq_ms is not None and math.isclose(r.lbl_seq_ms, lbl_seq_ms, rel_tol=1e-9)]
    pick = (same or list(replays) or [None])[0]
    if pick is None:
        return None
    if not same:
        notes.append(f"the stored replay ran a plan whose LBL_seq was {pick.lbl_seq_ms or 0:.4g} ms; the database "
                     f"gives {lbl_seq_ms:.4g} ms now: benanza replay again replays the current plan")
    if pick.reason:
        notes.append(f"replay: {pick.reason} (docs/REPLAY.md)")
    return pick


def _ceilings(ceil: Ceilings, system: dict[str, Any]) -> dict[str, Any]:
    """The report's ceilings: each value, where it comes from (measured, raised by a row, or the
    physical peak) and the GPU's physical peak beside it (None for a GPU not in PHYSICAL_PEAKS)."""
    phys = physical_peaks(system)
    flops = {Precision(p).value: v for p, v in ceil.flops.items()}
    return {"bandwidth (GB/s)": ceil.bandwidth_gbs,
            "L2-resident bandwidth (GB/s)": ceil.cache_bandwidth_gbs,
            "L2 (bytes)": ceil.cache_bytes,
            "peak (FLOP/s)": flops,
            "source": {"bandwidth (GB/s)": ceil.sources.get(HBM),
                       "L2-resident bandwidth (GB/s)": ceil.sources.get(L2_LEVEL),
                       "peak (FLOP/s)": {p: ceil.sources.get(p) for p in flops}},
            "physical peak": None if phys is None else {
                "bandwidth (GB/s)": phys.hbm_gbs, "peak (FLOP/s)": {p.value: v for p, v in phys.flops.items()},
                "source": phys.source}}


def mapped_rows(model: Model, inputs: Inputs, executed: dict[int, Choice | Miss]
            ) -> Mapped:
    """The layers that have both a measured GPU time and an as-executed latency, with both."""
    prof = inputs.profile
    return [(layer, lp, ms) for layer in model.layers
            if prof is not None and (lp := prof.layers.get(layer.index)) is not None and lp.gpu_ms is not None
            and (ms := _val(executed[layer.index])) is not None]


def _as_executed_check(mapped_layers: Mapped) -> tuple[int, float | None, float | None, float | None]:
    """How well the database reproduces the run, over the layers that have both a measured GPU
    time and an as-executed benchmark: (layer count, measured ms, ms of the library kernels
    alone, i.e. without the framework's own kernels that no call stands for, benchmark ms)."""
    mapped = [(lp, ms) for _, lp, ms in mapped_layers]
    if not mapped:
        return 0, None, None, None
    measured = sum(lp.gpu_ms or 0.0 for lp, _ in mapped)  # every mapped layer has a GPU time
    library = sum(_library_kernel_ms(lp) for lp, _ in mapped)
    return len(mapped), measured, library, sum(ms for _, ms in mapped)


def _library_kernel_ms(lp: LayerProfile, framework_counts: bool | None = None) -> float:
    """A layer's GPU time without the framework's own kernels that no call stands for. They count
    when an extra call stands for them (PyTorch's bias-add kernel, whose counterpart is the
    bias-add benchmark): by default whenever the layer has an extra call."""
    if not lp.kernels:
        return lp.gpu_ms or 0.0  # no kernel list: all of it
    framework_counts = bool(lp.extra) if framework_counts is None else framework_counts
    return sum(k.dur_us for k in lp.kernels
               if framework_counts or not any(m in k.name for m in FRAMEWORK_KERNELS)) / 1e3


def library_call_layers(mapped_layers: Mapped, executed: dict[int, Choice | Miss]
                         ) -> list[tuple[Layer, float, list[ExecutedCall], Choice]]:
    """The layers of the library-call check (``_library_call_check``): (layer, its library kernels'
    ms, its exact calls, its as-executed choice)."""
    out = []
    for layer, lp, _ in mapped_layers:
        choice = executed[layer.index]
        calls = (lp.executed, *lp.extra) if lp.executed is not None else ()
        exact = [c for c in calls if c.algorithm != ROOFLINE]
        if (not isinstance(choice, Choice) or choice.result is None or choice.unbenchmarked or not exact
                or any(ANY in (c.api, c.algorithm) for c in exact)):
            continue
        kernels = replace(lp, kernels=tuple(k for k in lp.kernels if not k.copy))
        measured = _library_kernel_ms(kernels, framework_counts=len(exact) > 1)
        if measured > 0:
            out.append((layer, measured, exact, choice))
    return out


def _library_call_check(mapped_layers: Mapped, executed: dict[int, Choice | Miss], inputs: Inputs | None = None,
                        l2: L2 = L2.WARM) -> tuple[int | None, float | None, float | None]:
    """The as-executed check where the framework's kernels are library calls: per mapped layer,
    the benchmarks of exactly the cuDNN/cuBLAS calls the logs show against the layer's library
    kernels. Left out on both sides: what the framework ran with its own kernels and the bound
    charges at the copy roofline (ORT's bias broadcast, elementwise, norm and softmax kernels),
    copies and memsets; left out entirely: layers of an ORT contrib node charged by the fastest
    benchmark of its fusion (``ANY``: not the call that ran) and layers with a call that has no
    benchmark. Framework kernels count only when a benchmarked extra call stands for them.
    ``l2``: warm (the as-executed rows), or another state with ``inputs``: the same calls' rows of
    that state (``choose.call_l2``: under cold weights the warm row for an API without weights),
    over the layers whose calls all have one; (None, None, None) when no layer uses a row of it.
    (layer count, measured ms, benchmark ms)."""
    checked, used = [], l2 is L2.WARM
    for layer, measured, exact, choice in library_call_layers(mapped_layers, executed):
        if l2 is L2.WARM:
            checked.append((measured, sum(r.median_ms or 0.0 for r in (choice.result, *choice.extra))))
            continue
        assert inputs is not None, "a check under another L2 state reads the rows from inputs"
        ms = executed_ms(layer.key, exact, inputs, l2)
        if ms is not None:
            checked.append((measured, ms))
            used = used or any(call_l2(c, l2) is l2 for c in exact)
    if not used:
        return None, None, None
    if not checked:
        return 0, None, None
    return len(checked), sum(m for m, _ in checked), sum(ms for _, ms in checked)


def _l2_check(mapped_layers: Mapped, inputs: Inputs, l2: L2) -> tuple[int | None, float | None, float | None]:
    """The as-executed check against benchmarks measured cold: at small batches a framework
    streams each layer's weights from HBM, so the fair counterpart of its kernel time is the same
    call with its weights out of L2. ``L2.COLD``: L2 flushed before each call (activations
    flushed too); ``L2.COLD_WEIGHTS``: the weights cold, the activations warm, the calls back to
    back, which is the state a framework leaves; there a call of an API without weights takes
    its warm row (``call_l2``). Over the mapped layers whose calls (main and extra) all have an
    ok row: (layer count, measured ms, benchmark ms), all None when no layer uses a row of ``l2``."""
    checked, used = [], False
    for layer, lp, _ in mapped_layers:
        calls = (lp.executed, *lp.extra) if lp.executed is not None else ()
        ms = executed_ms(layer.key, calls, inputs, l2)  # None without a call
        if ms is not None:
            checked.append((lp.gpu_ms or 0.0, ms))
            used = used or any(call_l2(c, l2) is l2 for c in calls)
    if not used:
        return None, None, None
    return len(checked), sum(m for m, _ in checked), sum(ms for _, ms in checked)


def _waterfall(start: float | None, end: float, steps: list[tuple[str, float | None]],
               fix: Callable[[str], str]) -> Table:
    """Measured latency, each gap taken off on its own (with the change that closes it, one the run
    has not made), then what their interaction leaves."""
    rows = []
    known = [(name, ms) for name, ms in steps if ms is not None]
    if start is not None:
        rows.append({"step": "measured", "kind": "total", "ms": start, "fix": ""})
    rows += [{"step": name, "kind": "gap", "ms": ms, "fix": fix(name)} for name, ms in known]
    if start is not None:
        rows.append({"step": "interaction and unexplained", "kind": "residual",
                     "ms": start - sum(ms for _, ms in known) - end, "fix": ""})
    rows.append({"step": "joint estimate", "kind": "total", "ms": end, "fix": ""})
    return Table("Gaps: from the measured latency to the joint estimate", ("step", "kind", "ms", "fix"), tuple(rows),
                 note="each gap is measured on its own; the residual holds their overlap and what no gap explains")


def _layer_table(model: Model, inputs: Inputs, choices: AllChoices) -> Table:
    prof = inputs.profile
    rows = []
    for layer in model.layers:
        i = layer.index
        lp = prof.layers.get(i) if prof else None
        best, run, heur = choices[Policy.BEST][i], choices[Policy.AS_EXECUTED][i], choices[Policy.HEURISTIC][i]
        bound = bound_ms(layer, best.precision, inputs.ceilings) if isinstance(best, Choice) else None
        direct = not (isinstance(best, Choice) and best.result is not None and fewer_flops(best.result))
        measured = lp.gpu_ms if lp else None
        actual = measured if measured is not None else _val(run)
        rows.append({
            "#": i, "layer": layer.name, "op": layer.op,
            "measured (ms)": measured, "kernels": lp.kernel_count if lp else None,
            "as-executed (ms)": _val(run), "as-executed call": run.describe() if isinstance(run, Choice) else None,
            "heuristic (ms)": _val(heur), "best (ms)": _val(best),
            "best benchmark": best.describe() if isinstance(best, Choice) else None,
            "source": best.source.value if isinstance(best, Choice) else None,
            "bound (ms)": bound, "efficiency (%)": efficiency_pct(bound, _val(best)) if direct else None,
            "gap (ms)": actual - best.latency_ms if actual is not None and isinstance(best, Choice) else None,
        })
    return Table("Per layer", LAYER_COLUMNS, tuple(rows),
                 note="gap: measured GPU time (or as-executed benchmark) minus best; no efficiency for a "
                      "Winograd/FFT best (fewer FLOPs than the direct count the bound uses)")


def _execution_table(model: Model, exe: Execution) -> Table:
    """The groups the headline bound charges, one row per library call, kernel or alias."""
    names = {layer.index: layer for layer in model.layers}
    rows = tuple({"#": g.layers[0], "layers": ", ".join(names[i].name for i in g.layers),
                  "ops": "+".join(names[i].op for i in g.layers), "kind": g.kind, "charged (ms)": g.ms,
                  "call": g.call, "folded": ", ".join(names[i].name for i in g.folded)} for g in exe.groups)
    return Table("Best execution: what the headline bound charges", EXECUTION_COLUMNS, rows,
                 note="folded: constant layers folded into the conv/GEMM weights at zero cost")


def _spans_of(exe: Execution) -> tuple:
    """(graph, head -> latency, head -> members) of an execution, for the trace's schedules."""
    source = {GroupKind.FUSED: Source.FUSED, GroupKind.CALL: Source.BENCHMARK, GroupKind.MEASURED: Source.BENCHMARK}
    calls = {g.layers[0]: Choice(g.ms, source.get(g.kind, Source.ROOFLINE)) for g in exe.groups}
    return exe.graph, calls, {g.layers[0]: g.layers for g in exe.groups}


def _missing_table(model: Model, inputs: Inputs, choices: AllChoices,
                   outcomes: list[gaps.FusionOutcome], exe: Execution) -> Table:
    rows = []
    for i, why in exe.unmeasured:
        layer = model.layers[i]
        rows.append({"policy": EXECUTION_POLICY, "kind": "layer (charged its roofline)", "#": i, "layer": layer.name,
                     "op": layer.op, "key": layer.key, "reason": why})
    for i, why in exe.uncharged:
        layer = model.layers[i]
        rows.append({"policy": EXECUTION_POLICY, "kind": "layer (not charged)", "#": i, "layer": layer.name,
                     "op": layer.op, "key": layer.key, "reason": why})
    for policy, chosen in choices.items():
        if policy is Policy.AS_EXECUTED and inputs.profile is None:
            continue
        for layer in model.layers:
            c = chosen[layer.index]
            if isinstance(c, Miss):
                rows.append({"policy": policy.value, "kind": "layer", "#": layer.index, "layer": layer.name,
                             "op": layer.op, "key": layer.key, "reason": c.describe()})
    names = {layer.index: layer.name for layer in model.layers}
    for o in outcomes:
        reason = None
        if o.unfused is None:
            reason = "a member layer has no data"
        elif isinstance(o.fused, Miss):
            reason = o.fused.describe()
        if reason:
            rows.append({"policy": Policy.BEST.value, "kind": f"fusion {o.candidate.pattern}",
                         "#": o.candidate.layers[0],
                         "layer": ", ".join(names.get(i, str(i)) for i in o.candidate.layers),
                         "op": o.candidate.pattern, "key": fusion_key(o.candidate) or "", "reason": reason})
    return Table("Missing data (never counted as zero)", MISSING_COLUMNS, tuple(rows))


def _roofline(model: Model, inputs: Inputs, best: gaps.Choices, notes: list[str]) -> tuple[Table, Table]:
    ceil = inputs.ceilings
    if ceil.bandwidth_gbs is None:
        notes.append("no measured bandwidth: roofline bounds and efficiencies are left out")
    precisions = {p.value: p for p in Precision}  # built once: this runs for every benchmark row
    measured = {r.dtype for layer in model.layers for r in usable(inputs.measurements.get(layer.key, ()))}
    missing = sorted(d for d in measured if d in precisions and ceil.peak_flops(precisions[d]) is None)
    if missing:
        notes.append(f"no measured peak FLOP/s for {', '.join(missing)}: compute bounds for those are left out")
    rows, bench = [], []
    unfused = Fusion.NONE.value
    for layer in model.layers:
        c = best[layer.index]
        if isinstance(c, Choice):
            p = c.precision
            bound = bound_ms(layer, p, ceil)
            moved = layer_bytes(layer, p)
            memory_ms = ceil.memory_ms(moved)
            direct = c.result is None or not fewer_flops(c.result)
            rows.append({"#": layer.index, "layer": layer.name, "op": layer.op, "precision": p.value if p else None,
                         "FLOPs": layer.flops, "bytes": moved, "intensity (FLOP/B)": intensity(layer, p),
                         "achieved (FLOP/s)": achieved_flops(layer, c.latency_ms), "bound (ms)": bound,
                         "best (ms)": c.latency_ms,
                         "efficiency (%)": efficiency_pct(bound, c.latency_ms) if direct else None,
                         "limit": FEWER_FLOPS if not direct else None if bound is None or memory_ms is None
                         else ("memory" if memory_ms >= bound else "compute")})
        bounds: dict[str, float | None] = {}  # this layer's bound per dtype
        for r in usable(inputs.measurements.get(layer.key, ())):
            if r.fusion != unfused:
                continue
            if r.dtype not in bounds:
                bounds[r.dtype] = bound_ms(layer, precisions.get(r.dtype), ceil)
            b = bounds[r.dtype]
            bench.append({"#": layer.index, "layer": layer.name, "api": r.api, "algorithm": r.algorithm,
                          "dtype": r.dtype, "latency (ms)": r.median_ms, "bound (ms)": b,
                          "efficiency (%)": None if fewer_flops(r) else efficiency_pct(b, r.median_ms)})
    why = "no efficiency for Winograd/FFT rows: they compute fewer FLOPs than the direct count the bound uses"
    return (Table("Roofline per layer (best benchmark's precision)", ROOFLINE_COLUMNS, tuple(rows), note=why),
            Table("Every ok benchmark against its roofline", BENCHMARK_COLUMNS, tuple(bench), note=why))
