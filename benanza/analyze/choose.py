"""Which measured latency stands for a layer: the policies, as pure functions.

A layer either gets a :class:`Choice` (a latency and where it came from) or a
:class:`Miss` that says exactly why not; no layer is ever silently zero.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from benanza.analyze.inputs import Ceilings, Constraints, Inputs
from benanza.apis import has_weights, whole_call
from benanza.library import L2, NO_COPY_OPS, Api, Fusion, Precision, Status
from benanza.model.layer import FusionCandidate, Layer
from benanza.records import ANY, ROOFLINE, ExecutedCall, Result


class Policy(StrEnum):
    """How a layer's latency is chosen among its benchmarks."""

    BEST = "best"  # fastest ok benchmark under the constraints
    AS_EXECUTED = "as-executed"  # the algorithm/engine the framework ran (from the library logs)
    HEURISTIC = "heuristic"  # the library heuristic's first choice that ran ok


class Source(StrEnum):
    BENCHMARK = "benchmark"  # a measured micro-benchmark
    ROOFLINE = "roofline"  # non-library layer: bytes moved / measured bandwidth
    FUSED = "fused"  # ran inside another layer's fused call (its time is counted there)


class MissingReason(StrEnum):
    NO_MAPPING = "op has no library mapping"
    NO_RESULTS = "no benchmark results for this key"
    NONE_OK = "no benchmark ran ok"
    NONE_ALLOWED = "no ok benchmark under the constraints"
    NO_BANDWIDTH = "non-library layer and no measured bandwidth"
    NO_PROFILE = "no profile given"
    NOT_EXECUTED = "profile has no as-executed call for this layer"
    NOT_BENCHMARKED = "as-executed call was not benchmarked"
    NO_HEURISTIC = "no heuristic ranking among the ok benchmarks"


@dataclass(frozen=True)
class Choice:
    latency_ms: float  # result's median plus the extra rows' medians
    source: Source
    result: Result | None = None  # None for roofline and fused layers
    # As-executed only: the benchmarks of the framework's further calls for the layer (a
    # separate bias add) and those of its further calls that have no benchmark.
    extra: tuple[Result, ...] = ()
    unbenchmarked: tuple[str, ...] = ()

    @property
    def precision(self) -> Precision | None:
        return Precision(self.result.dtype) if self.result and _is_precision(self.result.dtype) else None

    def describe(self) -> str:
        """'api / algorithm / dtype' of the chosen benchmark, or the source for the others."""
        if self.result is None:
            return self.source.value
        r = self.result
        fusion = "" if r.fusion == Fusion.NONE.value else f" [{r.fusion}]"
        return f"{r.api} / {r.algorithm} / {r.dtype}{fusion}" + "".join(f" + {e.api}" for e in self.extra)


@dataclass(frozen=True)
class Miss:
    reason: MissingReason
    detail: str = ""

    def describe(self) -> str:
        return f"{self.reason.value}: {self.detail}" if self.detail else self.reason.value


def _is_precision(value: str) -> bool:
    return value in {p.value for p in Precision}


def usable(rows: Iterable[Result], l2: L2 = L2.WARM) -> list[Result]:
    """Rows that count as latencies: status ok, with a median, measured with ``l2``. Warm by
    default: the lower bound and every gap; cold and cold-weights only for the as-executed
    cold-L2 and cold-weights checks."""
    want = l2.value  # read once: an enum's .value costs a descriptor call per row (analyze's hot loop)
    ok = Status.OK.value  # and ``r.status == ok`` rather than the ``Result.ok`` property, for the same reason
    return [r for r in rows if r.status == ok and r.l2 == want and r.median_ms is not None]


def fastest(rows: Iterable[Result]) -> Result | None:
    # Ties broken by the full key so that the choice never depends on row order.
    return min(rows, key=lambda r: (r.median_ms, r.key()), default=None)


