"""The cuDNN graph API's fused scaled-dot-product attention (cudnn-frontend sdpa) for an
attention core (Fusion.ATTENTION)."""

from __future__ import annotations

from benanza.apis.base import FLOAT_DTYPES, ApiDef, ApiFamily, JobFields, Unsupported
from benanza.apis.graph_ops import is_sdpa_graph
from benanza.apis.job_table import ENGINES, FUSION, KEY, PRECISION, Column, Kind, ints
from benanza.apis.log_side import LogSide
from benanza.library import Api, Fusion, Precision
from benanza.model import attention
from benanza.model.layer import FusionCandidate, Layer, Model

# The precisions cuDNN's fused flash attention takes (its fp32 path is no fused kernel).
SDPA_PRECISIONS = frozenset({Precision.FP16, Precision.BF16})


def graph_sdpa_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cuDNN fused scaled-dot-product attention (cudnn-frontend sdpa, inference: no stats) for an attention core.

    Q, K, V and O are [b, h, s, d] in the layout the exporters leave them (contiguous, K
    read as K not K^T); the scale is 1/sqrt(d); a causal mask is the top-left diagonal
    band, a padding mask cuDNN's per-batch sequence lengths (the benchmark gives the
    keys of batch entry i a length below s_kv, so that the mask changes the output).
    """
    if not isinstance(item, FusionCandidate) or item.pattern != Fusion.ATTENTION.value:
        raise Unsupported("the fused SDPA takes an attention-core fusion candidate")
    if precision not in SDPA_PRECISIONS:
        raise Unsupported(f"cuDNN's fused SDPA takes fp16 or bf16, not {precision.value}")
    try:
        a = attention.describe(item, model.layers)
    except ValueError as exc:
        raise Unsupported(str(exc)) from None
    if a.dtype not in FLOAT_DTYPES:
        raise Unsupported(f"attention dtype {a.dtype} is not a floating-point type")
    row = {"dims": [a.batch, a.heads, a.s_q, a.s_kv, a.d_qk, a.d_v], "scale": a.scale, "causal": a.causal,
           "padding": a.padding, "engines": []}
    shapes = {"q": [a.batch, a.heads, a.s_q, a.d_qk], "k": [a.batch, a.heads, a.s_kv, a.d_qk],
              "v": [a.batch, a.heads, a.s_kv, a.d_v], "scale": a.scale, "causal": a.causal, "padding": a.padding,
              "members": [model.layers[i].op for i in item.layers]}
    return JobFields(row, shapes, ("*",))


# Where this module's APIs come in the job order (jobs are numbered in it: benanza.library.Api).
ORDER = 40
# The vocabulary entries of this module's APIs: benanza.library builds ``Api`` (member -> the
# call as logs print it) and ``OP_APIS`` (the ONNX ops each serves) from them, reading this
# literal without importing the module.
VOCABULARY = {
    # fused scaled-dot-product attention (the attention core): Fusion.ATTENTION only
    "GRAPH_SDPA": {"call": "cudnn_frontend::graph::sdpa"},
}


DEFINITIONS = (
    ApiDef(Api.GRAPH_SDPA, "bench_graph_sdpa", "cudnn_graph_sdpa.cu.j2", ApiFamily.GRAPH, "cudnn", graph_sdpa_job,
           columns=(KEY, PRECISION, FUSION, ints("dims", 6), Column("scale", Kind.REAL32), Column("causal", Kind.FLAG),
                    Column("padding", Kind.FLAG), ENGINES),
           tensor_core=True, host_only=True, fusions=(Fusion.ATTENTION,),
           log=LogSide(cudnn_call=False, graph_recogniser=is_sdpa_graph, cublas_call=None, layer_signature=None,
                       call_signature=None, algorithm=None, fusion=Fusion.NONE, graph_fusions=(),
                       contrib_fusions=(Fusion.ATTENTION,), contrib_ops=False)),
)
