"""The cuDNN graph API's fused pointwise chain (cudnn-frontend pointwise nodes, one op graph) for an
exported elementwise chain (Fusion.POINTWISE: GELU in its Erf and tanh forms, SiLU, bias + GELU).

The chain becomes a small program of plain numbers (the template and the fp32 reference kernel
read the same one): step i computes register i + 1 from registers (0 is the chain's input x)
and constants.  Constant values are not in the layer IR, so every scalar constant is 2.0
(defined for Pow, Div, Sqrt's neighbours alike) and every per-column constant (a bias) is
filled at random: the time of a pointwise pass does not depend on the values.  The copy
roofline stays the chain's floor in the bound (analyze.execution).
"""

from __future__ import annotations

import math

from benanza.apis.base import FLOAT_DTYPES, ApiDef, ApiFamily, JobFields, Unsupported
from benanza.apis.graph_ops import is_pointwise_graph
from benanza.apis.job_table import ENGINES, FUSION, KEY, PRECISION, Column, Kind, Vocabulary, ints
from benanza.apis.log_side import LogSide
from benanza.library import Api, Fusion, Math, Precision
from benanza.model.layer import FusionCandidate, Layer, Model

# ONNX op -> (cudnn_frontend PointwiseMode_t, the reference kernel's PwOp, operand count).
POINTWISE_MODES: dict[str, tuple[str, str, int]] = {
    "Add": ("ADD", "Add", 2), "Sub": ("SUB", "Sub", 2), "Mul": ("MUL", "Mul", 2), "Div": ("DIV", "Div", 2),
    "Pow": ("POW", "Pow", 2), "Erf": ("ERF", "Erf", 1), "Tanh": ("TANH_FWD", "Tanh", 1),
    "Sigmoid": ("SIGMOID_FWD", "Sigmoid", 1), "Relu": ("RELU_FWD", "Relu", 1), "Sqrt": ("SQRT", "Sqrt", 1),
    "Exp": ("EXP", "Exp", 1), "Neg": ("NEG", "Neg", 1), "Reciprocal": ("RECIPROCAL", "Reciprocal", 1),
}
MAX_STEPS, MAX_CONSTS = 16, 8  # kernels.h kMaxPwSteps, kMaxPwConsts
NO_OPERAND = -1  # kernels.h kNoOperand
SCALAR_VALUE = 2.0


def _const_operand(k: int) -> int:
    return -2 - k


