"""The cuDNN graph API through cudnn-frontend: conv_fprop and matmul graphs, every engine config
or the named ones a framework ran."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from benanza.apis.base import ACTIVATION_MODE, ApiDef, ApiFamily, JobFields, Unsupported, _layout
from benanza.apis.conv import CONV_DIMS, CONV_FUSIONS, _conv_dims, conv_bias_act_job, conv_layer_signature
from benanza.apis.engine_config import parse_engine_config_name
from benanza.apis.gemm import ALPHA_BETA, GEMM_DIMS, GEMM_FUSIONS, WEIGHTS, _gemm_chain, _weights, gemm_layer_signature
from benanza.apis.graph_ops import is_conv_graph, is_matmul_graph
from benanza.apis.job_table import ENGINES, FUSION, KEY, PRECISION, Column, Kind, Vocabulary, choice
from benanza.apis.log_side import GraphFusions, LogSide, Signature, nd, tensor
from benanza.library import Activation, Api, Fusion, Precision
from benanza.model.layer import FusionCandidate, Layer, Model

# Activation -> the graph API's pointwise mode (cudnn_frontend::PointwiseMode_t spelling).
# A clipped ReLU is RELU_FWD with an upper clip; ELU's alpha is its own attribute.
GRAPH_POINTWISE: dict[Activation, str] = {
    Activation.RELU: "RELU_FWD",
    Activation.SIGMOID: "SIGMOID_FWD",
    Activation.TANH: "TANH_FWD",
    Activation.CLIPPED_RELU: "RELU_FWD",
    Activation.ELU: "ELU_FWD",
    Activation.IDENTITY: "IDENTITY",
}


def graph_conv_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cuDNN graph API: one operation graph conv_fprop [-> ADD bias -> ADD z -> activation], every engine config.

    A fusion computes what ``conv_bias_act_job`` gives the legacy fused call (BN folded
    into weights and bias, Clip as a clipped ReLU), so both APIs measure the same chain;
    the engine configs are enumerated by the binary (heuristics A, B and the fallback list).
    """
    if isinstance(item, Layer):
        if item.op != "Conv":
            raise Unsupported("the graph-API convolution takes a Conv layer or a conv fusion")
        dims, shapes = _conv_dims(item)
        act, coef, alpha2, bias, has_act = Activation.IDENTITY, 0.0, 0.0, False, False
    else:
        legacy = conv_bias_act_job(item, model, precision)
        dims, shapes = legacy.row["dims"], legacy.shapes
        act, coef, alpha2 = Activation(legacy.row["act"]), float(legacy.row["coef"]), float(legacy.row["alpha2"])
        bias, has_act = True, bool(item.activation)
    ops = ["conv_fprop", *(["add_bias"] if bias else []), *(["add_z"] if alpha2 else []),
           *([GRAPH_POINTWISE[act].lower()] if has_act else [])]
    row = {"dims": dims, "bias": bias, "alpha2": alpha2, "has_act": has_act, "pointwise": GRAPH_POINTWISE[act],
           "act": act.value, "coef": coef, "upper_clip": coef if act is Activation.CLIPPED_RELU else math.inf,
           "elu_alpha": coef if act is Activation.ELU else 1.0, "engines": []}
    return JobFields(row, {**shapes, "graph": ops}, ("*",), _layout(precision))


def graph_matmul_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """cuDNN graph API: matmul [-> scale alpha -> ADD beta C -> ADD bias -> ReLU] of a Gemm/MatMul, every engine config.

    Operands keep the model's row-major layout (a transpose is a stride); a fusion adds
    the Add's constant as a length-N bias and ReLU, as the cuBLASLt epilogue does.
    """
    shape, bias, relu = _gemm_chain(item, model, "the graph matmul benchmark fuses ReLU only, not {}")
    ops = ["matmul", *(["scale_alpha"] if shape.alpha != 1.0 else []), *(["add_c"] if shape.c_rows else []),
           *(["add_bias"] if bias else []), *(["relu_fwd"] if relu else [])]
    row = {"dims": shape.dims(), "alpha": shape.alpha, "beta": shape.beta, "bias": bias, "relu": relu, "engines": [],
           **_weights(shape)}
    return JobFields(row, {**shape.describe(), "bias": [shape.n] if bias else None, "relu": relu, "graph": ops},
                     ("*",))


def engine_cells(engines: Iterable[dict[str, Any]]) -> list[str]:
    """A row's named engine configs as the job table's ``engines`` cells: "id" or "id,KNOB=value,..."
    (csrc/benanza/cudnn_graph.h add_named_configs reads them)."""
    return [",".join([str(int(e["id"])), *(f"{k}={int(v)}" for k, v in e["knobs"])]) for e in engines]


