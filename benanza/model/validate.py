"""Model validation at import: refuse what no GPU could run, in one line naming the node.

An exporter bug or a hostile file must not become a traceback deep in the cost model,
nor an impossible layer (a dim of -988, a zero dilation) that reaches a job table.
``check_proto`` runs on the parsed file before anything else reads it; ``check_layer``
on each layer once its shapes are inferred and its attributes normalized.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import onnx
from onnx import AttributeProto, TensorProto

from benanza.errors import BenanzaError
from benanza.model.costs import DTYPE_BYTES
from benanza.model.layer import Tensor

MAX_DIM = 2**31 - 1  # cuDNN descriptors and cuBLAS take int32 dims
# Integer attributes that must be >= 1 (per element for lists), and those that must be >= 0.
POSITIVE_ATTRS: dict[str, tuple[str, ...]] = {
    "Conv": ("group", "strides", "dilations", "kernel_shape"),
    "ConvTranspose": ("group", "strides", "dilations", "kernel_shape"),
    "MaxPool": ("strides", "dilations", "kernel_shape"),
    "AveragePool": ("strides", "kernel_shape"),
    "LpPool": ("strides", "kernel_shape", "p"),
    "LRN": ("size",),
}
NON_NEGATIVE_ATTRS = ("pads", "output_padding")
WINDOWED = frozenset({"Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool"})
_ATTR_TYPE_NAMES = {v: k for k, v in AttributeProto.AttributeType.items()}
# ONNX elem types of data the cost model can price (onnx_import.DTYPES spells them in numpy).
_ITEM_SIZES = {TensorProto.FLOAT: 4, TensorProto.FLOAT16: 2, TensorProto.BFLOAT16: 2, TensorProto.DOUBLE: 8,
               TensorProto.INT64: 8, TensorProto.INT32: 4, TensorProto.INT16: 2, TensorProto.INT8: 1,
               TensorProto.UINT64: 8, TensorProto.UINT32: 4, TensorProto.UINT16: 2, TensorProto.UINT8: 1,
               TensorProto.BOOL: 1, TensorProto.FLOAT8E4M3FN: 1, TensorProto.FLOAT8E5M2: 1}
# Where a TensorProto keeps its elements when not in raw_data.
_TYPED_FIELDS = {TensorProto.FLOAT: "float_data", TensorProto.DOUBLE: "double_data", TensorProto.INT64: "int64_data",
                 TensorProto.UINT64: "uint64_data", TensorProto.UINT32: "uint64_data"}


def text(value: str | bytes) -> str:
    """A name as printable text (protobuf hands non-UTF-8 strings back as bytes)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _fail(label: str, where: str, problem: str) -> BenanzaError:
    return BenanzaError(f"{label}: {where}: {problem}")


def _node_where(node: onnx.NodeProto, index: int) -> str:
    return f"node '{text(node.name) or f'#{index}'}' ({text(node.op_type)})"


def _not_utf8(values: Iterable[Any]) -> str | None:
    return next((text(v) for v in values if isinstance(v, bytes)), None)


def _check_names(proto: onnx.ModelProto, label: str) -> None:
    g = proto.graph
    if isinstance(g.name, bytes):
        raise _fail(label, "graph", f"name {text(g.name)!r} is not UTF-8")
    for kind, infos in (("input", g.input), ("output", g.output), ("value_info", g.value_info),
                        ("initializer", g.initializer)):
        bad = _not_utf8(v.name for v in infos)
        if bad is not None:
            raise _fail(label, kind, f"name {bad!r} is not UTF-8")
    for i, node in enumerate(g.node):
        bad = _not_utf8([node.name, node.op_type, node.domain, *node.input, *node.output,
                         *(a.name for a in node.attribute)])
        if bad is not None:
            raise _fail(label, _node_where(node, i), f"name {bad!r} is not UTF-8")


def _shape_dims(info: onnx.ValueInfoProto) -> list[int]:
    return [d.dim_value for d in info.type.tensor_type.shape.dim if d.HasField("dim_value")]


