"""The headline figures of one analysis as a typed record, and the one table that names them for people.

``Summary`` is what the analyzer computes (the ratios and the joint gap are derived from its fields,
so they cannot disagree with them); ``LABELS`` gives each figure its display label, with its unit in
parentheses. ``Summary.labelled()`` is the only place those labels are produced: the terminal's
summary table, the JSON document's ``summary`` and ``figures`` (snake_case keys taken from the labels:
a public format, docs/analysis.schema.json) and the CSV all read it, so a figure is named once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from benanza.analyze.inputs import StoredReplay


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """Benanza ratio and speedups: None when either side is unknown or the denominator is 0."""
    if numerator is None or not denominator:
        return None
    return numerator / denominator


@dataclass(frozen=True)
class Check:
    """One check of the database against the run: the benchmarks of the calls the run made
    (``executed_ms``) against the GPU time measured for them (``measured_ms``) over ``layers`` layers.
    All None when no layer has a row of the kind the check needs (cold L2, cold weights)."""

    layers: int | None = None
    measured_ms: float | None = None
    executed_ms: float | None = None

    @property
    def ratio(self) -> float | None:
        return ratio(self.executed_ms, self.measured_ms)


@dataclass(frozen=True)
class Summary:
    """The headline figures of one analysis (docs/METRICS.md); None where the run or the database
    does not say (no profile, no cold rows)."""

    layers: int
    layers_with_data: int  # under the best policy
    lbl_seq_ms: float  # the headline bound: the best execution, one call after another
    lbl_par_ms: float  # the same execution along the critical path
    bound_precisions: str  # comma-separated, sorted
    approximate_algorithms: bool  # whether the bound may take approximate algorithms (FFT, Winograd)
    roofline_charged_ms: float  # the part of lbl_seq_ms charged a roofline, whole or part
    roofline_layers: int  # layers charged a roofline in whole or part (no benchmark)
    uncharged_layers: int  # layers not charged at all (no measured peak)
    e2e_ms: float | None  # the timed runs' median end-to-end latency
    e2e_mean_ms: float | None
    e2e_p90_ms: float | None
    e2e_min_ms: float | None
    e2e_max_ms: float | None
    e2e_runs: int | None
    gpu_busy_ms: float | None  # union of the profiled run's kernel intervals, per run
    gpu_copy_ms: float | None  # its memcpy/memset time
    layerwise_seq_ms: float  # the paper's layer-by-layer LBL
    layerwise_par_ms: float
    mapped: Check  # layers with a measured GPU time and an as-executed benchmark
    mapped_library_ms: float | None  # their library kernels alone (no framework kernel)
    library_calls: Check  # the exact calls the logs show against their library kernels, warm rows
    library_calls_cold_weights: Check  # the same, rows with the weights cold
    library_calls_cold_l2: Check  # the same, rows with L2 flushed
    cold_l2: Check  # mapped layers against their cold-L2 rows
    cold_weights: Check  # mapped layers against their cold-weights rows
    bias_adds_ms: float | None  # separate bias adds of the as-executed calls
    algorithm_gap_ms: float | None
    layout_gap_ms: float | None
    api_gap_ms: dict[str, float]  # precision -> legacy - graph API (ms)
    gap_baseline_ms: float  # LBL_seq with no fused call: where the gaps start
    fusion_gap_ms: float
    parallelism_gap_ms: float
    framework_overhead_ms: float | None
    joint_ms: float  # the joint estimate's LBL_par: every fix applied under the run's numerics
    joint_fusions: int  # fused calls the joint estimate applies
    what_if_ms: dict[str, float | None] = field(default_factory=dict)  # what-if -> its LBL_seq, beside the headline
    replay: StoredReplay | None = None  # the database's replay of this execution (benanza replay), if it holds one

    @property
    def benanza_ratio(self) -> float | None:
        """LBL_seq over the run's kernel-only GPU time."""
        return ratio(self.lbl_seq_ms, self.gpu_busy_ms)

    @property
    def measured_share(self) -> float | None:
        """The share of LBL_seq charged measured calls (the rest is a roofline)."""
        return ratio(self.lbl_seq_ms - self.roofline_charged_ms, self.lbl_seq_ms)

    @property
    def br_seq_e2e(self) -> float | None:
        return ratio(self.lbl_seq_ms, self.e2e_ms)

    @property
    def br_par_e2e(self) -> float | None:
        return ratio(self.lbl_par_ms, self.e2e_ms)

    @property
    def br_seq_busy(self) -> float | None:
        return ratio(self.lbl_seq_ms, self.gpu_busy_ms)

    @property
    def br_par_busy(self) -> float | None:
        return ratio(self.lbl_par_ms, self.gpu_busy_ms)

    @property
    def layerwise_br_seq_e2e(self) -> float | None:
        return ratio(self.layerwise_seq_ms, self.e2e_ms)

    @property
    def layerwise_br_par_e2e(self) -> float | None:
        return ratio(self.layerwise_par_ms, self.e2e_ms)

    @property
    def layerwise_br_seq_busy(self) -> float | None:
        return ratio(self.layerwise_seq_ms, self.gpu_busy_ms)

    @property
    def layerwise_br_par_busy(self) -> float | None:
        return ratio(self.layerwise_par_ms, self.gpu_busy_ms)

    @property
    def mapped_library_ratio(self) -> float | None:
        """The mapped layers' as-executed benchmarks over their library kernels alone."""
        return ratio(self.mapped.executed_ms, self.mapped_library_ms)

    @property
    def joint_gap_ms(self) -> float:
        return self.gap_baseline_ms - self.joint_ms

    @property
    def speedup_e2e(self) -> float | None:
        """Measured latency over the joint estimate."""
        return ratio(self.e2e_ms, self.joint_ms)

    @property
    def speedup_busy(self) -> float | None:
        return ratio(self.gpu_busy_ms, self.joint_ms)

    def labelled(self) -> dict[str, Any]:
        """Display label -> value, in ``LABELS``' order, the what-ifs in their place: the form every
        writer shows and the JSON document keys (``json_report``)."""
        out: dict[str, Any] = {}
        for label, path in LABELS:
            if path == "what_if_ms":
                out.update({WHAT_IF.format(name): ms for name, ms in self.what_if_ms.items()})
            elif path.startswith("replay.") and self.replay is None:  # no replay stored: no replay figures
                continue
            else:
                out[label] = attrgetter(path)(self)
        return out


