"""ONNX -> PyTorch for the torch capture: onnx2torch plus the fixes the zoo models need.

onnx2torch 1.5.15 cannot convert two patterns of the (opset 9) zoo models:

* ``Dropout`` opset 7 has no converter (AlexNet, Inception-v1, SqueezeNet, VGG-19).
  At inference it is the identity; its optional ``mask`` output, unused in the zoo,
  is dropped from the node so that no ones-tensor is computed (and timed).
* ``AveragePool`` with asymmetric ``pads`` (Inception-v1: ``[0, 0, 1, 1]``) is refused.
  Those nodes (only those) become a private op type (onnx2torch's registry allows one
  converter per op and version, and the stock AveragePool one is taken) whose converter
  pads explicitly, then pools, and rescales to ONNX's ``count_include_pad=0`` average
  (over the non-pad elements).

onnx2torch re-mangles node names into module names (the TorchScript exporter's
``/layer1/layer1.0/conv1/Conv`` comes out as ``layer1/layer1/0/conv1/Conv``), so
``convert_named`` gives every node a plain identifier before converting and returns
the ONNX node name of each converted module: the profiler's per-node ranges then
carry the ONNX node's own name, whatever onnx2torch does with it.

Ops that only widened their type lists since the version onnx2torch knows (opset
19-21: Reshape, Cast, Pad, Shape, ...) are converted by the older converter, and a
node nothing can convert is refused in one line naming the model, node and op.
Imported only by the torch child process (it needs torch and onnx2torch).
"""

from __future__ import annotations

import math
from typing import Any

import onnx
import torch
import torch.nn.functional as F
from onnx import defs
from torch import nn

PADDED_POOL = "BenanzaPaddedAveragePool"  # op type of the rewritten AveragePool nodes (no ONNX schema)
FLATTEN = "BenanzaFlatten"  # Flatten with axis != 1: onnx2torch's drops a dim when axis == rank (BERT's mask)
NODE_ID = "benanza_node_{}"  # the module name each ONNX node gets during conversion (an identifier)

# Newer op versions whose semantics equal an older one's for the float/int types a model runs
# (the newer schema only adds types: bfloat16, float8, int4, ...): (op, new) -> old.
SAME_AS: dict[tuple[str, int], int] = {
    ("Reshape", 19): 14, ("Reshape", 21): 14, ("Cast", 19): 13, ("Cast", 21): 13,
    ("Pad", 19): 18, ("Pad", 21): 18, ("Shape", 19): 15, ("Shape", 21): 15,
    ("Size", 19): 13, ("Size", 21): 13, ("Identity", 19): 16, ("Identity", 21): 16,
    ("Equal", 19): 13, ("Constant", 19): 13, ("Constant", 21): 13,
    ("ConstantOfShape", 20): 9, ("ConstantOfShape", 21): 9, ("Flatten", 21): 13,
    ("Squeeze", 21): 13, ("Unsqueeze", 21): 13, ("Transpose", 21): 13,
    ("GreaterOrEqual", 16): 12, ("LessOrEqual", 16): 12,
}


class _Identity(nn.Module):
    """Dropout at inference: the data unchanged, and an all-ones mask where the graph reads one."""

    def __init__(self, mask: bool) -> None:
        super().__init__()
        self.mask = mask

    def forward(self, x: torch.Tensor, *_: Any) -> Any:
        return (x, torch.ones_like(x)) if self.mask else x


