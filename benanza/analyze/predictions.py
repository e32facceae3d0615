"""What each gap's fix predicts: the saving an analysis says a change to the run would make, read the
way the close-the-loop harness checks it (bench/close_loop.py applies the change natively and times
it; docs/RESULTS.md §4). Pure functions of a ``Report`` (and, for BatchNorm folding, the model and the
database's bias-add rows), each returning its figures with ``predicted_ms`` (None where the analysis
cannot say), plus the arithmetic of comparing a realized saving with its prediction.

``PREDICTORS`` names each reading; an experiment names the one its change is judged by.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from benanza.analyze.choose import fastest, usable
from benanza.analyze.tables import Report
from benanza.model.layer import Model, bias_add
from benanza.records import Result

TOLERANCE = 0.15  # a prediction holds when |realized / predicted - 1| is at most this
# The analysis' figures shown beside every prediction (display labels: analyze.summary.LABELS).
SHOWN = ("GPU busy (ms)", "LBL_seq (ms)", "LBL_par (ms)", "gap baseline LBL_seq, no fused calls (ms)",
         "algorithm-selection gap (ms)", "layout gap (ms)", "what-if tf32: LBL_seq (ms)", "fusion gap (ms)",
         "parallelism gap (ms)", "as-executed LBL, mapped layers (ms)", "measured GPU time, mapped layers (ms)")
# conv(+BN)(+Add)+ReLU groups; a model without BN (or an export that folded it) has conv(+Add)+ReLU ones
FUSED_OPS = ("Conv+BatchNormalization+Relu", "Conv+BatchNormalization+Sum+Relu", "Conv+Relu", "Conv+Add+Relu",
             "Conv+Sum+Relu")


def shown(report: Report) -> dict[str, Any]:
    """``SHOWN`` of the report's summary (None for a what-if it was not asked)."""
    labelled = report.summary.labelled()
    return {label: labelled.get(label) for label in SHOWN}


def folded_bn(report: Report, model: Model, bias_rows: Mapping[str, Sequence[Result]],
              bandwidth_gbs: float) -> dict[str, Any]:
    """Saving of folding every BatchNormalization that directly follows a conv (its only reader): the
    BN layers' as-executed rows go, a bias add per conv comes (its fp32 row of ``bias_rows``, keyed by
    ``model.layer.bias_add``'s key, else its bytes at ``bandwidth_gbs``, counted and named)."""
    rows = {r["#"]: r for r in report.tables["layers"].rows}
    pairs = []
    for layer in model.layers:
        preds = list(model.graph.predecessors(layer.index))
        if layer.op != "BatchNormalization" or len(preds) != 1:
            continue
        conv = model.layers[preds[0]]
        if conv.op == "Conv" and list(model.graph.successors(conv.index)) == [layer.index]:
            pairs.append((conv, layer))
    bn_ms, bias_ms, unmeasured, roofline_bias = 0.0, 0.0, [], 0
    for conv, bn in pairs:
        executed = rows.get(bn.index, {}).get("as-executed (ms)")
        if executed is None:
            unmeasured.append(bn.name)
            continue
        bn_ms += executed
        row = fastest(r for r in usable(bias_rows.get(bias_add(conv).key, ())) if r.dtype == "fp32")
        if row is not None:
            bias_ms += row.median_ms or 0.0
        else:  # read the output and the bias, write the output, at the measured bandwidth
            roofline_bias += 1
            bias_ms += 2 * conv.bytes_written / (bandwidth_gbs * 1e6)
    return {"predicted_ms": bn_ms - bias_ms if pairs and not unmeasured else None,
            "BN layers folded": len(pairs), "BN as-executed (ms)": bn_ms, "bias adds (ms)": bias_ms,
            "bias adds at the roofline (no row)": roofline_bias, "BN layers without an as-executed row": unmeasured}


def bias_add_keys(model: Model) -> list[str]:
    """The keys of the bias adds ``folded_bn`` prices: one per conv of the model."""
    return [bias_add(layer).key for layer in model.layers if layer.op == "Conv"]


def fused_groups(report: Report, fuses: Callable[[str], bool] = FUSED_OPS.__contains__) -> dict[str, Any]:
    """Saving of running each fused-call group of the bound's execution whose ops ``fuses`` accepts
    (by default conv+BN+ReLU and conv+BN+Add+ReLU) as one fused call: the framework's measured
    kernels of the group's layers (from the profile) less the fused row the bound charges for it."""
    rows = {r["layer"]: r for r in report.tables["layers"].rows}
    measured, charged, groups, unmeasured = 0.0, 0.0, 0, 0
    for g in report.tables["execution"].rows:
        if g["kind"] != "fused call" or not fuses(g["ops"]):
            continue
        times = [rows[n.strip()]["measured (ms)"] for n in g["layers"].split(",") if n.strip() in rows]
        if any(t is None for t in times):
            unmeasured += 1
            continue
        groups += 1
        measured += sum(times)
        charged += g["charged (ms)"]
    return {"predicted_ms": measured - charged if groups and not unmeasured else None, "fused groups": groups,
            "their layers, measured (ms)": measured, "fused rows charged (ms)": charged,
            "groups with an unmeasured layer": unmeasured}


