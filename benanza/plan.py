"""The benchmark planner: the one place that decides what gets benchmarked.

Candidates are every (layer or fusion candidate) x (API it maps to) x (precision)
of the given models.  The planner dedupes them by key across models and batches,
drops those that make no sense or are already measured (logging why), and turns
the rest into jobs through ``JOB_BUILDERS``: one small function per API that turns
a layer or fusion into the plain numbers its template needs.  Adding an API is
one builder here plus one template (see docs/GENERATOR.md); generation
(``benanza.codegen``) never filters on the side.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from benanza.apis.engine_config import parse_engine_config_name
from benanza.library import (
    APIS,
    NO_COPY_OPS,
    ONNX_ACTIVATIONS,
    PRECISIONS,
    Activation,
    Api,
    ConvFwdAlgo,
    Fusion,
    Math,
    Precision,
)
from benanza.model.layer import SEPARATE_BIAS_OPS, FusionCandidate, Layer, Model, bias_add
from benanza.records import ExecutedCall

# ---------------------------------------------------------------- descriptions


@dataclass(frozen=True)
class Benchmark:
    """One measurable call; ``name()`` is its identity (dedupe key, database key)."""

    layer_key: str  # a layer key, or a fusion key for fused benchmarks
    api: str  # a benanza.library.Api value
    algorithm: str  # legacy enum spelling, "*" when enumerated at run time
    dtype: str  # a benanza.library.Precision value
    math: str  # a benanza.library.Math value
    fusion: str  # a benanza.library.Fusion value
    layout: str  # "NCHW", "NHWC", or "" where the API has no layout

    def name(self) -> str:
        return "/".join((self.api, self.algorithm, self.dtype, self.math, self.fusion, self.layout or "-",
                         self.layer_key))


@dataclass(frozen=True)
class JobFields:
    """What a job builder returns: the template's numbers plus the manifest's description."""

    row: dict[str, Any]  # fields of one row of the generated job table: numbers, hex keys, enum spellings
    shapes: dict[str, Any]  # human-readable shapes/attributes for manifest.json
    algorithms: tuple[str, ...]  # algorithms measured per job; ("*",) when enumerated at run time
    layout: str = ""
    math: str = ""  # a Math value when the API has no math mode ("n/a"); "" = the precision's


@dataclass(frozen=True)
class Job:
    """One row of one executable's job table: every algorithm of one API for one key."""

    executable: str  # bench_<slug>
    index: int  # position in the executable's job table (the binary's --jobs value)
    key: str  # layer key, or fusion key
    api: Api
    precision: Precision
    fusion: Fusion
    fields: JobFields = field(compare=False)

    @property
    def layout(self) -> str:
        return self.fields.layout

    @property
    def math(self) -> str:
        return self.fields.math or PRECISIONS[self.precision].math.value

    def benchmarks(self) -> list[Benchmark]:
        return [Benchmark(self.key, self.api.value, a, self.precision.value, self.math, self.fusion.value,
                          self.layout) for a in self.fields.algorithms]


ALREADY_MEASURED = "already in the database"  # Dropped.reason of a benchmark the database holds


@dataclass(frozen=True)
class Dropped:
    """A candidate the planner did not turn into a job, and why."""

    key: str
    what: str  # the op, or the fusion pattern
    api: str
    dtype: str
    reason: str


Drops = dict[tuple[str, str, str, str], Dropped]


def _record(dropped: Drops, d: Dropped) -> None:
    """Keep one drop per (key, api, dtype, reason); the first candidate's ``what`` names it."""
    dropped.setdefault((d.key, d.api, d.dtype, d.reason), d)


@dataclass
class Plan:
    jobs: list[Job]
    dropped: list[Dropped]
    models: list[Model] = field(default_factory=list)

    @property
    def benchmarks(self) -> list[Benchmark]:
        return [b for job in self.jobs for b in job.benchmarks()]

    def executables(self) -> dict[str, list[Job]]:
        """Jobs per executable, in job-index order."""
        out: dict[str, list[Job]] = {}
        for job in self.jobs:
            out.setdefault(job.executable, []).append(job)
        return out

    def drop_reasons(self) -> dict[str, int]:
        """How many candidates each reason dropped (for the CLI summary)."""
        counts: dict[str, int] = {}
        for d in self.dropped:
            counts[d.reason] = counts.get(d.reason, 0) + 1
        return counts


class Unsupported(Exception):
    """Raised by a job builder: this layer cannot be benchmarked with this API (the message says why)."""


# ---------------------------------------------------------------- tables

# One executable per API: bench_<slug>.
EXECUTABLES: dict[Api, str] = {
    Api.CONV_FWD: "bench_conv_fwd",
    Api.CONV_BIAS_ACT: "bench_conv_bias_act",
    Api.GRAPH_CONV: "bench_graph_conv",
    Api.GRAPH_MATMUL: "bench_graph_matmul",
    Api.BATCHNORM_INF: "bench_batchnorm",
    Api.ACTIVATION: "bench_activation",
    Api.POOLING: "bench_pooling",
    Api.SOFTMAX: "bench_softmax",
    Api.LRN: "bench_lrn",
    Api.ADD_TENSOR: "bench_add_tensor",
    Api.OP_TENSOR: "bench_op_tensor",
    Api.GEMM_EX: "bench_gemm_ex",
    Api.LT_MATMUL: "bench_lt_matmul",
    Api.SGEMV: "bench_sgemv",
    Api.COPY: "bench_copy",
    Api.CEILING: "bench_ceilings",
}

# Fusion pattern -> fused calls that can replace the chain.
FUSION_APIS: dict[Fusion, tuple[Api, ...]] = {
    Fusion.CONV_BIAS: (Api.CONV_BIAS_ACT, Api.GRAPH_CONV),
    Fusion.CONV_BIAS_ACT: (Api.CONV_BIAS_ACT, Api.GRAPH_CONV),
    Fusion.CONV_BIAS_ADD_ACT: (Api.CONV_BIAS_ACT, Api.GRAPH_CONV),
    Fusion.CONV_BN: (Api.CONV_BIAS_ACT, Api.GRAPH_CONV),  # inference BN folds into weights and bias
    Fusion.CONV_BN_ACT: (Api.CONV_BIAS_ACT, Api.GRAPH_CONV),
    Fusion.GEMM_BIAS: (Api.LT_MATMUL, Api.GRAPH_MATMUL),
    Fusion.GEMM_BIAS_ACT: (Api.LT_MATMUL, Api.GRAPH_MATMUL),
}

# Fusions whose chain adds a second tensor (the residual) before the activation.
RESIDUAL_FUSIONS = frozenset({Fusion.CONV_BIAS_ADD_ACT})

