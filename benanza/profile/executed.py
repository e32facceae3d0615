"""Logged cuDNN/cuBLAS calls as the benchmarks spell them (``ExecutedCall``), and their assignment
to the layers of their signature."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from math import prod

from benanza.apis import REGISTRY
from benanza.apis.log_side import NO_LOG_SIDE, LogSide, tensor
from benanza.library import Api, Fusion, Precision
from benanza.model.layer import Layer
from benanza.profile import cudnn_log
from benanza.profile.bundle import Bundle
from benanza.profile.cublas_log import GemmCall, lt_algorithm_name
from benanza.profile.signatures import SUCCESS, Signature, call_signature, layer_signature, logged_api
from benanza.records import ExecutedCall

# cuDNN data type -> storage precision; fp32 data runs as TF32 when the call allowed it.
CUDNN_PRECISION: dict[str, Precision] = {
    "CUDNN_DATA_FLOAT": Precision.FP32, "CUDNN_DATA_HALF": Precision.FP16, "CUDNN_DATA_BFLOAT16": Precision.BF16}
CUDA_PRECISION: dict[str, Precision] = {
    "CUDA_R_32F": Precision.FP32, "CUDA_R_16F": Precision.FP16, "CUDA_R_16BF": Precision.BF16}
# Legacy math types that let fp32 data use TF32 Tensor Cores (library.PRECISIONS: TF32 is CUDNN_DEFAULT_MATH).
TF32_MATH = frozenset({"CUDNN_DEFAULT_MATH", "CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION"})
# Pointwise modes of a graph-API op graph that are activations.
ACTIVATION_MODES = frozenset({"RELU_FWD", "SIGMOID_FWD", "TANH_FWD", "ELU_FWD", "GELU_FWD", "SWISH_FWD",
                              "GELU_APPROX_TANH_FWD", "SOFTPLUS_FWD"})
# cuBLASLt epilogue -> fusion pattern.
LT_EPILOGUES: dict[str, Fusion] = {"BIAS": Fusion.GEMM_BIAS, "RELU_BIAS": Fusion.GEMM_BIAS_ACT,
                                   "GELU_BIAS": Fusion.GEMM_BIAS_ACT, "RELU": Fusion.GEMM_BIAS_ACT}

# A legacy call whose API reads no algorithm from it (LogSide.algorithm None: cudnnAddTensor).
DEFAULT_ALGORITHM = "default"


def _pointwise_roles(call: cudnn_log.ExecutedCall) -> set[str]:
    roles: set[str] = set()
    for op in call.operations[1:]:
        if op.kind != "POINTWISE":
            continue
        if op.mode in ACTIVATION_MODES:
            roles.add("act")
        elif op.mode == "ADD":
            b = tensor(op, "bDesc", "b")
            roles.add("bias" if b is not None and prod(b.dims[2:]) == 1 and "bias" not in roles else "add")
    return roles


def _graph_fusion(call: cudnn_log.ExecutedCall, log: LogSide) -> Fusion:
    roles = _pointwise_roles(call)
    return next((f for need, f in log.graph_fusions if need <= roles), Fusion.NONE)


def tensor_layout(t: cudnn_log.TensorDesc | None) -> str:
    """"NHWC" or "NCHW" of a packed 4-D tensor from its strides; "" when they say neither or both (C = 1)."""
    if t is None or len(t.dims) != 4 or len(t.strides) != 4:
        return ""
    _n, c, h, w = t.dims
    nhwc = t.strides[1:] == (1, w * c, c)
    nchw = t.strides[1:] == (h * w, w, 1)
    return "" if nhwc == nchw else "NHWC" if nhwc else "NCHW"


def _layout(call: cudnn_log.ExecutedCall, x: cudnn_log.TensorDesc | None) -> str:
    """The input's layout, for the APIs benchmarked in more than one layout (``ApiDef.both_layouts``)."""
    api = next((a for a in Api if a.value == call.api), None)
    return tensor_layout(x) if api is not None and REGISTRY[api].both_layouts else ""


