"""The gaps between what a framework ran and what the libraries can do, one function each.

Each function is pure: (model, inputs, already-made choices) -> Table (and figures).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benanza.analyze.choose import (
    Choice,
    Miss,
    choose_fused,
    fastest,
    fusion_key,
    usable,
)
from benanza.analyze.execution import BIAS_OPS, Execution, conv_bias_ms
from benanza.analyze.inputs import WHAT_IFS, ApiFamily, Constraints, Inputs, WhatIf, api_family
from benanza.analyze.peaks import tensor_bytes
from benanza.analyze.tables import Table
from benanza.library import Fusion
from benanza.model.layer import FusionCandidate, Layer, Model, Tensor
from benanza.records import OverheadKind, Result

Choices = Mapping[int, Choice | Miss]


def layer_cols(layer: Layer) -> dict[str, Any]:
    return {"#": layer.index, "layer": layer.name, "op": layer.op}


def weights(choices: Choices) -> dict[int, float]:
    return {i: c.latency_ms for i, c in choices.items() if isinstance(c, Choice)}


# --- algorithm selection and layout ----------------------------------------------------------------

def _same_call(run: Result, inputs: Inputs, same_layout: bool) -> list[Result]:
    """Rows that differ from the executed ``run`` in algorithm/engine only (same API, precision and
    fusion, an accuracy the run allows) and, with ``same_layout``, in the run's layout. The API is
    held: a framework's search picks among the calls of the API it runs (ONNX Runtime 1.31 runs cuDNN
    frontend engines under HEURISTIC and EXHAUSTIVE alike), so a faster legacy algorithm is no
    algorithm choice of a graph-API run (the API table shows that difference)."""
    c = inputs.constraints
    return [r for r in usable(inputs.measurements.get(run.layer_key, ()))
            if r.api == run.api and r.dtype == run.dtype and r.fusion == run.fusion
            and (not same_layout or not run.layout or not r.layout or r.layout == run.layout)
            and (r is run or (api_family(r.api) in c.families and c.accurate_enough(r)))]


def algorithm_selection(model: Model, inputs: Inputs, executed: Choices) -> Table:
    """As-executed call vs the fastest benchmark of the same precision, fusion and layout, per layer.

    One thing changed: the algorithm/engine. The precision is a what-if, the layout its own gap.
    """
    rows = []
    for layer in model.layers:
        choice = executed.get(layer.index)
        if not isinstance(choice, Choice) or choice.result is None:
            continue
        run = choice.result
        best = fastest(_same_call(run, inputs, same_layout=True)) or run
        ran = run.median_ms or 0.0  # the main call alone: a separate bias add is no algorithm choice
        rows.append({**layer_cols(layer), "layout": run.layout or None,
                     "as-executed (ms)": ran, "as-executed call": Choice(ran, choice.source, run).describe(),
                     "best same precision (ms)": best.median_ms,
                     "best call": Choice(best.median_ms or 0.0, choice.source, best).describe(),
                     "gap (ms)": ran - (best.median_ms or 0.0)})
    return Table("Algorithm selection: as-executed vs best of the same precision, fusion and layout",
                 ("#", "layer", "op", "layout", "as-executed (ms)", "as-executed call", "best same precision (ms)",
                  "best call", "gap (ms)"), tuple(rows))


def algorithm_family(executed: Choices, table: Table) -> str:
    """The API family ("graph" / "legacy") of the as-executed calls that leave most of the
    algorithm-selection gap: which list of fixes applies (a framework's search setting reaches
    the calls of one family only)."""
    per: dict[str, float] = defaultdict(float)
    for row in table.rows:
        choice = executed.get(row["#"])
        family = api_family(choice.result.api) if isinstance(choice, Choice) and choice.result else None
        if family is not None and row["gap (ms)"] > 0:
            per[family.value] += row["gap (ms)"]
    return max(sorted(per), key=per.__getitem__) if per else ""


OTHER_LAYOUT = {"NCHW": "NHWC", "NHWC": "NCHW"}


def layout(model: Model, inputs: Inputs, executed: Choices) -> tuple[Table, float | None]:
    """The whole model switched to the other layout (PyTorch channels_last, ORT NHWC), algorithms
    chosen best in each: per layer run in a known layout, best in its layout - best in the other; the
    total adds the transposes the switch costs (model inputs in, outputs out, each read and written
    once). Layers of no layout (pooling, elementwise) are taken to cost the same in both.
    (table, gap ms: the saving when positive, else 0; None when no call has a layout)."""
    rows = []
    for layer in model.layers:
        choice = executed.get(layer.index)
        if not isinstance(choice, Choice) or choice.result is None or choice.result.layout not in OTHER_LAYOUT:
            continue
        run = choice.result
        same = fastest(_same_call(run, inputs, same_layout=True)) or run
        other = fastest(r for r in _same_call(run, inputs, same_layout=False)
                        if r.layout == OTHER_LAYOUT[run.layout])
        if other is None:
            continue
        rows.append({**layer_cols(layer), "layout": run.layout, "best in it (ms)": same.median_ms,
                     "other layout": other.layout, "best in other (ms)": other.median_ms,
                     "best call": Choice(other.median_ms or 0.0, choice.source, other).describe(),
                     "gap (ms)": (same.median_ms or 0.0) - (other.median_ms or 0.0)})
    if not rows:
        return Table("Layout", LAYOUT_COLUMNS, note="no call with a known layout and a row in the other"), None
    store = inputs.constraints.store
    moved = 2 * sum(tensor_bytes(t, store) for t in _model_ends(model) if len(t.shape) >= 4)
    transposes = inputs.ceilings.memory_ms(moved) or 0.0
    total = sum(r["gap (ms)"] for r in rows) - transposes
    rows.append({"#": None, "layer": "transposes at the model's inputs and outputs", "op": "Transpose",
                 "layout": None, "best in it (ms)": None, "other layout": None, "best in other (ms)": transposes,
                 "best call": f"{moved:.4g} B", "gap (ms)": -transposes})
    return Table("Layout: each layout-bound call in the other layout (whole model switched)", LAYOUT_COLUMNS,
                 tuple(rows), note="positive gap: the other layout is faster; the summary takes the sum when "
                                   "positive"), max(total, 0.0)


def _model_ends(model: Model) -> list[Tensor]:
    """The model's input and output activations: read by a layer and made by none (not constants), or
    made by a layer and read by none."""
    made = {t.name for layer in model.layers for t in layer.outputs}
    read = {t.name for layer in model.layers for t in layer.inputs}
    ends = {t.name: t for layer in model.layers for t in layer.inputs if t.name not in made and not t.constant}
    ends |= {t.name: t for layer in model.layers for t in layer.outputs if t.name not in read}
    return list(ends.values())


LAYOUT_COLUMNS = ("#", "layer", "op", "layout", "best in it (ms)", "other layout", "best in other (ms)",
                  "best call", "gap (ms)")


# --- API: legacy vs graph --------------------------------------------------------------------

def api_comparison(model: Model, inputs: Inputs) -> tuple[Table, Table]:
    """Best legacy call vs best graph-API engine per layer and precision, and totals per precision."""
    rows = []
    totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for layer in model.layers:
        ok = [r for r in usable(inputs.measurements.get(layer.key, ())) if r.fusion == Fusion.NONE.value]
        for precision in sorted({r.dtype for r in ok}):
            legacy = fastest(r for r in ok if r.dtype == precision and api_family(r.api) is ApiFamily.LEGACY)
            graph = fastest(r for r in ok if r.dtype == precision and api_family(r.api) is ApiFamily.GRAPH)
            if legacy is None or graph is None:
                continue
            lms, gms = legacy.median_ms or 0.0, graph.median_ms or 0.0
            rows.append({**layer_cols(layer), "precision": precision,
                         "legacy (ms)": lms, "legacy call": f"{legacy.api} / {legacy.algorithm}",
                         "graph (ms)": gms, "graph call": f"{graph.api} / {graph.algorithm}",
                         "legacy - graph (ms)": lms - gms,
                         "graph speedup (x)": lms / gms if gms > 0 else None})
            t = totals[precision]
            t["layers"] += 1
            t["graph wins"] += gms < lms
            t["legacy (ms)"] += lms
            t["graph (ms)"] += gms
            t["best of both (ms)"] += min(lms, gms)
    per_layer = Table("API: best legacy call vs best graph-API engine, per layer and precision",
                      ("#", "layer", "op", "precision", "legacy (ms)", "legacy call", "graph (ms)", "graph call",
                       "legacy - graph (ms)", "graph speedup (x)"), tuple(rows),
                      note="positive legacy - graph: the graph API is faster")
    total_rows = tuple({"precision": precision, "layers": int(t["layers"]), "graph wins": int(t["graph wins"]),
                        "legacy (ms)": t["legacy (ms)"], "graph (ms)": t["graph (ms)"],
                        "legacy - graph (ms)": t["legacy (ms)"] - t["graph (ms)"],
                        "best of both (ms)": t["best of both (ms)"]}
                       for precision, t in sorted(totals.items()))
    total = Table("API gap per precision (layers with both kinds measured)",
                  ("precision", "layers", "graph wins", "legacy (ms)", "graph (ms)", "legacy - graph (ms)",
                   "best of both (ms)"), total_rows)
    return per_layer, total


# --- fusion --------------------------------------------------------------------------------

@dataclass(frozen=True)
class FusionOutcome:
    candidate: FusionCandidate
    unfused: float | None
    fused: Choice | Miss

    @property
    def gap(self) -> float | None:
        if self.unfused is None or not isinstance(self.fused, Choice):
            return None
        return self.unfused - self.fused.latency_ms


def fusion_outcomes(model: Model, inputs: Inputs, best: Choices, constraints: Constraints) -> list[FusionOutcome]:
    """Unfused (sum of the members' best, plus a conv's bias add when the fused call adds a bias)
    and best fused latency of every fusion candidate."""
    out = []
    store = constraints.store
    for cand in model.fusions:
        members = [best.get(i) for i in cand.layers]
        unfused = sum(m.latency_ms for m in members) if all(isinstance(m, Choice) for m in members) else None
        head = model.layers[cand.layers[0]] if cand.layers else None
        if unfused is not None and head is not None and head.op in BIAS_OPS and "bias" in cand.pattern:
            # the fused call adds the conv's bias; unfused, it is a call of its own (never free)
            unfused += conv_bias_ms(head, inputs, store, inputs.ceilings) or 0.0
        out.append(FusionOutcome(cand, unfused, choose_fused(cand, inputs, constraints)))
    return out


def dominant_fusion(exe: Execution) -> str:
    """The pattern whose fused calls in ``exe`` save most over their members unfused: what the
    fusion gap's fix names ("" when the execution has no fused call)."""
    per: dict[str, float] = defaultdict(float)
    for g in exe.groups:
        if g.fusion:
            per[g.fusion] += g.saving
    return max(sorted(per), key=per.__getitem__) if per else ""