# Activation coefficient (cudnnSetActivationDescriptor's coef) from the ONNX op's attributes.
ACTIVATION_COEF: dict[str, Callable[[dict[str, Any]], float]] = {
    "Clip": lambda attrs: float(attrs.get("max", math.inf)),
    "Elu": lambda attrs: float(attrs.get("alpha", 1.0)),
}

FLOAT_DTYPES = frozenset({"float32", "float16", "bfloat16", "float64"})


# ---------------------------------------------------------------- job builders


def _layout(precision: Precision) -> str:
    return PRECISIONS[precision].cudnn_layout.removeprefix("CUDNN_TENSOR_")


def _conv_dims(layer: Layer) -> tuple[list[int], dict[str, Any]]:
    """The 18 numbers of a bz::ConvDims row, and the manifest's shapes, for one Conv layer."""
    if len(layer.inputs) < 2 or not layer.outputs:
        raise Unsupported("Conv without weights or output")
    x, w, y = layer.inputs[0], layer.inputs[1], layer.outputs[0]
    if x.dtype not in FLOAT_DTYPES:
        raise Unsupported(f"input dtype {x.dtype} is not a floating-point type")
    rank = len(x.shape)
    if rank not in (3, 4) or len(w.shape) != rank or len(y.shape) != rank:
        raise Unsupported(f"{rank - 2}-D convolution (only 1-D and 2-D are generated)")
    a = layer.attrs
    pads, strides, dil = list(a["pads"]), list(a["strides"]), list(a["dilations"])
    if rank == 3:  # 1-D: an H of 1
        x_s, w_s, y_s = (*x.shape[:2], 1, x.shape[2]), (*w.shape[:2], 1, w.shape[2]), (*y.shape[:2], 1, y.shape[2])
        pads, strides, dil = [0, pads[0], 0, pads[1]], [1, *strides], [1, *dil]
    else:
        x_s, w_s, y_s = tuple(x.shape), tuple(w.shape), tuple(y.shape)
    n, c, h, wd = x_s
    k, cg, r, s = w_s
    g = int(a.get("group", 1))
    if g < 1 or c % g or k % g or cg * g != c:
        raise Unsupported(f"inconsistent groups: C={c}, K={k}, filter channels={cg}, group={g}")
    dims = [n, c, h, wd, k, r, s, pads[0], pads[1], pads[2], pads[3], *strides, *dil, g, y_s[2], y_s[3]]
    shapes = {"x": list(x.shape), "w": list(w.shape), "y": list(y.shape), "pads": list(a["pads"]),
              "strides": list(a["strides"]), "dilations": list(a["dilations"]), "group": g}
    return [int(v) for v in dims], shapes


CONV_FWD_ALGORITHMS = tuple(a.value for a in ConvFwdAlgo)


def conv_fwd_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cudnnConvolutionForward: one Conv layer, all 8 forward algorithms."""
    if not isinstance(item, Layer) or item.op != "Conv":
        raise Unsupported("cudnnConvolutionForward takes a single Conv layer")
    dims, shapes = _conv_dims(item)
    return JobFields({"dims": dims}, shapes, CONV_FWD_ALGORITHMS, _layout(precision))


def conv_bias_act_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cudnnConvolutionBiasActivationForward: a conv fusion chain, act(conv + bias [+ z])."""
    if not isinstance(item, FusionCandidate):
        raise Unsupported("cudnnConvolutionBiasActivationForward takes a fusion candidate")
    fusion = Fusion(item.pattern)
    conv, last = model.layers[item.layers[0]], model.layers[item.layers[-1]]
    if conv.op != "Conv":
        raise Unsupported(f"fusion {fusion.value} does not start with a Conv")
    dims, shapes = _conv_dims(conv)
    act = Activation(item.activation) if item.activation else Activation.IDENTITY
    coef = ACTIVATION_COEF.get(last.op, lambda _: 0.0)(last.attrs) if item.activation else 0.0
    if last.op == "Clip" and float(last.attrs.get("min", 0.0)) != 0.0:
        raise Unsupported("Clip with min != 0 is not a clipped ReLU")
    residual = fusion in RESIDUAL_FUSIONS
    shapes = {**shapes, "bias": [dims[4]], "activation": act.value, "coef": coef}
    if residual:
        shapes["z"] = shapes["y"]
    row = {"dims": dims, "act": act.value, "coef": coef, "alpha2": 1.0 if residual else 0.0}
    return JobFields(row, shapes, CONV_FWD_ALGORITHMS, _layout(precision))


# ---------------------------------------------------------------- cuBLAS: Gemm and MatMul

_OP = {False: "CUBLAS_OP_N", True: "CUBLAS_OP_T"}
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class GemmShape:
    """A Gemm/MatMul as the model has it (row-major), and the column-major cuBLAS calls it maps to.

    ``Y[b] = alpha * op(A[b]) op(B[b]) + beta * C``: op(A) is m x k, op(B) is k x n, C
    broadcasts from ``c_rows x c_cols`` (0 x 0: no C).  A row-major matrix is its own
    transpose read column-major, so ``Y = op(A) op(B)`` is the cuBLAS call
    ``Y^T = op(B)^T op(A)^T``: cuBLAS's A is the model's B, its m is the model's n.
    ``b_constant``: B is a model constant, the layer's weights (what ``--l2 cold-weights``
    rotates); ``a_constant`` likewise for A (MatMul(W, x)), which the benchmarks do not
    rotate: they refuse cold-weights for such a layer rather than measure its weights warm.
    """

    batch: int
    m: int
    n: int
    k: int
    trans_a: bool = False
    trans_b: bool = False
    stride_a: int = 0  # elements between batch entries of A (0: one A for every entry)
    stride_b: int = 0
    alpha: float = 1.0
    beta: float = 0.0
    c_rows: int = 0
    c_cols: int = 0
    a_constant: bool = False
    b_constant: bool = False

    def cublas(self) -> dict[str, Any]:
        """Arguments of cublasGemmEx / the cuBLASLt layouts (column-major, operands swapped)."""
        return {"m": self.n, "n": self.m, "k": self.k, "transa": _OP[self.trans_b], "transb": _OP[self.trans_a],
                "lda": self.k if self.trans_b else self.n, "ldb": self.m if self.trans_a else self.k, "ldc": self.n}

    def gemv(self) -> dict[str, Any] | None:
        """Arguments of cublasSgemv (y = op(matrix) x) when one side is a vector, else None.

        m == 1: y^T = op(B)^T a, the matrix is B, read column-major as n x k (ld n), or
        k x n (ld k) when transB.  n == 1: y = op(A) b, the matrix is A, read column-major
        as k x m (ld k), or m x k (ld m) when transA.
        """
        if self.batch != 1:
            return None
        if self.m == 1:
            rows, cols = (self.k, self.n) if self.trans_b else (self.n, self.k)
            return {"trans": _OP[self.trans_b], "rows": rows, "cols": cols, "lda": rows, "x_is_a": True}
        if self.n == 1:
            rows, cols = (self.m, self.k) if self.trans_a else (self.k, self.m)
            return {"trans": _OP[not self.trans_a], "rows": rows, "cols": cols, "lda": rows, "x_is_a": False}
        return None

    def dims(self) -> list[int]:
        """The 16 numbers of a bz::GemmDims row (csrc/benanza/kernels.h)."""
        c = self.cublas()
        return [self.batch, self.m, self.n, self.k, int(self.trans_a), int(self.trans_b), self.stride_a,
                self.stride_b, self.c_rows, self.c_cols, c["m"], c["n"], c["k"], c["lda"], c["ldb"], c["ldc"]]

    def describe(self) -> dict[str, Any]:
        """The manifest's view: the model's M, N, K, transposes, batch, C, and the cuBLAS call."""
        return {"batch": self.batch, "m": self.m, "n": self.n, "k": self.k, "trans_a": self.trans_a,
                "trans_b": self.trans_b, "stride_a": self.stride_a, "stride_b": self.stride_b, "alpha": self.alpha,
                "beta": self.beta, "c": [self.c_rows, self.c_cols] if self.c_rows else None,
                "a_constant": self.a_constant, "b_constant": self.b_constant, "cublas": self.cublas()}


