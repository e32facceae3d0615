"""An fp16 copy of an exported ONNX model for ONNX Runtime, written for bench/validate.py.

Why a converter of its own: validate.py must share no code with benanza (whose fp16 capture
casts a model it first folded, ``benanza.profile.materialize``), and the GPU machine has no
onnxconverter-common. The exports fold nothing, so this one casts what makes float tensors:
float inputs, outputs and initializers, float ``Constant`` / ``ConstantOfShape`` values and
``Cast(to=float)``. Values beyond fp16's range are clipped to its largest finite value (an
attention mask's float32 minimum would become -inf, and 0 * -inf is NaN). The result is checked
by ONNX's strict type inference, so a graph this does not cover is refused, never run half-cast.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

FP16_MAX = float(np.finfo(np.float16).max)
# Ops that make float tensors from a dtype attribute or hold subgraphs: not covered, refused by name.
REFUSED = frozenset({"RandomNormal", "RandomUniform", "EyeLike", "If", "Loop", "Scan", "Resize", "Upsample"})


class Fp16Error(ValueError):
    """The model cannot be cast to fp16 by this converter (one line, naming the node)."""


def _half(tensor: TensorProto) -> TensorProto:
    array = numpy_helper.to_array(tensor).astype(np.float32)
    return numpy_helper.from_array(np.clip(array, -FP16_MAX, FP16_MAX).astype(np.float16), tensor.name)


def to_fp16(model: onnx.ModelProto, label: str = "model") -> onnx.ModelProto:
    """A float16 copy of ``model``; ``label`` names it in the one-line :class:`Fp16Error`."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    if out.functions:
        raise Fp16Error(f"{label}: has {len(out.functions)} local function(s); fp16 cast covers flat graphs only")
    for value in [*graph.input, *graph.output]:
        if value.type.tensor_type.elem_type == TensorProto.FLOAT:
            value.type.tensor_type.elem_type = TensorProto.FLOAT16
    for i, init in enumerate(graph.initializer):
        if init.data_type == TensorProto.FLOAT:
            graph.initializer[i].CopyFrom(_half(init))
    for node in graph.node:
        where = f"{label}: {node.op_type} node '{node.name or node.output[0]}'"
        if node.op_type in REFUSED:
            raise Fp16Error(f"{where}: not covered by the fp16 cast")
        for attr in node.attribute:
            if node.op_type == "Cast" and attr.name == "to" and attr.i == TensorProto.FLOAT:
                attr.i = TensorProto.FLOAT16
            elif node.op_type in ("Constant", "ConstantOfShape") and attr.name == "value" \
                    and attr.t.data_type == TensorProto.FLOAT:
                attr.t.CopyFrom(_half(attr.t))
            elif node.op_type == "Constant" and attr.name in ("value_float", "value_floats"):
                raise Fp16Error(f"{where}: {attr.name} attribute not covered by the fp16 cast")
            elif attr.type == onnx.AttributeProto.GRAPH:
                raise Fp16Error(f"{where}: subgraphs are not covered by the fp16 cast")
    del graph.value_info[:]
    try:
        onnx.shape_inference.infer_shapes(out, check_type=True, strict_mode=True)
    except Exception as exc:  # onnx raises several types; all mean a tensor kept a float32 type
        line = next((x for x in str(exc).splitlines() if x.strip()), type(exc).__name__)
        raise Fp16Error(f"{label}: the fp16 copy does not type-check: {line[:200]}") from None
    return out
