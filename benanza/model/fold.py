"""Constant folding: a numpy evaluator for the ops that occur in shape and weight chains.

Nodes whose inputs are all known fold to constants and are not layers (DESIGN.md:
"Nodes that fold to constants are not layers").  Each op is one function in
``FOLDERS``; an op absent from the table never folds.  Attributes arrive as plain
Python/numpy values (``onnx_import`` converts them at the edge), so this module
never imports ``onnx``.

Weights computed at run time (``ConstantOfShape`` in the zoo's light models) fold to
zero-stride ``np.broadcast_to`` views, so a 400 MB weight costs no memory: only
its shape and dtype are ever needed, and the view-only ops (Unsqueeze, Reshape,
Transpose, Expand, ...) keep it a view.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

Value = np.ndarray
FoldFn = Callable[[list[Value | None], dict[str, Any]], list[Value]]

# Ops that need only the *shape* of their input: they fold even when the input is an
# activation, as long as shape inference gave it a fully static shape.
SHAPE_ONLY_OPS = frozenset({"Shape", "Size"})


def shape_proxy(shape: tuple[int, ...]) -> Value:
    """A zero-memory array with the given shape, standing in for an activation."""
    return np.broadcast_to(np.zeros((), dtype=np.bool_), shape)


def _axes(value: Any, rank: int) -> list[int]:
    return sorted(int(a) + rank if int(a) < 0 else int(a) for a in np.asarray(value).reshape(-1))


def _constant(inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    for name, dtype in (("value", None), ("value_float", np.float32), ("value_floats", np.float32),
                        ("value_int", np.int64), ("value_ints", np.int64)):
        if name in attrs:
            return [np.asarray(attrs[name], dtype=dtype)]
    raise ValueError("Constant without a numeric value attribute")


def _constant_of_shape(inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    fill = attrs.get("value")
    fill = np.zeros((), np.float32) if fill is None else np.asarray(fill).reshape(())
    shape = tuple(int(d) for d in np.asarray(inputs[0]).reshape(-1))
    return [np.broadcast_to(fill, shape)]


def _shape(inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    dims = inputs[0].shape
    start, end = attrs.get("start", 0), attrs.get("end", len(dims))
    return [np.asarray(dims[start:end], dtype=np.int64)]


def _size(inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    return [np.asarray(inputs[0].size, dtype=np.int64)]


def _gather(inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    return [np.take(inputs[0], np.asarray(inputs[1], dtype=np.int64), axis=attrs.get("axis", 0))]


def _unsqueeze(inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    x = inputs[0]
    axes_value = inputs[1] if len(inputs) > 1 and inputs[1] is not None else attrs["axes"]
    axes = _axes(axes_value, x.ndim + np.asarray(axes_value).size)
    return [np.expand_dims(x, tuple(axes))]


def _squeeze(inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    x = inputs[0]
    axes_value = inputs[1] if len(inputs) > 1 and inputs[1] is not None else attrs.get("axes")
    if axes_value is None:
        return [np.squeeze(x)]
    return [np.squeeze(x, axis=tuple(_axes(axes_value, x.ndim)))]


def _concat(inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    return [np.concatenate([np.asarray(v) for v in inputs if v is not None], axis=attrs["axis"])]


def reshape_target(in_shape: tuple[int, ...], shape: list[int], allowzero: int = 0) -> tuple[int, ...]:
    """Resolve ONNX Reshape's 0 (copy the input dim) and -1 (infer) entries."""
    dims = [in_shape[i] if d == 0 and not allowzero else int(d) for i, d in enumerate(shape)]
    if dims.count(-1) == 1:
        known = int(np.prod([d for d in dims if d != -1]))
        total = int(np.prod(in_shape))
        if known == 0 or total % known:
            raise ValueError(f"cannot reshape {list(in_shape)} to {list(shape)}")
        dims[dims.index(-1)] = total // known
    return tuple(dims)


