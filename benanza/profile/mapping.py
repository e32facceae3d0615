"""Map a profile bundle onto a model's layers: the analyzer's :class:`~benanza.analyze.inputs.Profile`.

Why: a framework run speaks its own names (ONNX Runtime renames and fuses nodes,
PyTorch reports ATen ops), the library logs speak shapes and engine configs, and
the kernel trace speaks kernel names and host launch times. The analyzer needs
one answer per model layer: its measured GPU time, the library call that ran it
as-executed, and whether the framework fused it into another layer. Three links,
each a pure function of the parsed bundle parts:

1. **layer <-> library call**: every layer and every logged call gets a shape
   *signature* (``conv`` x/w/y dims, pads, strides, dilations; ``gemm`` k and
   {m, n}; ``pool`` x/y dims; ...). Calls of one signature repeat once per run;
   the last run's calls are assigned to that signature's layers in order.
2. **framework node <-> layer**: ONNX Runtime: the optimized model's nodes cover
   the original layers between their input and output tensors (a Conv that
   absorbed a BatchNormalization outputs the BN's tensor); else the same node
   name, else op kind + shapes + order. PyTorch: ``benanza.node:<name>`` ranges
   written by ``benanza profile``, else the top-level ATen ops of a run aligned
   in order with the layers by op kind and input shape.
3. **GPU kernel <-> framework node**: each kernel's launching runtime call (Kineto
   correlation) has a host time; it falls inside one node's host range (PyTorch
   ranges are on the Kineto clock; ONNX Runtime's profile is aligned run by run
   to the Kineto ``model_run`` range and the launches it holds).

Layers that no link reaches are listed with the reason in :class:`Mapping`,
never dropped: every layer index appears in ``Profile.layers``.
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from math import prod
from pathlib import Path
from typing import Any

from benanza.errors import BenanzaError
from benanza.library import NO_COPY_OPS, PRECISIONS, Api, Fusion, Precision
from benanza.model.layer import SEPARATE_BIAS_OPS, FusionCandidate, Layer, Model, bias_add
from benanza.profile import cudnn_log
from benanza.profile.bundle import Bundle, Framework, read_bundle
from benanza.profile.cublas_log import GemmCall, lt_algorithm_name
from benanza.profile.kineto import Annotation, CpuEvent, GpuEvent, KinetoTrace, busy_time
from benanza.profile.ort_profile import NodeEvent, OrtProfile, OrtRun
from benanza.profile.ranges import NODE_RANGE, RUN_RANGE
from benanza.records import ExecutedCall, KernelSpan, LayerProfile, OverheadKind, Profile, UnmappedWork

Signature = tuple
SUCCESS = "CUDNN_STATUS_SUCCESS"


# ---------------------------------------------------------------- signatures


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


# ---------------------------------------------------------------- as-executed calls

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
# (main op family, roles of the pointwise ops after it) -> fusion pattern, first match wins.
GRAPH_FUSIONS: list[tuple[str, frozenset[str], Fusion]] = [
    ("conv", frozenset({"add", "act"}), Fusion.CONV_BIAS_ADD_ACT),
    ("conv", frozenset({"act"}), Fusion.CONV_BIAS_ACT),
    ("conv", frozenset({"bias"}), Fusion.CONV_BIAS),
    ("gemm", frozenset({"act"}), Fusion.GEMM_BIAS_ACT),
    ("gemm", frozenset({"bias"}), Fusion.GEMM_BIAS),
]
GRAPH_FAMILY = {"CONVOLUTION_FORWARD": "conv", "MATMUL": "gemm"}
# cuBLASLt epilogue -> fusion pattern.
LT_EPILOGUES: dict[str, Fusion] = {"BIAS": Fusion.GEMM_BIAS, "RELU_BIAS": Fusion.GEMM_BIAS_ACT,
                                   "GELU_BIAS": Fusion.GEMM_BIAS_ACT, "RELU": Fusion.GEMM_BIAS_ACT}


def _desc_field(call: cudnn_log.ExecutedCall, name: str) -> str | None:
    return next((d[name] for d in call.descriptors.values() if name in d), call.args.get(name))


# Legacy cuDNN API -> how its "algorithm" is spelled: the enum the call was made with (the
# benchmarks of an API with no algorithm choice use the same mode spelling).
LEGACY_ALGORITHM: dict[str, Callable[[cudnn_log.ExecutedCall], str | None]] = {
    Api.CONV_FWD.value: lambda c: c.algo,
    Api.CONV_BIAS_ACT.value: lambda c: c.algo,
    Api.POOLING.value: lambda c: _desc_field(c, "mode"),
    Api.ACTIVATION.value: lambda c: _desc_field(c, "mode"),
    Api.LRN.value: lambda c: c.args.get("lrnMode"),
    Api.SOFTMAX.value: lambda c: c.args.get("algo") or c.args.get("algorithm"),
    Api.BATCHNORM_INF.value: lambda c: c.args.get("mode"),
    Api.OP_TENSOR.value: lambda c: _desc_field(c, "opTensorOp"),
}
DEFAULT_ALGORITHM = "default"


def _pointwise_roles(call: cudnn_log.ExecutedCall) -> set[str]:
    roles: set[str] = set()
    for op in call.operations[1:]:
        if op.kind != "POINTWISE":
            continue
        if op.mode in ACTIVATION_MODES:
            roles.add("act")
        elif op.mode == "ADD":
            b = _tensor(op, "bDesc", "b")
            roles.add("bias" if b is not None and prod(b.dims[2:]) == 1 and "bias" not in roles else "add")
    return roles


def _graph_fusion(call: cudnn_log.ExecutedCall) -> Fusion:
    family = GRAPH_FAMILY.get(call.operations[0].kind, "") if call.operations else ""
    roles = _pointwise_roles(call)
    return next((f for fam, need, f in GRAPH_FUSIONS if fam == family and need <= roles), Fusion.NONE)


def executed_call(call: cudnn_log.ExecutedCall | GemmCall) -> ExecutedCall:
    """The analyzer's as-executed description of one logged call (the fusion key is set by the caller)."""
    if isinstance(call, GemmCall):
        prec = CUDA_PRECISION.get(call.a_type, Precision.FP32)
        if prec is Precision.FP32 and call.tf32:
            prec = Precision.TF32
        if call.function.startswith("cublasLt"):
            fusion = LT_EPILOGUES.get((call.epilogue or "").removeprefix("CUBLASLT_EPILOGUE_"), Fusion.NONE)
            return ExecutedCall(Api.LT_MATMUL.value, lt_algorithm_name(call.algo or "") or (call.algo or ""),
                                prec.value, fusion.value)
        api = Api.SGEMV if call.kind == "gemv" and call.function.startswith("cublasSgemv") else Api.GEMM_EX
        return ExecutedCall(api.value, call.algo or "CUBLAS_GEMM_DEFAULT", prec.value)
    x = call.operations[0].tensors[0] if call.operations and call.operations[0].tensors else \
        (call.tensors[0] if call.tensors else None)
    prec = CUDNN_PRECISION.get(x.dtype if x else "", Precision.FP32)
    if call.engine_id is not None:
        if prec is Precision.FP32 and call.enable_tf32:
            prec = Precision.TF32
        return ExecutedCall(call.api or call.function, call.engine_config or "", prec.value,
                            _graph_fusion(call).value)
    if prec is Precision.FP32 and call.math_type in TF32_MATH:
        prec = Precision.TF32
    algo = LEGACY_ALGORITHM.get(call.api or "", lambda c: None)(call) or DEFAULT_ALGORITHM
    fusion = Fusion.CONV_BIAS_ACT if call.api == Api.CONV_BIAS_ACT.value else Fusion.NONE
    return ExecutedCall(call.api or call.function, algo, prec.value, fusion.value)


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