def graph_pointwise_job(item: Layer | FusionCandidate, model: Model, precision: Precision) -> JobFields:
    """One op graph of cudnn-frontend pointwise nodes over x [rows, cols, 1, 1] for a pointwise chain."""
    if not isinstance(item, FusionCandidate) or item.pattern != Fusion.POINTWISE.value:
        raise Unsupported("the fused pointwise chain takes a pointwise-chain fusion candidate")
    members = [model.layers[i] for i in sorted(item.layers)]
    if len(members) > MAX_STEPS:
        raise Unsupported(f"a chain of {len(members)} ops (at most {MAX_STEPS})")
    inside = {m.outputs[0].name for m in members}
    outer = [t for m in members for t in m.inputs if not t.constant and t.name not in inside]
    if not outer or len({t.name for t in outer}) != 1:
        raise Unsupported("a pointwise chain reads one variable tensor")
    x = outer[0]
    if x.dtype not in FLOAT_DTYPES or len(x.shape) < 1:
        raise Unsupported(f"chain input of dtype {x.dtype} and rank {len(x.shape)}")
    cols = int(x.shape[-1])
    rows = math.prod(x.shape[:-1]) if len(x.shape) > 1 else 1
    registers: dict[str, int] = {x.name: 0}
    const_cols: list[int] = []
    const_slot: dict[str, int] = {}
    modes, ops, a_ops, b_ops = [], [], [], []
    for step, layer in enumerate(members):
        if layer.op not in POINTWISE_MODES:
            raise Unsupported(f"{layer.op} has no graph-API pointwise mode here")
        mode, ref_op, arity = POINTWISE_MODES[layer.op]
        if len(layer.inputs) != arity:
            raise Unsupported(f"{layer.op} with {len(layer.inputs)} inputs")
        operands = []
        for t in layer.inputs:
            if t.name in registers:
                operands.append(registers[t.name])
                continue
            if not t.constant:
                raise Unsupported(f"{layer.op} reads a tensor from outside the chain")
            n = math.prod(t.shape) if t.shape else 1
            if n not in (1, cols) or (n == cols and cols > 1 and t.shape[-1] != cols):
                raise Unsupported(f"{layer.op} constant of shape {list(t.shape)} (scalar or [cols] only)")
            if t.name not in const_slot:
                if len(const_cols) == MAX_CONSTS:
                    raise Unsupported(f"more than {MAX_CONSTS} constants")
                const_slot[t.name] = len(const_cols)
                const_cols.append(n)
            operands.append(_const_operand(const_slot[t.name]))
        if all(o < 0 for o in operands):
            raise Unsupported(f"{layer.op} of constants alone")
        registers[layer.outputs[0].name] = step + 1
        modes.append(mode)
        ops.append(ref_op)
        a_ops.append(operands[0])
        b_ops.append(operands[1] if arity == 2 else NO_OPERAND)
    if tuple(members[-1].outputs[0].shape) != tuple(x.shape):
        raise Unsupported("the chain's output has another shape than its input")
    row = {"rows": rows, "cols": cols, "modes": modes, "ops": ops, "a": a_ops, "b": b_ops, "const_cols": const_cols,
           "scalar": SCALAR_VALUE, "engines": []}
    shapes = {"x": list(x.shape), "rows": rows, "cols": cols, "members": [m.op for m in members],
              "constants": const_cols}
    return JobFields(row, shapes, ("*",), "", Math.NONE.value)


ORDER = 45
# The vocabulary entries of this module's APIs: benanza.library builds ``Api`` (member -> the
# call as logs print it) and ``OP_APIS`` (the ONNX ops each serves) from them, reading this
# literal without importing the module.
VOCABULARY = {
    "GRAPH_POINTWISE": {"call": "cudnn_frontend::graph::pointwise"},  # fused chains only (Fusion.POINTWISE)
}

# The steps' vocabularies: cudnn-frontend's mode and the reference kernel's op (csrc/benanza/kernels.h PwOp).
STEP_MODE = Vocabulary("fe::PointwiseMode_t", tuple(dict.fromkeys(m for m, _, _ in POINTWISE_MODES.values())),
                       "fe::PointwiseMode_t::")
STEP_OP = Vocabulary("bz::PwOp", tuple(dict.fromkeys(o for _, o, _ in POINTWISE_MODES.values())), "bz::PwOp::")

DEFINITIONS = (
    ApiDef(Api.GRAPH_POINTWISE, "bench_graph_pointwise", "cudnn_graph_pointwise.cu.j2", ApiFamily.GRAPH, "cudnn",
           graph_pointwise_job,
           columns=(KEY, PRECISION, FUSION, Column("rows", Kind.INT), Column("cols", Kind.INT),
                    Column("scalar", Kind.REAL32), Column("modes", Kind.CHOICES, 1, MAX_STEPS, STEP_MODE),
                    Column("ops", Kind.CHOICES, 1, MAX_STEPS, STEP_OP), ints("a", at_least=1, at_most=MAX_STEPS),
                    ints("b", at_least=1, at_most=MAX_STEPS), ints("const_cols", at_most=MAX_CONSTS), ENGINES),
           host_only=True, fusions=(Fusion.POINTWISE,),
           log=LogSide(cudnn_call=False, graph_recogniser=is_pointwise_graph, cublas_call=None, layer_signature=None,
                       call_signature=None, algorithm=None, fusion=Fusion.NONE, graph_fusions=(),
                       contrib_fusions=(), contrib_ops=False)),
)