def _gemm_op(layer: Layer) -> GemmShape:
    a, b = layer.inputs[0].shape, layer.inputs[1].shape
    if len(a) != 2 or len(b) != 2:
        raise Unsupported(f"Gemm operands of rank {len(a)} and {len(b)} (ONNX Gemm takes 2-D A and B)")
    attrs = layer.attrs
    ta, tb = bool(attrs.get("transA", 0)), bool(attrs.get("transB", 0))
    m, k = (a[1], a[0]) if ta else (a[0], a[1])
    kb, n = (b[1], b[0]) if tb else (b[0], b[1])
    if k != kb:
        raise Unsupported(f"Gemm inner dimensions differ: op(A) is {m}x{k}, op(B) is {kb}x{n}")
    beta = float(attrs.get("beta", 1.0))
    c_rows = c_cols = 0
    if len(layer.inputs) > 2 and layer.inputs[2].name and beta != 0.0:
        c = tuple(layer.inputs[2].shape)
        if len(c) > 2:
            raise Unsupported(f"Gemm C of rank {len(c)}")
        c_rows, c_cols = (1,) * (2 - len(c)) + c
        if c_rows not in (1, m) or c_cols not in (1, n):
            raise Unsupported(f"Gemm C of shape {list(c)} does not broadcast to {m}x{n}")
    else:
        beta = 0.0
    return GemmShape(1, m, n, k, ta, tb, 0, 0, float(attrs.get("alpha", 1.0)), beta, c_rows, c_cols)


def _matmul_op(layer: Layer) -> GemmShape:
    a, b = list(layer.inputs[0].shape), list(layer.inputs[1].shape)
    if not a or not b:
        raise Unsupported("MatMul of a scalar")
    a = [1, *a] if len(a) == 1 else a  # numpy: a 1-D A is a row, a 1-D B a column
    b = [*b, 1] if len(b) == 1 else b
    (m, k), (kb, n) = a[-2:], b[-2:]
    if k != kb:
        raise Unsupported(f"MatMul inner dimensions differ: A is ...x{m}x{k}, B is ...x{kb}x{n}")
    rank = max(len(a), len(b)) - 2
    a_batch, b_batch = [1] * (rank - len(a) + 2) + a[:-2], [1] * (rank - len(b) + 2) + b[:-2]
    pa, pb = math.prod(a_batch), math.prod(b_batch)
    if pb == 1:  # one B: A's batch dimensions fold into its rows (row-major A is (batch*m) x k)
        return GemmShape(1, pa * m, n, k)
    if pa == 1:
        return GemmShape(pb, m, n, k, stride_a=0, stride_b=k * n)
    if a_batch == b_batch:
        return GemmShape(pa, m, n, k, stride_a=m * k, stride_b=k * n)
    raise Unsupported(f"MatMul batch dimensions {a_batch} and {b_batch} broadcast against each other "
                      "(only equal, or one side shared, map to a strided batch)")


GEMM_SHAPES: dict[str, Callable[[Layer], GemmShape]] = {"Gemm": _gemm_op, "MatMul": _matmul_op}


def gemm_shape(layer: Layer) -> GemmShape:
    """The GEMM a Gemm or MatMul layer computes (raises Unsupported for anything else)."""
    op = GEMM_SHAPES.get(layer.op)
    if op is None:
        raise Unsupported(f"{layer.op} is not a Gemm or MatMul")
    if len(layer.inputs) < 2 or not layer.outputs:
        raise Unsupported(f"{layer.op} without two inputs and an output")
    for t in layer.inputs[:2]:
        if t.dtype not in FLOAT_DTYPES:
            raise Unsupported(f"input dtype {t.dtype} is not a floating-point type")
    # which operand holds the layer's weights (the layer key includes the constant flags)
    shape = replace(op(layer), a_constant=layer.inputs[0].constant, b_constant=layer.inputs[1].constant)
    if math.prod(layer.outputs[0].shape) != shape.batch * shape.m * shape.n:
        raise Unsupported(f"output shape {list(layer.outputs[0].shape)} is not {shape.batch}x{shape.m}x{shape.n}")
    if max(shape.m, shape.n, shape.k, shape.batch) > _INT32_MAX:
        raise Unsupported("GEMM dimensions beyond 32-bit cuBLAS arguments")
    return shape


def _weights(shape: GemmShape) -> dict[str, bool]:
    """The template's row fields that say which operand is a weight (plain bools)."""
    return {"a_constant": shape.a_constant, "b_constant": shape.b_constant}


def _gemm_row(shape: GemmShape) -> dict[str, Any]:
    c = shape.cublas()
    return {"dims": shape.dims(), "op_a": c["transa"], "op_b": c["transb"], "alpha": shape.alpha, "beta": shape.beta,
            **_weights(shape)}


def _single_gemm(item: Layer | FusionCandidate, api: Api) -> GemmShape:
    if not isinstance(item, Layer):
        raise Unsupported(f"{api.value} takes a single Gemm or MatMul layer")
    return gemm_shape(item)


# Every cublasGemmAlgo_t of cuBLAS 13.1 (cublas_api.h): the default, the 24 explicit
# algorithms, their Tensor Core variants, and AUTOTUNE (times the candidates, caches the winner).
GEMM_EX_ALGORITHMS = ("CUBLAS_GEMM_DEFAULT", *(f"CUBLAS_GEMM_ALGO{i}" for i in range(24)),
                      "CUBLAS_GEMM_DEFAULT_TENSOR_OP", *(f"CUBLAS_GEMM_ALGO{i}_TENSOR_OP" for i in range(16)),
                      "CUBLAS_GEMM_AUTOTUNE")