# ---------------------------------------------------------------- framework nodes -> layers


@dataclass(frozen=True)
class NodeLayers:
    """One framework node (ORT node, PyTorch range or top-level op) and the layers it ran (anchor first)."""

    name: str
    op: str
    layers: tuple[int, ...]


# ONNX Runtime's fused/contrib op -> the ONNX op of its anchor layer.
ORT_OPS: dict[str, str] = {"FusedConv": "Conv", "NhwcConv": "Conv", "FusedGemm": "Gemm", "FusedMatMul": "MatMul"}
# Framework-only ONNX Runtime nodes: what their GPU work is, as overhead.
ORT_OVERHEAD: dict[str, OverheadKind] = {
    "MemcpyFromHost": OverheadKind.COPY, "MemcpyToHost": OverheadKind.COPY, "Transpose": OverheadKind.EXTRA_LAYER,
    "Pad": OverheadKind.EXTRA_LAYER, "Cast": OverheadKind.EXTRA_LAYER}


def _producers(model: Model) -> dict[str, int]:
    return {t.name: layer.index for layer in model.layers for t in layer.outputs}


def covered_layers(model: Model, inputs: Iterable[str], outputs: Iterable[str]) -> tuple[int, ...]:
    """Layers that lie between a node's input and output tensors (all of them, if the node is a fusion)."""
    producer = _producers(model)
    stop = set(inputs)
    seen: set[int] = set()
    todo = [producer[o] for o in outputs if o in producer and o not in stop]
    while todo:
        index = todo.pop()
        if index in seen:
            continue
        seen.add(index)
        for t in model.layers[index].inputs:
            if not t.constant and t.name not in stop and t.name in producer:
                todo.append(producer[t.name])
    return tuple(sorted(seen))