def _check_dims(dims: Sequence[int], label: str, where: str, allow_zero: bool = False) -> None:
    low = 0 if allow_zero else 1
    bad = next((d for d in dims if not low <= d <= MAX_DIM), None)
    if bad is not None:
        need = "non-negative" if allow_zero else "positive"
        raise _fail(label, where, f"dim {bad} in {list(dims)} (every dim must be {need} and below 2^31)")


def _check_initializer(t: TensorProto, label: str) -> None:
    where = f"initializer '{t.name}'"
    _check_dims(list(t.dims), label, where, allow_zero=True)
    if t.data_type not in _ITEM_SIZES:
        raise _fail(label, where, f"has dtype {_dtype_name(t.data_type)}, which benanza cannot price")
    if t.data_location == TensorProto.EXTERNAL:
        return
    count = math.prod(t.dims)
    if t.HasField("raw_data") or t.raw_data:
        have, want = len(t.raw_data), count * _ITEM_SIZES[t.data_type]
        unit = "bytes"
    else:
        field = _TYPED_FIELDS.get(t.data_type, "int32_data")
        have, want, unit = len(getattr(t, field)), count, "elements"
    if have != want:
        raise _fail(label, where, f"dims {list(t.dims)} need {want} {unit} of data, it holds {have}")


def _dtype_name(elem_type: int) -> str:
    try:
        return TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"unknown type {elem_type}"


def _check_attributes(node: onnx.NodeProto, index: int, opset: int, label: str) -> None:
    """Attribute types per the ONNX schema of the model's opset, and required ones present."""
    if node.domain not in ("", "ai.onnx") or not onnx.defs.has(node.op_type):
        return
    try:
        schema = onnx.defs.get_schema(node.op_type, opset)
    except onnx.defs.SchemaError:
        return  # op newer than the model's opset: shape inference says so in its own words
    where = _node_where(node, index)
    given = {a.name: a for a in node.attribute}
    for name, spec in schema.attributes.items():
        attr = given.get(name)
        if attr is None:
            if spec.required:
                raise _fail(label, where, f"required attribute '{name}' is missing")
            continue
        want = int(spec.type)
        if attr.type != want:
            raise _fail(label, where, f"attribute '{name}' is {_ATTR_TYPE_NAMES.get(attr.type, attr.type)}, "
                                      f"the ONNX schema says {_ATTR_TYPE_NAMES.get(want, want)}")


def check_proto(proto: onnx.ModelProto, opset: int, label: str) -> None:
    """Names, declared input dims, initializers and attribute types of a parsed model."""
    _check_names(proto, label)
    g = proto.graph
    for t in g.initializer:
        _check_initializer(t, label)
    initialized = {t.name for t in g.initializer}
    for v in g.input:
        if v.name in initialized or not v.type.HasField("tensor_type"):
            continue
        elem = v.type.tensor_type.elem_type
        if elem and elem not in _ITEM_SIZES:
            raise _fail(label, f"input '{v.name}'", f"has dtype {_dtype_name(elem)}, which benanza cannot price")
        dims = _shape_dims(v)
        _check_dims(dims[1:] if len(dims) > 1 else [], label, f"input '{v.name}'")
        if dims and not 0 <= dims[0] <= MAX_DIM:  # the batch dim is replaced, but must be sane
            _check_dims(dims[:1], label, f"input '{v.name}'")
    for i, node in enumerate(g.node):
        _check_attributes(node, i, opset, label)
        op = node.op_type if node.domain in ("", "ai.onnx") else ""
        values = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute
                  if a.type in (AttributeProto.INT, AttributeProto.INTS)}
        _check_attr_values(op, values, label, _node_where(node, i))


def _ints(value: Any) -> list[int]:
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, int)]
    return [value] if isinstance(value, int) else []


