"""cuBLAS Gemm and MatMul: the row-major to column-major algebra, cublasGemmEx, cublasLtMatmul
and cublasSgemv."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from benanza.apis.base import _INT32_MAX, FLOAT_DTYPES, ApiDef, ApiFamily, JobFields, Unsupported
from benanza.apis.job_table import FUSION, KEY, PRECISION, Column, Kind, Vocabulary, choice, ints
from benanza.apis.log_side import LogSide, Signature
from benanza.library import Activation, Api, Fusion, Precision
from benanza.model.layer import FusionCandidate, Layer, Model

# GEMM chains one fused call runs (bias and activation as epilogues).
GEMM_FUSIONS = (Fusion.GEMM_BIAS, Fusion.GEMM_BIAS_ACT)

_OP = {False: "CUBLAS_OP_N", True: "CUBLAS_OP_T"}


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
SGEMV_ALGORITHM = "CUBLAS_GEMM_DEFAULT"  # the one name cublasSgemv's results carry
GEMM_EX_ALGORITHMS = ("CUBLAS_GEMM_DEFAULT", *(f"CUBLAS_GEMM_ALGO{i}" for i in range(24)),
                      "CUBLAS_GEMM_DEFAULT_TENSOR_OP", *(f"CUBLAS_GEMM_ALGO{i}_TENSOR_OP" for i in range(16)),
                      "CUBLAS_GEMM_AUTOTUNE")


def _prefilled_bias(item: FusionCandidate, model: Model) -> GemmShape:
    """The GEMM of a MatMul + bias Add as ONNX Runtime's Gemm runs it: Y pre-filled with the bias
    broadcast along the rows (its own kernel), then one cuBLAS call with beta = 1 that adds into Y.

    Only a bias-only chain whose GEMM is a single one (batch 1: a MatMul whose A batch dimensions
    fold into rows) and has no C of its own, and whose Add's constant is a length-N row vector.
    """
    if item.pattern != Fusion.GEMM_BIAS.value or item.activation or len(item.layers) != 2:
        raise Unsupported(f"cublasGemmEx adds a bias only (a {item.pattern} chain of {len(item.layers)} layers)")
    gemm, add = (model.layers[i] for i in item.layers)
    shape = gemm_shape(gemm)
    if shape.c_rows or shape.batch != 1:
        raise Unsupported("cublasGemmEx's bias needs a single GEMM without a C of its own "
                          f"(batch {shape.batch}, C {shape.c_rows}x{shape.c_cols})")
    bias = next((t for t in add.inputs if t.name != gemm.outputs[0].name), None)
    if bias is None or not bias.constant or math.prod(bias.shape) != shape.n \
            or (bias.shape and bias.shape[-1] != shape.n):
        raise Unsupported(f"the Add's other input {list(bias.shape) if bias else None} is not a constant "
                          f"length-{shape.n} row vector")
    return replace(shape, beta=1.0, c_rows=1, c_cols=shape.n)


def gemm_ex_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cublasGemmEx (cublasGemmStridedBatchedEx for a batch): every cublasGemmAlgo_t, ONNX beta * C in place.

    A MatMul + bias Add (Fusion.GEMM_BIAS) is the call ONNX Runtime makes for it: beta = 1 into
    a Y that starts as the bias broadcast along the rows (``_prefilled_bias``); the checked call
    starts from that Y and the reference adds the bias.  The prefill is not timed: the row is
    the library call alone (ApiDef.prefilled), for the as-executed check, never a whole execution.
    """
    shape = _single_gemm(item, Api.GEMM_EX) if isinstance(item, Layer) else _prefilled_bias(item, model)
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
    return JobFields(row, {**shape.describe(), "gemv": gemv}, (SGEMV_ALGORITHM,))


# Where this module's APIs come in the job order (jobs are numbered in it: benanza.library.Api).
ORDER = 60
# The vocabulary entries of this module's APIs: benanza.library builds ``Api`` (member -> the
# call as logs print it) and ``OP_APIS`` (the ONNX ops each serves) from them, reading this
# literal without importing the module.
VOCABULARY = {
    "GEMM_EX": {"call": "cublasGemmEx", "ops": ("Gemm", "MatMul")},
    "LT_MATMUL": {"call": "cublasLtMatmul", "ops": ("Gemm", "MatMul")},
    "SGEMV": {"call": "cublasSgemv", "ops": ("Gemm", "MatMul")},  # matrix-vector, fp32 only
}