def _optimized_nodes(path: Path | None, model: Model) -> dict[str, tuple[str, tuple[int, ...]]]:
    """ORT's optimized graph: node name -> (op, covered layers); empty when absent or unreadable."""
    if path is None:
        return {}
    import onnx  # ONNX stays at the edge: only this reader of the optimized model needs it

    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # onnx raises several types; all mean the file is not a readable model
        raise BenanzaError(f"{path}: cannot read ORT's optimized model: {str(exc).splitlines()[0]}") from None
    return {n.name: (n.op_type, covered_layers(model, n.input, n.output)) for n in proto.graph.node if n.name}


def _shape_match(node: NodeEvent, layer: Layer) -> bool:
    return (bool(node.inputs) and bool(layer.inputs) and tuple(node.inputs[0][1]) == tuple(layer.inputs[0].shape)
            and bool(node.outputs) and bool(layer.outputs)
            and tuple(node.outputs[0][1]) == tuple(layer.outputs[0].shape))


def ort_node_layers(model: Model, nodes: Sequence[NodeEvent], optimized: Path | None) -> list[NodeLayers]:
    """Each ORT node of a run with the layers it ran: optimized-graph coverage, then name, then shapes + order."""
    graph = _optimized_nodes(optimized, model)
    by_name = {layer.name: layer for layer in model.layers}
    taken: set[int] = set()
    out: list[NodeLayers | None] = [None] * len(nodes)
    for i, node in enumerate(nodes):  # exact: the optimized graph's tensors, then the node name
        covered = graph.get(node.name, (node.op, ()))[1]
        if not covered:
            layer = by_name.get(node.name)
            if layer is not None and ORT_OPS.get(node.op, node.op) == layer.op:
                covered = (layer.index,)
        covered = tuple(c for c in covered if c not in taken)
        if covered:
            taken.update(covered)
            out[i] = NodeLayers(node.name, node.op, covered)
    for i, node in enumerate(nodes):  # the rest: first free layer of the same op and shapes
        if out[i] is not None:
            continue
        op = ORT_OPS.get(node.op, node.op)
        layer = next((x for x in model.layers if x.index not in taken and x.op == op and _shape_match(node, x)),
                     None)
        if layer is not None:
            taken.add(layer.index)
        out[i] = NodeLayers(node.name, node.op, (layer.index,) if layer else ())
    return [n for n in out if n is not None]