def executed_call(call: cudnn_log.ExecutedCall | GemmCall) -> ExecutedCall:
    """The analyzer's as-executed description of one logged call (the fusion key is set by the caller)."""
    api = logged_api(call)  # its log side (ApiDef.log) says how to read it
    log = REGISTRY[api].log if api in REGISTRY else NO_LOG_SIDE
    if isinstance(call, GemmCall):
        assert api is not None  # cublas_api raises for a line no API takes
        prec = CUDA_PRECISION.get(call.a_type, Precision.FP32)
        if prec is Precision.FP32 and call.tf32:
            prec = Precision.TF32
        if call.function.startswith("cublasLt"):  # cuBLASLt names its algorithm and epilogue its own way
            fusion = LT_EPILOGUES.get((call.epilogue or "").removeprefix("CUBLASLT_EPILOGUE_"), Fusion.NONE)
            return ExecutedCall(api.value, lt_algorithm_name(call.algo or "") or (call.algo or ""),
                                prec.value, fusion.value)
        return ExecutedCall(api.value, call.algo or "CUBLAS_GEMM_DEFAULT", prec.value)
    x = call.operations[0].tensors[0] if call.operations and call.operations[0].tensors else \
        (call.tensors[0] if call.tensors else None)
    prec = CUDNN_PRECISION.get(x.dtype if x else "", Precision.FP32)
    if call.engine_id is not None:
        if prec is Precision.FP32 and call.enable_tf32:
            prec = Precision.TF32
        return ExecutedCall(call.api or call.function, call.engine_config or "", prec.value,
                            _graph_fusion(call, log).value, layout=_layout(call, x))
    if prec is Precision.FP32 and call.math_type in TF32_MATH:
        prec = Precision.TF32
    algo = (log.algorithm(call) if log.algorithm is not None else None) or DEFAULT_ALGORITHM
    return ExecutedCall(call.api or call.function, algo, prec.value, log.fusion.value, layout=_layout(call, x))


def _library_calls(bundle: Bundle) -> tuple[list[cudnn_log.ExecutedCall | GemmCall], list[str]]:
    calls: list[cudnn_log.ExecutedCall | GemmCall] = []
    notes: list[str] = []
    if bundle.cudnn_log is not None:
        calls += [c for c in bundle.cudnn_log.calls
                  if not c.during_heuristic and (c.status is None or c.status == SUCCESS)]
        notes += bundle.cudnn_log.notes
    for log in (bundle.cublas_log, bundle.cublaslt_log):
        if log is not None:
            calls += log.calls
            notes += log.notes
    return calls, notes


def assign_calls(layers: Sequence[Layer], calls: Sequence[cudnn_log.ExecutedCall | GemmCall]
                 ) -> tuple[dict[int, cudnn_log.ExecutedCall | GemmCall], int | None, list[str]]:
    """Layer index -> its logged call: per signature, the last run's calls in order onto the layers in order.

    Returns the assignment, the number of runs the logs hold (the most common calls per layer) and notes.
    """
    by_layer: dict[Signature, list[int]] = defaultdict(list)
    for layer in layers:
        sig = layer_signature(layer)
        if sig is not None:
            by_layer[sig].append(layer.index)
    by_call: dict[Signature, list[cudnn_log.ExecutedCall | GemmCall]] = defaultdict(list)
    for call in calls:
        sig = call_signature(call)
        if sig is not None:
            by_call[sig].append(call)
    ratios = Counter(len(by_call[s]) // len(idx) for s, idx in by_layer.items()
                     if by_call.get(s) and len(by_call[s]) % len(idx) == 0)
    runs = ratios.most_common(1)[0][0] if ratios else None
    out: dict[int, cudnn_log.ExecutedCall | GemmCall] = {}
    notes: list[str] = []
    for sig, indices in by_layer.items():
        found = by_call.get(sig, [])
        if not found:
            continue
        if runs is not None and len(found) != runs * len(indices):
            notes.append(f"{len(found)} logged {sig[0]} call(s) for {len(indices)} layer(s) of one shape "
                         f"(layers {', '.join(map(str, indices))}) over {runs} runs: the last ones were used")
        last = found[-len(indices):]
        for index, call in zip(indices[len(indices) - len(last):], last, strict=True):
            out[index] = call
    return out, runs, notes


def split_bias_adds(calls: Sequence[cudnn_log.ExecutedCall | GemmCall]
                    ) -> tuple[list[cudnn_log.ExecutedCall | GemmCall], dict[int, cudnn_log.ExecutedCall]]:
    """(the calls without bias adds, id(conv call) -> its bias add).

    A bias add is a cudnnAddTensor logged right after a conv call that adds a
    ``[1, K, 1, 1]`` tensor to exactly that conv's output (ONNX Runtime adds every
    conv's bias, a folded BatchNormalization's shift included, this way). Taken out
    first, it cannot be mistaken for a model Add of the same shapes.
    """
    rest: list[cudnn_log.ExecutedCall | GemmCall] = []
    bias: dict[int, cudnn_log.ExecutedCall] = {}
    conv: Signature | None = None
    for call in calls:
        sig = call_signature(call)
        if conv is not None and getattr(call, "api", None) == Api.ADD_TENSOR.value and sig is not None \
                and sig[1:] == (conv[3], (1, conv[3][1], *(1,) * (len(conv[3]) - 2))):
            bias[id(rest[-1])] = call  # type: ignore[assignment]
            conv = None
            continue
        rest.append(call)
        conv = sig if sig is not None and sig[0] == "conv" else None
    return rest, bias
