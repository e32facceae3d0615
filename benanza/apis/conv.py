"""cuDNN legacy convolutions: cudnnConvolutionForward and cudnnConvolutionBiasActivationForward."""

from __future__ import annotations

from typing import Any

from benanza.apis.base import (
    ACTIVATION_COEF,
    ACTIVATION_MODE,
    FLOAT_DTYPES,
    ApiDef,
    ApiFamily,
    JobFields,
    Unsupported,
    _layout,
)
from benanza.apis.job_table import FUSION, KEY, PRECISION, Column, Kind, choice, ints
from benanza.apis.log_side import LogSide, Signature, int_list, nd, tensor
from benanza.library import Activation, Api, ConvFwdAlgo, Fusion, Precision
from benanza.model.layer import FusionCandidate, Layer, Model

# Fusions whose chain adds a second tensor (the residual) before the activation.
RESIDUAL_FUSIONS = frozenset({Fusion.CONV_BIAS_ADD_ACT})
# Conv chains one fused call runs (inference BN folds into the weights and bias).
CONV_FUSIONS = (Fusion.CONV_BIAS, Fusion.CONV_BIAS_ACT, Fusion.CONV_BIAS_ADD_ACT, Fusion.CONV_BN, Fusion.CONV_BN_ACT)


def _conv_dims(layer: Layer) -> tuple[list[int], dict[str, Any]]:
    """The 18 numbers of a bz::ConvDims row, and the manifest's shapes, for one Conv layer."""
    if len(layer.inputs) < 2 or not layer.outputs:
        raise Unsupported("Conv without weights or output")
    x, w, y = layer.inputs[0], layer.inputs[1], layer.outputs[0]
    if x.dtype not in FLOAT_DTYPES:
        raise Unsupported(f"input dtype {x.dtype} is not a floating-point type")
    rank = len(x.shape)
    if rank not in (3, 4) or len(w.shape) != rank or len(y.shape) != rank:
        raise Unsupported(f"{rank - 2}-D convolution (only 1-D and 2-D are generated)")
    a = layer.attrs
    pads, strides, dil = list(a["pads"]), list(a["strides"]), list(a["dilations"])
    if rank == 3:  # 1-D: an H of 1
        x_s, w_s, y_s = (*x.shape[:2], 1, x.shape[2]), (*w.shape[:2], 1, w.shape[2]), (*y.shape[:2], 1, y.shape[2])
        pads, strides, dil = [0, pads[0], 0, pads[1]], [1, *strides], [1, *dil]
    else:
        x_s, w_s, y_s = tuple(x.shape), tuple(w.shape), tuple(y.shape)
    n, c, h, wd = x_s
    k, cg, r, s = w_s
    g = int(a.get("group", 1))
    if g < 1 or c % g or k % g or cg * g != c:
        raise Unsupported(f"inconsistent groups: C={c}, K={k}, filter channels={cg}, group={g}")
    dims = [n, c, h, wd, k, r, s, pads[0], pads[1], pads[2], pads[3], *strides, *dil, g, y_s[2], y_s[3]]
    shapes = {"x": list(x.shape), "w": list(w.shape), "y": list(y.shape), "pads": list(a["pads"]),
              "strides": list(a["strides"]), "dilations": list(a["dilations"]), "group": g}
    return [int(v) for v in dims], shapes


CONV_FWD_ALGORITHMS = tuple(a.value for a in ConvFwdAlgo)


def conv_fwd_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cudnnConvolutionForward: one Conv layer, all 8 forward algorithms."""
    if not isinstance(item, Layer) or item.op != "Conv":
        raise Unsupported("cudnnConvolutionForward takes a single Conv layer")
    dims, shapes = _conv_dims(item)
    return JobFields({"dims": dims}, shapes, CONV_FWD_ALGORITHMS, _layout(precision))


def conv_bias_act_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cudnnConvolutionBiasActivationForward: a conv fusion chain, act(conv + bias [+ z])."""
    if not isinstance(item, FusionCandidate):
        raise Unsupported("cudnnConvolutionBiasActivationForward takes a fusion candidate")
    fusion = Fusion(item.pattern)
    conv, last = model.layers[item.layers[0]], model.layers[item.layers[-1]]
    if conv.op != "Conv":
        raise Unsupported(f"fusion {fusion.value} does not start with a Conv")
    dims, shapes = _conv_dims(conv)
    act = Activation(item.activation) if item.activation else Activation.IDENTITY
    coef = ACTIVATION_COEF.get(last.op, lambda _: 0.0)(last.attrs) if item.activation else 0.0
    if last.op == "Clip" and float(last.attrs.get("min", 0.0)) != 0.0:
        raise Unsupported("Clip with min != 0 is not a clipped ReLU")
    residual = fusion in RESIDUAL_FUSIONS
    shapes = {**shapes, "bias": [dims[4]], "activation": act.value, "coef": coef}
    if residual:
        shapes["z"] = shapes["y"]
    row = {"dims": dims, "act": act.value, "coef": coef, "alpha2": 1.0 if residual else 0.0}
    return JobFields(row, shapes, CONV_FWD_ALGORITHMS, _layout(precision))