# ONNX op -> the top-level ATen ops PyTorch (and onnx2torch) runs it as.
TORCH_OPS: dict[str, frozenset[str]] = {
    "Conv": frozenset({"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution", "aten::_convolution"}),
    "Relu": frozenset({"aten::relu", "aten::relu_"}),
    "Sigmoid": frozenset({"aten::sigmoid"}),
    "Tanh": frozenset({"aten::tanh"}),
    "Clip": frozenset({"aten::clamp", "aten::clip", "aten::hardtanh"}),
    "LeakyRelu": frozenset({"aten::leaky_relu"}),
    "Elu": frozenset({"aten::elu"}),
    "MaxPool": frozenset({"aten::max_pool1d", "aten::max_pool2d", "aten::max_pool3d"}),
    "AveragePool": frozenset({"aten::avg_pool1d", "aten::avg_pool2d", "aten::avg_pool3d"}),
    "GlobalAveragePool": frozenset({"aten::adaptive_avg_pool2d", "aten::mean"}),
    "GlobalMaxPool": frozenset({"aten::adaptive_max_pool2d", "aten::amax"}),
    "Gemm": frozenset({"aten::linear", "aten::addmm", "aten::matmul", "aten::mm"}),
    "MatMul": frozenset({"aten::matmul", "aten::mm", "aten::bmm", "aten::linear"}),
    "Softmax": frozenset({"aten::softmax", "aten::_softmax"}),
    "BatchNormalization": frozenset({"aten::batch_norm"}),
    "Add": frozenset({"aten::add", "aten::add_"}),
    "Sum": frozenset({"aten::add", "aten::add_"}),
    "Mul": frozenset({"aten::mul", "aten::mul_"}),
    "Concat": frozenset({"aten::cat", "aten::concat"}),
    "Flatten": frozenset({"aten::flatten"}),
    "Reshape": frozenset({"aten::reshape", "aten::view"}),
    "Transpose": frozenset({"aten::permute", "aten::transpose"}),
    "Dropout": frozenset({"aten::dropout"}),
}
LOOKAHEAD = 8  # top-level ops skipped at most to find a layer's op (framework-only ops in between)


def top_level_ops(ops: Sequence[CpuEvent]) -> list[CpuEvent]:
    """Ops not nested in another op of the same thread (the framework's view of a run)."""
    out: list[CpuEvent] = []
    open_until: dict[int, float] = {}
    for op in sorted(ops, key=lambda o: (o.start_us, -o.dur_us)):
        if op.start_us < open_until.get(op.tid, float("-inf")):
            continue
        out.append(op)
        open_until[op.tid] = op.end_us
    return out


def torch_op_layers(model: Model, ops: Sequence[CpuEvent]) -> list[NodeLayers]:
    """Top-level ATen ops of one run aligned in order with the layers by op kind and first input shape."""
    out = [NodeLayers(op.name, op.name, ()) for op in ops]
    pos = 0
    for layer in model.layers:
        names = TORCH_OPS.get(layer.op, frozenset())
        for j in range(pos, min(len(ops), pos + LOOKAHEAD)):
            op = ops[j]
            dims = op.input_dims[0] if op.input_dims else ()
            if op.name in names and (not dims or tuple(dims) == tuple(layer.inputs[0].shape)):
                out[j] = NodeLayers(op.name, op.name, (layer.index,))
                pos = j + 1
                break
    return out


def _norm(name: str) -> str:
    return re.sub(r"\W", "_", name)


def torch_range_layers(model: Model, ranges: Sequence[Annotation]) -> list[NodeLayers]:
    """``benanza.node:<module>`` ranges (written by ``benanza profile``) matched to layers by name."""
    by_name = {_norm(layer.name): layer.index for layer in model.layers}
    out = []
    for r in ranges:
        name = r.name.removeprefix(NODE_RANGE)
        index = by_name.get(_norm(name))
        out.append(NodeLayers(name, "", () if index is None else (index,)))
    return out


# ---------------------------------------------------------------- kernels -> nodes, per run


@dataclass
class RunWork:
    """One run's GPU events, each with the framework node that launched it (None: before any node)."""

    origin_us: float  # the run's start (host range), kernel spans are relative to it
    nodes: list[NodeLayers] = field(default_factory=list)  # every node of the run, with or without kernels
    events: list[tuple[GpuEvent, NodeLayers | None]] = field(default_factory=list)
    approximate: int = 0  # launches that fell between node ranges (given to the node before them)


def _launch_times(trace: KinetoTrace) -> dict[int, float]:
    return {c.correlation: c.start_us for c in trace.runtime_calls if c.correlation is not None}


def _run_ranges(trace: KinetoTrace) -> list[Annotation]:
    return [a for a in trace.annotations if a.name == RUN_RANGE and not a.gpu]


