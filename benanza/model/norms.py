"""RMSNorm as exporters write it, found as a fusion candidate for the graph API's rmsnorm forward.

Hugging Face's ``LlamaRMSNorm`` (and T5's) exports as
``Pow(x, 2) -> ReduceMean(last axis, keepdims) -> Add(eps) -> Sqrt -> Div(x, .)``, or with
``Reciprocal`` and ``Mul(x, .)`` for the division, then ``Mul`` by the weight [cols].  One
normalization-forward call computes it; the planner benchmarks it as ``RMSNormalization``.
Kept apart from the attention module: one pattern's facts per module.
"""

from __future__ import annotations

import math

from benanza.library import Fusion
from benanza.model.layer import FusionCandidate, Layer


def _one_reader(layer: Layer, consumers: dict[str, list[int]], outputs: set[str]) -> int | None:
    name = layer.outputs[0].name
    readers = consumers.get(name, [])
    return readers[0] if len(readers) == 1 and name not in outputs and len(layer.outputs) == 1 else None


def _scalar_other(layer: Layer, name: str) -> bool:
    others = [t for t in layer.inputs if t.name != name]
    return len(layer.inputs) == 2 and len(others) == 1 and others[0].constant and math.prod(others[0].shape) == 1


def find_rmsnorms(layers: list[Layer], model_outputs: set[str], taken: set[int]) -> list[FusionCandidate]:
    """RMSNorm chains of ``layers`` that share no layer with ``taken``."""
    consumers: dict[str, list[int]] = {}
    for layer in layers:
        for name in dict.fromkeys(t.name for t in layer.inputs):
            consumers.setdefault(name, []).append(layer.index)
    found: list[FusionCandidate] = []
    used = set(taken)

    def step(layer: Layer, op: str | tuple[str, ...]) -> Layer | None:
        nxt = _one_reader(layer, consumers, model_outputs)
        if nxt is None or nxt in used or layers[nxt].op not in ((op,) if isinstance(op, str) else op):
            return None
        return layers[nxt]

    for sq in layers:
        if sq.op != "Pow" or sq.index in used or not _scalar_other(sq, sq.inputs[0].name):
            continue
        x = sq.inputs[0]
        if len(x.shape) < 2:
            continue
        mean = step(sq, "ReduceMean")
        if mean is None or tuple(mean.outputs[0].shape) != (*x.shape[:-1], 1):
            continue
        add = step(mean, "Add")
        if add is None or not _scalar_other(add, mean.outputs[0].name):
            continue
        root = step(add, "Sqrt")
        if root is None:
            continue
        chain = [sq, mean, add, root]
        nxt = step(root, ("Div", "Reciprocal"))
        if nxt is None:
            continue
        if nxt.op == "Reciprocal":
            chain.append(nxt)
            nxt = step(nxt, "Mul")
            if nxt is None:
                continue
        if {t.name for t in nxt.inputs} != {x.name, chain[-1].outputs[0].name}:
            continue
        chain.append(nxt)
        weight = step(nxt, "Mul")
        if weight is not None and any(t.constant and math.prod(t.shape) == x.shape[-1] for t in weight.inputs):
            chain.append(weight)
        members = sorted(layer.index for layer in chain)
        used.update(members)
        found.append(FusionCandidate(Fusion.RMSNORM.value, tuple(members), tuple(layers[i].key for i in members)))
    return found