def _best_of(rows: Sequence[Result], constraints: Constraints, fusion: str) -> Result | Miss:
    if not rows:
        return Miss(MissingReason.NO_RESULTS)
    ok = [r for r in usable(rows) if r.fusion == fusion and whole_call(r.api, r.fusion)]
    if not ok:
        statuses = Counter(r.status for r in rows)
        return Miss(MissingReason.NONE_OK, ", ".join(f"{s} x{n}" for s, n in sorted(statuses.items())))
    allowed = [r for r in ok if constraints.allows(r)]
    if not allowed:
        return Miss(MissingReason.NONE_ALLOWED, constraints.describe())
    best = fastest(allowed)
    assert best is not None
    return best


def is_copy_layer(layer: Layer) -> bool:
    return bool(layer.apis) and all(api is Api.COPY for api in layer.apis)


def roofline_copy_ms(layer: Layer, ceilings: Ceilings) -> float | None:
    """Bound of a non-library layer: bytes moved at measured bandwidth (aliasing ops move none)."""
    if layer.op in NO_COPY_OPS:
        return 0.0
    per_ms = ceilings.bandwidth_bytes_per_ms
    return None if per_ms is None else layer.bytes / per_ms


def _non_library(layer: Layer, inputs: Inputs, constraints: Constraints) -> Choice | Miss:
    measured = fastest(r for r in usable(inputs.measurements.get(layer.key, ())) if constraints.allows(r))
    if measured is not None:
        return Choice(measured.median_ms or 0.0, Source.BENCHMARK, measured)
    bound = roofline_copy_ms(layer, inputs.ceilings)
    if bound is None:
        return Miss(MissingReason.NO_BANDWIDTH)
    return Choice(bound, Source.ROOFLINE)


def choose(layer: Layer, inputs: Inputs, policy: Policy, constraints: Constraints | None = None) -> Choice | Miss:
    """The latency that stands for ``layer`` under ``policy`` (constraints default to the inputs')."""
    constraints = constraints or inputs.constraints
    if policy is Policy.AS_EXECUTED and _in_contrib_group(layer, inputs):
        return _choose_as_executed(layer, inputs, constraints)
    if not layer.apis:
        return Miss(MissingReason.NO_MAPPING, layer.op)
    if is_copy_layer(layer):
        return _non_library(layer, inputs, constraints)
    return _POLICIES[policy](layer, inputs, constraints)


def _charges(call: ExecutedCall | None) -> bool:
    return call is not None and (ANY in (call.api, call.algorithm) or call.algorithm == ROOFLINE)


def _in_contrib_group(layer: Layer, inputs: Inputs) -> bool:
    """Whether an ORT contrib node ran ``layer`` (profile.contrib): its anchor's calls charge the whole
    group, copy layers included, so the members' own rooflines must not count again."""
    layers = inputs.profile.layers if inputs.profile is not None else {}
    prof = layers.get(layer.index)
    if prof is None:
        return False
    anchor = layers.get(prof.fused_into) if prof.fused_into is not None and prof.executed is None else prof
    return anchor is not None and any(_charges(c) for c in (anchor.executed, *anchor.extra))


def _choose_best(layer: Layer, inputs: Inputs, constraints: Constraints) -> Choice | Miss:
    best = _best_of(inputs.measurements.get(layer.key, ()), constraints, Fusion.NONE.value)
    return best if isinstance(best, Miss) else Choice(best.median_ms or 0.0, Source.BENCHMARK, best)


def _tensor_core_engine(row: Result) -> bool:
    """Whether a graph-API engine config row uses Tensor Cores; legacy rows (no engine notes) count as yes."""
    notes = row.notes.get("numerical_notes") if isinstance(row.notes, dict) else None
    return notes is None or "TENSOR_CORE" in notes


