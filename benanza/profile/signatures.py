"""Shape signatures of model layers and logged library calls (link 1 of the mapping: a layer and
the calls of its signature are the same work)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod

from benanza.library import Api
from benanza.model.layer import Layer
from benanza.profile import cudnn_log
from benanza.profile.cublas_log import GemmCall

Signature = tuple
SUCCESS = "CUDNN_STATUS_SUCCESS"


def _nd(shape: Sequence[int], rank: int = 4) -> tuple[int, ...]:
    """cuDNN describes tensors with at least 4 dims: (N, C) is (N, C, 1, 1)."""
    dims = tuple(int(d) for d in shape)
    return dims + (1,) * (rank - len(dims)) if len(dims) < rank else dims


def _conv_sig(layer: Layer) -> Signature | None:
    if len(layer.inputs) < 2 or not layer.outputs:
        return None
    pads = list(layer.attrs.get("pads", []))
    n = len(pads) // 2
    return ("conv", _nd(layer.inputs[0].shape), _nd(layer.inputs[1].shape), _nd(layer.outputs[0].shape),
            tuple(pads[:n]), tuple(pads[n:]), tuple(layer.attrs.get("strides", ())),
            tuple(layer.attrs.get("dilations", ())))


def _gemm_sig(layer: Layer) -> Signature | None:
    if len(layer.inputs) < 2 or not layer.outputs:
        return None
    a, b, y = layer.inputs[0].shape, layer.inputs[1].shape, layer.outputs[0].shape
    if layer.op == "Gemm":
        trans_a = layer.attrs.get("transA", 0)
        m, k, batch = (a[1], a[0], 1) if trans_a else (a[0], a[1], 1)
    elif len(b) <= 2:  # MatMul with a 2-D weight: leading dims of A fold into m
        m, k, batch = prod(a[:-1]), a[-1], 1
    else:
        m, k, batch = a[-2], a[-1], prod(y[:-2])
    return ("gemm", int(k), tuple(sorted((int(m), int(y[-1])))), int(batch))


def _other_input(layer: Layer) -> tuple[int, ...]:
    rank = len(layer.outputs[0].shape)
    other = layer.inputs[1].shape if len(layer.inputs) > 1 else layer.outputs[0].shape
    return _nd((1,) * (rank - len(other)) + tuple(other))


def _io(kind: str) -> Callable[[Layer], Signature | None]:
    return lambda layer: (kind, _nd(layer.inputs[0].shape), _nd(layer.outputs[0].shape)) if layer.outputs else None


def _x(kind: str) -> Callable[[Layer], Signature | None]:
    return lambda layer: (kind, _nd(layer.inputs[0].shape))


# ONNX op -> its signature (the kind of call that can run it, and the shapes that call logs).
LAYER_SIGNATURES: dict[str, Callable[[Layer], Signature | None]] = {
    "Conv": _conv_sig,
    "Gemm": _gemm_sig,
    "MatMul": _gemm_sig,
    **{op: _io("pool") for op in ("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool")},
    **{op: _x("act") for op in ("Relu", "Sigmoid", "Tanh", "Clip", "Elu", "LeakyRelu")},
    "LRN": _x("lrn"),
    "BatchNormalization": _x("bn"),
    "Softmax": lambda layer: ("softmax", prod(layer.inputs[0].shape)),
    **{op: (lambda layer, kind=kind: (kind, _nd(layer.outputs[0].shape), _other_input(layer)))
       for op, kind in (("Add", "add"), ("Sum", "add"), ("Mul", "mul"))},
}


def layer_signature(layer: Layer) -> Signature | None:
    fn = LAYER_SIGNATURES.get(layer.op)
    if fn is None or not layer.inputs:
        return None
    return fn(layer)


def _desc_field(call: cudnn_log.ExecutedCall, name: str) -> str | None:
    return next((d[name] for d in call.descriptors.values() if name in d), call.args.get(name))


def _tensor(call: cudnn_log.ExecutedCall | cudnn_log.Operation, *roles: str) -> cudnn_log.TensorDesc | None:
    tensors = call.tensors
    return next((t for role in roles for t in tensors if t.role == role), None)


def _graph_conv_sig(call: cudnn_log.ExecutedCall) -> Signature | None:
    op = call.operations[0]
    x, w, y = _tensor(op, "xDesc", "x"), _tensor(op, "wDesc", "w"), _tensor(op, "yDesc", "y")
    if x is None or w is None or y is None:
        return None
    return ("conv", _nd(x.dims), _nd(w.dims), _nd(y.dims), op.pre_padding, op.post_padding, op.strides,
            op.dilations)


def _graph_matmul_sig(call: cudnn_log.ExecutedCall) -> Signature | None:
    op = call.operations[0]
    a, c = _tensor(op, "aDesc", "a"), _tensor(op, "cDesc", "c")
    if a is None or c is None or len(a.dims) < 2:
        return None
    return ("gemm", a.dims[-1], tuple(sorted((prod(a.dims[:-1]) // max(1, prod(c.dims[:-2])), c.dims[-1]))),
            prod(c.dims[:-2]) or 1)


def _legacy_conv_sig(call: cudnn_log.ExecutedCall) -> Signature | None:
    x, w, y = _tensor(call, "xDesc"), _tensor(call, "wDesc"), _tensor(call, "yDesc")
    conv = call.descriptors.get("convDesc", {})
    if x is None or w is None or y is None:
        return None
    pads = cudnn_log._ints(conv.get("padA"))
    return ("conv", _nd(x.dims), _nd(w.dims), _nd(y.dims), pads, pads, cudnn_log._ints(conv.get("strideA")),
            cudnn_log._ints(conv.get("dilationA")))


def _first_last(kind: str) -> Callable[[cudnn_log.ExecutedCall], Signature | None]:
    def sig(call: cudnn_log.ExecutedCall) -> Signature | None:
        return (kind, _nd(call.tensors[0].dims), _nd(call.tensors[-1].dims)) if call.tensors else None
    return sig


def _first(kind: str) -> Callable[[cudnn_log.ExecutedCall], Signature | None]:
    return lambda call: (kind, _nd(call.tensors[0].dims)) if call.tensors else None


# cudnnOpTensor's operation -> the signature kind of the layers it can run.
OP_TENSOR_KINDS = {"CUDNN_OP_TENSOR_ADD": "add", "CUDNN_OP_TENSOR_MUL": "mul"}


def _add_sig(call: cudnn_log.ExecutedCall) -> Signature | None:
    dest = _tensor(call, "srcDestDesc", "cDesc", "CDesc")
    if call.api == Api.ADD_TENSOR.value:
        kind, other = "add", _tensor(call, "biasDesc", "aDesc", "ADesc")
    else:
        op = _desc_field(call, "opTensorOp") or ""
        kind, other = OP_TENSOR_KINDS.get(op, op.lower()), _tensor(call, "bDesc", "BDesc")
    return None if dest is None or other is None else (kind, _nd(dest.dims), _nd(other.dims))


# Api of a logged cuDNN call -> its signature.
CALL_SIGNATURES: dict[str, Callable[[cudnn_log.ExecutedCall], Signature | None]] = {
    Api.GRAPH_CONV.value: _graph_conv_sig,
    Api.GRAPH_MATMUL.value: _graph_matmul_sig,
    Api.CONV_FWD.value: _legacy_conv_sig,
    Api.CONV_BIAS_ACT.value: _legacy_conv_sig,
    Api.POOLING.value: _first_last("pool"),
    Api.ACTIVATION.value: _first("act"),
    Api.LRN.value: _first("lrn"),
    Api.BATCHNORM_INF.value: _first("bn"),
    Api.SOFTMAX.value: lambda call: ("softmax", prod(call.tensors[0].dims)) if call.tensors else None,
    Api.ADD_TENSOR.value: _add_sig,
    Api.OP_TENSOR.value: _add_sig,
}


def call_signature(call: cudnn_log.ExecutedCall | GemmCall) -> Signature | None:
    if isinstance(call, GemmCall):
        return ("gemm", call.k, tuple(sorted((call.m, call.n))), call.batch_count)
    fn = CALL_SIGNATURES.get(call.api or "")
    return fn(call) if fn else None
