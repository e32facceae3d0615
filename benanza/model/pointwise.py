"""Pointwise chains (GELU in its Erf and tanh forms, SiLU, a scale-shift-ReLU) as fusion candidates.

Exporters write GELU and SiLU as a handful of elementwise ops over one tensor; one fused
pass computes them, so the chain's floor is one copy of its output (the copy roofline),
against one pass per member unfused.  Kept apart: one pattern's facts per module.
"""

from __future__ import annotations

from benanza.library import Fusion
from benanza.model.attention import consumers_of, producers_of
from benanza.model.layer import FusionCandidate, Layer, Tensor

# Elementwise ops a chain may hold: every input is the chain's input, an earlier member's
# output, or a constant that broadcasts to it.
POINTWISE_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Erf", "Tanh", "Sigmoid", "Relu", "Sqrt", "Exp",
                           "Neg", "Reciprocal"})


def find_pointwise_chains(layers: list[Layer], model_outputs: set[str], taken: set[int]) -> list[FusionCandidate]:
    """Chains of >= 2 elementwise layers over one tensor x (GELU's Erf and tanh forms, SiLU's x * sigmoid(x)),
    with a bias add before them when only the chain reads its output.

    One fused pass reads x and writes the chain's output: its floor is the copy roofline of
    that output, against one pass per member unfused.  Each member but the last feeds only
    the next one; x may feed several members (GELU's Mul by x).
    """
    producers, consumers = producers_of(layers), consumers_of(layers)
    found: list[FusionCandidate] = []
    taken = set(taken)
    for start in layers:
        if start.op not in POINTWISE_OPS or start.index in taken or not start.outputs:
            continue
        variable = [t for t in start.inputs if not t.constant]
        if len({t.name for t in variable}) != 1 or tuple(variable[0].shape) != tuple(start.outputs[0].shape):
            continue
        x = variable[0]
        members, inside = [start.index], {x.name, start.outputs[0].name}
        current = start
        while True:
            readers = consumers.get(current.outputs[0].name, [])
            if len(readers) != 1 or current.outputs[0].name in model_outputs or len(current.outputs) != 1:
                break
            nxt = layers[readers[0]]
            if nxt.op not in POINTWISE_OPS or nxt.index in taken or not nxt.outputs:
                break
            side = [producers.get(t.name) for t in nxt.inputs if not t.constant and t.name not in inside]
            if any(i is None or not _side_branch(layers[i], x.name, taken, consumers, model_outputs) for i in side):
                break
            if tuple(nxt.outputs[0].shape) != tuple(x.shape):
                break
            members += [*(i for i in side if i is not None), nxt.index]
            inside.update({layers[i].outputs[0].name for i in side if i is not None} | {nxt.outputs[0].name})
            current = nxt
        while (src := producers.get(x.name)) is not None and _bias_before(layers[src], x, members, taken, consumers,
                                                                          model_outputs):
            members.insert(0, src)  # a bias add whose output only the chain reads: bias + GELU, bias + SiLU
            x = next(t for t in layers[src].inputs if not t.constant)
        if len(members) < 2:
            continue
        members = sorted(members)
        taken.update(members)
        found.append(FusionCandidate(Fusion.POINTWISE.value, tuple(members), tuple(layers[i].key for i in members)))
    return found


def _bias_before(layer: Layer, x: Tensor, members: list[int], taken: set[int], consumers: dict[str, list[int]],
                 outputs: set[str]) -> bool:
    """A pointwise layer of one variable tensor (of x's shape) and constants whose output x only
    the chain reads (a bias add before GELU) joins the chain at its front."""
    variable = [t for t in layer.inputs if not t.constant]
    return (layer.op in POINTWISE_OPS and layer.index not in taken and layer.index not in members
            and len(layer.outputs) == 1 and x.name not in outputs
            and len({t.name for t in variable}) == 1 and tuple(variable[0].shape) == tuple(x.shape)
            and all(c in members for c in consumers.get(x.name, ())))


def _side_branch(layer: Layer, x: str, taken: set[int], consumers: dict[str, list[int]], outputs: set[str]) -> bool:
    """A pointwise layer of x and constants alone, read once (GELU tanh form's 0.5 * x), joins the chain."""
    return (layer.op in POINTWISE_OPS and layer.index not in taken and len(layer.outputs) == 1
            and all(t.constant or t.name == x for t in layer.inputs)
            and len(consumers.get(layer.outputs[0].name, [])) == 1 and layer.outputs[0].name not in outputs)
