"""Shape signatures of model layers and logged library calls (link 1 of the mapping: a layer and
the calls of its signature are the same work), read from each API's log side (``ApiDef.log``)."""

from __future__ import annotations

from benanza.apis import REGISTRY, cublas_api
from benanza.apis.log_side import CallSignature, LayerSignature, Signature
from benanza.library import OP_APIS, Api
from benanza.model.layer import Layer
from benanza.profile import cudnn_log
from benanza.profile.cublas_log import GemmCall

SUCCESS = "CUDNN_STATUS_SUCCESS"


def _layer_signatures() -> dict[str, LayerSignature]:
    """ONNX op -> its signature, from the APIs that serve it (which must agree)."""
    found: dict[str, LayerSignature] = {}
    for op, apis in OP_APIS.items():
        for api in apis:
            fn = REGISTRY[api].log.layer_signature if api in REGISTRY else None
            if fn is None:
                continue
            if found.setdefault(op, fn) is not fn:
                raise RuntimeError(f"benanza.apis: the APIs of {op} give it different layer signatures")
    return found


# ONNX op -> its signature (the kind of call that can run it, and the shapes that call logs).
LAYER_SIGNATURES: dict[str, LayerSignature] = _layer_signatures()
# Api of a logged cuDNN call -> its signature.
CALL_SIGNATURES: dict[str, CallSignature] = {
    api.value: d.log.call_signature for api, d in REGISTRY.items()
    if d.log.call_signature is not None and d.log.cublas_call is None}


def layer_signature(layer: Layer) -> Signature | None:
    fn = LAYER_SIGNATURES.get(layer.op)
    if fn is None or not layer.inputs:
        return None
    return fn(layer)


def call_signature(call: cudnn_log.ExecutedCall | GemmCall) -> Signature | None:
    if isinstance(call, GemmCall):
        fn = REGISTRY[cublas_api(call.function, call.kind)].log.call_signature
    else:
        fn = CALL_SIGNATURES.get(call.api or "")
    return fn(call) if fn else None


def logged_api(call: cudnn_log.ExecutedCall | GemmCall) -> Api | None:
    """The ``Api`` of a logged call: the cuDNN reader's, or the cuBLAS API whose log side takes it."""
    if isinstance(call, GemmCall):
        return cublas_api(call.function, call.kind)
    return next((a for a in Api if a.value == call.api), None)