def _events_by_run(trace: KinetoTrace, runs: Sequence[Annotation]) -> list[list[tuple[GpuEvent, float]]]:
    """GPU events of each run with their host launch time (events with no launch record use their GPU start)."""
    launch = _launch_times(trace)
    out: list[list[tuple[GpuEvent, float]]] = [[] for _ in runs]
    gpu_ranges = [a for a in trace.annotations if a.name == RUN_RANGE and a.gpu]
    for ev in trace.gpu_events():
        t = launch.get(ev.correlation) if ev.correlation is not None else None
        for i, r in enumerate(runs):
            if t is not None and r.start_us <= t <= r.end_us:
                out[i].append((ev, t))
                break
            if t is None and any(g.external_id == r.external_id and g.start_us <= ev.start_us <= g.end_us
                                 for g in gpu_ranges):
                out[i].append((ev, ev.start_us))
                break
    return out


def _node_at(t: float, spans: Sequence[tuple[float, float, NodeLayers]]) -> tuple[NodeLayers | None, bool]:
    """The node whose host range holds ``t``; else the last one that started before it (approximate)."""
    before = None
    for start, end, node in spans:
        if start <= t <= end:
            return node, False
        if start <= t:
            before = node
    return before, before is not None


def torch_runs(model: Model, trace: KinetoTrace) -> tuple[list[RunWork], list[str]]:
    runs = _run_ranges(trace)
    ranges = [a for a in trace.annotations if a.name.startswith(NODE_RANGE) and not a.gpu]
    notes = [] if ranges else ["no benanza.node ranges in the trace: layers matched to top-level ATen ops by "
                               "op kind, input shape and order"]
    out = []
    for r, events in zip(runs, _events_by_run(trace, runs), strict=True):
        if ranges:
            inside = [a for a in ranges if r.start_us <= a.start_us <= r.end_us]
            spans = [(a.start_us, a.end_us, n) for a, n in zip(inside, torch_range_layers(model, inside),
                                                                 strict=True)]
            spans.sort(key=lambda s: s[1] - s[0])  # innermost first
        else:
            ops = top_level_ops([o for o in trace.cpu_ops if r.start_us <= o.start_us <= r.end_us])
            spans = [(o.start_us, o.end_us, n) for o, n in zip(ops, torch_op_layers(model, ops), strict=True)]
        work = RunWork(r.start_us, [n for _, _, n in spans])
        for ev, t in events:
            node = next((n for s, e, n in spans if s <= t <= e), None)
            work.events.append((ev, node))
        out.append(work)
    return out, notes


# What kernels an ONNX Runtime node of each op launches (substrings of their names): the
# evidence that aligns ORT's clock with the kernel trace's (_ort_offset).  A node whose op
# is missing here still gets its kernels; it only adds no evidence.
ORT_KERNELS: dict[str, tuple[str, ...]] = {
    "Conv": ("fprop", "convolve", "fft2d", "flip_filter", "winograd", "op_generic_tensor", "xmma_gemm"),
    "Gemm": ("gemm", "gemv", "splitKreduce", "BroadcastBias"),
    "MatMul": ("gemm", "gemv", "splitKreduce"),
    "Relu": ("OP_Relu",), "Concat": ("Concat",), "BatchNormalization": ("bn_fw",),
    "Add": ("BinaryElementWise",), "Mul": ("BinaryElementWise",), "Sum": ("BinaryElementWise", "Variadic"),
    "MaxPool": ("pool",), "AveragePool": ("pool", "Pool"), "GlobalAveragePool": ("pool", "Pool"),
    "Softmax": ("softmax",), "LRN": ("lrn",),
}


