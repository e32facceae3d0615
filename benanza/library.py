"""The vocabulary of benanza: one Enum per concept and tables to the C++ spellings.

Code looks a data type, an API or a fusion pattern up in tables rather than branching
on it (after CUTLASS's ``cutlass_library/library.py``): the names and C++ spellings are
here; what benanza knows about each API (executable, template, family, layout policy,
job builder, log recogniser) is its ``benanza.apis`` definition.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


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


class Api(StrEnum):
    """A library call a layer maps to; the value is the C/C++ function name as logs print it."""

    CONV_FWD = "cudnnConvolutionForward"
    CONV_BIAS_ACT = "cudnnConvolutionBiasActivationForward"
    GRAPH_CONV = "cudnn_frontend::graph::conv_fprop"  # graph (backend) API, every engine config
    GRAPH_MATMUL = "cudnn_frontend::graph::matmul"
    GRAPH_NORM = "cudnn_frontend::graph::norm_fwd"  # LayerNormalization / RMSNormalization, inference phase
    GRAPH_SDPA = "cudnn_frontend::graph::sdpa"  # fused scaled-dot-product attention (the attention core)
    GRAPH_POINTWISE = "cudnn_frontend::graph::pointwise"  # a fused chain of pointwise ops (GELU, SiLU...)
    BATCHNORM_INF = "cudnnBatchNormalizationForwardInference"
    ACTIVATION = "cudnnActivationForward"
    POOLING = "cudnnPoolingForward"
    SOFTMAX = "cudnnSoftmaxForward"
    LRN = "cudnnLRNCrossChannelForward"
    ADD_TENSOR = "cudnnAddTensor"
    OP_TENSOR = "cudnnOpTensor"
    GEMM_EX = "cublasGemmEx"
    LT_MATMUL = "cublasLtMatmul"
    SGEMV = "cublasSgemv"
    COPY = "roofline"  # non-library layer: bounded by bytes moved at measured bandwidth
    CEILING = "ceiling"  # the system's measured peaks (device copy bandwidth, GEMM rate per precision)


# ONNX op -> library calls (DESIGN.md's table, kept as data).  Ops absent here are
# unknown: the model processor reports them and still lists every other layer.
OP_APIS: dict[str, tuple[Api, ...]] = {
    "Conv": (Api.CONV_FWD, Api.GRAPH_CONV),
    "BatchNormalization": (Api.BATCHNORM_INF,),
    "Relu": (Api.ACTIVATION,),
    "Sigmoid": (Api.ACTIVATION,),
    "Tanh": (Api.ACTIVATION,),
    "Clip": (Api.ACTIVATION,),
    "Elu": (Api.ACTIVATION,),
    "LeakyRelu": (Api.ACTIVATION,),
    "MaxPool": (Api.POOLING,),
    "AveragePool": (Api.POOLING,),
    "GlobalAveragePool": (Api.POOLING,),
    "GlobalMaxPool": (Api.POOLING,),
    "Softmax": (Api.SOFTMAX,),
    "LRN": (Api.LRN,),
    "Add": (Api.ADD_TENSOR, Api.OP_TENSOR),
    "Sum": (Api.OP_TENSOR,),
    "Mul": (Api.OP_TENSOR,),
    "Gemm": (Api.GEMM_EX, Api.LT_MATMUL, Api.GRAPH_MATMUL, Api.SGEMV),  # cublasSgemv: matrix-vector, fp32 only
    "MatMul": (Api.GEMM_EX, Api.LT_MATMUL, Api.GRAPH_MATMUL, Api.SGEMV),
    "Concat": (Api.COPY,),
    "Reshape": (Api.COPY,),
    "Flatten": (Api.COPY,),
    "Transpose": (Api.COPY,),
    "Dropout": (Api.COPY,),
    "Unsqueeze": (Api.COPY,),
    "Squeeze": (Api.COPY,),
    "Identity": (Api.COPY,),
    "Pad": (Api.COPY,),
    # --- transformer layers (issue 16).  Normalizations: the cuDNN graph API's norm forward.
    "LayerNormalization": (Api.GRAPH_NORM,),
    "RMSNormalization": (Api.GRAPH_NORM,),  # ONNX opset 23
    # Embeddings and slices read and write their output's bytes: the copy roofline.
    "Gather": (Api.COPY,),
    "Slice": (Api.COPY,),
    "Split": (Api.COPY,),
    "Expand": (Api.COPY,),
    "Cast": (Api.COPY,),
    # Pointwise ops outside cuDNN's legacy calls (the GELU / SiLU / RMSNorm chains' members):
    # the copy roofline is their floor (one read-and-write pass, Transpose's bound).
    "Erf": (Api.COPY,),
    "Div": (Api.COPY,),
    "Sub": (Api.COPY,),
    "Pow": (Api.COPY,),
    "Sqrt": (Api.COPY,),
    "Reciprocal": (Api.COPY,),
    "Neg": (Api.COPY,),
    "Exp": (Api.COPY,),
    "Where": (Api.COPY,),
    "Gelu": (Api.COPY,),
    "ReduceMean": (Api.COPY,),
}

# Ops that only alias or reshape memory: their roofline bound moves no bytes.
NO_COPY_OPS = frozenset({"Reshape", "Flatten", "Dropout", "Unsqueeze", "Squeeze", "Identity"})


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