CUBLAS_OP = Vocabulary("cublasOperation_t", tuple(_OP.values()))
LT_EPILOGUE = Vocabulary("cublasLtEpilogue_t", tuple(LT_EPILOGUES.values()))
GEMM_DIMS = ints("dims", 16)  # a bz::GemmDims (gemm_dims in csrc/benanza/cublas_util.h)
WEIGHTS = (Column("a_constant", Kind.FLAG), Column("b_constant", Kind.FLAG))
ALPHA_BETA = (Column("alpha", Kind.REAL32), Column("beta", Kind.REAL32))
OPS = (choice("op_a", CUBLAS_OP), choice("op_b", CUBLAS_OP))



def gemm_layer_signature(layer: Layer) -> Signature | None:
    """A Gemm or MatMul layer as a GEMM logs it: (k, {m, n}, batch), m and n in either order."""
    if len(layer.inputs) < 2 or not layer.outputs:
        return None
    a, b, y = layer.inputs[0].shape, layer.inputs[1].shape, layer.outputs[0].shape
    if layer.op == "Gemm":
        trans_a = layer.attrs.get("transA", 0)
        m, k, batch = (a[1], a[0], 1) if trans_a else (a[0], a[1], 1)
    elif len(b) <= 2:  # MatMul with a 2-D weight: leading dims of A fold into m
        m, k, batch = math.prod(a[:-1]), a[-1], 1
    else:
        m, k, batch = a[-2], a[-1], math.prod(y[:-2])
    return ("gemm", int(k), tuple(sorted((int(m), int(y[-1])))), int(batch))


def _gemm_call_signature(call: Any) -> Signature | None:
    """A cuBLAS log's GEMM (a GEMV as n = 1) in the same terms."""
    return ("gemm", call.k, tuple(sorted((call.m, call.n))), call.batch_count)


def _is_lt(function: str, kind: str) -> bool:
    return function.startswith("cublasLt")


def _is_sgemv(function: str, kind: str) -> bool:
    return kind == "gemv" and function.startswith("cublasSgemv")


def _is_gemm_ex(function: str, kind: str) -> bool:
    """Every other cuBLAS GEMM or GEMV (cublasSgemm_v2, cublasGemmStridedBatchedEx ...) runs as cublasGemmEx."""
    return not _is_lt(function, kind) and not _is_sgemv(function, kind)


def _cublas_log(call: Callable[[str, str], bool]) -> LogSide:
    """A cuBLAS call: the executed reader names its algorithm and epilogue (profile.executed)."""
    return LogSide(cudnn_call=False, graph_recogniser=None, cublas_call=call, layer_signature=gemm_layer_signature,
                   call_signature=_gemm_call_signature, algorithm=None, fusion=Fusion.NONE, graph_fusions=(),
                   contrib_fusions=(), contrib_ops=False)


DEFINITIONS = (
    ApiDef(Api.GEMM_EX, "bench_gemm_ex", "cublas_gemm_ex.cu.j2", ApiFamily.LEGACY, "cublas", gemm_ex_job,
           columns=(KEY, PRECISION, FUSION, GEMM_DIMS, *OPS, *ALPHA_BETA, *WEIGHTS), algorithms=GEMM_EX_ALGORITHMS,
           tensor_core=True, host_only=True, weights=True, fusions=(Fusion.GEMM_BIAS,),
           prefilled=(Fusion.GEMM_BIAS,), log=_cublas_log(_is_gemm_ex)),
    ApiDef(Api.LT_MATMUL, "bench_lt_matmul", "cublaslt_matmul.cu.j2", ApiFamily.LEGACY, "cublas", lt_matmul_job,
           columns=(KEY, PRECISION, FUSION, GEMM_DIMS, *OPS, *ALPHA_BETA, Column("bias", Kind.FLAG),
                    Column("relu", Kind.FLAG), choice("epilogue", LT_EPILOGUE), *WEIGHTS),
           tensor_core=True, host_only=True, weights=True, fusions=GEMM_FUSIONS, log=_cublas_log(_is_lt)),
    ApiDef(Api.SGEMV, "bench_sgemv", "cublas_sgemv.cu.j2", ApiFamily.LEGACY, "cublas", sgemv_job,
           columns=(KEY, PRECISION, FUSION, GEMM_DIMS, *ALPHA_BETA, choice("gemv_op", CUBLAS_OP), ints("gemv", 4),
                    *WEIGHTS),
           algorithms=(SGEMV_ALGORITHM,), host_only=True, weights=True, log=_cublas_log(_is_sgemv)),
)