def fusion_tables(model: Model, outcomes: list[FusionOutcome]) -> tuple[Table, Table]:
    names = {layer.index: layer.name for layer in model.layers}
    rows = []
    per: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for o in outcomes:
        fused = o.fused
        members = ", ".join(names.get(i, str(i)) for i in o.candidate.layers)
        rows.append({"pattern": o.candidate.pattern, "layers": members,
                     "key": fusion_key(o.candidate) or "",
                     "unfused (ms)": o.unfused,
                     "fused (ms)": fused.latency_ms if isinstance(fused, Choice) else None,
                     "fused call": fused.describe(), "gap (ms)": o.gap})
        p = per[o.candidate.pattern]
        p["candidates"] += 1
        if o.gap is not None:
            p["with data"] += 1
            p["unfused (ms)"] += o.unfused or 0.0
            p["fused (ms)"] += fused.latency_ms if isinstance(fused, Choice) else 0.0
            p["gap (ms)"] += o.gap
    cand = Table("Fusion candidates: sum of the members' best vs best fused call",
                 ("pattern", "layers", "key", "unfused (ms)", "fused (ms)", "fused call", "gap (ms)"), tuple(rows),
                 note="positive gap: the fused call is faster")
    pattern = Table("Fusion gap per pattern (candidates with data)",
                    ("pattern", "candidates", "with data", "unfused (ms)", "fused (ms)", "gap (ms)"),
                    tuple({"pattern": k, "candidates": int(v["candidates"]), "with data": int(v["with data"]),
                           "unfused (ms)": v["unfused (ms)"], "fused (ms)": v["fused (ms)"], "gap (ms)": v["gap (ms)"]}
                          for k, v in sorted(per.items())))
    return cand, pattern


