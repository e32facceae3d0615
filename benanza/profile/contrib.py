"""ONNX Runtime's fused contrib nodes charged against benanza's fused benchmarks (the as-executed model).

ORT's CUDA EP runs Attention, SkipLayerNormalization, FastGelu... as kernels of its own: no
cuDNN/cuBLAS log names them, so the library-call link leaves them without an as-executed
call.  Each such node covers a group of layers (``node_layers.ort_node_layers``); this module
says which benchmarks stand for that group: the fusion candidates it holds (the attention
core -> cuDNN's fused SDPA, an RMSNorm chain -> the graph API's norm forward, a pointwise
chain -> the fused pointwise benchmark or its copy roofline), its normalization layers ->
the graph API's norm forward, its MatMuls -> their GEMM rows (with the bias epilogue where
the model has a gemm+bias candidate), and every other member (SkipLayerNorm's residual add,
a bias add) -> its copy roofline.  Kept as data: one table entry per contrib op.
"""

from __future__ import annotations

from dataclasses import replace
from enum import StrEnum

from benanza.apis import REGISTRY
from benanza.apis.base import Unsupported
from benanza.library import NO_COPY_OPS, OP_APIS, Api, Fusion, Precision
from benanza.model.layer import FusionCandidate, Model
from benanza.records import ANY, ROOFLINE, ExecutedCall


class Contrib(StrEnum):
    """What an ORT contrib node does, for the charge."""

    ATTENTION = "attention"
    NORM = "normalization"
    POINTWISE = "pointwise"
    GEMM = "gemm"


# ORT op -> what it is.  Nodes of ops absent here keep the library-call link alone.
ORT_CONTRIB: dict[str, Contrib] = {
    "Attention": Contrib.ATTENTION, "MultiHeadAttention": Contrib.ATTENTION,
    "SkipLayerNormalization": Contrib.NORM, "LayerNormalization": Contrib.NORM,
    "SkipSimplifiedLayerNormalization": Contrib.NORM, "SimplifiedLayerNormalization": Contrib.NORM,
    "BiasGelu": Contrib.POINTWISE, "FastGelu": Contrib.POINTWISE, "Gelu": Contrib.POINTWISE,
    "QuickGelu": Contrib.POINTWISE, "BiasSoftmax": Contrib.POINTWISE,
    "FusedMatMul": Contrib.GEMM, "FusedGemm": Contrib.GEMM, "Gemm": Contrib.GEMM, "MatMul": Contrib.GEMM,
}
# Standard ops that are a fusion only when ORT's node covers several layers (MatMul + bias Add -> Gemm).
FUSED_ONLY_WHEN_SEVERAL = frozenset({"Gemm", "MatMul"})

# Fusion patterns inside a node charged to every api planned for them (ANY).
ANY_API_FUSIONS = (Fusion.POINTWISE, Fusion.GEMM_BIAS, Fusion.GEMM_BIAS_ACT)
# Fusion pattern inside a node -> the api of its fused benchmark: the API whose log side claims it
# (ApiDef.log.contrib_fusions), else ANY.
FUSED_API: dict[str, str] = {**{f.value: ANY for f in ANY_API_FUSIONS},
                             **{f.value: api.value for api, d in REGISTRY.items() for f in d.log.contrib_fusions}}
# ONNX op of a member -> the API charged for it: the one whose log side claims its ops (ApiDef.log.contrib_ops).
CHARGED_OPS: dict[str, str] = {op: api.value for op, apis in OP_APIS.items() for api in apis
                               if api in REGISTRY and REGISTRY[api].log.contrib_ops}
GEMM_OPS = frozenset({"MatMul", "Gemm"})
# (api, fusion) of a logged plain call that runs a whole fusion candidate into an output the
# framework's own kernel pre-filled (ApiDef.prefilled): ORT's Gemm for MatMul + bias Add runs
# BroadcastBiasKernel (Y = bias) and then cublasGemmEx with beta = 1.
PREFILLED_CALLS = frozenset((api.value, f.value) for api, d in REGISTRY.items() for f in d.prefilled)


def prefilled_calls(model: Model, layers: tuple[int, ...], logged: dict[int, ExecutedCall]
                    ) -> dict[int, tuple[FusionCandidate, ExecutedCall]]:
    """Anchor -> (candidate, call) for the fusion candidates inside one framework node's ``layers``
    whose anchor alone has a logged call, a plain one of an API that runs that fusion into a
    pre-filled output (``PREFILLED_CALLS``): the call, with that fusion and the candidate's key,
    stands for the whole chain. A chain that API cannot benchmark keeps the plain call."""
    covered = set(layers)
    out: dict[int, tuple[FusionCandidate, ExecutedCall]] = {}
    for cand in model.fusions:
        call = logged.get(cand.layers[0]) if cand.layers else None
        if (call is None or not cand.key or not set(cand.layers) <= covered or call.fusion != Fusion.NONE.value
                or (call.api, cand.pattern) not in PREFILLED_CALLS or any(i in logged for i in cand.layers[1:])):
            continue
        try:
            REGISTRY[Api(call.api)].builder(cand, model, Precision(call.precision))  # type: ignore[misc]
        except (Unsupported, ValueError):
            continue
        out[cand.layers[0]] = (cand, replace(call, fusion=cand.pattern, key=cand.key))
    return out


def contrib_calls(model: Model, op: str, layers: tuple[int, ...], precision: str,
                  logged: dict[int, ExecutedCall] | None = None) -> tuple[ExecutedCall, ...]:
    """The benchmarks standing for one contrib node (ORT op ``op`` over ``layers``), in layer order; () for others.

    ``logged``: calls the library logs assign to layers; a GEMM member that has one keeps it
    (ORT's FusedMatMul is a cuBLAS call), and where it is the plain cublasGemmEx of a MatMul +
    bias Add the node covers (ORT's Gemm), it becomes that fusion's call (``prefilled_calls``).
    """
    if op not in ORT_CONTRIB or not layers or (op in FUSED_ONLY_WHEN_SEVERAL and len(layers) < 2):
        return ()
    logged = logged or {}
    covered = set(layers)
    calls: list[tuple[int, ExecutedCall]] = []
    charged: set[int] = set()
    for anchor, (cand, call) in prefilled_calls(model, layers, logged).items():
        calls.append((anchor, call))
        charged.update(cand.layers)
    for cand in model.fusions:
        api = FUSED_API.get(cand.pattern)
        if api is None or not cand.key or not set(cand.layers) <= covered or any(i in logged for i in cand.layers):
            continue
        calls.append((min(cand.layers), ExecutedCall(api, ANY, precision, cand.pattern, key=cand.key)))
        charged.update(cand.layers)
    for i in layers:
        layer = model.layers[i]
        if i in charged or layer.op in NO_COPY_OPS:
            continue
        if i in logged:
            call = logged[i] if logged[i].key else replace(logged[i], key=layer.key)
        elif layer.op in CHARGED_OPS:
            call = ExecutedCall(CHARGED_OPS[layer.op], ANY, precision, key=layer.key)
        elif layer.op in GEMM_OPS:
            call = ExecutedCall(ANY, ANY, precision, key=layer.key)
        else:
            call = ExecutedCall(Api.COPY.value, ROOFLINE, precision, key=layer.key)
        calls.append((i, call))
    return tuple(c for _, c in sorted(calls, key=lambda t: t[0]))