def _ort_offset(run_range: Annotation, run: OrtRun, events: Sequence[tuple[GpuEvent, float]]) -> float:
    """Kineto time minus ORT time for one run.

    The two clocks are unrelated; ORT's Run() lies inside the Kineto range and holds every
    launch, which bounds the offset to an interval hundreds of microseconds wide, many
    nodes long.  Inside it, take the middle of the stretch where the most launches fall in
    a node of an op that launches such kernels (``ORT_KERNELS``): a Concat kernel in a
    Concat node, a convolution kernel in a Conv node.
    """
    lo, hi = run_range.start_us - run.ts_us, run_range.end_us - (run.ts_us + run.dur_us)
    launches = [t for _, t in events]
    if launches:
        lo2, hi2 = max(lo, max(launches) - (run.ts_us + run.dur_us)), min(hi, min(launches) - run.ts_us)
        if lo2 <= hi2:
            lo, hi = lo2, hi2
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for n in run.nodes:
        spans[ORT_OPS.get(n.op, n.op)].append((n.ts_us, n.ts_us + n.dur_us))
    marks: list[tuple[float, int]] = []  # +1 where an offset puts a launch in a node of its op, -1 where it stops
    for ev, t in events:
        for op, hints in ORT_KERNELS.items():
            if any(h in ev.name for h in hints):
                for start, end in spans.get(op, ()):
                    a, b = max(lo, t - end), min(hi, t - start)
                    if a <= b:
                        marks += [(a, 1), (b, -1)]
    if not marks:
        return (lo + hi) / 2
    marks.sort(key=lambda m: (m[0], -m[1]))  # closed intervals: a start before an end at the same offset
    best, best_span, count = 0, (lo, hi), 0
    for (x, delta), (nxt, _) in itertools.pairwise(marks):  # count holds from x to the next mark
        count += delta
        if count > best or (count == best and nxt - x > best_span[1] - best_span[0]):
            best, best_span = count, (x, nxt)
    return (best_span[0] + best_span[1]) / 2


def ort_runs(model: Model, trace: KinetoTrace, profile: OrtProfile, optimized: Path | None
             ) -> tuple[list[RunWork], list[str]]:
    runs = _run_ranges(trace)
    notes: list[str] = []
    if len(profile.runs) < len(runs):
        return [], [f"{profile.path}: {len(profile.runs)} ORT runs but {len(runs)} model_run ranges in the "
                    "kernel trace: kernels not linked to nodes"]
    ort = profile.runs[len(profile.runs) - len(runs):]  # the profiled runs are the last ones (warm-up first)
    node_layers = ort_node_layers(model, ort[-1].nodes, optimized) if ort else []
    by_name = {n.name: n for n in node_layers}
    out = []
    for r, o, events in zip(runs, ort, _events_by_run(trace, runs), strict=True):
        c = _ort_offset(r, o, events)
        spans = [(n.ts_us + c, n.ts_us + n.dur_us + c, by_name.get(n.name, NodeLayers(n.name, n.op, ())))
                 for n in o.nodes]
        work = RunWork(r.start_us, [n for _, _, n in spans])
        for ev, t in events:
            node, approx = _node_at(t, spans)
            work.approximate += approx
            work.events.append((ev, node))
        out.append(work)
    approx = sum(w.approximate for w in out)
    if approx:
        notes.append(f"{approx} kernel launch(es) fell between ORT node ranges: given to the node before them")
    return out, notes


# ---------------------------------------------------------------- assembling the profile


@dataclass(frozen=True)
class Mapping:
    """The mapped profile plus what could not be mapped, and why."""

    profile: Profile
    nodes: dict[int, str]  # layer index -> the framework node (or op) that ran it
    calls: dict[int, ExecutedCall]
    runs_in_logs: int | None
    unmapped_layers: tuple[tuple[int, str], ...]  # (layer index, why)
    notes: tuple[str, ...] = ()


def _fusion_key(model: Model, anchor: int, call: ExecutedCall) -> str | None:
    cand: FusionCandidate | None = next((f for f in model.fusions if f.layers and f.layers[0] == anchor
                                         and f.pattern == call.fusion), None)
    return cand.key if cand else None


def _fused_members(model: Model, nodes: dict[int, str], fused: dict[int, int]) -> None:
    """Layers no node ran that belong to a fusion candidate whose anchor ran: fused into the anchor (in place)."""
    for cand in model.fusions:
        anchor = cand.layers[0]
        if anchor in nodes:
            for member in cand.layers[1:]:
                if member not in nodes and member not in fused:
                    fused[member] = anchor


def _kind(ev: GpuEvent, node: NodeLayers | None) -> OverheadKind:
    if ev.kind != "kernel":
        return OverheadKind.COPY
    return ORT_OVERHEAD.get(node.op, OverheadKind.KERNEL) if node else OverheadKind.KERNEL


# Frameworks that add a convolution's bias in a kernel of their own after the library call
# (ATen's convolution: ``output.add_(bias)``), by the prefix of that kernel's name.  Such a
# kernel is part of the layer's measured time, and its benchmark counterpart is the layer's
# bias add (cudnnAddTensor), as for ORT's logged one.
BIAS_KERNELS: dict[str, str] = {Framework.PYTORCH.value: "void at::native::"}


