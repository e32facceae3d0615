"""The analyzer's inputs as plain data, so that tests (and the CLI) build them directly.

Nothing here reads a database or a profile file: the caller turns those into these
frozen dataclasses and :func:`benanza.analyze.analyze` turns them into tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache, cached_property
from typing import Any

from benanza.library import PRECISIONS, Api, Fusion, Precision
from benanza.model.layer import Model
from benanza.records import Result


class ApiFamily(StrEnum):
    """Which kind of library entry point a benchmark used (the ``--api`` constraint)."""

    LEGACY = "legacy"  # cuDNN legacy calls and cuBLAS / cuBLASLt
    GRAPH = "graph"  # the cuDNN graph (backend) API through cudnn-frontend
    NONE = "none"  # non-library layers: bounded by bytes moved at measured bandwidth


API_FAMILY: dict[Api, ApiFamily] = {
    Api.CONV_FWD: ApiFamily.LEGACY,
    Api.CONV_BIAS_ACT: ApiFamily.LEGACY,
    Api.GRAPH_CONV: ApiFamily.GRAPH,
    Api.GRAPH_MATMUL: ApiFamily.GRAPH,
    Api.GRAPH_NORM: ApiFamily.GRAPH,
    Api.GRAPH_SDPA: ApiFamily.GRAPH,
    Api.BATCHNORM_INF: ApiFamily.LEGACY,
    Api.ACTIVATION: ApiFamily.LEGACY,
    Api.POOLING: ApiFamily.LEGACY,
    Api.SOFTMAX: ApiFamily.LEGACY,
    Api.LRN: ApiFamily.LEGACY,
    Api.ADD_TENSOR: ApiFamily.LEGACY,
    Api.OP_TENSOR: ApiFamily.LEGACY,
    Api.GEMM_EX: ApiFamily.LEGACY,
    Api.LT_MATMUL: ApiFamily.LEGACY,
    Api.SGEMV: ApiFamily.LEGACY,
    Api.COPY: ApiFamily.NONE,
    Api.CEILING: ApiFamily.NONE,
}

# Bytes per element of each precision's storage type (fp32 and tf32 share fp32 storage).
PRECISION_BYTES: dict[Precision, int] = {
    Precision.FP32: 4,
    Precision.TF32: 4,
    Precision.FP16: 2,
    Precision.BF16: 2,
}

TENSOR_CORE_PRECISIONS = frozenset(p for p, spec in PRECISIONS.items() if spec.tensor_core)
NON_TENSOR_CORE_PRECISIONS = frozenset(p for p, spec in PRECISIONS.items() if not spec.tensor_core)


@cache  # per row of every layer: the Api lookup once per name
def api_family(api: str) -> ApiFamily | None:
    """Family of an ``Api`` value as stored in a Result; None for a name the table does not know."""
    try:
        return API_FAMILY[Api(api)]
    except ValueError:
        return None


@dataclass(frozen=True)
class Constraints:
    """What the ``best`` policy may choose from.

    The default allows fp32 and TF32 math on fp32 data, because that is what
    frameworks do on Hopper by default (ONNX Runtime's ``use_tf32``).
    """

    precisions: frozenset[Precision] = frozenset({Precision.FP32, Precision.TF32})
    families: frozenset[ApiFamily] = frozenset({ApiFamily.LEGACY, ApiFamily.GRAPH})

    def allows(self, result: Result) -> bool:
        family = api_family(result.api)
        if family is None:
            return False
        if family is ApiFamily.NONE:
            return True  # a measured copy has no precision or API choice
        return family in self.families and result.dtype in self._dtypes

    @cached_property
    def _dtypes(self) -> frozenset[str]:
        """The precisions' values, built once (``allows`` runs for every row of every layer)."""
        return frozenset(p.value for p in self.precisions)

    def with_precisions(self, precisions: frozenset[Precision]) -> Constraints:
        return Constraints(precisions=precisions, families=self.families)

    def with_families(self, families: frozenset[ApiFamily]) -> Constraints:
        return Constraints(precisions=self.precisions, families=families)

    def describe(self) -> str:
        prec = ",".join(sorted(p.value for p in self.precisions))
        fam = ",".join(sorted(f.value for f in self.families))
        return f"precisions={prec} apis={fam}"


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


@dataclass(frozen=True)
class ExecutedCall:
    """The library call a framework made for one layer, as the cuDNN/cuBLAS logs show it.

    ``algorithm`` is spelled like the benchmarks spell it (legacy enum name, cuBLAS algo
    id, or the graph API's ``engine_config_name``). ``key`` is the layer key or, when the
    framework ran a fused call, the fusion key under which the fused benchmark is stored.
    """

    api: str
    algorithm: str
    precision: str  # a Precision value: the math actually used (TF32 for fp32 data on Hopper)
    fusion: str = Fusion.NONE.value
    key: str | None = None  # None: the layer's own key


@dataclass(frozen=True)
class KernelSpan:
    """One GPU kernel or copy of a measured run (times relative to the run's start)."""

    name: str
    start_us: float
    dur_us: float


@dataclass(frozen=True)
class LayerProfile:
    """What the profile knows about one model layer; None where it does not know."""

    gpu_ms: float | None = None  # union of the layer's kernel intervals in one run
    kernel_count: int | None = None
    executed: ExecutedCall | None = None
    fused_into: int | None = None  # ran inside this other layer's (fused) call
    kernels: tuple[KernelSpan, ...] = ()
    # Calls the framework made for this layer after ``executed`` (ONNX Runtime adds a
    # conv's bias with a cudnnAddTensor of its own): as-executed counts them too.
    extra: tuple[ExecutedCall, ...] = ()


class OverheadKind(StrEnum):
    """GPU work of a run that belongs to no model layer."""

    KERNEL = "kernel"  # framework-only kernel (e.g. a cast or a fill)
    COPY = "copy"  # memcpy / memset
    EXTRA_LAYER = "extra layer"  # a layer the model does not need (inserted transpose, padding)


@dataclass(frozen=True)
class UnmappedWork:
    name: str
    ms: float
    kind: OverheadKind = OverheadKind.KERNEL


@dataclass(frozen=True)
class Profile:
    """A measured framework run, already mapped onto the model's layer indices."""

    layers: Mapping[int, LayerProfile] = field(default_factory=dict)
    e2e_ms: float | None = None  # end-to-end latency, median over runs
    gpu_busy_ms: float | None = None  # union of all kernel intervals of one run (kernels only)
    copy_ms: float | None = None  # union of the run's memcpy/memset intervals (not in gpu_busy_ms)
    kernel_count: int | None = None
    unmapped: tuple[UnmappedWork, ...] = ()
    framework: str = ""


@dataclass(frozen=True)
class Inputs:
    """Everything one analysis needs, for one model on one system."""

    model: Model
    measurements: Mapping[str, Sequence[Result]]  # layer key or fusion key -> all rows, any status
    system: Mapping[str, Any] = field(default_factory=dict)
    ceilings: Ceilings = field(default_factory=Ceilings)
    profile: Profile | None = None
    constraints: Constraints = field(default_factory=Constraints)
    # Precisions the Tensor Core gap and the joint estimate may add (default: TF32, same storage).
    tensor_core: frozenset[Precision] = frozenset({Precision.TF32})
