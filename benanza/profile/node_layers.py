"""Framework nodes -> model layers (link 2 of the mapping): ONNX Runtime's optimized nodes and
PyTorch's ranges or ATen ops."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from benanza.errors import BenanzaError
from benanza.model.layer import Layer, Model
from benanza.profile.kineto import Annotation, CpuEvent
from benanza.profile.ort_profile import NodeEvent
from benanza.profile.ranges import NODE_RANGE
from benanza.profile.torch_module import module_of_node
from benanza.records import OverheadKind


@dataclass(frozen=True)
class NodeLayers:
    """One framework node (ORT node, PyTorch range or top-level op) and the layers it ran (anchor first)."""

    name: str
    op: str
    layers: tuple[int, ...]
    why: str = ""  # with no layers: why its GPU work reaches none (said to the user, aggregated)


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
    out = {n.name: (n.op_type, covered_layers(model, n.input, n.output)) for n in proto.graph.node if n.name}
    _through_internal_tensors(model, proto.graph.node, out)
    return out


# ONNX Runtime nodes that move no data when they reshape a tensor of their own between two of its nodes.
ORT_ALIASES = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Flatten"})


def _through_internal_tensors(model: Model, nodes: Sequence[object], graph: dict[str, tuple[str, tuple[int, ...]]]
                              ) -> None:
    """Nodes joined by tensors ORT made up (none of the model's) ran one computation between them:
    ORT's MatMul + Add -> Reshape, Gemm, Reshape covers the layers from the last Reshape (the one
    writing a model tensor), but the Gemm launched the kernels.  Within each such group the
    coverage goes to its first node that is no reshape (in place)."""
    known = {t.name for layer in model.layers for t in (*layer.inputs, *layer.outputs)}
    parent: dict[str, str] = {}

    def root(a: str) -> str:
        while parent.get(a, a) != a:
            a = parent[a]
        return a

    writer: dict[str, str] = {}
    order = [n for n in nodes if getattr(n, "name", "")]
    for n in order:
        for t in n.output:  # type: ignore[attr-defined]
            writer[t] = n.name  # type: ignore[attr-defined]
    for n in order:
        for t in n.input:  # type: ignore[attr-defined]
            if t and t not in known and t in writer:
                parent[root(n.name)] = root(writer[t])  # type: ignore[attr-defined]
    groups: dict[str, list[object]] = {}
    for n in order:
        groups.setdefault(root(n.name), []).append(n)  # type: ignore[attr-defined]
    for members in groups.values():
        if len(members) < 2:
            continue
        worker = next((m for m in members if m.op_type not in ORT_ALIASES), None)  # type: ignore[attr-defined]
        inside = {t for m in members for t in m.output if t not in known}  # type: ignore[attr-defined]
        covered = covered_layers(model, [t for m in members for t in m.input if t not in inside],  # type: ignore
                                 [t for m in members for t in m.output if t in known])  # type: ignore[attr-defined]
        if worker is None or not covered:
            continue
        for m in members:
            graph[m.name] = (graph[m.name][0], covered if m is worker else ())  # type: ignore[attr-defined]


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
    """``benanza.node:<name>`` ranges (written by ``benanza profile``) matched to layers: by the ONNX
    node's name (onnx2torch capture), else as a module path (``--torch-module`` capture) to the
    layers whose node scope is that module (``torch_module.module_of_node``; "" = the root's own)."""
    by_name = {_norm(layer.name): layer.index for layer in model.layers}
    by_module: dict[str, list[int]] = {}
    for layer in model.layers:
        by_module.setdefault(module_of_node(layer.name) or "", []).append(layer.index)
    out = []
    for r in ranges:
        name = r.name.removeprefix(NODE_RANGE)
        index = by_name.get(_norm(name))
        layers = (index,) if index is not None else tuple(by_module.get(name, ()))
        out.append(NodeLayers(name, "", layers))
    return out