def with_named_configs(fields: JobFields, names: Iterable[str]) -> JobFields:
    """``fields`` measuring exactly the engine configs ``names`` (canonical, as logs and benchmarks spell them)."""
    names = sorted(set(names))
    engines = []
    for name in names:
        engine_id, knobs = parse_engine_config_name(name)
        engines.append({"id": engine_id, "knobs": [[k, v] for k, v in sorted(knobs.items())]})
    return replace(fields, row={**fields.row, "engines": engines}, algorithms=tuple(names))


# Where this module's APIs come in the job order (jobs are numbered in it: benanza.library.Api).
ORDER = 20
# The vocabulary entries of this module's APIs: benanza.library builds ``Api`` (member -> the
# call as logs print it) and ``OP_APIS`` (the ONNX ops each serves) from them, reading this
# literal without importing the module.
VOCABULARY = {
    "GRAPH_CONV": {"call": "cudnn_frontend::graph::conv_fprop", "ops": ("Conv",)},  # every engine config
    "GRAPH_MATMUL": {"call": "cudnn_frontend::graph::matmul", "ops": ("Gemm", "MatMul")},
}


POINTWISE_MODE = Vocabulary("fe::PointwiseMode_t", tuple(dict.fromkeys(GRAPH_POINTWISE.values())),
                            "fe::PointwiseMode_t::")



def _graph_conv_signature(call: Any) -> Signature | None:
    op = call.operations[0]
    x, w, y = tensor(op, "xDesc", "x"), tensor(op, "wDesc", "w"), tensor(op, "yDesc", "y")
    if x is None or w is None or y is None:
        return None
    return ("conv", nd(x.dims), nd(w.dims), nd(y.dims), op.pre_padding, op.post_padding, op.strides, op.dilations)


def _graph_matmul_signature(call: Any) -> Signature | None:
    op = call.operations[0]
    a, c = tensor(op, "aDesc", "a"), tensor(op, "cDesc", "c")
    if a is None or c is None or len(a.dims) < 2:
        return None
    return ("gemm", a.dims[-1],
            tuple(sorted((math.prod(a.dims[:-1]) // max(1, math.prod(c.dims[:-2])), c.dims[-1]))),
            math.prod(c.dims[:-2]) or 1)


# The pointwise roles after the main operation -> the fusion the graph ran, first match wins.
CONV_GRAPH_FUSIONS: GraphFusions = ((frozenset({"add", "act"}), Fusion.CONV_BIAS_ADD_ACT),
                                    (frozenset({"act"}), Fusion.CONV_BIAS_ACT), (frozenset({"bias"}), Fusion.CONV_BIAS))
MATMUL_GRAPH_FUSIONS: GraphFusions = ((frozenset({"act"}), Fusion.GEMM_BIAS_ACT),
                                      (frozenset({"bias"}), Fusion.GEMM_BIAS))

DEFINITIONS = (
    ApiDef(Api.GRAPH_CONV, "bench_graph_conv", "cudnn_graph_conv.cu.j2", ApiFamily.GRAPH, "cudnn", graph_conv_job,
           columns=(KEY, PRECISION, FUSION, Column("bias", Kind.FLAG), Column("alpha2", Kind.REAL32),
                    Column("has_act", Kind.FLAG), choice("pointwise", POINTWISE_MODE), choice("act", ACTIVATION_MODE),
                    Column("coef", Kind.REAL), Column("upper_clip", Kind.REAL), Column("elu_alpha", Kind.REAL),
                    CONV_DIMS, ENGINES),
           tensor_core=True, host_only=True, weights=True, both_layouts=True, named_configs=True,
           fusions=CONV_FUSIONS,
           log=LogSide(cudnn_call=False, graph_recogniser=is_conv_graph, cublas_call=None,
                       layer_signature=conv_layer_signature, call_signature=_graph_conv_signature, algorithm=None,
                       fusion=Fusion.NONE, graph_fusions=CONV_GRAPH_FUSIONS, contrib_fusions=(), contrib_ops=False)),
    ApiDef(Api.GRAPH_MATMUL, "bench_graph_matmul", "cudnn_graph_matmul.cu.j2", ApiFamily.GRAPH, "cudnn",
           graph_matmul_job, columns=(KEY, PRECISION, FUSION, GEMM_DIMS, *ALPHA_BETA, Column("bias", Kind.FLAG),
                                      Column("relu", Kind.FLAG), *WEIGHTS, ENGINES),
           tensor_core=True, host_only=True, weights=True, named_configs=True,
           fusions=GEMM_FUSIONS,
           log=LogSide(cudnn_call=False, graph_recogniser=is_matmul_graph, cublas_call=None,
                       layer_signature=gemm_layer_signature, call_signature=_graph_matmul_signature, algorithm=None,
                       fusion=Fusion.NONE, graph_fusions=MATMUL_GRAPH_FUSIONS, contrib_fusions=(),
                       contrib_ops=False)),
)