def _kernel_bias_add(bundle: Bundle, layer: Layer, call: ExecutedCall | None, kernels: Sequence[KernelSpan]
                     ) -> tuple[ExecutedCall, ...]:
    """The bias add of a layer whose framework added its bias in its own kernel, else ()."""
    prefix = BIAS_KERNELS.get(bundle.meta.framework)
    has_bias = len(layer.inputs) > 2 and bool(layer.inputs[2].name)
    if call is None or prefix is None or layer.op not in SEPARATE_BIAS_OPS or not has_bias \
            or call.fusion != Fusion.NONE.value or not any(k.name.startswith(prefix) for k in kernels):
        return ()
    storage = CUDNN_PRECISION[PRECISIONS[Precision(call.precision)].cudnn_dtype]  # tf32 math: fp32 data
    return (ExecutedCall(Api.ADD_TENSOR.value, "default", storage.value, key=bias_add(layer).key),)


@dataclass(frozen=True)
class LoggedCalls:
    """What a bundle's cuDNN/cuBLAS logs say each layer ran, by layer index."""

    calls: dict[int, ExecutedCall]  # a fused call carries its fusion key
    extra: dict[int, tuple[ExecutedCall, ...]]  # calls after the main one (ORT's separate bias add)
    runs_in_logs: int
    notes: tuple[str, ...]


def logged_calls(model: Model, bundle: Bundle) -> LoggedCalls:
    """The library calls of a bundle assigned to the model's layers (no kernel trace needed)."""
    raw_calls, notes = _library_calls(bundle)
    lib_calls, bias_of = split_bias_adds(raw_calls)
    assigned, runs_in_logs, assign_notes = assign_calls(model.layers, lib_calls)
    calls = {}
    for i, c in assigned.items():
        call = executed_call(c)
        calls[i] = call if call.fusion == Fusion.NONE.value else replace(call, key=_fusion_key(model, i, call))
    extra = {i: (replace(executed_call(bias_of[id(c)]), key=bias_add(model.layers[i]).key),)
             for i, c in assigned.items() if id(c) in bias_of}
    return LoggedCalls(calls, extra, runs_in_logs, (*notes, *assign_notes))


def executed_calls(model: Model, bundle: Bundle) -> list[tuple[str, ExecutedCall]]:
    """(layer key, call) of every call the bundle's logs assign to a layer, its bias adds included."""
    logged = logged_calls(model, bundle)
    return [(model.layers[i].key, call) for i in sorted(logged.calls)
            for call in (logged.calls[i], *logged.extra.get(i, ()))]


