"""Which layers fold into a convolution's or GEMM's weights and bias (BatchNormalization, Mul/Add
by per-channel constants): the structure of the model's graph that the execution bound
(``analyze/execution.py``) charges at zero cost.  Split from there: finding the folds reads
only the graph, costing them reads the measurements."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping

from benanza.model.layer import Layer, Model

COMPUTE_OPS = frozenset({"Conv", "Gemm", "MatMul"})  # charged their measured calls (FLOP-bound work)
FOLDABLE_OPS = frozenset({"BatchNormalization", "Mul", "Add"})  # into a conv/GEMM's weights and bias


def _consumers(model: Model) -> dict[str, list[int]]:
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


def _per_channel_constant(follower: Layer, producer: Layer) -> bool:
    """Whether ``follower`` applies constants per output channel (or one scalar) to ``producer``'s output."""
    out = producer.outputs[0]
    if follower.op == "BatchNormalization":
        return follower.inputs[0].name == out.name and all(t.constant for t in follower.inputs[1:])
    others = [t for t in follower.inputs if t.name != out.name]
    if len(others) != 1 or not others[0].constant or len(follower.inputs) != 2:
        return False
    shape, channels = others[0].shape, out.shape[1] if len(out.shape) > 1 else 1
    n = math.prod(shape) if shape else 1
    if n == 1:
        return True
    if producer.op == "Conv":  # [C,1,1] or [1,C,1,1]: broadcast along the channel axis
        trailing = shape[-(len(out.shape) - 1):] if len(shape) >= len(out.shape) - 1 else ()
        return n == channels and len(trailing) == len(out.shape) - 1 and trailing[0] == channels
    return n == out.shape[-1] and shape[-1] == out.shape[-1]  # a GEMM's bias/scale over its columns


def folds(model: Model) -> dict[int, tuple[int, ...]]:
    """conv/GEMM index -> the followers folded into its weights (BatchNormalization, Mul/Add by constants)."""
    consumers = _consumers(model)
    out: dict[int, tuple[int, ...]] = {}
    for layer in model.layers:
        if layer.op not in COMPUTE_OPS or len(layer.outputs) != 1:
            continue
        chain, cur = [], layer
        while (nxt := _sole_consumer(cur, consumers)) is not None:
            follower = model.layers[nxt]
            if follower.op not in FOLDABLE_OPS or not _per_channel_constant(follower, cur):
                break
            chain.append(nxt)
            cur = follower
        if chain:
            out[layer.index] = tuple(chain)
    return out