def _choose_as_executed(layer: Layer, inputs: Inputs, constraints: Constraints) -> Choice | Miss:
    if inputs.profile is None:
        return Miss(MissingReason.NO_PROFILE)
    prof = inputs.profile.layers.get(layer.index)
    if prof is not None and prof.fused_into is not None and prof.executed is None:
        return Choice(0.0, Source.FUSED)
    if prof is None or prof.executed is None:
        return Miss(MissingReason.NOT_EXECUTED)
    main = executed_row(prof.executed, layer.key, inputs)
    if isinstance(main, Miss):
        return main
    extra = [executed_row(call, layer.key, inputs) for call in prof.extra]
    if any(isinstance(r, RooflineRow) for r in (main, *extra)):  # a contrib node's group (profile.contrib)
        return _charged_group(main, extra)
    rows = tuple(r for r in extra if not isinstance(r, Miss))
    return Choice((main.median_ms or 0.0) + sum(r.median_ms or 0.0 for r in rows), Source.BENCHMARK, main,
                  extra=rows, unbenchmarked=tuple(m.detail for m in extra if isinstance(m, Miss)))


@dataclass(frozen=True)
class RooflineRow:
    """A contrib node's member charged the bytes it moves at the measured bandwidth (no benchmark)."""

    median_ms: float
    what: str


def _charged_group(main: Result | RooflineRow, extra: Sequence[Result | RooflineRow | Miss]) -> Choice:
    """A contrib node's group: its benchmarks' medians plus its members' rooflines, the first
    benchmark as the Choice's row (its source is ROOFLINE when every part is a roofline)."""
    parts = [main, *(r for r in extra if not isinstance(r, Miss))]
    rows = [r for r in parts if isinstance(r, Result)]
    ms = sum(r.median_ms or 0.0 for r in parts)
    if not rows:
        return Choice(ms, Source.ROOFLINE)
    return Choice(ms, Source.BENCHMARK, rows[0], extra=tuple(rows[1:]),
                  unbenchmarked=tuple(m.detail for m in extra if isinstance(m, Miss)))


def _roofline_of_key(key: str, inputs: Inputs) -> RooflineRow | Miss:
    layer = next((x for x in inputs.model.layers if x.key == key), None)
    bound = None if layer is None else roofline_copy_ms(layer, inputs.ceilings)
    if bound is None:
        return Miss(MissingReason.NO_BANDWIDTH, key[:40])
    return RooflineRow(bound, f"{layer.op} roofline" if layer else "roofline")


def executed_row(call: ExecutedCall, layer_key: str, inputs: Inputs, l2: L2 = L2.WARM
                 ) -> Result | RooflineRow | Miss:
    """The fastest ok benchmark of exactly the call the framework made (api, algorithm, precision,
    fusion), among the rows measured with ``l2``: warm for the as-executed policy, cold or
    cold-weights for the checks against a run that streams each layer's weights from HBM.

    A call of ORT's own fused kernels (``profile.contrib``) names ``ANY`` api and/or algorithm:
    the fastest benchmark of that fusion and precision stands for it; a ``ROOFLINE`` member is
    charged its bytes (warm only: a check under another L2 state leaves its layer out)."""
    if call.api == Api.COPY.value and call.algorithm == ROOFLINE:
        return _roofline_of_key(call.key or layer_key, inputs) if l2 is L2.WARM else \
            Miss(MissingReason.NOT_BENCHMARKED, f"roofline charge ({l2.value})")
    measured = [r for r in inputs.measurements.get(call.key or layer_key, ()) if r.l2 == l2.value]

    def same(want: str, got: str) -> bool:
        return want in (ANY, got)

    def of_call(precision: str) -> list[Result]:
        # in the layout the call used, where both are known (fp16 convolutions are measured NHWC and NCHW)
        return [r for r in measured if same(call.api, r.api) and same(call.algorithm, r.algorithm)
                and (r.dtype, r.fusion) == (precision, call.fusion)
                and (not call.layout or not r.layout or r.layout == call.layout)]

    rows = of_call(call.precision)
    if call.precision == Precision.TF32.value and not any(_tensor_core_engine(r) for r in rows):
        # TF32 was allowed, but this engine config computes with FMA (no TENSOR_CORE note,
        # or measured in fp32 only): it ran in fp32, and its fp32 row is the one to compare.
        rows = [r for r in of_call(Precision.FP32.value) if not _tensor_core_engine(r)] or rows
    wanted = f"{call.api} / {call.algorithm} / {call.precision} / {call.fusion}" + \
        (f" / {call.layout}" if call.layout else "") + _L2_SUFFIX[l2]
    if not rows:
        return Miss(MissingReason.NOT_BENCHMARKED, wanted)
    ok = fastest(usable(rows, l2))
    if ok is None:
        return Miss(MissingReason.NONE_OK, f"{wanted}: {', '.join(sorted({r.status for r in rows}))}")
    return ok