WHAT_IF = "what-if {}: LBL_seq (ms)"  # one label per what-if the analysis was asked for


def _check(what: str, layers: str, measured: str, executed: str, ratio: str) -> tuple[tuple[str, str], ...]:
    return ((layers, f"{what}.layers"), (measured, f"{what}.measured_ms"), (executed, f"{what}.executed_ms"),
            (ratio, f"{what}.ratio"))


# (display label, Summary attribute or dotted path), in the order every writer shows them. The
# labels are a public format (the JSON document's keys): change one and you change the format.
LABELS: tuple[tuple[str, str], ...] = (
    ("layers", "layers"),
    ("layers with data (best)", "layers_with_data"),
    ("LBL_seq (ms)", "lbl_seq_ms"),
    ("LBL_par (ms)", "lbl_par_ms"),
    ("replay, warm L2 (ms)", "replay.warm_ms"),  # these six only where the database holds a replay
    ("replay, cold L2 (ms)", "replay.cold_ms"),
    ("replay / LBL_seq", "replay.over_lbl_seq"),
    ("replay / LBL_par", "replay.over_lbl_par"),
    ("replay check", "replay.status"),
    ("LBL_seq of the replayed plan (ms)", "replay.lbl_seq_ms"),
    ("Benanza ratio", "benanza_ratio"),
    ("precisions of the bound", "bound_precisions"),
    ("approximate algorithms in the bound", "approximate_algorithms"),
    ("LBL_seq charged at a roofline, whole or part (ms)", "roofline_charged_ms"),
    ("LBL_seq measured share", "measured_share"),
    ("layers charged a roofline in whole or part (no benchmark)", "roofline_layers"),
    ("layers not charged (no measured peak)", "uncharged_layers"),
    ("measured end-to-end (ms)", "e2e_ms"),
    ("end-to-end mean (ms)", "e2e_mean_ms"),
    ("end-to-end p90 (ms)", "e2e_p90_ms"),
    ("end-to-end min (ms)", "e2e_min_ms"),
    ("end-to-end max (ms)", "e2e_max_ms"),
    ("end-to-end runs", "e2e_runs"),
    ("GPU busy (ms)", "gpu_busy_ms"),
    ("GPU memcpy/memset (ms)", "gpu_copy_ms"),
    ("BR_seq vs end-to-end", "br_seq_e2e"),
    ("BR_par vs end-to-end", "br_par_e2e"),
    ("BR_seq vs GPU busy", "br_seq_busy"),
    ("BR_par vs GPU busy", "br_par_busy"),
    ("LBL_seq layer-wise (ms)", "layerwise_seq_ms"),
    ("LBL_par layer-wise (ms)", "layerwise_par_ms"),
    ("BR_seq layer-wise vs end-to-end", "layerwise_br_seq_e2e"),
    ("BR_par layer-wise vs end-to-end", "layerwise_br_par_e2e"),
    ("BR_seq layer-wise vs GPU busy", "layerwise_br_seq_busy"),
    ("BR_par layer-wise vs GPU busy", "layerwise_br_par_busy"),
    ("mapped layers (measured and as-executed)", "mapped.layers"),
    ("measured GPU time, mapped layers (ms)", "mapped.measured_ms"),
    ("library kernels, mapped layers (ms)", "mapped_library_ms"),
    ("as-executed LBL, mapped layers (ms)", "mapped.executed_ms"),
    ("as-executed / measured, mapped layers", "mapped.ratio"),
    ("as-executed / library kernels, mapped layers", "mapped_library_ratio"),
    *_check("library_calls", "library-call layers (as-executed check)",
            "measured library kernels, library-call layers (ms)", "as-executed LBL, library-call layers (ms)",
            "as-executed / measured, library-call layers"),
    *_check("library_calls_cold_weights", "library-call layers, cold weights (as-executed check)",
            "measured library kernels, library-call layers with cold-weights rows (ms)",
            "as-executed LBL cold weights, library-call layers (ms)",
            "as-executed cold weights / measured, library-call layers"),
    *_check("library_calls_cold_l2", "library-call layers, cold L2 (as-executed check)",
            "measured library kernels, library-call layers with cold-L2 rows (ms)",
            "as-executed LBL cold L2, library-call layers (ms)", "as-executed cold L2 / measured, library-call layers"),
    *_check("cold_l2", "cold-L2 layers (of the mapped)", "measured GPU time, cold-L2 layers (ms)",
            "as-executed LBL, cold L2 (ms)", "as-executed cold L2 / measured"),
    *_check("cold_weights", "cold-weights layers (of the mapped)", "measured GPU time, cold-weights layers (ms)",
            "as-executed LBL, cold weights (ms)", "as-executed cold weights / measured"),
    ("separate bias adds, as-executed (ms)", "bias_adds_ms"),
    ("algorithm-selection gap (ms)", "algorithm_gap_ms"),
    ("layout gap (ms)", "layout_gap_ms"),
    ("API gap legacy - graph (ms)", "api_gap_ms"),
    ("gap baseline LBL_seq, no fused calls (ms)", "gap_baseline_ms"),
    ("fusion gap (ms)", "fusion_gap_ms"),
    ("parallelism gap (ms)", "parallelism_gap_ms"),
    (WHAT_IF, "what_if_ms"),
    ("framework overhead (ms)", "framework_overhead_ms"),
    ("joint estimate LBL_par (ms)", "joint_ms"),
    ("joint gap (ms)", "joint_gap_ms"),
    ("joint fusions applied", "joint_fusions"),
    ("predicted speedup vs end-to-end (x)", "speedup_e2e"),
    ("predicted speedup vs GPU busy (x)", "speedup_busy"),
)
