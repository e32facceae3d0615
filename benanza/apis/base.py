"""What every API definition shares: the job builder's result and refusal, and the checks of
more than one builder."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from benanza.apis.job_table import FUSION, KEY, PRECISION, Column, Kind, Vocabulary, choice
from benanza.apis.log_side import LogSide
from benanza.library import PRECISIONS, Activation, Api, Fusion, Precision
from benanza.model.layer import FusionCandidate, Layer, Model


@dataclass(frozen=True)
class JobFields:
    """What a job builder returns: the template's numbers plus the manifest's description."""

    row: dict[str, Any]  # one line of the job table: a value per ApiDef.columns (numbers, text, enum spellings)
    shapes: dict[str, Any]  # human-readable shapes/attributes for manifest.json
    algorithms: tuple[str, ...]  # algorithms measured per job; ("*",) when enumerated at run time
    layout: str = ""
    math: str = ""  # a Math value when the API has no math mode ("n/a"); "" = the precision's


class Unsupported(Exception):
    """Raised by a job builder: this layer cannot be benchmarked with this API (the message says why)."""


JobBuilder = Callable[[Layer | FusionCandidate, Model, Precision], JobFields]


FLOAT_DTYPES = frozenset({"float32", "float16", "bfloat16", "float64"})
_INT32_MAX = 2**31 - 1


def _layout(precision: Precision) -> str:
    return PRECISIONS[precision].cudnn_layout.removeprefix("CUDNN_TENSOR_")


# Activation coefficient (cudnnSetActivationDescriptor's coef) from the ONNX op's attributes.
ACTIVATION_COEF: dict[str, Callable[[dict[str, Any]], float]] = {
    "Clip": lambda attrs: float(attrs.get("max", math.inf)),
    "Elu": lambda attrs: float(attrs.get("alpha", 1.0)),
}


# Enum spellings more than one API's job table holds (job_table.Vocabulary).
ACTIVATION_MODE = Vocabulary("cudnnActivationMode_t", tuple(a.value for a in Activation))
TENSOR_FORMAT = Vocabulary("cudnnTensorFormat_t", ("CUDNN_TENSOR_NCHW", "CUDNN_TENSOR_NHWC"))
# The first columns of a legacy cuDNN op's table, and its last two (cudnn_ops.h op_result).
OP_HEAD = (KEY, PRECISION, FUSION)
OP_FORMAT = (choice("format", TENSOR_FORMAT), Column("layout", Kind.TEXT))


class ApiFamily(StrEnum):
    """Which kind of library entry point a benchmark used (the ``--api`` constraint)."""

    LEGACY = "legacy"  # cuDNN legacy calls and cuBLAS / cuBLASLt
    GRAPH = "graph"  # the cuDNN graph (backend) API through cudnn-frontend
    NONE = "none"  # non-library layers: bounded by bytes moved at measured bandwidth


@dataclass(frozen=True)
class ApiDef:
    """Everything benanza knows about one ``Api``, in one place: the planner, codegen, the
    runner, the cuDNN log reader and the analyzer read these fields and branch on no API."""

    api: Api
    executable: str  # bench_<slug>: the binary of its jobs (generate --api takes the slug)
    template: str  # file under templates/ that renders this API's benchmark source
    family: ApiFamily
    library: str  # "cudnn", "cublas", "none"
    builder: JobBuilder | None  # layer or fusion -> the template's row; None: planned on its own (ceilings)
    # The columns of its job table (benanza/apis/job_table.py): the row fields the template reads at run
    # time, in order. The compiled source depends on these, never on the jobs.
    columns: tuple[Column, ...] = ()
    # The algorithm spellings its template compiles in (a legacy enum table, or the one algorithm
    # it names), in measuring order; every job's algorithms are among them. () where the algorithm
    # is a column of the job (activation mode, pooling mode ...) or enumerated at run time.
    algorithms: tuple[str, ...] = ()
    tensor_core: bool = False  # whether Tensor Core precisions (TF32) make sense for it
    # The source defines no kernels of its own (no __global__, no <<<: its references
    # live in the harness's kernels.cu: conv, GEMM, activation), so the host compiler
    # builds it: much faster than nvcc, above all for the cudnn-frontend sources.
    host_only: bool = False
    # The call reads a layer's weights (a conv filter, a GEMM's constant B), which its template
    # rotates under --l2 cold-weights (L2.COLD_WEIGHTS); for the others that mode is their warm
    # state.  BatchNormalization's scale, bias, mean and variance are a few KB: no weights.
    weights: bool = False
    # Layout policy of a legacy cuDNN call: True gives it the precision's preferred layout
    # (NHWC for fp16/bf16), False always NCHW.
    nhwc: bool = False
    # Convolutions: measured in both layouts in every precision, the other layout a second job
    # whose layout is part of its key: PyTorch runs fp16 convolutions NCHW unless the model is
    # channels_last, and fp32 ones NHWC when it is (ConvNeXt's permutes make it so), so a bound
    # without either would not cover what frameworks run (docs/METRICS.md "Layouts").
    both_layouts: bool = False
    # Named-config codec: the job can name the engine configs it measures
    # (apis.graph.with_named_configs over apis.engine_config), so that a framework's own
    # choice read from its cuDNN log is measured even where the heuristics' lists miss it.
    named_configs: bool = False
    # Fusion patterns whose whole chain this API runs as one call (the planner's FUSION_APIS).
    fusions: tuple[Fusion, ...] = ()
    # Of those, the ones it runs only into an output another kernel pre-filled (cublasGemmEx's
    # beta = 1 bias, as ONNX Runtime's Gemm does it): their rows time the library call alone,
    # for the as-executed check; the bound never takes them as a whole fused execution
    # (docs/METRICS.md, "Execution bound").
    prefilled: tuple[Fusion, ...] = ()
    # How its calls appear in a framework's cuDNN/cuBLAS logs (benanza.apis.log_side): required,
    # NO_LOG_SIDE where no log shows them, so that no API is left unmapped by omission.
    log: LogSide = field(kw_only=True)
