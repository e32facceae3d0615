"""Attribute normalization: every layer's attributes with the ONNX defaults filled in.

Two layers that compute the same thing must get the same layer key, whether the
model spelled a default out or left it implicit, used ``auto_pad`` or explicit
pads, or passed Clip's bounds as attributes (opset < 11) or inputs (opset >= 11).
The defaults are data (``DEFAULTS``); ops whose defaults depend on the input's
rank or the opset have one function each in ``NORMALIZERS``.

``pads`` stay in ONNX order, ``[x1_begin, x2_begin, ..., x1_end, x2_end]``, and
asymmetric pads stay asymmetric (the original Benanza read them in the wrong order).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

FLOAT_LOWEST = float(np.finfo(np.float32).min)  # Clip without a lower bound (what ONNX Runtime uses)
FLOAT_MAX = float(np.finfo(np.float32).max)

DEFAULTS: dict[str, dict[str, Any]] = {
    "Conv": {"group": 1},
    "ConvTranspose": {"group": 1},
    "MaxPool": {"ceil_mode": 0, "storage_order": 0},
    "AveragePool": {"ceil_mode": 0, "count_include_pad": 0},
    "LpPool": {"p": 2},
    "Gemm": {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0},
    "LRN": {"alpha": 0.0001, "beta": 0.75, "bias": 1.0},
    "BatchNormalization": {"epsilon": 1e-5, "momentum": 0.9},
    "InstanceNormalization": {"epsilon": 1e-5},
    "LeakyRelu": {"alpha": 0.01},
    "Elu": {"alpha": 1.0},
    "Selu": {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875},
    "HardSigmoid": {"alpha": 0.2, "beta": 0.5},
    "Flatten": {"axis": 1},
    "Gather": {"axis": 0},
    "Pad": {"mode": "constant"},
    "Reshape": {"allowzero": 0},
    "Dropout": {"ratio": 0.5},
}

# Attributes that carry no meaning for inference (legacy opset-1 bookkeeping).
DROPPED = frozenset({"consumed_inputs", "is_test"})

# Inputs that are really parameters: when constant they move into the attributes
# (by input position), so that e.g. Clip(min=0, max=6) is one key in every opset.
VALUE_INPUTS: dict[str, dict[int, str]] = {
    "Clip": {1: "min", 2: "max"},
    "Reshape": {1: "shape"},
    "Unsqueeze": {1: "axes"},
    "Squeeze": {1: "axes"},
    "Pad": {1: "pads", 2: "constant_value", 3: "axes"},
    "Slice": {1: "starts", 2: "ends", 3: "axes", 4: "steps"},
    "Expand": {1: "shape"},
    "Tile": {1: "repeats"},
    "Resize": {1: "roi", 2: "scales", 3: "sizes"},
    "Upsample": {1: "scales"},
    "TopK": {1: "k"},
    "ReduceMean": {1: "axes"},
    "ReduceSum": {1: "axes"},
    "ReduceMax": {1: "axes"},
}

# One-element constant inputs that stay inputs (their value does not change the layer's cost, so not its
# key) but whose value the replay needs: which element a select (a Gather by one index) reads. By position;
# recorded in ``Layer.values``.
INDEX_INPUTS: dict[str, dict[int, str]] = {"Gather": {1: "indices"}}

Shapes = list[tuple[int, ...]]
Normalizer = Callable[[dict[str, Any], Shapes, int], dict[str, Any]]


def resolve_pads(auto_pad: str, in_dims: list[int], kernel: list[int], strides: list[int],
                 dilations: list[int], pads: list[int] | None) -> list[int]:
    """Explicit pads in ONNX order for any ``auto_pad`` (SAME_UPPER puts the odd pad at the end)."""
    n = len(kernel)
    if auto_pad in ("", "NOTSET"):
        return [int(p) for p in pads] if pads else [0] * (2 * n)
    if auto_pad == "VALID":
        return [0] * (2 * n)
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise ValueError(f"unknown auto_pad '{auto_pad}'")
    begins, ends = [], []
    for size, k, s, d in zip(in_dims, kernel, strides, dilations, strict=True):
        out = math.ceil(size / s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        small, big = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else big)
        ends.append(big if auto_pad == "SAME_UPPER" else small)
    return begins + ends


def _windowed(attrs: dict[str, Any], shapes: Shapes, kernel: list[int]) -> dict[str, Any]:
    """strides, dilations, kernel_shape and explicit pads for Conv and the pools."""
    n = len(shapes[0]) - 2
    out = dict(attrs)
    auto_pad = str(out.pop("auto_pad", "NOTSET"))
    out["kernel_shape"] = [int(k) for k in kernel]
    out["strides"] = [int(s) for s in attrs.get("strides") or [1] * n]
    out["dilations"] = [int(d) for d in attrs.get("dilations") or [1] * n]
    out["pads"] = resolve_pads(auto_pad, list(shapes[0][2:]), out["kernel_shape"], out["strides"],
                               out["dilations"], attrs.get("pads"))
    return out


def _conv(attrs: dict[str, Any], shapes: Shapes, opset: int) -> dict[str, Any]:
    kernel = attrs.get("kernel_shape") or list(shapes[1][2:])
    return _windowed(attrs, shapes, kernel)


def _pool(attrs: dict[str, Any], shapes: Shapes, opset: int) -> dict[str, Any]:
    return _windowed(attrs, shapes, attrs["kernel_shape"])


def _softmax(attrs: dict[str, Any], shapes: Shapes, opset: int) -> dict[str, Any]:
    """Opset < 13 coerces the input to 2-D at ``axis``; from 13 it is over that one axis.

    The two agree when ``axis`` is the last; otherwise an opset-13 layer is marked
    ``single_axis`` (so it never shares a key, and a benchmark, with the coerced form).
    """
    axis = int(attrs.get("axis", 1 if opset < 13 else -1))
    rank = len(shapes[0])
    axis = axis + rank if axis < 0 else axis
    out = {**attrs, "axis": axis}
    if opset >= 13 and axis != rank - 1:
        out["single_axis"] = 1
    return out


def _axis(default: int | None) -> Normalizer:
    """Make a negative ``axis`` positive (relative to the first input's rank)."""

    def normalize(attrs: dict[str, Any], shapes: Shapes, opset: int) -> dict[str, Any]:
        axis = int(attrs.get("axis", default))
        return {**attrs, "axis": axis + len(shapes[0]) if axis < 0 else axis}

    return normalize


def _clip(attrs: dict[str, Any], shapes: Shapes, opset: int) -> dict[str, Any]:
    low, high = attrs.get("min"), attrs.get("max")
    low = FLOAT_LOWEST if low is None else float(np.asarray(low).reshape(-1)[0])
    high = FLOAT_MAX if high is None else float(np.asarray(high).reshape(-1)[0])
    return {**attrs, "min": low, "max": high}


def _transpose(attrs: dict[str, Any], shapes: Shapes, opset: int) -> dict[str, Any]:
    return {**attrs, "perm": [int(p) for p in attrs.get("perm") or reversed(range(len(shapes[0])))]}


def _batchnorm(attrs: dict[str, Any], shapes: Shapes, opset: int) -> dict[str, Any]:
    out = {k: v for k, v in attrs.items() if not (k == "spatial" and v == 1)}  # opset < 9 default
    if out.get("training_mode") == 0:
        del out["training_mode"]
    return out


NORMALIZERS: dict[str, Normalizer] = {
    "Conv": _conv,
    "ConvTranspose": _conv,
    "MaxPool": _pool,
    "AveragePool": _pool,
    "LpPool": _pool,
    "Softmax": _softmax,
    "LogSoftmax": _softmax,
    "Hardmax": _softmax,
    "Concat": _axis(None),
    "Flatten": _axis(1),
    "Gather": _axis(0),
    "Clip": _clip,
    "Transpose": _transpose,
    "BatchNormalization": _batchnorm,
}


def normalize(op: str, attrs: dict[str, Any], shapes: Shapes, opset: int) -> dict[str, Any]:
    """Fill defaults and resolve rank/opset-dependent attributes; ``shapes`` are the input shapes."""
    out = {**DEFAULTS.get(op, {}), **{k: v for k, v in attrs.items() if k not in DROPPED}}
    fn = NORMALIZERS.get(op)
    return fn(out, shapes, opset) if fn else out
