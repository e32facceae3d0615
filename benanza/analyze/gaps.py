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
    Policy,
    choose,
    choose_fused,
    fastest,
    fusion_key,
    usable,
)
from benanza.analyze.execution import BIAS_OPS, conv_bias_ms, tensor_core_precisions
from benanza.analyze.inputs import (
    ApiFamily,
    Constraints,
    Inputs,
    OverheadKind,
    api_family,
)
from benanza.analyze.tables import Table
from benanza.library import Fusion
from benanza.model.layer import FusionCandidate, Layer, Model

Choices = Mapping[int, Choice | Miss]


def layer_cols(layer: Layer) -> dict[str, Any]:
    return {"#": layer.index, "layer": layer.name, "op": layer.op}


def weights(choices: Choices) -> dict[int, float]:
    return {i: c.latency_ms for i, c in choices.items() if isinstance(c, Choice)}


# --- algorithm selection -------------------------------------------------------------------

def algorithm_selection(model: Model, inputs: Inputs, executed: Choices) -> Table:
    """As-executed call vs the fastest benchmark of the same precision and fusion, per layer.

    Same precision, so that this gap is about the algorithm/engine choice only (the
    precision choice is the Tensor Core gap). The as-executed call is itself a candidate,
    so the gap is never negative.
    """
    rows = []
    for layer in model.layers:
        choice = executed.get(layer.index)
        if not isinstance(choice, Choice) or choice.result is None:
            continue
        run = choice.result
        candidates = [r for r in usable(inputs.measurements.get(run.layer_key, ()))
                      if r.dtype == run.dtype and r.fusion == run.fusion
                      and (r is run or api_family(r.api) in inputs.constraints.families)]
        best = fastest(candidates) or run
        ran = run.median_ms or 0.0  # the main call alone: a separate bias add is no algorithm choice
        rows.append({**layer_cols(layer),
                     "as-executed (ms)": ran, "as-executed call": Choice(ran, choice.source, run).describe(),
                     "best same precision (ms)": best.median_ms,
                     "best call": Choice(best.median_ms or 0.0, choice.source, best).describe(),
                     "gap (ms)": ran - (best.median_ms or 0.0)})
    return Table("Algorithm selection: as-executed vs best of the same precision",
                 ("#", "layer", "op", "as-executed (ms)", "as-executed call", "best same precision (ms)",
                  "best call", "gap (ms)"), tuple(rows))


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


# --- Tensor Cores ------------------------------------------------------------------------------

def tensor_core_sets(inputs: Inputs) -> tuple[Constraints, Constraints]:
    """(the run's own, with Tensor Cores) constraints: the gap is measured from the precisions the run
    allowed, so a run that already used TF32 has no TF32 gap (never against fp32 then)."""
    run = inputs.constraints
    return run, run.with_precisions(tensor_core_precisions(inputs))


def tensor_core(model: Model, inputs: Inputs) -> tuple[Table, float, int]:
    """Per layer best under the run's precisions and with Tensor Cores added; (table, gap ms, layers compared)."""
    own, tc = tensor_core_sets(inputs)
    rows = []
    for layer in model.layers:
        a = choose(layer, inputs, Policy.BEST, own)
        b = choose(layer, inputs, Policy.BEST, tc)
        if isinstance(a, Choice) and isinstance(b, Choice):
            rows.append({**layer_cols(layer), "run's precisions (ms)": a.latency_ms, "run's call": a.describe(),
                         "with Tensor Cores (ms)": b.latency_ms, "TC call": b.describe(),
                         "gap (ms)": a.latency_ms - b.latency_ms})
    gap = sum(r["gap (ms)"] for r in rows)
    table = Table(f"Tensor Cores, per layer: best with {own.describe()} vs {tc.describe()}",
                  ("#", "layer", "op", "run's precisions (ms)", "run's call", "with Tensor Cores (ms)", "TC call",
                   "gap (ms)"),
                  tuple(rows), note="layers with data under both; positive gap: Tensor Cores are faster; the "
                                    "summary's gap is taken over the whole execution bound")
    return table, gap, len(rows)


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