def _reshape(inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    x = inputs[0]
    target = reshape_target(x.shape, [int(d) for d in np.asarray(inputs[1]).reshape(-1)], attrs.get("allowzero", 0))
    return [np.reshape(x, target)]


def _flatten(inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    x = inputs[0]
    axis = attrs.get("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    return [np.reshape(x, (int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:]))))]


def _cast(inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    return [np.asarray(inputs[0]).astype(np.dtype(attrs["to"]))]


def _slice(inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    x = inputs[0]

    def arg(i: int, name: str) -> list[int] | None:
        if len(inputs) > i and inputs[i] is not None:
            return [int(v) for v in np.asarray(inputs[i]).reshape(-1)]
        return attrs.get(name)  # opset < 10 keeps them as attributes

    starts, ends = arg(1, "starts"), arg(2, "ends")
    axes = arg(3, "axes") or list(range(len(starts)))
    steps = arg(4, "steps") or [1] * len(starts)
    index = [slice(None)] * x.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        index[axis + x.ndim if axis < 0 else axis] = slice(start, end, step)
    return [x[tuple(index)]]


def _div(inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    a, b = np.asarray(inputs[0]), np.asarray(inputs[1])
    if np.issubdtype(a.dtype, np.integer):
        return [np.trunc(a / b).astype(a.dtype)]  # ONNX integer Div truncates toward zero
    return [a / b]


def _range(inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    start = np.asarray(inputs[0])
    return [np.arange(start, np.asarray(inputs[1]), np.asarray(inputs[2]), dtype=start.dtype)]


def _expand(inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    x = inputs[0]
    shape = tuple(int(d) for d in np.asarray(inputs[1]).reshape(-1))
    return [np.broadcast_to(x, np.broadcast_shapes(x.shape, shape))]


def _transpose(inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    return [np.transpose(inputs[0], attrs.get("perm"))]


def _binary(fn: Callable[[Value, Value], Value]) -> FoldFn:
    def fold(inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
        a, b = np.asarray(inputs[0]), np.asarray(inputs[1])
        out = np.asarray(fn(a, b))
        return [out if out.dtype == np.bool_ else out.astype(np.result_type(a, b), copy=False)]

    return fold


def _unary(fn: Callable[[Value], Value]) -> FoldFn:
    return lambda inputs, attrs: [np.asarray(fn(np.asarray(inputs[0])))]


def _variadic(fn: Callable[[Value, Value], Value]) -> FoldFn:
    def fold(inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
        out = np.asarray(inputs[0])
        for v in inputs[1:]:
            out = fn(out, np.asarray(v))
        return [out]

    return fold


def _cumsum(inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    x, axis = np.asarray(inputs[0]), int(np.asarray(inputs[1]).reshape(()))
    if attrs.get("reverse", 0):
        x = np.flip(x, axis)
    out = np.cumsum(x, axis=axis, dtype=x.dtype)
    if attrs.get("exclusive", 0):
        out = out - x
    return [np.flip(out, axis) if attrs.get("reverse", 0) else out]


def _gather_nd(inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    """ONNX GatherND: the last index axis picks into data's dims after ``batch_dims`` leading shared ones."""
    data, indices = np.asarray(inputs[0]), np.asarray(inputs[1], dtype=np.int64)
    b, depth = int(attrs.get("batch_dims", 0)), indices.shape[-1]
    batches = math.prod(data.shape[:b])
    flat_data = data.reshape((batches, *data.shape[b:]))
    flat_idx = indices.reshape((batches, -1, depth))
    picked = np.stack([flat_data[i][tuple(flat_idx[i].T)] for i in range(batches)])
    return [picked.reshape(indices.shape[:-1] + data.shape[b + depth:])]


def _mod(inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    a, b = np.asarray(inputs[0]), np.asarray(inputs[1])
    return [(np.fmod if attrs.get("fmod", 0) else np.mod)(a, b).astype(np.result_type(a, b), copy=False)]


def _scatter_nd(inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    """ONNX ScatterND without reduction: ``updates`` written at the index tuples (Swin's window masks)."""
    if attrs.get("reduction", "none") != "none":
        raise ValueError(f"ScatterND reduction {attrs['reduction']!r} is not folded")
    data = np.array(inputs[0], copy=True)
    indices, updates = np.asarray(inputs[1], dtype=np.int64), np.asarray(inputs[2])
    depth = indices.shape[-1]
    flat_idx = indices.reshape(-1, depth)
    flat_upd = updates.reshape((flat_idx.shape[0], *data.shape[depth:]))
    for idx, upd in zip(flat_idx, flat_upd, strict=True):
        data[tuple(idx)] = upd
    return [data]


FOLDERS: dict[str, FoldFn] = {
    "Constant": _constant,
    "ConstantOfShape": _constant_of_shape,
    "Shape": _shape,
    "Size": _size,
    "Gather": _gather,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Concat": _concat,
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Cast": _cast,
    "Slice": _slice,
    "Add": _binary(np.add),
    "Sub": _binary(np.subtract),
    "Mul": _binary(np.multiply),
    "Div": _div,
    "Equal": _binary(np.equal),
    "Less": _binary(np.less),
    "Greater": _binary(np.greater),
    "Min": _variadic(np.minimum),
    "Max": _variadic(np.maximum),
    "Sum": _variadic(np.add),
    "Neg": _unary(np.negative),
    "Abs": _unary(np.abs),
    "Sqrt": _unary(np.sqrt),
    "Floor": _unary(np.floor),
    "Ceil": _unary(np.ceil),
    "Not": _unary(np.logical_not),
    "Identity": lambda inputs, attrs: [inputs[0]],
    "Range": _range,
    "Expand": _expand,
    "Transpose": _transpose,
    "Where": lambda inputs, attrs: [np.where(inputs[0], inputs[1], inputs[2])],
    # attention masks and position ids of today's exports: constant once the batch and sequence are set
    "CumSum": _cumsum,
    "Mod": _mod,
    "Pow": _binary(np.power),
    "ScatterND": _scatter_nd,
    "GatherND": _gather_nd,
    "And": _binary(np.logical_and),
    "Or": _binary(np.logical_or),
    "LessOrEqual": _binary(np.less_equal),
    "GreaterOrEqual": _binary(np.greater_equal),
}


def fold_node(op: str, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    """Evaluate one node on known inputs; raises KeyError for an op that never folds."""
    return FOLDERS[op](inputs, attrs)