# --- what-ifs: numerics the run did not allow ----------------------------------------------------

WHAT_IF_COLUMNS = ("what-if", "constraints", "LBL_seq (ms)", "LBL_par (ms)", "saving vs LBL_seq (ms)",
                   "bound speedup (x)", "tolerance (rel)", "worst measured error (rel)")


def _class_rows(model: Model, inputs: Inputs, run: Constraints, what: Constraints) -> list[Result]:
    """The model's rows a what-if adds: allowed by it and not by the run (its accuracy class)."""
    keys = {layer.key for layer in model.layers} | {f.key for f in model.fusions}
    return [r for k in keys for r in usable(inputs.measurements.get(k, ()))
            if what.allows(r) and not run.allows(r) and api_family(r.api) is not ApiFamily.NONE]


def what_if_table(model: Model, inputs: Inputs, headline: Execution, what_ifs: Mapping[WhatIf, Execution]) -> Table:
    """Each what-if's bound beside the headline, with its accuracy cost: the output-check tolerance of
    the rows it adds and the worst error measured among them (the headline never includes these)."""
    rows = []
    for w, exe in what_ifs.items():
        what = WHAT_IFS[w](inputs.constraints)
        assert what is not None  # Bounds keeps only the what-ifs that change the run
        added = _class_rows(model, inputs, inputs.constraints, what)
        errors = [r.max_rel_error for r in added if r.max_rel_error is not None]
        tolerances = [r.tolerance for r in added if r.tolerance is not None]
        rows.append({"what-if": w.value, "constraints": what.describe(),
                     "LBL_seq (ms)": exe.seq_ms, "LBL_par (ms)": exe.par_ms,
                     "saving vs LBL_seq (ms)": headline.seq_ms - exe.seq_ms,
                     "bound speedup (x)": headline.seq_ms / exe.seq_ms if exe.seq_ms > 0 else None,
                     "tolerance (rel)": max(tolerances, default=None),
                     "worst measured error (rel)": max(errors, default=None)})
    return Table("What-ifs: numerics the run did not allow (never in the headline)", WHAT_IF_COLUMNS, tuple(rows),
                 note="accuracy: the output check's tolerance and the worst relative error measured among the "
                      "model's rows each what-if adds, against an fp32 reference")


