"""cuDNN legacy single-op calls: batch norm, activation, pooling, softmax, LRN, add and op tensor."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from typing import Any

from benanza import apis
from benanza.apis.base import (
    _INT32_MAX,
    ACTIVATION_COEF,
    ACTIVATION_MODE,
    FLOAT_DTYPES,
    OP_FORMAT,
    OP_HEAD,
    ApiDef,
    ApiFamily,
    JobFields,
    Unsupported,
)
from benanza.apis.job_table import Column, Kind, Vocabulary, choice, ints
from benanza.apis.log_side import (
    CallSignature,
    LayerSignature,
    LogSide,
    Signature,
    desc_field,
    first_call,
    first_last_call,
    io_layer,
    nd,
    tensor,
    x_layer,
)
from benanza.library import ONNX_ACTIVATIONS, PRECISIONS, Activation, Api, Fusion, Math, Precision
from benanza.model.layer import FusionCandidate, Layer, Model

# The one algorithm each of these APIs has, spelled as its LogSide.algorithm reads it from a
# cuDNN log (the mode of the call); pooling, activation and op-tensor
# jobs spell their mode per job.  cudnnAddTensor has no mode: "default".
BATCHNORM_ALGORITHM = "CUDNN_BATCHNORM_SPATIAL"
SOFTMAX_ALGORITHM = "CUDNN_SOFTMAX_ACCURATE"
# single-axis (opset 13) -> cudnnSoftmaxMode_t; INSTANCE over [rows, cols, 1, 1] is the coerced 2-D form
SOFTMAX_MODES: dict[bool, str] = {False: "CUDNN_SOFTMAX_MODE_INSTANCE", True: "CUDNN_SOFTMAX_MODE_CHANNEL"}
LRN_ALGORITHM = "CUDNN_LRN_CROSS_CHANNEL_DIM1"
ADD_TENSOR_ALGORITHM = "default"

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


def _format(api: Api, precision: Precision) -> tuple[str, str]:
    """(cudnnTensorFormat_t spelling, layout label) for one legacy op in one precision."""
    fmt = PRECISIONS[precision].cudnn_layout if apis.REGISTRY[api].nhwc else "CUDNN_TENSOR_NCHW"
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
    """cudnnSoftmaxForward, ACCURATE, over ONNX Softmax's axis in either opset's meaning.

    Before opset 13 the input is coerced to 2-D at ``axis``: rows = prod(shape[:axis]),
    softmax over prod(shape[axis:]), INSTANCE mode on [rows, cols, 1, 1].  From opset 13
    (attribute ``single_axis``, set by the model processor where the two differ) it is over
    ``shape[axis]`` alone: CHANNEL mode on NCHW [prod(before), shape[axis], prod(after), 1],
    the model's own row-major layout.  A last-axis softmax ([N*..., D]) is the first form.
    """
    layer = _one_layer(item, Api.SOFTMAX, {"Softmax"})
    x = layer.inputs[0].shape
    axis = int(layer.attrs.get("axis", 1))
    if not 0 <= axis <= len(x) or (layer.attrs.get("single_axis") and axis >= len(x)):
        raise Unsupported(f"Softmax axis {axis} out of range for rank {len(x)}")
    if layer.attrs.get("single_axis"):
        dims = [math.prod(x[:axis]), x[axis], math.prod(x[axis + 1:]), 1]
        fmt, layout, mode = "CUDNN_TENSOR_NCHW", "NCHW", SOFTMAX_MODES[True]
    else:
        dims = [math.prod(x[:axis]), math.prod(x[axis:]), 1, 1]
        (fmt, layout), mode = _format(Api.SOFTMAX, precision), SOFTMAX_MODES[False]
    row = {"dims": [int(d) for d in dims], "format": fmt, "layout": layout, "mode": mode}
    shapes = {"x": list(x), "axis": axis, "rows": dims[0] * dims[2], "cols": dims[1], "mode": mode}
    return JobFields(row, shapes, (SOFTMAX_ALGORITHM,), layout, Math.NONE.value)


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


# LRN stays NCHW (nhwc=False): whether cudnnLRNCrossChannelForward takes NHWC is not
# documented, and NCHW is the layout every framework gives it.
# Where this module's APIs come in the job order (jobs are numbered in it: benanza.library.Api).
ORDER = 50
# The vocabulary entries of this module's APIs: benanza.library builds ``Api`` (member -> the
# call as logs print it) and ``OP_APIS`` (the ONNX ops each serves) from them, reading this
# literal without importing the module.
VOCABULARY = {
    "BATCHNORM_INF": {"call": "cudnnBatchNormalizationForwardInference", "ops": ("BatchNormalization",)},
    "ACTIVATION": {"call": "cudnnActivationForward", "ops": ("Relu", "Sigmoid", "Tanh", "Clip", "Elu", "LeakyRelu")},
    "POOLING": {"call": "cudnnPoolingForward",
                "ops": ("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool")},
    "SOFTMAX": {"call": "cudnnSoftmaxForward", "ops": ("Softmax",)},
    "LRN": {"call": "cudnnLRNCrossChannelForward", "ops": ("LRN",)},
    "ADD_TENSOR": {"call": "cudnnAddTensor", "ops": ("Add",)},
    "OP_TENSOR": {"call": "cudnnOpTensor", "ops": ("Add", "Sum", "Mul")},
}


POOLING_MODE = Vocabulary("cudnnPoolingMode_t", tuple(dict.fromkeys(POOLING_MODES.values())))
SOFTMAX_MODE = Vocabulary("cudnnSoftmaxMode_t", tuple(SOFTMAX_MODES.values()))
OP_TENSOR_OP = Vocabulary("cudnnOpTensorOp_t", tuple(dict.fromkeys(OP_TENSOR_OPS.values())))
DIMS4 = ints("dims", 4)  # a bz::Dims4 (dims4 in csrc/benanza/cudnn_ops.h)



# Elementwise ONNX op -> the signature kind of the calls that can run it.
ELEMENTWISE_KINDS = {"Add": "add", "Sum": "add", "Mul": "mul"}
# cudnnOpTensor's operation -> the signature kind of the layers it can run.
OP_TENSOR_KINDS = {"CUDNN_OP_TENSOR_ADD": "add", "CUDNN_OP_TENSOR_MUL": "mul"}


def _elementwise_layer(layer: Layer) -> Signature | None:
    """Its output and its other input, broadcast to the output's rank (cuDNN's C and A/B)."""
    rank = len(layer.outputs[0].shape)
    other = layer.inputs[1].shape if len(layer.inputs) > 1 else layer.outputs[0].shape
    return (ELEMENTWISE_KINDS[layer.op], nd(layer.outputs[0].shape), nd((1,) * (rank - len(other)) + tuple(other)))


def _add_tensor_call(call: Any) -> Signature | None:
    dest, other = tensor(call, "srcDestDesc", "cDesc", "CDesc"), tensor(call, "biasDesc", "aDesc", "ADesc")
    return None if dest is None or other is None else ("add", nd(dest.dims), nd(other.dims))


def _op_tensor_call(call: Any) -> Signature | None:
    dest, other = tensor(call, "srcDestDesc", "cDesc", "CDesc"), tensor(call, "bDesc", "BDesc")
    op = desc_field(call, "opTensorOp") or ""
    return None if dest is None or other is None else (OP_TENSOR_KINDS.get(op, op.lower()), nd(dest.dims),
                                                      nd(other.dims))


def _softmax_layer(layer: Layer) -> Signature | None:
    return ("softmax", math.prod(layer.inputs[0].shape))


def _softmax_call(call: Any) -> Signature | None:
    return ("softmax", math.prod(call.tensors[0].dims)) if call.tensors else None


def _legacy_log(layer: LayerSignature, call: CallSignature, algorithm: Callable[[Any], str | None] | None) -> LogSide:
    """A legacy cuDNN call of one layer: recognised by its function name, no fusion."""
    return LogSide(cudnn_call=True, graph_recogniser=None, cublas_call=None, layer_signature=layer,
                   call_signature=call, algorithm=algorithm, fusion=Fusion.NONE, graph_fusions=(),
                   contrib_fusions=(), contrib_ops=False)


DEFINITIONS = (
    ApiDef(Api.BATCHNORM_INF, "bench_batchnorm", "cudnn_batchnorm.cu.j2", ApiFamily.LEGACY, "cudnn", batchnorm_job,
           columns=(*OP_HEAD, DIMS4, Column("epsilon", Kind.REAL), *OP_FORMAT), algorithms=(BATCHNORM_ALGORITHM,),
           host_only=True, nhwc=True,  # its reference lives in kernels.cu
           log=_legacy_log(x_layer("bn"), first_call("bn"), lambda call: call.args.get("mode"))),
    ApiDef(Api.ACTIVATION, "bench_activation", "cudnn_activation.cu.j2", ApiFamily.LEGACY, "cudnn", activation_job,
           columns=(*OP_HEAD, DIMS4, choice("act", ACTIVATION_MODE), Column("coef", Kind.REAL), *OP_FORMAT),
           host_only=True, nhwc=True,
           log=_legacy_log(x_layer("act"), first_call("act"), lambda call: desc_field(call, "mode"))),
    ApiDef(Api.POOLING, "bench_pooling", "cudnn_pooling.cu.j2", ApiFamily.LEGACY, "cudnn", pooling_job,
           columns=(*OP_HEAD, ints("dims", 14), choice("mode", POOLING_MODE), *OP_FORMAT),
           host_only=True, nhwc=True,  # its reference lives in kernels.cu
           log=_legacy_log(io_layer("pool"), first_last_call("pool"), lambda call: desc_field(call, "mode"))),
    ApiDef(Api.SOFTMAX, "bench_softmax", "cudnn_softmax.cu.j2", ApiFamily.LEGACY, "cudnn", softmax_job,
           columns=(*OP_HEAD, DIMS4, *OP_FORMAT, choice("mode", SOFTMAX_MODE)), algorithms=(SOFTMAX_ALGORITHM,),
           host_only=True, nhwc=True,  # its reference lives in kernels.cu
           log=_legacy_log(_softmax_layer, _softmax_call,
                           lambda call: call.args.get("algo") or call.args.get("algorithm"))),
    ApiDef(Api.LRN, "bench_lrn", "cudnn_lrn.cu.j2", ApiFamily.LEGACY, "cudnn", lrn_job,
           columns=(*OP_HEAD, DIMS4, Column("size", Kind.INT), Column("alpha", Kind.REAL), Column("beta", Kind.REAL),
                    Column("bias", Kind.REAL), *OP_FORMAT),
           algorithms=(LRN_ALGORITHM,),
           log=_legacy_log(x_layer("lrn"), first_call("lrn"), lambda call: call.args.get("lrnMode"))),
    ApiDef(Api.ADD_TENSOR, "bench_add_tensor", "cudnn_add_tensor.cu.j2", ApiFamily.LEGACY, "cudnn", add_tensor_job,
           columns=(*OP_HEAD, ints("c", 4), ints("a", 4), *OP_FORMAT), algorithms=(ADD_TENSOR_ALGORITHM,),
           nhwc=True,
           log=_legacy_log(_elementwise_layer, _add_tensor_call, None)),
    ApiDef(Api.OP_TENSOR, "bench_op_tensor", "cudnn_op_tensor.cu.j2", ApiFamily.LEGACY, "cudnn", op_tensor_job,
           columns=(*OP_HEAD, ints("a", 4), ints("b", 4), choice("op", OP_TENSOR_OP), *OP_FORMAT),
           host_only=True, nhwc=True,  # its reference lives in kernels.cu
           log=_legacy_log(_elementwise_layer, _op_tensor_call, lambda call: desc_field(call, "opTensorOp"))),
)
