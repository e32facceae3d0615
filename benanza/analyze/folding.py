"""Which layers fold into a convolution's or GEMM's weights and bias (BatchNormalization, Mul/Add
by per-channel constants): the structure of the model's graph that the execution bound
(``analyze/execution.py``) charges at zero cost.  Split from there: finding the folds reads
only the graph, costing them reads the measurements."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from benanza.model.graph import is_per_channel
from benanza.model.layer import Layer, Model, Tensor

COMPUTE_OPS = frozenset({"Conv", "Gemm", "MatMul"})  # charged their measured calls (FLOP-bound work)
FOLDABLE_OPS = frozenset({"BatchNormalization", "Mul", "Add"})  # into a conv/GEMM's weights and bias


def tensor_consumers(model: Model) -> dict[str, list[int]]:
    """The layers that read each tensor, by tensor name."""
    out: dict[str, list[int]] = defaultdict(list)
    for layer in model.layers:
        for t in layer.inputs:
            out[t.name].append(layer.index)
    return out


def _sole_consumer(layer: Layer, consumers: Mapping[str, list[int]]) -> int | None:
    """The one layer that reads ``layer``'s only output, if exactly one does."""
    if len(layer.outputs) != 1:
        return None
    readers = set(consumers.get(layer.outputs[0].name, ()))
    return next(iter(readers)) if len(readers) == 1 else None


def _per_channel_constant(follower: Layer, anchor: Layer, current: Tensor) -> bool:
    """Whether ``follower`` applies constants per output channel of ``anchor`` (or one scalar) to
    ``current``, the tensor the folds have reached: after a folded BatchNormalization a Mul/Add by a
    [C,1,1] constant is checked against the conv's channel axis, not against the BatchNormalization."""
    if follower.op == "BatchNormalization":
        return follower.inputs[0].name == current.name and all(t.constant for t in follower.inputs[1:])
    others = [t for t in follower.inputs if t.name != current.name]
    return len(follower.inputs) == 2 and len(others) == 1 and is_per_channel(others[0], anchor.op, current)


def folds(model: Model) -> dict[int, tuple[int, ...]]:
    """conv/GEMM index -> the followers folded into its weights (BatchNormalization, Mul/Add by constants)."""
    consumers = tensor_consumers(model)
    out: dict[int, tuple[int, ...]] = {}
    for layer in model.layers:
        if layer.op not in COMPUTE_OPS or len(layer.outputs) != 1:
            continue
        chain, cur = [], layer
        while (nxt := _sole_consumer(cur, consumers)) is not None:
            follower = model.layers[nxt]
            if follower.op not in FOLDABLE_OPS or not _per_channel_constant(follower, layer, cur.outputs[0]):
                break
            chain.append(nxt)
            cur = follower
        if chain:
            out[layer.index] = tuple(chain)
    return out