# --- framework overhead ------------------------------------------------------------------------

OVERHEAD_COLUMNS = ("component", "kind", "count", "ms", "counted")


def framework_overhead(inputs: Inputs) -> tuple[Table, float | None]:
    """Idle GPU time of the run (end-to-end - GPU busy) plus the kernels that map to no layer.

    GPU busy is the union of kernel intervals only, so a memcpy/memset already lies in the idle
    time: it is listed (kind copy, "within idle") but never added again."""
    prof = inputs.profile
    if prof is None:
        return Table("Framework overhead", OVERHEAD_COLUMNS, note="no profile given"), None
    rows: list[dict[str, Any]] = []
    idle = None
    if prof.e2e_ms is not None and prof.gpu_busy_ms is not None:
        idle = prof.e2e_ms - prof.gpu_busy_ms
        rows.append({"component": "GPU idle (end-to-end - GPU busy): launches, host work, syncs, copies",
                     "kind": "idle", "count": None, "ms": idle, "counted": True})
    grouped: dict[tuple[str, str], list[float]] = defaultdict(list)
    for w in prof.unmapped:
        grouped[(OverheadKind(w.kind).value, w.name)].append(w.ms)
    for (kind, name), values in sorted(grouped.items(), key=lambda kv: -sum(kv[1])):
        rows.append({"component": name, "kind": kind, "count": len(values), "ms": sum(values),
                     "counted": kind != OverheadKind.COPY.value})
    if idle is None and not rows:
        return Table("Framework overhead", OVERHEAD_COLUMNS,
                     note="profile has neither end-to-end and GPU-busy times nor unmapped work"), None
    total = sum(r["ms"] for r in rows if r["counted"])
    note = "counted = no: a copy lies in the idle time already (GPU busy counts kernels only)"
    if idle is None:
        note += "; end-to-end or GPU-busy time missing: idle time not counted"
    return Table("Framework overhead", OVERHEAD_COLUMNS, tuple(rows), note=note), total
