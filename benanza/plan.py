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
from dataclasses import dataclass, field
from typing import Any

from benanza.library import (
    APIS,
    PRECISIONS,
    Activation,
    Api,
    ConvFwdAlgo,
    Fusion,
    Precision,
)
from benanza.model.layer import FusionCandidate, Layer, Model

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
        return PRECISIONS[self.precision].math.value

    def benchmarks(self) -> list[Benchmark]:
        return [Benchmark(self.key, self.api.value, a, self.precision.value, self.math, self.fusion.value,
                          self.layout) for a in self.fields.algorithms]


@dataclass(frozen=True)
class Dropped:
    """A candidate the planner did not turn into a job, and why."""

    key: str
    what: str  # the op, or the fusion pattern
    api: str
    dtype: str
    reason: str


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
        """The 16 numbers of a bz::GemmDims row (csrc/benanza/cublas_util.h)."""
        c = self.cublas()
        return [self.batch, self.m, self.n, self.k, int(self.trans_a), int(self.trans_b), self.stride_a,
                self.stride_b, self.c_rows, self.c_cols, c["m"], c["n"], c["k"], c["lda"], c["ldb"], c["ldc"]]

    def describe(self) -> dict[str, Any]:
        """The manifest's view: the model's M, N, K, transposes, batch, C, and the cuBLAS call."""
        return {"batch": self.batch, "m": self.m, "n": self.n, "k": self.k, "trans_a": self.trans_a,
                "trans_b": self.trans_b, "stride_a": self.stride_a, "stride_b": self.stride_b, "alpha": self.alpha,
                "beta": self.beta, "c": [self.c_rows, self.c_cols] if self.c_rows else None, "cublas": self.cublas()}


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
    shape = op(layer)
    if math.prod(layer.outputs[0].shape) != shape.batch * shape.m * shape.n:
        raise Unsupported(f"output shape {list(layer.outputs[0].shape)} is not {shape.batch}x{shape.m}x{shape.n}")
    if max(shape.m, shape.n, shape.k, shape.batch) > _INT32_MAX:
        raise Unsupported("GEMM dimensions beyond 32-bit cuBLAS arguments")
    return shape


def _gemm_row(shape: GemmShape) -> dict[str, Any]:
    c = shape.cublas()
    return {"dims": shape.dims(), "op_a": c["transa"], "op_b": c["transb"], "alpha": shape.alpha, "beta": shape.beta}


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


def lt_matmul_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cublasLtMatmul, every algorithm its heuristic returns; a gemm fusion through the bias/ReLU epilogue.

    A plain layer computes ``alpha * op(A) op(B) + beta * C`` with C a separate input.  In a
    fusion the bias (the Add's constant, and a Gemm C that is a row vector or scalar) is
    the epilogue's length-N bias vector; a C with M rows stays ``beta * C``.
    """
    if isinstance(item, Layer):
        shape, bias, relu = gemm_shape(item), False, False
    else:
        members = [model.layers[i] for i in item.layers]
        shape = gemm_shape(members[0])
        if item.activation and item.activation != Activation.RELU.value:
            raise Unsupported(f"cuBLASLt has no epilogue for {item.activation}")
        bias, relu = any(m.op == "Add" for m in members[1:]), bool(item.activation)
        if shape.c_rows == 1:  # C broadcasts along the rows: it is a bias vector
            shape = GemmShape(shape.batch, shape.m, shape.n, shape.k, shape.trans_a, shape.trans_b, shape.stride_a,
                              shape.stride_b, shape.alpha)
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


# ---------------------------------------------------------------- ceilings

CEILING_KEY = "ceiling"  # layer_key of the ceiling results
CEILING_COPY_BYTES = 1 << 30  # one cudaMemcpyAsync device to device
CEILING_GEMM_SIZE = 8192  # square GEMM per precision


def ceiling_jobs() -> list[tuple[Precision, JobFields]]:
    """The system's peaks for the roofline: a large device copy, and one large GEMM per precision."""
    jobs = [(Precision.FP32, JobFields({"memcpy": True, "size": CEILING_COPY_BYTES, "algorithm": "copy_d2d"},
                                       {"bytes": CEILING_COPY_BYTES}, ("copy_d2d",)))]
    for p in Precision:
        name, n = f"gemm_{p.value}", CEILING_GEMM_SIZE
        jobs.append((p, JobFields({"memcpy": False, "size": n, "algorithm": name}, {"m": n, "n": n, "k": n}, (name,))))
    return jobs


JobBuilder = Callable[[Layer | FusionCandidate, Model, Precision], JobFields]

# API -> job builder.  An API without an entry is dropped with "no benchmark template".
JOB_BUILDERS: dict[Api, JobBuilder] = {
    Api.CONV_FWD: conv_fwd_job,
    Api.CONV_BIAS_ACT: conv_bias_act_job,
    Api.GEMM_EX: gemm_ex_job,
    Api.LT_MATMUL: lt_matmul_job,
    Api.SGEMV: sgemv_job,
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
    dropped: dict[tuple[str, str, str, str], Dropped] = {}
    pending: list[tuple[Api, int, int, _Candidate, Precision, JobFields]] = []

    def drop(c: _Candidate, precision: Precision | None, reason: str) -> None:
        d = Dropped(c.key, c.what, c.api.value, precision.value if precision else "*", reason)
        dropped.setdefault((d.key, d.api, d.dtype, d.reason), d)

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
                drop(c, precision, "already in the database")
                continue
            pending.append((c.api, p_order, order, c, precision, fields))

    api_order = {a: i for i, a in enumerate(Api)}
    pending.sort(key=lambda t: (api_order[t[0]], t[1], t[2]))
    jobs: list[Job] = []
    counters: dict[str, int] = {}
    for api, _p, _o, c, precision, fields in pending:
        exe = EXECUTABLES[api]
        index = counters.get(exe, 0)
        counters[exe] = index + 1
        jobs.append(Job(exe, index, c.key, api, precision, c.fusion, fields))
    if ceilings or (wanted is not None and Api.CEILING in wanted):
        for precision, fields in ceiling_jobs():
            job = Job(EXECUTABLES[Api.CEILING], counters.get(EXECUTABLES[Api.CEILING], 0), CEILING_KEY, Api.CEILING,
                      precision, Fusion.NONE, fields)
            if all(measured(b) for b in job.benchmarks()):
                d = Dropped(CEILING_KEY, CEILING_KEY, Api.CEILING.value, precision.value, "already in the database")
                dropped.setdefault((d.key, d.api, d.dtype, d.reason), d)
                continue
            counters[job.executable] = job.index + 1
            jobs.append(job)
    return Plan(jobs, list(dropped.values()), models)
