"""The log side of an API: how its calls appear in a framework's cuDNN/cuBLAS logs.

Why here: the profile readers (``benanza.profile``) link logged calls to layers with what each
``ApiDef.log`` says, so an API's log side is written in its own module beside its job builder,
and an API added without one fails (``tests/test_apis.py``) instead of going silently unmapped.
A logged call is the profile readers' record (a cuDNN ``ExecutedCall`` or a cuBLAS ``GemmCall``);
this package sits before them in the data flow, so the readers here take it as ``Any`` and read
only its fields (``tensors``, ``descriptors``, ``args``, ``operations``, ``algo``, ``m``/``n``/``k``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from benanza.apis.graph_ops import GraphOp
from benanza.library import Fusion
from benanza.model.layer import Layer

# A shape signature: a layer and the logged calls of its signature are the same work (link 1 of
# the mapping, docs/PROFILES.md); its first item names the kind of work ("conv", "gemm", "pool"...).
Signature = tuple
LayerSignature = Callable[[Layer], Signature | None]
CallSignature = Callable[[Any], Signature | None]
# Pointwise roles after a graph's main operation ("bias", "add", "act") -> the fusion they make.
GraphFusions = tuple[tuple[frozenset[str], Fusion], ...]


@dataclass(frozen=True, kw_only=True)
class LogSide:
    """Every part is required, so that an API states each one (``None`` or () where it has none)."""

    # Recognisers, at most one set: a legacy cuDNN record of the API's function name (its ``Api``
    # value) is its call; or an op graph whose whole operation list this accepts (graph API,
    # exclusive of each other); or a cuBLAS log line whose (function, kind) this accepts.
    cudnn_call: bool
    graph_recogniser: Callable[[Sequence[GraphOp]], bool] | None
    cublas_call: Callable[[str, str], bool] | None
    # The signature of a layer of each ONNX op the API serves, and of a logged call; None: its
    # calls are not linked to layers by shape (a fused graph read through an ORT contrib node).
    layer_signature: LayerSignature | None
    call_signature: CallSignature | None
    # Legacy cuDNN call -> the algorithm (or mode) spelling its benchmarks give it; None: "default".
    algorithm: Callable[[Any], str | None] | None
    # The fusion every call of it runs (cudnnConvolutionBiasActivationForward), or Fusion.NONE ...
    fusion: Fusion
    # ... or, for a graph, the first of these whose roles its pointwise epilogue holds.
    graph_fusions: GraphFusions
    # Inside an ORT contrib node (profile.contrib): the fusion patterns charged to this API, and
    # whether the layers of the ops it serves are.
    contrib_fusions: tuple[Fusion, ...]
    contrib_ops: bool


# An API that no framework log shows (the copy roofline, the system's ceilings): says so by name.
NO_LOG_SIDE = LogSide(cudnn_call=False, graph_recogniser=None, cublas_call=None, layer_signature=None,
                      call_signature=None, algorithm=None, fusion=Fusion.NONE, graph_fusions=(), contrib_fusions=(),
                      contrib_ops=False)


def nd(shape: Sequence[int], rank: int = 4) -> tuple[int, ...]:
    """cuDNN describes tensors with at least 4 dims: (N, C) is (N, C, 1, 1)."""
    dims = tuple(int(d) for d in shape)
    return dims + (1,) * (rank - len(dims)) if len(dims) < rank else dims


def int_list(text: str | None) -> tuple[int, ...]:
    """A cuDNN log's integer list (``[1,2]`` or ``1,2``); () when it is none."""
    body = (text or "").strip().strip("[]")
    try:
        return tuple(int(x) for x in body.split(",") if x.strip())
    except ValueError:
        return ()


def tensor(call: Any, *roles: str) -> Any:
    """The first tensor of a logged call or graph operation with one of ``roles`` (in that order), else None."""
    tensors = call.tensors
    return next((t for role in roles for t in tensors if t.role == role), None)


def desc_field(call: Any, name: str) -> str | None:
    """A field of a legacy call's descriptors, else its argument of that name."""
    return next((d[name] for d in call.descriptors.values() if name in d), call.args.get(name))


def io_layer(kind: str) -> LayerSignature:
    """Signature of its first input and its output (pooling)."""
    return lambda layer: (kind, nd(layer.inputs[0].shape), nd(layer.outputs[0].shape)) if layer.outputs else None


def x_layer(kind: str) -> LayerSignature:
    """Signature of its first input alone (shape-preserving ops)."""
    return lambda layer: (kind, nd(layer.inputs[0].shape))


def first_last_call(kind: str) -> CallSignature:
    """Signature of a legacy call's first and last tensor (x, y)."""
    return lambda call: (kind, nd(call.tensors[0].dims), nd(call.tensors[-1].dims)) if call.tensors else None


def first_call(kind: str) -> CallSignature:
    """Signature of a legacy call's first tensor."""
    return lambda call: (kind, nd(call.tensors[0].dims)) if call.tensors else None