class _PaddedAvgPool(nn.Module):
    """ONNX AveragePool with any pads: zero-pad, pool, and with count_include_pad=0 rescale
    each output by (window size / non-pad elements), a factor computed once per input shape."""

    def __init__(self, kernel: list[int], strides: list[int], pads: list[int], ceil_mode: bool,
                 count_include_pad: bool) -> None:
        super().__init__()
        rank = len(kernel)
        self.pool = getattr(F, f"avg_pool{rank}d")
        self.kernel, self.strides, self.ceil_mode = kernel, strides, ceil_mode
        self.count_include_pad = count_include_pad
        # F.pad wants (begin, end) pairs from the last axis; ONNX gives all begins, then all ends
        self.pad = [p for axis in reversed(range(rank)) for p in (pads[axis], pads[rank + axis])]
        self._scale: torch.Tensor | None = None

    def _avg(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(F.pad(x, self.pad), self.kernel, self.strides, 0, self.ceil_mode, True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self._avg(x)
        if self.count_include_pad:
            return y
        s = self._scale
        if s is None or s.shape[2:] != y.shape[2:] or s.device != y.device or s.dtype != y.dtype:
            ones = torch.ones((1, 1, *x.shape[2:]), device=x.device, dtype=torch.float32)
            s = self._scale = (1.0 / self._avg(ones)).to(y.dtype)
        return y * s


class _Gelu(nn.Module):
    """ONNX Gelu (opset 20): erf form, or tanh form with approximate="tanh"."""

    def __init__(self, approximate: str) -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate=self.approximate)


class _ReduceMean(nn.Module):
    """ONNX ReduceMean (opset 18: axes as a constant input)."""

    def __init__(self, axes: list[int] | None, keepdims: bool) -> None:
        super().__init__()
        self.axes, self.keepdims = axes, keepdims

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        axes = self.axes if self.axes else list(range(x.dim()))
        return torch.mean(x, dim=axes, keepdim=self.keepdims)


class _Split(nn.Module):
    """ONNX Split (opset 18): constant sizes, or ``num_outputs`` chunks of ceil(dim / n) (the last smaller)."""

    def __init__(self, axis: int, sizes: list[int] | None, parts: int) -> None:
        super().__init__()
        self.axis, self.sizes, self.parts = axis, sizes, parts

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if self.sizes:
            return tuple(torch.split(x, self.sizes, dim=self.axis))
        return tuple(torch.split(x, -(-x.shape[self.axis] // self.parts), dim=self.axis))


def _split(node: Any, graph: Any) -> Any:
    from onnx2torch.utils.common import OnnxMapping, OperationConverterResult, get_const_value

    sizes_name = node.input_values[1] if len(node.input_values) > 1 else ""
    sizes = [int(v) for v in get_const_value(sizes_name, graph).reshape(-1).tolist()] if sizes_name else None
    module = _Split(int(node.attributes.get("axis", 0)), sizes, len(node.output_values))
    return OperationConverterResult(torch_module=module, onnx_mapping=OnnxMapping(
        inputs=(node.input_values[0],), outputs=node.output_values))


class _Flatten(nn.Module):
    """ONNX Flatten at any axis: [prod(dims before axis), prod(dims from axis)] (axis == rank gives [n, 1])."""

    def __init__(self, axis: int) -> None:
        super().__init__()
        self.axis = axis

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        axis = self.axis + x.dim() if self.axis < 0 else self.axis
        return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


def _flatten(node: Any, graph: Any) -> Any:
    return _result(_Flatten(int(node.attributes.get("axis", 1))), node)


def _gelu(node: Any, graph: Any) -> Any:
    return _result(_Gelu(str(node.attributes.get("approximate", "none"))), node)


def _reduce_mean(node: Any, graph: Any) -> Any:
    from onnx2torch.utils.common import OnnxMapping, OperationConverterResult, get_const_value

    a = node.attributes
    axes_name = node.input_values[1] if len(node.input_values) > 1 else ""
    axes = [int(v) for v in get_const_value(axes_name, graph).reshape(-1).tolist()] if axes_name else None
    if not axes and a.get("noop_with_empty_axes", 0):
        raise NotImplementedError(f"ReduceMean {node.name}: noop_with_empty_axes")
    return OperationConverterResult(torch_module=_ReduceMean(axes, bool(a.get("keepdims", 1))),
                                    onnx_mapping=OnnxMapping(inputs=(node.input_values[0],),
                                                             outputs=node.output_values))


def _result(module: nn.Module, node: Any) -> Any:
    from onnx2torch.utils.common import OperationConverterResult, onnx_mapping_from_node

    return OperationConverterResult(torch_module=module, onnx_mapping=onnx_mapping_from_node(node))


def _dropout(node: Any, graph: Any) -> Any:
    return _result(_Identity(mask=len(node.output_values) > 1), node)


def _padded_pool(node: Any, graph: Any) -> Any:
    a = node.attributes
    kernel = list(a["kernel_shape"])
    rank = len(kernel)
    if any(d != 1 for d in a.get("dilations", [1] * rank)):
        raise NotImplementedError(f"AveragePool {node.name}: dilations are not supported")
    module = _PaddedAvgPool(kernel, list(a.get("strides", [1] * rank)), list(a["pads"]),
                            bool(a.get("ceil_mode", 0)), bool(a.get("count_include_pad", 0)))
    return _result(module, node)


def _register(op: str, version: int, converter: Any) -> None:
    """onnx2torch's add_converter, unless (op, version) already has a converter."""
    from onnx2torch.node_converters.registry import add_converter, get_converter

    try:
        get_converter(operation_type=op, version=version)
    except NotImplementedError:
        add_converter(operation_type=op, version=version)(converter)


def _zero_free_target(node: onnx.NodeProto, g: onnx.GraphProto) -> bool:
    if not any(a.name == "allowzero" and a.i for a in node.attribute) or len(node.input) < 2:
        return False
    target = next((t for t in g.initializer if t.name == node.input[1]), None)
    return target is not None and 0 not in onnx.numpy_helper.to_array(target).tolist()


def _rewrite(model: onnx.ModelProto) -> bool:
    """Drop unused Dropout masks; make asymmetric-pad AveragePool nodes PADDED_POOL and Flatten nodes with
    axis != 1 FLATTEN (True if any node changed op type)."""
    g = model.graph
    read = {name for n in g.node for name in n.input} | {v.name for v in g.output}
    moved = False
    for node in g.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type == "Dropout" and len(node.output) > 1 and node.output[1] not in read:
            del node.output[1:]
        elif node.op_type == "Reshape" and _zero_free_target(node, g):
            # allowzero only changes what a 0 in the target means: without one it is a plain Reshape
            kept = [a for a in node.attribute if a.name != "allowzero"]
            del node.attribute[:]
            node.attribute.extend(kept)
        elif node.op_type == "Flatten" and any(a.name == "axis" and a.i != 1 for a in node.attribute):
            node.op_type = FLATTEN
            moved = True
        elif node.op_type == "AveragePool":
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            pads = list(attrs.get("pads", []))
            if attrs.get("auto_pad", b"NOTSET") == b"NOTSET" and pads[:len(pads) // 2] != pads[len(pads) // 2:]:
                node.op_type = PADDED_POOL
                moved = True
    return moved


class ConversionError(Exception):
    """onnx2torch cannot convert a model: one line naming the model, node and op."""


def _since(op: str, domain: str, opset: int) -> int | None:
    try:
        return defs.get_schema(op, max_inclusive_version=opset, domain=domain).since_version
    except (RuntimeError, defs.SchemaError):
        return None


def _check_convertible(model: onnx.ModelProto) -> None:
    """Alias type-only version bumps (SAME_AS) and refuse, in one line, the first node with no converter."""
    from onnx2torch.node_converters.registry import get_converter

    opsets = {o.domain: o.version for o in model.opset_import}
    opsets.setdefault("ai.onnx", opsets.get("", 1))
    for node in model.graph.node:
        domain = "" if node.domain == "ai.onnx" else node.domain
        opset = opsets.get(domain, opsets[""])
        since = _since(node.op_type, domain, opset)
        older = SAME_AS.get((node.op_type, since or -1)) if not domain else None
        if older is not None:
            _register(node.op_type, since, get_converter(operation_type=node.op_type, version=older))
        try:
            get_converter(operation_type=node.op_type, version=opset, domain=domain)
        except NotImplementedError:
            version = f"version {since}" if since is not None else f"opset {opset}"
            op = f"{domain}.{node.op_type}" if domain else node.op_type
            raise ConversionError(f"onnx2torch cannot convert node '{node.name or node.output[0]}' "
                                  f"({op}, {version}): no converter for it") from None


def convert_named(model_path: str) -> tuple[nn.Module, dict[str, str]]:
    """onnx2torch.convert of ``model_path`` after the fixes above, in eval mode, and the ONNX
    node name of each converted module (module name -> node name).

    Plain onnx2torch 1.5.15 fails on the opset-9 zoo models (Dropout-7, AveragePool with
    asymmetric pads); this converts them, with outputs that match ONNX Runtime.
    """
    import onnx2torch
    from onnx2torch.utils.safe_shape_inference import safe_shape_inference

    model = onnx.load(model_path)
    # shapes first: onnx2torch infers them again, but not past an op without a schema
    model = safe_shape_inference(model)
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    _register("Dropout", 7, _dropout)
    _register("Gelu", 20, _gelu)
    _register("ReduceMean", 18, _reduce_mean)
    _register("Split", 18, _split)
    if _rewrite(model):
        # an op without a schema is looked up under the model's default-domain opset
        _register(PADDED_POOL, opset, _padded_pool)
        _register(FLATTEN, opset, _flatten)
    _check_convertible(model)
    names: dict[str, str] = {}
    for i, node in enumerate(model.graph.node):
        module_name = NODE_ID.format(i)
        names[module_name] = node.name
        node.name = module_name
    return onnx2torch.convert(model).eval(), names


def convert(model_path: str) -> nn.Module:
    """The converted module alone (``convert_named`` without the names)."""
    return convert_named(model_path)[0]