# Where this module's APIs come in the job order (jobs are numbered in it: benanza.library.Api).
ORDER = 10
# The vocabulary entries of this module's APIs: benanza.library builds ``Api`` (member -> the
# call as logs print it) and ``OP_APIS`` (the ONNX ops each serves) from them, reading this
# literal without importing the module.
VOCABULARY = {
    "CONV_FWD": {"call": "cudnnConvolutionForward", "ops": ("Conv",)},
    "CONV_BIAS_ACT": {"call": "cudnnConvolutionBiasActivationForward"},  # fusions only
}


# The 18 numbers of a bz::ConvDims (conv_dims in csrc/benanza/cudnn_conv.h).
CONV_DIMS = ints("dims", 18)



def conv_layer_signature(layer: Layer) -> Signature | None:
    """A Conv layer's shapes as a cuDNN convolution logs them (x, w, y, pads, strides, dilations)."""
    if len(layer.inputs) < 2 or not layer.outputs:
        return None
    pads = list(layer.attrs.get("pads", []))
    n = len(pads) // 2
    return ("conv", nd(layer.inputs[0].shape), nd(layer.inputs[1].shape), nd(layer.outputs[0].shape),
            tuple(pads[:n]), tuple(pads[n:]), tuple(layer.attrs.get("strides", ())),
            tuple(layer.attrs.get("dilations", ())))


def _legacy_conv_signature(call: Any) -> Signature | None:
    x, w, y = tensor(call, "xDesc"), tensor(call, "wDesc"), tensor(call, "yDesc")
    conv = call.descriptors.get("convDesc", {})
    if x is None or w is None or y is None:
        return None
    pads = int_list(conv.get("padA"))
    return ("conv", nd(x.dims), nd(w.dims), nd(y.dims), pads, pads, int_list(conv.get("strideA")),
            int_list(conv.get("dilationA")))


def _legacy_conv_log(fusion: Fusion) -> LogSide:
    """A legacy convolution call: its algorithm is the enum it was called with."""
    return LogSide(cudnn_call=True, graph_recogniser=None, cublas_call=None, layer_signature=conv_layer_signature,
                   call_signature=_legacy_conv_signature, algorithm=lambda call: call.algo, fusion=fusion,
                   graph_fusions=(), contrib_fusions=(), contrib_ops=False)


DEFINITIONS = (
    ApiDef(Api.CONV_FWD, "bench_conv_fwd", "cudnn_conv_fwd.cu.j2", ApiFamily.LEGACY, "cudnn", conv_fwd_job,
           columns=(KEY, PRECISION, CONV_DIMS), algorithms=CONV_FWD_ALGORITHMS,
           tensor_core=True, host_only=True, weights=True, both_layouts=True,
           log=_legacy_conv_log(Fusion.NONE)),
    ApiDef(Api.CONV_BIAS_ACT, "bench_conv_bias_act", "cudnn_conv_bias_act.cu.j2", ApiFamily.LEGACY, "cudnn",
           conv_bias_act_job,
           columns=(KEY, PRECISION, FUSION, choice("act", ACTIVATION_MODE), Column("coef", Kind.REAL),
                    Column("alpha2", Kind.REAL32), CONV_DIMS),
           algorithms=CONV_FWD_ALGORITHMS, tensor_core=True, host_only=True, weights=True, both_layouts=True,
           fusions=CONV_FUSIONS, log=_legacy_conv_log(Fusion.CONV_BIAS_ACT)),
)
