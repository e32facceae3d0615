"""The vocabulary of benanza: one Enum per concept and tables to the C++ spellings.

Code looks a data type, an API or a fusion pattern up in tables rather than branching
on it (after CUTLASS's ``cutlass_library/library.py``): the names and C++ spellings are
here.  The ``Api`` members and the ONNX ops each serves are declared by the ``benanza.apis``
module of each API (its ``VOCABULARY``), as is everything else benanza knows about it
(executable, template, family, layout policy, job builder, log recogniser): adding an API
edits no table here.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any


class Precision(StrEnum):
    """What a benchmark computes in: storage type plus math mode (the ``--dtype`` values)."""

    FP32 = "fp32"  # fp32 storage, FMA math (no Tensor Cores)
    TF32 = "tf32"  # fp32 storage, TF32 Tensor Core math
    FP16 = "fp16"  # fp16 storage, fp32 accumulate, Tensor Core math
    BF16 = "bf16"  # bf16 storage, fp32 accumulate, Tensor Core math


# Bytes per element of every element type (ONNX / numpy spelling): the one table the IR's
# costs, the copy bound and the roofline's precision scaling read.
DTYPE_BYTES: dict[str, int] = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1,
    "uint64": 8, "uint32": 4, "uint16": 2, "uint8": 1,
    "bool": 1, "float8e4m3fn": 1, "float8e5m2": 1,
}


class Math(StrEnum):
    FMA = "fma"
    TF32 = "tf32_tensor_op"
    TENSOR_OP = "tensor_op"
    NONE = "n/a"  # ops without a math mode (pooling, activation, ...)


@dataclass(frozen=True)
class PrecisionSpec:
    """C++ spellings of one precision; templates read these fields, never branch on names."""

    cpp_type: str  # storage type in the harness
    cudnn_dtype: str
    cudnn_compute: str  # compute type of convolution descriptors
    cudnn_math: str
    cudnn_layout: str  # the layout cuDNN prefers for this precision
    cuda_dtype: str  # cudaDataType_t for cuBLAS
    cublas_compute: str
    math: Math
    tolerance: float  # max |out - ref| / max |ref| accepted by the output check
    tensor_core: bool
    storage: str  # element type of the storage (a DTYPE_BYTES key): fp32 and tf32 share float32


PRECISIONS: dict[Precision, PrecisionSpec] = {
    Precision.FP32: PrecisionSpec("float", "CUDNN_DATA_FLOAT", "CUDNN_DATA_FLOAT", "CUDNN_FMA_MATH",
                                  "CUDNN_TENSOR_NCHW", "CUDA_R_32F", "CUBLAS_COMPUTE_32F", Math.FMA, 1e-4, False,
                                  storage="float32"),
    Precision.TF32: PrecisionSpec("float", "CUDNN_DATA_FLOAT", "CUDNN_DATA_FLOAT", "CUDNN_DEFAULT_MATH",
                                  "CUDNN_TENSOR_NCHW", "CUDA_R_32F", "CUBLAS_COMPUTE_32F_FAST_TF32",
                                  Math.TF32, 1e-2, True, storage="float32"),
    Precision.FP16: PrecisionSpec("__half", "CUDNN_DATA_HALF", "CUDNN_DATA_FLOAT", "CUDNN_TENSOR_OP_MATH",
                                  "CUDNN_TENSOR_NHWC", "CUDA_R_16F", "CUBLAS_COMPUTE_32F", Math.TENSOR_OP, 1e-2, True,
                                  storage="float16"),
    Precision.BF16: PrecisionSpec("__nv_bfloat16", "CUDNN_DATA_BFLOAT16", "CUDNN_DATA_FLOAT",
                                  "CUDNN_TENSOR_OP_MATH", "CUDNN_TENSOR_NHWC", "CUDA_R_16BF", "CUBLAS_COMPUTE_32F",
                                  Math.TENSOR_OP, 5e-2, True, storage="bfloat16"),
}


def _vocabulary_entries() -> list[tuple[str, dict[str, Any]]]:
    """(member, entry) of every ``VOCABULARY`` in ``benanza/apis/``, in job order (the modules'
    ``ORDER``, then their names).  The modules are parsed, not imported: they import this one."""
    found: list[tuple[tuple[int, str], list[tuple[str, dict[str, Any]]]]] = []
    for path in sorted((Path(__file__).resolve().parent / "apis").glob("*.py")):
        literals: dict[str, Any] = {}
        try:
            body = ast.parse(path.read_text(), str(path)).body
        except SyntaxError as exc:
            raise RuntimeError(f"{path}:{exc.lineno}: {exc.msg}") from None
        for node in body:
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
                node.target if isinstance(node, ast.AnnAssign) else None
            if isinstance(target, ast.Name) and target.id in ("ORDER", "VOCABULARY") and node.value is not None:
                try:
                    literals[target.id] = ast.literal_eval(node.value)
                except ValueError:
                    raise RuntimeError(f"{path}: {target.id} must be a literal (it is read without importing "
                                       f"the module)") from None
        if "VOCABULARY" in literals:
            if not isinstance(literals.get("ORDER"), int):
                raise RuntimeError(f"{path}: a module with a VOCABULARY needs an integer ORDER (its place in "
                                   f"the job order)")
            found.append(((literals["ORDER"], path.stem), list(literals["VOCABULARY"].items())))
    return [entry for _key, entries in sorted(found) for entry in entries]


_VOCABULARY = _vocabulary_entries()

# A library call a layer maps to; the value is the C/C++ function name as logs print it.
# Each ``benanza/apis`` module declares its members in ``VOCABULARY`` (member -> {"call": the
# name, "ops": the ONNX ops it serves}); the member order is the job order.
Api = StrEnum("Api", [(member, entry["call"]) for member, entry in _VOCABULARY], module=__name__,  # type: ignore[misc]
              qualname="Api")


def _op_apis() -> dict[str, tuple[Api, ...]]:
    out: dict[str, tuple[Api, ...]] = {}
    for member, entry in _VOCABULARY:
        for op in entry.get("ops", ()):
            out[op] = (*out.get(op, ()), Api[member])
    return out


# ONNX op -> library calls (DESIGN.md's table, kept as data in each API module's VOCABULARY).
# Ops absent here are unknown: the model processor reports them and still lists every other layer.
OP_APIS: dict[str, tuple[Api, ...]] = _op_apis()

# Ops that only alias or reshape memory: their roofline bound moves no bytes.
NO_COPY_OPS = frozenset({"Reshape", "Flatten", "Dropout", "Unsqueeze", "Squeeze", "Identity"})
# Ops whose output is a strided view of their input (a permutation, a slice, the parts of a split;
# a Gather by one constant index is a select, analyze.execution.is_view): the execution bound lets
# the consumer read it through strides, or the producer write it so, as PyTorch's attention and
# ConvNeXt's permutes do, so it charges them nothing unless their output leaves the model.
VIEW_OPS = frozenset({"Transpose", "Slice", "Split"})


class ConvFwdAlgo(StrEnum):
    """The 8 legacy forward algorithms, in cudnnConvolutionFwdAlgo_t order."""

    IMPLICIT_GEMM = "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM"
    IMPLICIT_PRECOMP_GEMM = "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM"
    GEMM = "CUDNN_CONVOLUTION_FWD_ALGO_GEMM"
    DIRECT = "CUDNN_CONVOLUTION_FWD_ALGO_DIRECT"
    FFT = "CUDNN_CONVOLUTION_FWD_ALGO_FFT"
    FFT_TILING = "CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING"
    WINOGRAD = "CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD"
    WINOGRAD_NONFUSED = "CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED"


# Algorithms whose transforms trade accuracy for speed (their graph-API engines carry
# CUDNN_NUMERICAL_NOTE_WINOGRAD): on the H100 fp32 Winograd-nonfused outputs differed
# from the fp32 reference by up to 7e-3 of max|ref| (5x5 filters).  Frameworks do pick
# them, so the bound counts them; their output check uses at least this tolerance.
ALGORITHM_TOLERANCE: dict[str, float] = {
    ConvFwdAlgo.WINOGRAD: 1e-2,
    ConvFwdAlgo.WINOGRAD_NONFUSED: 1e-2,
}

# Convolutions computed with fewer FLOPs than the direct count (Winograd's and the FFT's
# transforms): legacy algorithms by name, graph-API engine configs by a numerical note
# (CUDNN_NUMERICAL_NOTE_FFT, _WINOGRAD, _WINOGRAD_TILE_4x4 ...).  The roofline counts direct
# FLOPs, so such a row neither raises a compute peak nor has an efficiency against it.
FEWER_FLOP_ALGORITHMS: frozenset[str] = frozenset(a.value for a in (
    ConvFwdAlgo.FFT, ConvFwdAlgo.FFT_TILING, ConvFwdAlgo.WINOGRAD, ConvFwdAlgo.WINOGRAD_NONFUSED))
FEWER_FLOP_NOTES = ("FFT", "WINOGRAD")


class Activation(StrEnum):
    """ONNX activation op -> cudnnActivationMode_t."""

    RELU = "CUDNN_ACTIVATION_RELU"
    SIGMOID = "CUDNN_ACTIVATION_SIGMOID"
    TANH = "CUDNN_ACTIVATION_TANH"
    CLIPPED_RELU = "CUDNN_ACTIVATION_CLIPPED_RELU"
    ELU = "CUDNN_ACTIVATION_ELU"
    IDENTITY = "CUDNN_ACTIVATION_IDENTITY"


ONNX_ACTIVATIONS: dict[str, Activation] = {
    "Relu": Activation.RELU,
    "Sigmoid": Activation.SIGMOID,
    "Tanh": Activation.TANH,
    "Clip": Activation.CLIPPED_RELU,
    "Elu": Activation.ELU,
}


class Fusion(StrEnum):
    """Fusion patterns benchmarked as one call (named by the ops they fuse)."""

    NONE = "none"
    CONV_BIAS = "conv+bias"
    CONV_BIAS_ACT = "conv+bias+act"
    CONV_BIAS_ADD_ACT = "conv+bias+add+act"  # residual add before the activation
    CONV_BN = "conv+bn"  # BatchNormalization folded into the convolution's weights and bias
    CONV_BN_ACT = "conv+bn+act"
    GEMM_BIAS = "gemm+bias"
    GEMM_BIAS_ACT = "gemm+bias+act"
    # MatMul(Q, K^T) -> scale -> [mask] -> Softmax -> MatMul(., V): cuDNN's fused SDPA
    ATTENTION = "attention"
    # Pow -> ReduceMean -> Add(eps) -> Sqrt -> Div (x / rms) [-> Mul(weight)]: one norm forward
    RMSNORM = "rmsnorm"
    # elementwise layers over one tensor (GELU, SiLU, ...): one pass at the copy roofline
    POINTWISE = "pointwise-chain"


class Status(StrEnum):
    """Outcome of one benchmark; every outcome is recorded, none crashes the run."""

    OK = "ok"
    NOT_SUPPORTED = "not_supported"
    OUT_OF_MEMORY = "out_of_memory"
    CHECK_FAILED = "check_failed"  # ran, but its output disagrees with the reference
    FAILED = "failed"  # a library or CUDA error other than the above
    CRASHED = "crashed"  # the process died (signal) while running it
    TIMEOUT = "timeout"
    GARBAGE = "garbage"  # the process printed something that is not a result line


class L2(StrEnum):
    """The state of L2 a benchmark measures a call in (``benanza run --l2``)."""

    WARM = "warm"  # inputs left in L2 between repetitions (the lower bound)
    COLD = "cold"  # L2 flushed before every repetition
    # What a framework leaves at small batches: activations warm (just written by the previous
    # layer), weights cold (each call reads a copy of its weights that the others evicted from
    # L2), calls back to back.  Measured only for the APIs with weights (ApiDef.weights, benanza.apis).
    COLD_WEIGHTS = "cold-weights"