def gemm_ex_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cublasGemmEx (cublasGemmStridedBatchedEx for a batch): every cublasGemmAlgo_t, ONNX beta * C in place."""
    shape = _single_gemm(item, Api.GEMM_EX)
    return JobFields(_gemm_row(shape), shape.describe(), GEMM_EX_ALGORITHMS)


# (bias vector, ReLU) -> cuBLASLt epilogue
LT_EPILOGUES: dict[tuple[bool, bool], str] = {
    (False, False): "CUBLASLT_EPILOGUE_DEFAULT",
    (True, False): "CUBLASLT_EPILOGUE_BIAS",
    (False, True): "CUBLASLT_EPILOGUE_RELU",
    (True, True): "CUBLASLT_EPILOGUE_RELU_BIAS",
}


def _gemm_chain(item: Layer | FusionCandidate, model: Model, refusal: str) -> tuple[GemmShape, bool, bool]:
    """The GEMM of a Gemm/MatMul layer or gemm fusion, and whether a bias add and a ReLU follow it.

    ``refusal`` (with ``{}`` for the activation) is the reason a non-ReLU activation is dropped.
    """
    if isinstance(item, Layer):
        return gemm_shape(item), False, False
    members = [model.layers[i] for i in item.layers]
    if item.activation and item.activation != Activation.RELU.value:
        raise Unsupported(refusal.format(item.activation))
    return gemm_shape(members[0]), any(m.op == "Add" for m in members[1:]), bool(item.activation)


def lt_matmul_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cublasLtMatmul, every algorithm its heuristic returns; a gemm fusion through the bias/ReLU epilogue.

    A plain layer computes ``alpha * op(A) op(B) + beta * C`` with C a separate input.  In a
    fusion the bias (the Add's constant, and a Gemm C that is a row vector or scalar) is
    the epilogue's length-N bias vector; a C with M rows stays ``beta * C``.
    """
    shape, bias, relu = _gemm_chain(item, model, "cuBLASLt has no epilogue for {}")
    if not isinstance(item, Layer) and shape.c_rows == 1:  # C broadcasts along the rows: it is a bias vector
        shape = replace(shape, beta=0.0, c_rows=0, c_cols=0)
        bias = True
    row = {**_gemm_row(shape), "bias": bias, "relu": relu, "epilogue": LT_EPILOGUES[(bias, relu)]}
    return JobFields(row, {**shape.describe(), "bias": [shape.n] if bias else None, "relu": relu,
                           "epilogue": row["epilogue"]}, ("*",))


