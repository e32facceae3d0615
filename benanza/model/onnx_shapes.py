"""Every tensor's shape and every small constant of an ONNX graph, before its layers are built.

Why: today's exporters write data-dependent shapes (Shape -> Gather -> Concat -> Reshape chains)
that onnx shape inference alone leaves open, so rounds of inference (with data propagation)
alternate with constant folding (``benanza.model.fold``) until every shape is known. This is
the part of the loader that works on the ONNX protobuf; ``onnx_import`` reads the file, sets the
batch and sequence dims and builds the layers from what this module resolves.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper, shape_inference

from benanza.errors import BenanzaError
from benanza.model import fold

# ONNX elem_type -> numpy spelling used in Tensor.dtype.
DTYPES: dict[int, str] = {
    TensorProto.FLOAT: "float32", TensorProto.FLOAT16: "float16", TensorProto.BFLOAT16: "bfloat16",
    TensorProto.DOUBLE: "float64", TensorProto.INT64: "int64", TensorProto.INT32: "int32",
    TensorProto.INT16: "int16", TensorProto.INT8: "int8", TensorProto.UINT64: "uint64",
    TensorProto.UINT32: "uint32", TensorProto.UINT16: "uint16", TensorProto.UINT8: "uint8",
    TensorProto.BOOL: "bool", TensorProto.STRING: "string",
    TensorProto.FLOAT8E4M3FN: "float8e4m3fn", TensorProto.FLOAT8E5M2: "float8e5m2",
}
DTYPE_ATTRS: dict[str, str] = {"Cast": "to"}  # attributes holding an ONNX elem_type
SMALL_CONSTANT = 4096  # constants up to this many elements keep their values during shape inference
MAX_ROUNDS = 64  # infer -> fold rounds; a chain of data-dependent shapes (Swin: one per block) takes one each


def _dtype_name(elem_type: int) -> str:
    return DTYPES.get(elem_type) or TensorProto.DataType.Name(elem_type).lower()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _attr_values(node: onnx.NodeProto) -> dict[str, Any]:
    """Attributes as plain Python / numpy values."""
    out: dict[str, Any] = {}
    for a in node.attribute:
        value = onnx.helper.get_attribute_value(a)
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        elif isinstance(value, TensorProto):
            value = numpy_helper.to_array(value)
        elif isinstance(value, onnx.GraphProto):
            value = f"<subgraph {value.name}>"  # control flow is not benchmarked, only named
        elif isinstance(value, list):
            value = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in value]
            value = [v if isinstance(v, (int, float, str)) else str(v) for v in value]
        out[a.name] = value
    dtype_attr = DTYPE_ATTRS.get(node.op_type)
    if dtype_attr in out:
        out[dtype_attr] = _dtype_name(int(out[dtype_attr]))
    return out


# --- constants -------------------------------------------------------------------------


class _Consts:
    """Known values: initializers (materialized only when a value is needed) and folded outputs."""

    def __init__(self, initializers: Iterable[TensorProto]) -> None:
        self._protos = {t.name: t for t in initializers}
        self._values: dict[str, np.ndarray] = {}

    def __contains__(self, name: str) -> bool:
        return name in self._values or name in self._protos

    def shape(self, name: str) -> tuple[int, ...]:
        if name in self._values:
            return tuple(self._values[name].shape)
        return tuple(int(d) for d in self._protos[name].dims)

    def dtype(self, name: str) -> str:
        if name in self._values:
            return str(self._values[name].dtype)
        return _dtype_name(self._protos[name].data_type)

    def value(self, name: str) -> np.ndarray:
        if name not in self._values:
            self._values[name] = numpy_helper.to_array(self._protos[name])
        return self._values[name]

    def add(self, name: str, value: np.ndarray) -> None:
        self._values[name] = np.asarray(value)


@dataclass
class _Resolved:
    """The outcome of folding and shape inference for one batch."""

    consts: _Consts
    folded: set[int]  # indices into the topologically sorted nodes
    shapes: dict[str, tuple[int, ...]]
    dtypes: dict[str, str]


def _topo_nodes(g: onnx.GraphProto, data_inputs: list[str], label: str) -> list[onnx.NodeProto]:
    """Nodes in an order where every input is ready (the file's order when it already is)."""
    ready = {"", *data_inputs, *(t.name for t in g.initializer)}
    pending = list(g.node)
    order: list[onnx.NodeProto] = []
    while pending:
        rest = []
        for node in pending:
            if all(name in ready for name in node.input):
                order.append(node)
                ready.update(node.output)
            else:
                rest.append(node)
        if len(rest) == len(pending):
            node = rest[0]
            missing = next(name for name in node.input if name not in ready)
            raise BenanzaError(f"{label}: node '{node.name or node.op_type}' reads tensor '{missing}' that no "
                               "input, initializer or node provides (or the graph has a cycle)")
        pending = rest
    return order


def _fold(nodes: list[onnx.NodeProto], proto: onnx.ModelProto, shapes: dict[str, tuple[int, ...]],
          label: str) -> tuple[_Consts, set[int]]:
    """Evaluate every node whose inputs are known; Shape/Size also fold on static activations."""
    consts = _Consts(proto.graph.initializer)
    folded: set[int] = set()
    for i, node in enumerate(nodes):
        if node.domain not in ("", "ai.onnx") or node.op_type not in fold.FOLDERS:
            continue
        names = [n for n in node.input if n]
        if node.op_type in fold.SHAPE_ONLY_OPS and names and names[0] not in consts:
            if names[0] not in shapes:
                continue
            inputs: list[np.ndarray | None] = [fold.shape_proxy(shapes[names[0]])]
        elif all(n in consts for n in names):
            inputs = [consts.value(n) if n else None for n in node.input]
        else:
            continue
        try:
            values = fold.fold_node(node.op_type, inputs, _attr_values(node))
        except (ValueError, IndexError, KeyError, TypeError) as exc:
            raise BenanzaError(f"{label}: cannot evaluate constant {node.op_type} node "
                               f"'{node.name or node.output[0]}': {_first_line(exc)}") from None
        for name, value in zip(node.output, values, strict=False):
            consts.add(name, value)
        folded.add(i)
    return consts, folded


def _value_info(name: str, elem_type: int, shape: Iterable[int] | None) -> onnx.ValueInfoProto:
    return onnx.helper.make_tensor_value_info(name, elem_type, None if shape is None else list(shape))


def _elem_type(dtype: str) -> int:
    return next((k for k, v in DTYPES.items() if v == dtype), TensorProto.UNDEFINED)


def _inference_proto(proto: onnx.ModelProto, nodes: list[onnx.NodeProto], consts: _Consts | None,
                     data_inputs: list[onnx.ValueInfoProto], value_info: list[onnx.ValueInfoProto]) -> onnx.ModelProto:
    """A light copy for shape inference: big constants are declared by shape, never copied."""
    g = onnx.GraphProto(name=proto.graph.name)
    g.node.extend(nodes)
    g.input.extend(data_inputs)
    produced = {o for n in nodes for o in n.output}
    needed = dict.fromkeys(n for node in nodes for n in node.input if n and n not in produced)
    data_names = {v.name for v in data_inputs}
    known = consts if consts is not None else _Consts(proto.graph.initializer)
    for name in needed:
        if name in data_names or name not in known:
            continue
        shape = known.shape(name)
        if int(np.prod(shape)) <= SMALL_CONSTANT and known.dtype(name) != "string":
            g.initializer.append(numpy_helper.from_array(np.array(known.value(name), order="C"), name))
        else:
            g.input.append(_value_info(name, _elem_type(known.dtype(name)), shape))
    for out in proto.graph.output:
        g.output.append(_value_info(out.name, out.type.tensor_type.elem_type, None))
    g.value_info.extend(v for v in value_info if v.name in produced)
    light = onnx.ModelProto(ir_version=max(proto.ir_version, 4), graph=g)
    light.opset_import.extend(proto.opset_import)
    light.functions.extend(proto.functions)
    return light


def _infer(light: onnx.ModelProto, label: str) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
    """Concrete shapes (only fully static ones) and dtypes of every tensor inference reaches."""
    try:
        inferred = shape_inference.infer_shapes(light, check_type=True, strict_mode=True, data_prop=True)
    except Exception as exc:  # onnx raises several error types here; all mean "inconsistent model"
        raise BenanzaError(f"{label}: shape inference failed: {_first_line(exc)}") from None
    shapes: dict[str, tuple[int, ...]] = {}
    dtypes: dict[str, str] = {}
    g = inferred.graph
    for v in [*g.input, *g.value_info, *g.output]:
        if not v.type.HasField("tensor_type"):
            continue
        tt = v.type.tensor_type
        if tt.elem_type:
            dtypes[v.name] = _dtype_name(tt.elem_type)
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            shapes[v.name] = tuple(int(d.dim_value) for d in tt.shape.dim)
    return shapes, dtypes


def _used_names(proto: onnx.ModelProto) -> set[str]:
    return {n for node in proto.graph.node for n in node.input} | {o.name for o in proto.graph.output}


def _resolve(proto: onnx.ModelProto, nodes: list[onnx.NodeProto], data_inputs: list[onnx.ValueInfoProto],
             value_info: list[onnx.ValueInfoProto], label: str) -> _Resolved:
    """Alternate shape inference and folding until every used tensor has a static shape."""
    used = _used_names(proto)
    light_nodes, consts = nodes, None
    last_missing: list[tuple[str, onnx.NodeProto]] = []
    for _ in range(MAX_ROUNDS):
        shapes, dtypes = _infer(_inference_proto(proto, light_nodes, consts, data_inputs, value_info), label)
        consts, folded = _fold(nodes, proto, shapes, label)
        missing = [(o, n) for i, n in enumerate(nodes) if i not in folded
                   for o in n.output if o and o in used and o not in shapes]
        if not missing:
            return _Resolved(consts, folded, shapes, dtypes)
        if [m[0] for m in missing] == [m[0] for m in last_missing]:
            break  # no progress: another round cannot help
        last_missing = missing
        light_nodes = [n for i, n in enumerate(nodes) if i not in folded]
    name, node = last_missing[0]
    raise BenanzaError(f"{label}: cannot resolve the shape of tensor '{name}' "
                       f"(output of {node.op_type} node '{node.name or name}')")


