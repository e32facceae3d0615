"""The analyzer's inputs as plain data, so that tests (and the CLI) build them directly.

Nothing here reads a database or a profile file: the caller turns those into these
frozen dataclasses and :func:`benanza.analyze.analyze` turns them into tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cached_property
from typing import Any

from benanza.apis import REGISTRY, api_family
from benanza.apis.base import ApiFamily
from benanza.library import DTYPE_BYTES, PRECISIONS, Api, Precision
from benanza.model.layer import Model, bias_add, separate_bias
from benanza.records import (
    Profile,
    Result,
)

# Which kind of library entry point each API is (ApiDef.family).
API_FAMILY: dict[Api, ApiFamily] = {api: d.family for api, d in REGISTRY.items()}

# Bytes per element of each precision's storage type (fp32 and tf32 share fp32 storage).
PRECISION_BYTES: dict[Precision, int] = {p: DTYPE_BYTES[spec.storage] for p, spec in PRECISIONS.items()}

TENSOR_CORE_PRECISIONS = frozenset(p for p, spec in PRECISIONS.items() if spec.tensor_core)
NON_TENSOR_CORE_PRECISIONS = frozenset(p for p, spec in PRECISIONS.items() if not spec.tensor_core)


def storage(precisions: Iterable[Precision]) -> Precision:
    """The storage precision of a run: fp16/bf16 when it computes in one, else fp32 (tf32 stores fp32)."""
    ps = set(precisions)
    for p in (Precision.FP16, Precision.BF16):
        if p in ps and not ps & {Precision.FP32, Precision.TF32}:
            return p
    return Precision.FP32


# The storage type a row of each precision moves (a tf32 copy moves fp32 data).
STORAGE_OF: dict[str, str] = {p.value: storage({p}).value for p in Precision}


def within_tolerance(result: Result) -> bool:
    """Whether a row computes within its precision's accuracy: its output check's tolerance and its
    measured error no looser than the precision's own (fp32 1e-4). Winograd rows pass only a
    loosened 1e-2 (up to 7.2e-3 measured on the H100, 10x the worst TF32 row): they are no fp32."""
    spec = PRECISIONS.get(Precision(result.dtype)) if result.dtype in _PRECISION_VALUES else None
    if spec is None:
        return True
    return (result.tolerance or 0.0) <= spec.tolerance and (result.max_rel_error or 0.0) <= spec.tolerance


_PRECISION_VALUES = frozenset(p.value for p in Precision)


# ``--api``: the cuDNN API families the best policy may choose from (``Constraints.families``).
FAMILIES = {"legacy": {ApiFamily.LEGACY}, "graph": {ApiFamily.GRAPH}, "both": {ApiFamily.LEGACY, ApiFamily.GRAPH}}


@dataclass(frozen=True)
class Constraints:
    """What the ``best`` policy may choose from.

    The default allows fp32 and TF32 math on fp32 data, because that is what
    frameworks do on Hopper by default (ONNX Runtime's ``use_tf32``). A row less accurate than
    its precision allows (``within_tolerance``) counts only with ``approximate``.
    """

    precisions: frozenset[Precision] = frozenset({Precision.FP32, Precision.TF32})
    families: frozenset[ApiFamily] = frozenset({ApiFamily.LEGACY, ApiFamily.GRAPH})
    approximate: bool = False

    def allows(self, result: Result) -> bool:
        family = api_family(result.api)
        if family is None:
            return False
        if family is ApiFamily.NONE:  # a measured copy has no math or API choice, but moves the run's type:
            return STORAGE_OF.get(result.dtype) == self.store.value  # an fp16 copy of fp32 tensors moves half the bytes
        return family in self.families and result.dtype in self._dtypes and self.accurate_enough(result)

    def accurate_enough(self, result: Result) -> bool:
        """Whether ``result`` computes within the accuracy these constraints ask (``within_tolerance``)."""
        return self.approximate or within_tolerance(result)

    @cached_property
    def _dtypes(self) -> frozenset[str]:
        """The precisions' values, built once (``allows`` runs for every row of every layer)."""
        return frozenset(p.value for p in self.precisions)

    @cached_property
    def store(self) -> Precision:
        """The storage type of the run these constraints describe (``storage``)."""
        return storage(self.precisions)

    def with_precisions(self, precisions: frozenset[Precision]) -> Constraints:
        return replace(self, precisions=precisions)

    def with_families(self, families: frozenset[ApiFamily]) -> Constraints:
        return replace(self, families=families)

    def describe(self) -> str:
        prec = ",".join(sorted(p.value for p in self.precisions))
        fam = ",".join(sorted(f.value for f in self.families))
        return f"precisions={prec} apis={fam}" + (" approximate algorithms allowed" if self.approximate else "")


class WhatIf(StrEnum):
    """A change of numerics the run did not allow: never in the headline, each its own labelled bound."""

    TF32 = "tf32"  # TF32 math on fp32 data (Tensor Cores; 10-bit mantissa)
    FP16 = "fp16"  # the whole model stored and computed in fp16
    BF16 = "bf16"  # the same in bf16
    APPROX = "approx"  # algorithms less accurate than their precision allows (fp32 Winograd)


# What each what-if makes of the run's constraints (None: nothing new for this run).
def _add_tf32(c: Constraints) -> Constraints | None:
    return c.with_precisions(c.precisions | {Precision.TF32}) \
        if c.store is Precision.FP32 and Precision.TF32 not in c.precisions else None


def _only(p: Precision) -> Callable[[Constraints], Constraints | None]:
    return lambda c: c.with_precisions(frozenset({p})) if c.precisions != {p} else None


WHAT_IFS: dict[WhatIf, Callable[[Constraints], Constraints | None]] = {
    WhatIf.TF32: _add_tf32,
    WhatIf.FP16: _only(Precision.FP16),
    WhatIf.BF16: _only(Precision.BF16),
    WhatIf.APPROX: lambda c: None if c.approximate else replace(c, approximate=True),
}
DEFAULT_WHAT_IFS: tuple[WhatIf, ...] = (WhatIf.TF32,)


@dataclass(frozen=True)
class StoredReplay:
    """A run of this model's best execution as one program that the database holds (``benanza replay``,
    store/replays.py), for the summary beside LBL: warm and cold L2 times, the LBL of the plan it ran."""

    warm_ms: float | None
    cold_ms: float | None
    lbl_seq_ms: float | None  # the replayed plan's, when it ran (the database may give another now)
    lbl_par_ms: float | None
    status: str  # ok, check_failed, failed (the program's)
    steps: int | None
    measured_at: str
    reason: str = ""  # above replay_explain.EXPLAIN_ABOVE x LBL_seq: where its time beyond LBL_seq goes, one line

    @property
    def over_lbl_seq(self) -> float | None:
        return self.warm_ms / self.lbl_seq_ms if self.warm_ms is not None and self.lbl_seq_ms else None

    @property
    def over_lbl_par(self) -> float | None:
        return self.warm_ms / self.lbl_par_ms if self.warm_ms is not None and self.lbl_par_ms else None


@dataclass(frozen=True)
class Ceilings:
    """Peaks measured on the system: a large device copy and a large GEMM per precision.

    A missing peak is None / absent: the roofline columns that need it are left out
    with a note, never filled with a guess.
    """

    bandwidth_gbs: float | None = None  # GB/s, bytes read + written per second / 1e9
    flops: Mapping[Precision, float] = field(default_factory=dict)  # FLOP/s per precision
    # Data that fits in L2 moves faster than HBM allows (a warm benchmark, or a framework layer
    # reading what the previous one just wrote): the bandwidth measured on such data, and L2's size.
    cache_bandwidth_gbs: float | None = None
    cache_bytes: int | None = None
    sources: Mapping[str, str] = field(default_factory=dict)  # "hbm", "l2", a precision -> where its value comes from

    def peak_flops(self, precision: Precision) -> float | None:
        value = self.flops.get(precision)
        return value if value and value > 0 else None

    @property
    def bandwidth_bytes_per_ms(self) -> float | None:
        if not self.bandwidth_gbs or self.bandwidth_gbs <= 0:
            return None
        return self.bandwidth_gbs * 1e6  # 1 GB/s = 1e9 B/s = 1e6 B/ms

    def memory_ms(self, moved: float) -> float | None:
        """Time to move ``moved`` bytes at the peak of the memory level that holds them (None: no peak)."""
        per_ms = self.bandwidth_bytes_per_ms
        if per_ms is None:
            return None
        if self.cache_bytes and self.cache_bandwidth_gbs and moved <= self.cache_bytes:
            per_ms = max(per_ms, self.cache_bandwidth_gbs * 1e6)
        return moved / per_ms


def measurement_keys(model: Model, profile: Profile | None) -> set[str]:
    """The layer and fusion keys whose database rows an analysis of ``model`` reads: its layers, its fusion
    candidates, the bias add after each conv (a key of its own: the bound charges it whether or not a profile
    logged it, and PyTorch logs none) and the profile's further calls."""
    keys = {layer.key for layer in model.layers} | {f.key for f in model.fusions}
    keys |= {bias_add(layer).key for layer in model.layers if separate_bias(layer)}
    if profile is not None:
        keys |= {c.key for lp in profile.layers.values() for c in lp.extra if c.key}
    return keys


@dataclass(frozen=True)
class Inputs:
    """Everything one analysis needs, for one model on one system."""

    model: Model
    measurements: Mapping[str, Sequence[Result]]  # layer key or fusion key -> all rows, any status
    system: Mapping[str, Any] = field(default_factory=dict)
    ceilings: Ceilings = field(default_factory=Ceilings)
    profile: Profile | None = None
    constraints: Constraints = field(default_factory=Constraints)
    # Numerics the run did not allow, each reported as a labelled what-if beside the headline.
    what_if: tuple[WhatIf, ...] = DEFAULT_WHAT_IFS
    # Replays of this model, precisions and API families on the system, newest first (summary: the one of
    # the headline's own plan).
    replays: tuple[StoredReplay, ...] = ()