def sgemv_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cublasSgemv for a Gemm/MatMul with one output row or column (fp32 only), beta * C in place."""
    shape = _single_gemm(item, Api.SGEMV)
    if precision is not Precision.FP32:
        raise Unsupported("cublasSgemv is fp32 only")
    gemv = shape.gemv()
    if gemv is None:
        raise Unsupported("not a matrix-vector product (M > 1 and N > 1, or batched)")
    row = {**_gemm_row(shape), "gemv_op": gemv["trans"],
           "gemv": [gemv["rows"], gemv["cols"], gemv["lda"], int(gemv["x_is_a"])]}
    return JobFields(row, {**shape.describe(), "gemv": gemv}, ("CUBLAS_GEMM_DEFAULT",))


# ---------------------------------------------------------------- legacy cuDNN ops and copies

# The one algorithm each of these APIs has, spelled as profile.mapping.LEGACY_ALGORITHM
# reads it from a cuDNN log (the mode of the call); pooling, activation and op-tensor
# jobs spell their mode per job.  cudnnAddTensor has no mode: "default".
BATCHNORM_ALGORITHM = "CUDNN_BATCHNORM_SPATIAL"
SOFTMAX_ALGORITHM = "CUDNN_SOFTMAX_ACCURATE"
LRN_ALGORITHM = "CUDNN_LRN_CROSS_CHANNEL_DIM1"
ADD_TENSOR_ALGORITHM = "default"
COPY_ALGORITHM = "cudaMemcpyAsync"

# Whether the legacy call is given the precision's preferred layout (NHWC for fp16/bf16);
# False: always NCHW.  LRN stays NCHW: whether cudnnLRNCrossChannelForward takes NHWC is
# not documented, and NCHW is the layout every framework gives it.
NHWC_CAPABLE: dict[Api, bool] = {
    Api.BATCHNORM_INF: True,
    Api.ACTIVATION: True,
    Api.POOLING: True,
    Api.SOFTMAX: True,
    Api.LRN: False,
    Api.ADD_TENSOR: True,
    Api.OP_TENSOR: True,
}

# ONNX pooling op -> cudnnPoolingMode_t (AveragePool picks by count_include_pad).
POOLING_MODES: dict[tuple[str, int], str] = {
    ("MaxPool", 0): "CUDNN_POOLING_MAX",
    ("GlobalMaxPool", 0): "CUDNN_POOLING_MAX",
    ("AveragePool", 0): "CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING",
    ("AveragePool", 1): "CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING",
    ("GlobalAveragePool", 0): "CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING",
}
GLOBAL_POOLS = frozenset({"GlobalAveragePool", "GlobalMaxPool"})

# ONNX elementwise op -> cudnnOpTensorOp_t.
OP_TENSOR_OPS: dict[str, str] = {"Add": "CUDNN_OP_TENSOR_ADD", "Sum": "CUDNN_OP_TENSOR_ADD",
                                 "Mul": "CUDNN_OP_TENSOR_MUL"}

# cudnn_ops.h: CUDNN_LRN_MIN_N, CUDNN_LRN_MAX_N, CUDNN_LRN_MIN_K, CUDNN_LRN_MIN_BETA (cuDNN 9.19).
LRN_LIMITS = {"min_n": 1, "max_n": 16, "min_k": 1e-5, "min_beta": 0.01}

# Bytes per element of each precision's storage type (the copy bound's size).
STORAGE_BYTES: dict[str, int] = {"float": 4, "__half": 2, "__nv_bfloat16": 2}


def _format(api: Api, precision: Precision) -> tuple[str, str]:
    """(cudnnTensorFormat_t spelling, layout label) for one legacy op in one precision."""
    fmt = PRECISIONS[precision].cudnn_layout if NHWC_CAPABLE[api] else "CUDNN_TENSOR_NCHW"
    return fmt, fmt.removeprefix("CUDNN_TENSOR_")


def _one_layer(item: Layer | FusionCandidate, api: Api, ops: Collection[str]) -> Layer:
    if not isinstance(item, Layer) or item.op not in ops:
        raise Unsupported(f"{api.value} takes a single {'/'.join(sorted(ops))} layer")
    if not item.inputs or not item.outputs:
        raise Unsupported(f"{item.op} without input or output")
    for t in (*item.inputs, item.outputs[0]):
        if t.name and t.dtype not in FLOAT_DTYPES:
            raise Unsupported(f"tensor dtype {t.dtype} is not a floating-point type")
    if math.prod(item.outputs[0].shape) > _INT32_MAX or math.prod(item.inputs[0].shape) > _INT32_MAX:
        raise Unsupported("tensor beyond 2^31 elements (32-bit cuDNN dimensions)")
    return item


def dims4(shape: tuple[int, ...] | list[int]) -> list[int]:
    """A tensor as cuDNN's 4-D (n, c, h, w) for channel-wise and elementwise ops.

    Lower ranks get trailing 1s; higher ranks fold the middle spatial dimensions into h
    (exact for ops that treat each channel's spatial positions alike)."""
    s = [int(d) for d in shape]
    if not s:
        return [1, 1, 1, 1]
    if len(s) <= 4:
        return s + [1] * (4 - len(s))
    return [s[0], s[1], math.prod(s[2:-1]), s[-1]]


def broadcast4(full: tuple[int, ...], other: tuple[int, ...]) -> tuple[list[int], list[int]]:
    """4-D dims of two operands where ``other`` broadcasts (numpy rules) to ``full``.

    ``other`` is aligned to the right and padded with leading 1s; adjacent axes that
    broadcast alike are merged until four remain.  Raises Unsupported when ``other``
    does not broadcast to ``full`` or more than four distinct runs remain.
    """
    if len(other) > len(full):
        raise Unsupported(f"operand of rank {len(other)} does not broadcast to rank {len(full)}")
    b = (1,) * (len(full) - len(other)) + tuple(other)
    if any(o not in (1, f) for o, f in zip(b, full, strict=True)):
        raise Unsupported(f"shape {list(other)} does not broadcast to {list(full)}")
    axes: list[list[int]] = []  # [full, other] per merged axis
    for f, o in zip(full, b, strict=True):
        if f == 1:
            continue  # a unit axis merges with anything
        if axes and (axes[-1][1] == 1) == (o == 1):
            axes[-1] = [axes[-1][0] * f, axes[-1][1] * o]
        else:
            axes.append([f, o])
    if len(full) > 4 and len(axes) > 4:
        raise Unsupported(f"broadcast of {list(other)} to {list(full)} needs more than 4 cuDNN dimensions")
    if len(full) <= 4:  # keep the model's own axes, trailing 1s up to four
        pad = [1] * (4 - len(full))
        return [*full, *pad], [*b, *pad]
    axes += [[1, 1]] * (4 - len(axes))
    return [a[0] for a in axes], [a[1] for a in axes]


def batchnorm_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cudnnBatchNormalizationForwardInference, spatial mode: y = scale (x - mean) / sqrt(var + eps) + bias."""
    layer = _one_layer(item, Api.BATCHNORM_INF, {"BatchNormalization"})
    x = layer.inputs[0].shape
    if len(layer.inputs) < 5 or len(x) < 2:
        raise Unsupported("BatchNormalization needs x of rank >= 2 and scale, bias, mean, var")
    if any(math.prod(t.shape) != x[1] for t in layer.inputs[1:5]):
        raise Unsupported(f"BatchNormalization parameters are not per-channel (C = {x[1]})")
    if int(layer.attrs.get("training_mode", 0)) or layer.attrs.get("spatial", 1) != 1:
        raise Unsupported("BatchNormalization in training or per-activation mode")
    eps = float(layer.attrs.get("epsilon", 1e-5))
    fmt, layout = _format(Api.BATCHNORM_INF, precision)
    row = {"dims": dims4(x), "epsilon": eps, "format": fmt, "layout": layout}
    return JobFields(row, {"x": list(x), "epsilon": eps, "mode": BATCHNORM_ALGORITHM}, (BATCHNORM_ALGORITHM,),
                     layout, Math.NONE.value)


def _activation_mode(layer: Layer) -> tuple[Activation, float]:
    if layer.op not in ONNX_ACTIVATIONS:
        raise Unsupported(f"no cuDNN activation mode for {layer.op}")
    if layer.op == "Clip" and float(layer.attrs.get("min", 0.0)) != 0.0:
        raise Unsupported("Clip with min != 0 is not a clipped ReLU")
    coef = ACTIVATION_COEF.get(layer.op, lambda _: 0.0)(layer.attrs)
    return ONNX_ACTIVATIONS[layer.op], coef


def activation_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cudnnActivationForward: Relu, Sigmoid, Tanh, Clip(min 0) as clipped ReLU, Elu."""
    layer = _one_layer(item, Api.ACTIVATION, {"Relu", "Sigmoid", "Tanh", "Clip", "Elu", "LeakyRelu"})
    act, coef = _activation_mode(layer)
    fmt, layout = _format(Api.ACTIVATION, precision)
    x = layer.inputs[0].shape
    row = {"dims": dims4(x), "act": act.value, "coef": coef, "format": fmt, "layout": layout}
    return JobFields(row, {"x": list(x), "activation": act.value, "coef": coef}, (act.value,), layout,
                     Math.NONE.value)


def pooling_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cudnnPoolingForward: 2-D (or 1-D as H = 1) max and average pools, global pools as a full window.

    Asymmetric pads and ONNX output sizes that differ from cuDNN's (ceil_mode) are not
    dropped here: the binary records them as not_supported, like the legacy conv.
    """
    layer = _one_layer(item, Api.POOLING, {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"})
    x, y = list(layer.inputs[0].shape), list(layer.outputs[0].shape)
    if len(layer.outputs) > 1 and layer.outputs[1].name:
        raise Unsupported("MaxPool with an Indices output")
    if len(x) not in (3, 4) or len(y) != len(x):
        raise Unsupported(f"{len(x) - 2}-D pooling (only 1-D and 2-D are generated)")
    a = layer.attrs
    if layer.op in GLOBAL_POOLS:
        window, pads, strides = x[2:], [0] * (2 * (len(x) - 2)), [1] * (len(x) - 2)
    else:
        window, pads, strides = list(a["kernel_shape"]), list(a["pads"]), list(a["strides"])
        if any(d != 1 for d in a.get("dilations", [])):
            raise Unsupported("dilated pooling (cuDNN pooling has no dilation)")
    if len(x) == 3:  # 1-D: an H of 1
        x, y = [*x[:2], 1, x[2]], [*y[:2], 1, y[2]]
        window, pads, strides = [1, *window], [0, pads[0], 0, pads[1]], [1, *strides]
    mode = POOLING_MODES[(layer.op, int(a.get("count_include_pad", 0)))]
    fmt, layout = _format(Api.POOLING, precision)
    row = {"dims": [int(v) for v in (*x, *window, *pads, *strides, y[2], y[3])], "mode": mode, "format": fmt,
           "layout": layout}
    shapes = {"x": list(layer.inputs[0].shape), "y": list(layer.outputs[0].shape), "window": window, "pads": pads,
              "strides": strides, "mode": mode, "ceil_mode": int(a.get("ceil_mode", 0))}
    return JobFields(row, shapes, (mode,), layout, Math.NONE.value)


def softmax_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cudnnSoftmaxForward, ACCURATE, INSTANCE mode over the input coerced to 2-D at ``axis``.

    That is ONNX Softmax before opset 13 (the zoo's opset 9): rows = prod(shape[:axis]),
    softmax over prod(shape[axis:]).  From opset 13 it is over one axis; the two agree
    when every axis after ``axis`` is 1, as in all the zoo models.
    """
    layer = _one_layer(item, Api.SOFTMAX, {"Softmax"})
    x = layer.inputs[0].shape
    axis = int(layer.attrs.get("axis", 1))
    if not 0 <= axis <= len(x):
        raise Unsupported(f"Softmax axis {axis} out of range for rank {len(x)}")
    rows, cols = math.prod(x[:axis]), math.prod(x[axis:])
    fmt, layout = _format(Api.SOFTMAX, precision)
    row = {"dims": [rows, cols, 1, 1], "format": fmt, "layout": layout}
    return JobFields(row, {"x": list(x), "axis": axis, "rows": rows, "cols": cols}, (SOFTMAX_ALGORITHM,), layout,
                     Math.NONE.value)


def lrn_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cudnnLRNCrossChannelForward: y = x / (bias + alpha / size * sum of x^2 over the channel window)^beta."""
    layer = _one_layer(item, Api.LRN, {"LRN"})
    a = layer.attrs
    size, alpha, beta, bias = int(a["size"]), float(a["alpha"]), float(a["beta"]), float(a["bias"])
    lim = LRN_LIMITS
    if not lim["min_n"] <= size <= lim["max_n"] or bias < lim["min_k"] or beta < lim["min_beta"]:
        raise Unsupported(f"LRN size {size}, bias {bias}, beta {beta} outside cuDNN's limits "
                          f"(size {lim['min_n']}..{lim['max_n']}, bias >= {lim['min_k']}, beta >= {lim['min_beta']})")
    x = layer.inputs[0].shape
    if len(x) < 3:
        raise Unsupported(f"LRN of rank {len(x)}")
    fmt, layout = _format(Api.LRN, precision)
    row = {"dims": dims4(x), "size": size, "alpha": alpha, "beta": beta, "bias": bias, "format": fmt,
           "layout": layout}
    shapes = {"x": list(x), "size": size, "alpha": alpha, "beta": beta, "bias": bias}
    return JobFields(row, shapes, (LRN_ALGORITHM,), layout, Math.NONE.value)


def _binary_operands(layer: Layer) -> tuple[list[int], list[int]]:
    """(4-D dims of the input with the output's shape, 4-D dims of the other) of a 2-input elementwise op."""
    inputs = [t for t in layer.inputs if t.name]
    if len(inputs) != 2:
        raise Unsupported(f"{layer.op} of {len(inputs)} inputs (the cuDNN call takes two; "
                          f"{max(len(inputs) - 1, 0)} chained calls are not generated)")
    y = tuple(layer.outputs[0].shape)
    full = next((i for i, t in enumerate(inputs) if tuple(t.shape) == y), None)
    if full is None:
        raise Unsupported(f"neither input of {layer.op} has the output's shape {list(y)} (both broadcast)")
    return broadcast4(y, tuple(inputs[1 - full].shape))


def add_tensor_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cudnnAddTensor (C = A + C, in place): an Add whose one input broadcasts (e.g. a per-channel bias)."""
    layer = _one_layer(item, Api.ADD_TENSOR, {"Add"})
    c, a = _binary_operands(layer)
    fmt, layout = _format(Api.ADD_TENSOR, precision)
    row = {"c": c, "a": a, "format": fmt, "layout": layout}
    shapes = {"inputs": [list(t.shape) for t in layer.inputs], "c": c, "a": a}
    return JobFields(row, shapes, (ADD_TENSOR_ALGORITHM,), layout, Math.NONE.value)


def op_tensor_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cudnnOpTensor (C = op(A, B)): Add, Mul and two-input Sum; B may broadcast to A."""
    layer = _one_layer(item, Api.OP_TENSOR, set(OP_TENSOR_OPS))
    a, b = _binary_operands(layer)
    op = OP_TENSOR_OPS[layer.op]
    fmt, layout = _format(Api.OP_TENSOR, precision)
    row = {"a": a, "b": b, "op": op, "format": fmt, "layout": layout}
    shapes = {"inputs": [list(t.shape) for t in layer.inputs], "a": a, "b": b, "op": op}
    return JobFields(row, shapes, (op,), layout, Math.NONE.value)


def copy_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """Roofline bound of a non-library layer: one device-to-device cudaMemcpyAsync of its output's bytes."""
    if not isinstance(item, Layer):
        raise Unsupported("a copy bound takes a single layer")
    if item.op in NO_COPY_OPS:
        raise Unsupported("moves no bytes")
    outputs = [t for t in item.outputs if t.name]
    for t in outputs:
        if t.dtype not in FLOAT_DTYPES:
            raise Unsupported(f"output dtype {t.dtype} is not a floating-point type (shape arithmetic, not data)")
    size = STORAGE_BYTES[PRECISIONS[precision].cpp_type]
    count = sum(math.prod(t.shape) for t in outputs)
    if count == 0:
        raise Unsupported("moves no bytes")
    return JobFields({"bytes": count * size}, {"outputs": [list(t.shape) for t in outputs], "bytes": count * size},
                     (COPY_ALGORITHM,), "", Math.NONE.value)


# ---------------------------------------------------------------- ceilings

CEILING_KEY = "ceiling"  # layer_key of the ceiling results
CEILING_COPY_BYTES = 1 << 30  # one cudaMemcpyAsync device to device
CEILING_GEMM_SIZE = 8192  # square GEMM per precision


def ceiling_jobs() -> list[tuple[Precision, JobFields]]:
    """The system's peaks for the roofline: a large device copy, and one large GEMM per precision."""
    jobs = [(Precision.FP32, JobFields({"memcpy": True, "size": CEILING_COPY_BYTES, "algorithm": "copy_d2d"},
                                       {"bytes": CEILING_COPY_BYTES}, ("copy_d2d",), math=Math.NONE.value))]
    for p in Precision:
        name, n = f"gemm_{p.value}", CEILING_GEMM_SIZE
        jobs.append((p, JobFields({"memcpy": False, "size": n, "algorithm": name}, {"m": n, "n": n, "k": n}, (name,))))
    return jobs


# ---------------------------------------------------------------- cuDNN graph API (cudnn-frontend)

# Activation -> the graph API's pointwise mode (cudnn_frontend::PointwiseMode_t spelling).
# A clipped ReLU is RELU_FWD with an upper clip; ELU's alpha is its own attribute.
GRAPH_POINTWISE: dict[Activation, str] = {
    Activation.RELU: "RELU_FWD",
    Activation.SIGMOID: "SIGMOID_FWD",
    Activation.TANH: "TANH_FWD",
    Activation.CLIPPED_RELU: "RELU_FWD",
    Activation.ELU: "ELU_FWD",
    Activation.IDENTITY: "IDENTITY",
}


def graph_conv_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cuDNN graph API: one operation graph conv_fprop [-> ADD bias -> ADD z -> activation], every engine config.

    A fusion computes what ``conv_bias_act_job`` gives the legacy fused call (BN folded
    into weights and bias, Clip as a clipped ReLU), so both APIs measure the same chain;
    the engine configs are enumerated by the binary (heuristics A, B and the fallback list).
    """
    if isinstance(item, Layer):
        if item.op != "Conv":
            raise Unsupported("the graph-API convolution takes a Conv layer or a conv fusion")
        dims, shapes = _conv_dims(item)
        act, coef, alpha2, bias, has_act = Activation.IDENTITY, 0.0, 0.0, False, False
    else:
        legacy = conv_bias_act_job(item, model, precision)
        dims, shapes = legacy.row["dims"], legacy.shapes
        act, coef, alpha2 = Activation(legacy.row["act"]), float(legacy.row["coef"]), float(legacy.row["alpha2"])
        bias, has_act = True, bool(item.activation)
    ops = ["conv_fprop", *(["add_bias"] if bias else []), *(["add_z"] if alpha2 else []),
           *([GRAPH_POINTWISE[act].lower()] if has_act else [])]
    row = {"dims": dims, "bias": bias, "alpha2": alpha2, "has_act": has_act, "pointwise": GRAPH_POINTWISE[act],
           "act": act.value, "coef": coef, "upper_clip": coef if act is Activation.CLIPPED_RELU else math.inf,
           "elu_alpha": coef if act is Activation.ELU else 1.0, "engines": []}
    return JobFields(row, {**shapes, "graph": ops}, ("*",), _layout(precision))


def graph_matmul_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cuDNN graph API: matmul [-> scale alpha -> ADD beta C -> ADD bias -> ReLU] of a Gemm/MatMul, every engine config.

    Operands keep the model's row-major layout (a transpose is a stride); a fusion adds
    the Add's constant as a length-N bias and ReLU, as the cuBLASLt epilogue does.
    """
    shape, bias, relu = _gemm_chain(item, model, "the graph matmul benchmark fuses ReLU only, not {}")
    ops = ["matmul", *(["scale_alpha"] if shape.alpha != 1.0 else []), *(["add_c"] if shape.c_rows else []),
           *(["add_bias"] if bias else []), *(["relu_fwd"] if relu else [])]
    row = {"dims": shape.dims(), "alpha": shape.alpha, "beta": shape.beta, "bias": bias, "relu": relu, "engines": [],
           **_weights(shape)}
    return JobFields(row, {**shape.describe(), "bias": [shape.n] if bias else None, "relu": relu, "graph": ops},
                     ("*",))


JobBuilder = Callable[[Layer | FusionCandidate, Model, Precision], JobFields]

# API -> job builder.  An API without an entry is dropped with "no benchmark template".
JOB_BUILDERS: dict[Api, JobBuilder] = {
    Api.CONV_FWD: conv_fwd_job,
    Api.CONV_BIAS_ACT: conv_bias_act_job,
    Api.GRAPH_CONV: graph_conv_job,
    Api.GRAPH_MATMUL: graph_matmul_job,
    Api.GEMM_EX: gemm_ex_job,
    Api.LT_MATMUL: lt_matmul_job,
    Api.SGEMV: sgemv_job,
    Api.BATCHNORM_INF: batchnorm_job,
    Api.ACTIVATION: activation_job,
    Api.POOLING: pooling_job,
    Api.SOFTMAX: softmax_job,
    Api.LRN: lrn_job,
    Api.ADD_TENSOR: add_tensor_job,
    Api.OP_TENSOR: op_tensor_job,
    Api.COPY: copy_job,
}


# ---------------------------------------------------------------- planning


@dataclass(frozen=True)
class _Candidate:
    key: str
    what: str
    api: Api
    fusion: Fusion
    item: Layer | FusionCandidate
    model: Model


def _candidates(models: Iterable[Model]) -> Iterator[_Candidate]:
    for model in models:
        for layer in model.layers:
            for api in layer.apis:
                yield _Candidate(layer.key, layer.op, api, Fusion.NONE, layer, model)
            if layer.op in SEPARATE_BIAS_OPS and layer.outputs and len(layer.outputs[0].shape) >= 3:
                bias = bias_add(layer)
                for api in bias.apis:
                    yield _Candidate(bias.key, f"{layer.op} bias", api, Fusion.NONE, bias, model)
        for f in model.fusions:
            fusion = Fusion(f.pattern)
            key = getattr(f, "key", "") or f"{fusion.value}:{'-'.join(model.layers[i].key for i in f.layers)}"
            for api in FUSION_APIS.get(fusion, ()):
                yield _Candidate(key, fusion.value, api, fusion, f, model)


def _precision_problem(api: Api, precision: Precision) -> str | None:
    """Why a precision makes no sense for an API (None when it does)."""
    if precision is Precision.TF32 and not APIS[api].tensor_core:
        return "tf32 is fp32 for a non-Tensor-Core op"
    return None


Skip = Callable[[Benchmark], bool] | Collection[str] | None


def _measured(skip: Skip) -> Callable[[Benchmark], bool]:
    if skip is None:
        return lambda _b: False
    if callable(skip):
        return skip
    names = set(skip)
    return lambda b: b.name() in names


_Pending = tuple[Api, int, int, _Candidate, Precision, JobFields]  # api, precision order, candidate order, ...


def _numbered(pending: list[_Pending]) -> tuple[list[Job], dict[str, int]]:
    """Jobs in API, precision, candidate order, numbered per executable (and the next free numbers)."""
    api_order = {a: i for i, a in enumerate(Api)}
    jobs: list[Job] = []
    counters: dict[str, int] = {}
    for api, _p, _o, c, precision, fields in sorted(pending, key=lambda t: (api_order[t[0]], t[1], t[2])):
        exe = EXECUTABLES[api]
        index = counters.get(exe, 0)
        counters[exe] = index + 1
        jobs.append(Job(exe, index, c.key, api, precision, c.fusion, fields))
    return jobs, counters


def plan(models: Iterable[Model], precisions: Iterable[Precision | str],
         apis: Iterable[Api | str] | None = None, skip: Skip = None, ceilings: bool = False) -> Plan:
    """Jobs for every layer and fusion of ``models`` in each precision, deduped by key.

    ``apis`` restricts the APIs (None: all); ``skip`` is a predicate on a Benchmark
    (e.g. ``benanza.db.measured(db, system)``) or a set of benchmark names already
    measured: a job whose benchmarks are all measured is dropped.  ``ceilings`` (or
    ``Api.CEILING`` among ``apis``) adds the system-peak jobs (``bench_ceilings``).
    """
    models = list(models)
    precs = [Precision(p) for p in precisions]
    wanted = None if apis is None else {Api(a) for a in apis}
    measured = _measured(skip)
    seen: set[tuple[str, Api, Precision]] = set()
    dropped: Drops = {}
    pending: list[_Pending] = []

    def drop(c: _Candidate, precision: Precision | None, reason: str) -> None:
        _record(dropped, Dropped(c.key, c.what, c.api.value, precision.value if precision else "*", reason))

    for order, c in enumerate(_candidates(models)):
        if wanted is not None and c.api not in wanted:
            drop(c, None, "API not requested")
            continue
        builder = JOB_BUILDERS.get(c.api)
        if builder is None:
            drop(c, None, f"no benchmark template for {c.api.value} yet")
            continue
        for p_order, precision in enumerate(precs):
            if (c.key, c.api, precision) in seen:
                continue
            seen.add((c.key, c.api, precision))
            problem = _precision_problem(c.api, precision)
            if problem:
                drop(c, precision, problem)
                continue
            try:
                fields = builder(c.item, c.model, precision)
            except Unsupported as exc:
                drop(c, precision, str(exc))
                continue
            job = Job("", 0, c.key, c.api, precision, c.fusion, fields)
            if fields.algorithms and all(measured(b) for b in job.benchmarks()):
                drop(c, precision, ALREADY_MEASURED)
                continue
            pending.append((c.api, p_order, order, c, precision, fields))

    jobs, counters = _numbered(pending)
    if ceilings or (wanted is not None and Api.CEILING in wanted):
        for precision, fields in ceiling_jobs():
            job = Job(EXECUTABLES[Api.CEILING], counters.get(EXECUTABLES[Api.CEILING], 0), CEILING_KEY, Api.CEILING,
                      precision, Fusion.NONE, fields)
            if all(measured(b) for b in job.benchmarks()):
                _record(dropped, Dropped(CEILING_KEY, CEILING_KEY, Api.CEILING.value, precision.value,
                                         ALREADY_MEASURED))
                continue
            counters[job.executable] = job.index + 1
            jobs.append(job)
    return Plan(jobs, list(dropped.values()), models)


# ---------------------------------------------------------------- the calls a framework made

# APIs whose job can name the engine configs it measures, so that a framework's own
# choice (read from its cuDNN log) is measured even where it is not among the first
# --max-engines configs of the heuristics, or in none of their lists.
NAMED_CONFIG_APIS = frozenset({Api.GRAPH_CONV, Api.GRAPH_MATMUL})
# Dropped.reason of a measured job whose algorithms its API enumerates at run time (cuBLASLt):
# the framework's own configuration may not be among them, and cannot be named yet.
UNNAMED = "already measured; the framework's own configuration cannot be named for this API"


def with_named_configs(fields: JobFields, names: Iterable[str]) -> JobFields:
    """``fields`` measuring exactly the engine configs ``names`` (canonical, as logs and benchmarks spell them)."""
    names = sorted(set(names))
    engines = []
    for name in names:
        engine_id, knobs = parse_engine_config_name(name)
        engines.append({"id": engine_id, "knobs": [[k, v] for k, v in sorted(knobs.items())]})
    return replace(fields, row={**fields.row, "engines": engines}, algorithms=tuple(names))


def plan_executed(calls: Iterable[tuple[Model, str, ExecutedCall]], skip: Skip = None) -> Plan:
    """Jobs for exactly the library calls a framework made (``benanza generate --from-profile``).

    ``calls`` are (model, layer key, call) as a profile's mapping gives them.  A graph-API
    call becomes a job of its named engine configs; any other call its layer's usual job,
    which measures every algorithm.  What the database holds is dropped as in :func:`plan`.
    """
    calls = list(calls)
    models = list({id(model): model for model, _, _ in calls}.values())  # Model is not hashable
    found: dict[tuple[str, Api], _Candidate] = {}
    for c in _candidates(models):
        found.setdefault((c.key, c.api), c)
    wanted: dict[tuple[str, Api, Precision, Fusion], set[str]] = {}
    dropped: Drops = {}
    for _model, layer_key, call in calls:
        key, api = call.key or layer_key, Api(call.api)
        if (key, api) not in found:
            _record(dropped, Dropped(key, call.api, call.api, call.precision,
                                     "the models have no such layer or fusion for this API"))
            continue
        precision = Precision(call.precision)
        # TF32 allowed: an FMA engine config computes in fp32, and its fp32 row is the one the
        # analyzer compares (analyze.choose.executed_row); a Tensor Core one is refused in fp32
        for p in (precision, Precision.FP32) if precision is Precision.TF32 and api in NAMED_CONFIG_APIS \
                else (precision,):
            wanted.setdefault((key, api, p, Fusion(call.fusion)), set()).add(call.algorithm)
    measured = _measured(skip)
    pending: list[_Pending] = []
    for order, ((key, api, precision, _fusion), algorithms) in enumerate(sorted(wanted.items())):
        c = found[(key, api)]
        builder = JOB_BUILDERS.get(api)
        try:
            if builder is None:
                raise Unsupported(f"no benchmark template for {api.value} yet")
            fields = builder(c.item, c.model, precision)
        except Unsupported as exc:
            _record(dropped, Dropped(key, c.what, api.value, precision.value, str(exc)))
            continue
        if api in NAMED_CONFIG_APIS:  # only the configs the database lacks (all of them: dropped below)
            named = Job("", 0, key, api, precision, c.fusion, with_named_configs(fields, algorithms))
            fields = with_named_configs(fields, [b.algorithm for b in named.benchmarks() if not measured(b)]
                                        or algorithms)
        if all(measured(b) for b in Job("", 0, key, api, precision, c.fusion, fields).benchmarks()):
            reason = UNNAMED if fields.algorithms == ("*",) else ALREADY_MEASURED
            _record(dropped, Dropped(key, c.what, api.value, precision.value, reason))
            continue
        pending.append((api, 0, order, c, precision, fields))
    return Plan(_numbered(pending)[0], list(dropped.values()), models)