def fused_attention(report: Report) -> dict[str, Any]:
    """Saving of fusing the attention cores: the analysis' attention row of its per-pattern fusion gaps,
    beside the measured-kernel reading of the groups that hold a Softmax."""
    pattern = next((r for r in report.tables["fusion patterns"].rows if r["pattern"] == "attention"), {})
    groups = fused_groups(report, lambda ops: "Softmax" in ops.split("+"))
    return {**{f"attention pattern: {k}": v for k, v in pattern.items()},
            **{f"measured-kernel reading: {k}": v for k, v in groups.items()},
            "predicted_ms": pattern.get("gap (ms)")}


def cuda_graph(report: Report) -> dict[str, Any]:
    """Saving of capturing the whole eager run in one CUDA graph, end to end: the run's framework
    overhead (the overhead table's counted rows: GPU idle = end-to-end - GPU busy, plus the kernels
    that map to no layer) less those unmapped kernels, which a graph replay still runs. What is left
    is the idle time: launches, host work between kernels and syncs, which a replay takes off the
    critical path, and the copies within it (listed, never counted twice)."""
    s = report.summary
    overhead = s.framework_overhead_ms
    rows = report.tables["overhead"].rows if "overhead" in report.tables else ()
    idle = sum(r["ms"] for r in rows if r["kind"] == "idle")
    kept = sum(r["ms"] for r in rows if r["counted"] and r["kind"] != "idle")
    copies = sum(r["ms"] for r in rows if not r["counted"])
    has_idle = any(r["kind"] == "idle" for r in rows)
    return {"predicted_ms": overhead - kept if overhead is not None and has_idle else None,
            "framework overhead (ms)": overhead,
            "of it: GPU idle, end-to-end - GPU busy (ms)": idle if has_idle else None,
            "of it: unmapped kernels a CUDA graph still runs (ms)": kept,
            "unmapped copies within the idle time (ms)": copies,
            "measured end-to-end (ms)": s.e2e_ms, "GPU memcpy/memset (ms)": s.gpu_copy_ms}


def tf32_saving(report: Report) -> dict[str, Any]:
    """Saving of allowing TF32: a precision change is a what-if beside the headline, LBL_seq less the
    what-if's LBL_seq (None when the analysis was not asked the what-if)."""
    s = report.summary
    tf32 = s.what_if_ms.get("tf32")
    return {"predicted_ms": None if tf32 is None else s.lbl_seq_ms - tf32}


def _gap(attribute: str) -> Callable[[Report], dict[str, Any]]:
    def read(report: Report) -> dict[str, Any]:
        return {"predicted_ms": getattr(report.summary, attribute)}

    read.__doc__ = f"Saving of the gap's named fix: the summary's {attribute}."
    return read


FOLDED_BN = "folded BN"  # needs the model and the database besides the report: workflows.close_loop
# reading -> how it is read from the analysis of the run before the change
PREDICTORS: dict[str, Callable[[Report], dict[str, Any]]] = {
    "framework overhead, CUDA-graph part": cuda_graph,
    "fused groups": fused_groups,
    "fused attention": fused_attention,
    "what-if tf32 saving": tf32_saving,
    "parallelism gap (ms)": _gap("parallelism_gap_ms"),
    "algorithm-selection gap (ms)": _gap("algorithm_gap_ms"),
    "layout gap (ms)": _gap("layout_gap_ms"),
    "fusion gap (ms)": _gap("fusion_gap_ms"),
}
READINGS = frozenset({*PREDICTORS, FOLDED_BN})


def realized_ratio(realized_ms: float | None, predicted_ms: float | None) -> float | None:
    """Realized over predicted saving; None when either is unknown or nothing was predicted."""
    if realized_ms is None or not predicted_ms:
        return None
    return realized_ms / predicted_ms


def holds(ratio: float | None, tolerance: float = TOLERANCE) -> bool | None:
    """Whether a realized/predicted ratio is within ``tolerance`` of 1 (None: no ratio)."""
    return None if ratio is None else abs(ratio - 1.0) <= tolerance


def spread(before: Mapping[str, Any], after: Mapping[str, Any], key: str = "kernel_ms_iters") -> float | None:
    """Run-to-run spread of a realized saving: the two medians' standard errors combined, each from the
    interquartile range of its per-iteration times ``key`` (kernel-only, or end-to-end ``e2e_ms_iters``;
    IQR / 1.349 estimates a normal sigma; a median's standard error is about 1.2533 sigma / sqrt(n));
    None with fewer than four iterations on a side."""
    errors = []
    for side in (before, after):
        xs = side.get(key) or []
        if len(xs) < 4:
            return None
        q = statistics.quantiles(xs, n=4)
        errors.append(1.2533 * (q[2] - q[0]) / 1.349 / len(xs) ** 0.5)
    return (errors[0] ** 2 + errors[1] ** 2) ** 0.5