def _check_tensor(t: Tensor, label: str, where: str) -> None:
    _check_dims(t.shape, label, f"{where} tensor '{t.name}'", allow_zero=t.constant)
    if t.dtype not in DTYPE_BYTES:
        raise _fail(label, where, f"tensor '{t.name}' has dtype {t.dtype}, which benanza cannot price")


def check_layer(op: str, name: str, inputs: Sequence[Tensor], outputs: Sequence[Tensor], attrs: dict[str, Any],
                label: str) -> None:
    """Shapes, dtypes and attribute values of one layer, before the cost model sees it."""
    where = f"node '{name}' ({op})"
    for t in [*inputs, *outputs]:
        _check_tensor(t, label, where)
    if op in NO_EMPTY_INPUTS and (empty := next((t for t in inputs if 0 in t.shape), None)) is not None:
        raise _fail(label, where, f"input '{empty.name}' {list(empty.shape)} is empty: the layer has no work")
    _check_attr_values(op, attrs, label, where)
    if op in WINDOWED and inputs:
        spatial = len(inputs[0].shape) - 2
        for attr in ("kernel_shape", "strides", "dilations"):
            if attr in attrs and len(_ints(attrs[attr])) != spatial:
                raise _fail(label, where, f"attribute '{attr}' = {attrs[attr]} has {len(_ints(attrs[attr]))} "
                                          f"entries for {spatial} spatial dims")
        if "pads" in attrs and len(_ints(attrs["pads"])) != 2 * spatial:
            raise _fail(label, where, f"attribute 'pads' = {attrs['pads']} needs {2 * spatial} entries")
    if op in ("Conv", "ConvTranspose") and len(inputs) >= 2:
        _check_groups(op, inputs, attrs, label, where)


# Ops whose every input must hold data: a zero-size weight or operand is a layer with no work, whose
# benchmark would time nothing (a Conv weight [192, 480, 1, 0] once reached generated C++ with 0 MACs).
NO_EMPTY_INPUTS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})


def _floats(value: Any) -> list[float]:
    items = value if isinstance(value, (list, tuple)) else [value]
    return [v for v in items if isinstance(v, float)]


def _check_attr_values(op: str, attrs: dict[str, Any], label: str, where: str) -> None:
    for attr, value in attrs.items():  # a NaN alpha/beta/epsilon has no arithmetic to benchmark or price
        if any(not math.isfinite(v) for v in _floats(value)):
            raise _fail(label, where, f"attribute '{attr}' = {value} is not a finite number")
    for attr in POSITIVE_ATTRS.get(op, ()):
        bad = next((v for v in _ints(attrs.get(attr)) if not 1 <= v <= MAX_DIM), None)
        if bad is not None:
            raise _fail(label, where, f"attribute '{attr}' = {attrs.get(attr)} (must be positive and below 2^31)")
    for attr in NON_NEGATIVE_ATTRS if op in WINDOWED else ():
        bad = next((v for v in _ints(attrs.get(attr)) if not 0 <= v <= MAX_DIM), None)
        if bad is not None:
            raise _fail(label, where, f"attribute '{attr}' = {attrs.get(attr)} (must be non-negative)")


def _check_groups(op: str, inputs: Sequence[Tensor], attrs: dict[str, Any], label: str, where: str) -> None:
    group = attrs.get("group", 1)
    x, w = inputs[0].shape, inputs[1].shape
    if len(x) < 3 or len(w) != len(x):
        raise _fail(label, where, f"input {list(x)} and weight {list(w)} do not have the same rank (>= 3)")
    channels = x[1]
    if channels % group:
        raise _fail(label, where, f"group {group} does not divide the {channels} input channels")
    per_group = w[1] if op == "Conv" else w[0]
    if (op == "Conv" and per_group * group != channels) or (op == "ConvTranspose" and per_group != channels):
        raise _fail(label, where, f"weight {list(w)} does not match {channels} input channels in {group} group(s)")
    if op == "Conv" and w[0] % group:
        raise _fail(label, where, f"group {group} does not divide the {w[0]} output channels")
