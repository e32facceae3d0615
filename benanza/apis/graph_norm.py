"""The cuDNN graph API's normalization forward (inference): LayerNormalization, RMSNormalization
and an exported RMSNorm chain (Fusion.RMSNORM)."""

from __future__ import annotations

import math

from benanza.apis.base import FLOAT_DTYPES, ApiDef, ApiFamily, JobFields, Unsupported
from benanza.apis.cudnn_ops import _one_layer
from benanza.apis.graph_ops import is_norm_graph
from benanza.apis.job_table import ENGINES, FUSION, KEY, PRECISION, Column, Kind
from benanza.apis.log_side import LogSide
from benanza.library import Api, Fusion, Math, Precision
from benanza.model.layer import FusionCandidate, Layer, Model

# ONNX normalization op -> the graph API's norm node ("layernorm" or "rmsnorm").
NORM_KINDS: dict[str, str] = {"LayerNormalization": "layernorm", "RMSNormalization": "rmsnorm"}

RMSNORM_EPSILON = 1e-6  # an exported RMSNorm's epsilon is a constant whose value the layer IR does not keep


def graph_norm_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cuDNN graph API normalization forward, inference phase: LayerNormalization / RMSNormalization over trailing axes.

    ONNX normalizes over ``shape[axis:]`` with a scale (and bias) of that shape; the graph
    sees it as rows x cols (cols = prod(shape[axis:])), cuDNN's [rows, cols, 1, 1] with a
    [1, cols, 1, 1] scale, which is how frameworks call it for transformer hidden states.
    """
    if isinstance(item, FusionCandidate) and item.pattern == Fusion.RMSNORM.value:
        return _rmsnorm_chain(item, model)
    layer = _one_layer(item, Api.GRAPH_NORM, set(NORM_KINDS))
    x = list(layer.inputs[0].shape)
    axis = int(layer.attrs.get("axis", -1))
    axis = axis + len(x) if axis < 0 else axis
    if not 0 < axis < len(x) or len(layer.inputs) < 2:
        raise Unsupported(f"{layer.op} over axis {axis} of rank {len(x)} (needs a leading row axis and a scale)")
    rows, cols = math.prod(x[:axis]), math.prod(x[axis:])
    params = [t for t in layer.inputs[1:] if t.name]
    if any(math.prod(t.shape) != cols for t in params):
        raise Unsupported(f"{layer.op} scale/bias of another size than the normalized {cols} values")
    if int(layer.attrs.get("stash_type", 1)) != 1:
        raise Unsupported(f"{layer.op} with stash_type {layer.attrs['stash_type']} (cuDNN computes in fp32)")
    kind, eps = NORM_KINDS[layer.op], float(layer.attrs.get("epsilon", 1e-5))
    bias = len(params) > 1
    row = {"rows": rows, "cols": cols, "epsilon": eps, "rms": kind == "rmsnorm", "bias": bias, "engines": []}
    shapes = {"x": x, "axis": axis, "rows": rows, "cols": cols, "epsilon": eps, "norm": kind, "bias": bias}
    return JobFields(row, shapes, ("*",), "", Math.NONE.value)


def _rmsnorm_chain(item: FusionCandidate, model: Model) -> JobFields:
    """An exported RMSNorm chain (Fusion.RMSNORM) as one rmsnorm forward over its last axis."""
    first, last = model.layers[item.layers[0]], model.layers[item.layers[-1]]
    x = list(first.inputs[0].shape)
    if first.inputs[0].dtype not in FLOAT_DTYPES:
        raise Unsupported(f"input dtype {first.inputs[0].dtype} is not a floating-point type")
    rows, cols = math.prod(x[:-1]), x[-1]
    row = {"rows": rows, "cols": cols, "epsilon": RMSNORM_EPSILON, "rms": True, "bias": False, "engines": []}
    shapes = {"x": x, "axis": len(x) - 1, "rows": rows, "cols": cols, "epsilon": RMSNORM_EPSILON, "norm": "rmsnorm",
              "bias": False, "weight": last.op == "Mul" and any(t.constant for t in last.inputs),
              "members": [model.layers[i].op for i in item.layers]}
    return JobFields(row, shapes, ("*",), "", Math.NONE.value)


# Where this module's APIs come in the job order (jobs are numbered in it: benanza.library.Api).
ORDER = 30
# The vocabulary entries of this module's APIs: benanza.library builds ``Api`` (member -> the
# call as logs print it) and ``OP_APIS`` (the ONNX ops each serves) from them, reading this
# literal without importing the module.
VOCABULARY = {
    # LayerNormalization / RMSNormalization (ONNX opset 23), inference phase
    "GRAPH_NORM": {"call": "cudnn_frontend::graph::norm_fwd", "ops": ("LayerNormalization", "RMSNormalization")},
}


DEFINITIONS = (
    ApiDef(Api.GRAPH_NORM, "bench_graph_norm", "cudnn_graph_norm.cu.j2", ApiFamily.GRAPH, "cudnn", graph_norm_job,
           columns=(KEY, PRECISION, FUSION, Column("rows", Kind.INT), Column("cols", Kind.INT),
                    Column("epsilon", Kind.REAL32), Column("rms", Kind.FLAG), Column("bias", Kind.FLAG), ENGINES),
           host_only=True, fusions=(Fusion.RMSNORM,),
           log=LogSide(cudnn_call=False, graph_recogniser=is_norm_graph, cublas_call=None, layer_signature=None,
                       call_signature=None, algorithm=None, fusion=Fusion.NONE, graph_fusions=(),
                       contrib_fusions=(Fusion.RMSNORM,), contrib_ops=True)),
)