def map_bundle_report(model: Model, bundle: Bundle | str | Path) -> Mapping:
    """Map every part of a bundle that is there onto the model's layers (see the module doc)."""
    if not isinstance(bundle, Bundle):
        bundle = read_bundle(bundle)
    logged = logged_calls(model, bundle)
    notes = [*bundle.notes, *logged.notes]
    calls, bias_calls, runs_in_logs = dict(logged.calls), logged.extra, logged.runs_in_logs

    trace = bundle.torch_trace
    work: list[RunWork] = []
    if trace is None:
        notes.append(f"{bundle.path}: no kernel trace (torch_trace.json): no measured GPU times")
    elif bundle.meta.framework == Framework.PYTORCH.value:
        work, more = torch_runs(model, trace)
        notes += more
    elif bundle.ort_profile is not None:
        work, more = ort_runs(model, trace, bundle.ort_profile, bundle.optimized_model)
        notes += more
    else:
        notes.append(f"{bundle.path}: no ORT profile: kernels cannot be linked to nodes")

    nodes: dict[int, str] = {}
    fused: dict[int, int] = {}
    if bundle.ort_profile is not None and bundle.ort_profile.runs:
        framework_nodes: list[NodeLayers] = ort_node_layers(model, bundle.ort_profile.runs[-1].nodes,
                                                            bundle.optimized_model)
    else:
        framework_nodes = work[-1].nodes if work else []
    for node in framework_nodes:
        if node.layers:
            nodes.setdefault(node.layers[0], node.name)
            for member in node.layers[1:]:
                fused.setdefault(member, node.layers[0])
    _fused_members(model, nodes, fused)

    per_layer: dict[int, list[list[GpuEvent]]] = defaultdict(list)
    run_busy: list[float] = []
    for w in work:
        mine: dict[int, list[GpuEvent]] = defaultdict(list)
        for ev, node in w.events:
            if node and node.layers:
                mine[node.layers[0]].append(ev)
        for index, evs in mine.items():
            per_layer[index].append(evs)
        run_busy.append(busy_time(ev.interval for ev, _ in w.events) / 1e3 if w.events else 0.0)
    rep = None
    if work:
        median = statistics.median_low(run_busy)
        rep = work[run_busy.index(median)]

    layers: dict[int, LayerProfile] = {}
    for layer in model.layers:
        i = layer.index
        call = calls.get(i)
        runs = per_layer.get(i, [])
        gpu_ms = statistics.median(busy_time(e.interval for e in evs) / 1e3 for evs in runs) if runs else None
        spans: tuple[KernelSpan, ...] = ()
        count = None
        if rep is not None:
            mine = [ev for ev, node in rep.events if node and node.layers and node.layers[0] == i]
            spans = tuple(KernelSpan(ev.name, ev.start_us - rep.origin_us, ev.dur_us) for ev in mine)
            count = len(mine) if (mine or i in nodes) else None
        extra = bias_calls.get(i, ()) or _kernel_bias_add(bundle, layer, call, spans)
        layers[i] = LayerProfile(gpu_ms=gpu_ms, kernel_count=count, executed=call, fused_into=fused.get(i),
                                 kernels=spans, extra=extra)

    unmapped_work: tuple[UnmappedWork, ...] = ()
    if rep is not None:
        unmapped_work = tuple(UnmappedWork(ev.name, ev.dur_us / 1e3, _kind(ev, node))
                              for ev, node in rep.events if not (node and node.layers))
    missing, elided = [], []
    for layer in model.layers:
        i = layer.index
        if i in nodes or i in fused:
            continue
        if i in calls and not work:
            continue  # the library logs place it; with no kernel trace there is no node to find
        if layer.op in NO_COPY_OPS and work:
            elided.append(layer.name)  # inference no-op (Dropout, Reshape...): frameworks drop it
            continue
        why = "no framework node or op matched it" if work or bundle.ort_profile is not None else \
            "no library call matched it" if layer_signature(layer) is not None else "no part of the bundle names it"
        missing.append((i, f"{layer.op} '{layer.name}': {why}"))
    if elided:
        notes.append(f"{len(elided)} alias layer(s) ran as no framework node (elided, no GPU work): "
                     f"{', '.join(elided[:5])}{' ...' if len(elided) > 5 else ''}")
    profile = Profile(layers=layers, e2e_ms=bundle.meta.latency_ms.median,
                      gpu_busy_ms=statistics.median(run_busy) if run_busy else None,
                      kernel_count=sum(1 for ev, _ in rep.events if ev.kind == "kernel") if rep else None,
                      unmapped=unmapped_work, framework=bundle.meta.framework)
    return Mapping(profile=profile, nodes=nodes, calls=calls, runs_in_logs=runs_in_logs,
                   unmapped_layers=tuple(missing), notes=tuple(notes))


def map_bundle(model: Model, bundle: Bundle | str | Path) -> Profile:
    """The analyzer's Profile of a bundle (use :func:`map_bundle_report` for what could not be mapped)."""
    return map_bundle_report(model, bundle).profile


def summary(mapping: Mapping) -> dict[str, Any]:
    """Counts for the CLI: layers with a node, a call, GPU time; unmapped layers and GPU work."""
    p = mapping.profile
    return {"layers": len(p.layers), "with node": len(mapping.nodes),
            "fused into another": sum(1 for lp in p.layers.values() if lp.fused_into is not None),
            "with library call": sum(1 for lp in p.layers.values() if lp.executed is not None),
            "with GPU time": sum(1 for lp in p.layers.values() if lp.gpu_ms is not None),
            "unmapped layers": len(mapping.unmapped_layers), "unmapped GPU work": len(p.unmapped),
            "end-to-end (ms)": p.e2e_ms, "GPU busy (ms)": p.gpu_busy_ms}