# warm is the default, so a miss names only the others
_L2_SUFFIX = {L2.WARM: "", L2.COLD: " (cold L2)", L2.COLD_WEIGHTS: " (cold weights)"}


def call_l2(call: ExecutedCall, l2: L2) -> L2:
    """The rows that stand for ``call`` in the check under ``l2``. Cold-weights rows exist for the
    APIs with weights only (``benanza run --l2 cold-weights`` runs no others): a call without
    weights finds the same state warm, so its warm row stands for it."""
    return L2.WARM if l2 is L2.COLD_WEIGHTS and not has_weights(call.api) else l2


def executed_ms(layer_key: str, calls: Sequence[ExecutedCall], inputs: Inputs, l2: L2) -> float | None:
    """Sum of the rows of every one of ``calls`` under ``l2`` (``call_l2``); None when any of them
    has none (a check over a layer must not count part of what the framework ran)."""
    rows = [executed_row(call, layer_key, inputs, call_l2(call, l2)) for call in calls]
    if not rows or any(isinstance(r, Miss) for r in rows):
        return None
    return sum(r.median_ms or 0.0 for r in rows if not isinstance(r, Miss))


def heuristic_pick(rows: Sequence[Result]) -> Result | None:
    """Per (api, precision, fusion): the ok row the heuristic ranks first; the fastest of those.

    An (api, precision) with one algorithm and no ranking (pooling, activation...) has
    nothing to choose, so its only row is the heuristic's choice too.
    """
    groups: dict[tuple[str, str, str], list[Result]] = defaultdict(list)
    for r in rows:
        groups[(r.api, r.dtype, r.fusion)].append(r)
    picks = []
    for group in groups.values():
        ranked = [r for r in group if r.heuristic_rank is not None]
        if ranked:
            picks.append(min(ranked, key=lambda r: (r.heuristic_rank, r.key())))
        elif len(group) == 1:
            picks.append(group[0])
    return fastest(picks)


def _choose_heuristic(layer: Layer, inputs: Inputs, constraints: Constraints) -> Choice | Miss:
    rows = inputs.measurements.get(layer.key, ())
    best = _best_of(rows, constraints, Fusion.NONE.value)
    if isinstance(best, Miss):
        return best
    allowed = [r for r in usable(rows) if r.fusion == Fusion.NONE.value and constraints.allows(r)]
    pick = heuristic_pick(allowed)
    if pick is None:
        return Miss(MissingReason.NO_HEURISTIC)
    return Choice(pick.median_ms or 0.0, Source.BENCHMARK, pick)


_POLICIES = {
    Policy.BEST: _choose_best,
    Policy.AS_EXECUTED: _choose_as_executed,
    Policy.HEURISTIC: _choose_heuristic,
}


def fusion_key(candidate: FusionCandidate) -> str | None:
    """The key fused benchmarks are stored under (None for a candidate without one)."""
    return candidate.key or None


def choose_fused(candidate: FusionCandidate, inputs: Inputs, constraints: Constraints) -> Choice | Miss:
    """Fastest ok fused benchmark of ``candidate`` under the constraints."""
    key = fusion_key(candidate)
    if key is None:
        return Miss(MissingReason.NO_RESULTS, "fusion candidate has no key")
    best = _best_of(inputs.measurements.get(key, ()), constraints, candidate.pattern)
    return best if isinstance(best, Miss) else Choice(best.median_ms or 0.0, Source.BENCHMARK, best)
