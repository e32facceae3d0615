"""The layer DAG and what is read off it: critical path, parallel branches, fusion candidates.

Nodes are layer indices, edges run producer -> consumer through a tensor (edge
attribute ``tensors``: the names of the tensors that flow).  Model inputs and
constants are not nodes.  ``LBL_par`` is the critical path weighted by layer
latency; ``LBL_seq`` equals it exactly when the model has no parallel branches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

import networkx as nx

from benanza.library import ONNX_ACTIVATIONS, Fusion
from benanza.model.attention import find_attention
from benanza.model.layer import FusionCandidate, Layer, Tensor
from benanza.model.norms import find_rmsnorms
from benanza.model.pointwise import find_pointwise_chains


def build_graph(layers: list[Layer]) -> nx.DiGraph:
    """Producer -> consumer edges between layers (by index) through their tensors."""
    producer = {t.name: layer.index for layer in layers for t in layer.outputs}
    graph = nx.DiGraph()
    graph.add_nodes_from(layer.index for layer in layers)
    for layer in layers:
        for t in layer.inputs:
            src = producer.get(t.name)
            if src is None:
                continue
            if graph.has_edge(src, layer.index):
                graph.edges[src, layer.index]["tensors"].append(t.name)
            else:
                graph.add_edge(src, layer.index, tensors=[t.name])
    return graph


def critical_path(graph: nx.DiGraph, weight: dict[int, float]) -> tuple[float, list[int]]:
    """Heaviest path with weights on nodes (a missing weight counts 0): ``LBL_par``."""
    best: dict[int, float] = {}
    prev: dict[int, int | None] = {}
    end: int | None = None
    for node in nx.topological_sort(graph):
        src = max(graph.predecessors(node), key=lambda p: best[p], default=None)
        best[node] = weight.get(node, 0.0) + (best[src] if src is not None else 0.0)
        prev[node] = src
        if end is None or best[node] >= best[end]:  # on a tie, run on through zero-weight layers
            end = node
    if end is None:
        return 0.0, []
    path = [end]
    while (step := prev[path[-1]]) is not None:
        path.append(step)
    return best[end], path[::-1]


def has_parallel_branches(graph: nx.DiGraph) -> bool:
    """True if two layers are not ordered by reachability (inception, residual, densenet).

    A DAG totally ordered by reachability has a unique topological order, which
    holds exactly when each consecutive pair of that order is joined by an edge.
    """
    order = list(nx.topological_sort(graph))
    return any(not graph.has_edge(a, b) for a, b in pairwise(order))


# --- fusion candidates ------------------------------------------------------------

FUSABLE_ACTIVATIONS = ("Relu", "Clip", "Sigmoid", "Tanh")
ANCHOR_CHANNEL_AXIS: dict[str, int] = {"Conv": 1, "Gemm": -1, "MatMul": -1}  # axis a bias broadcasts along


@dataclass(frozen=True)
class _Chain:
    """Where the chain stands while it grows: its anchor's kind and the tensor flowing out."""

    anchor: str
    out: Tensor


def _other_input(layer: Layer, chain: _Chain) -> Tensor | None:
    """The input that is not the chain's tensor, for a binary op fed by the chain once."""
    names = [t.name for t in layer.inputs]
    if len(layer.inputs) != 2 or names.count(chain.out.name) != 1:
        return None
    return layer.inputs[1 - names.index(chain.out.name)]


def is_per_channel(other: Tensor, anchor: str, out: Tensor) -> bool:
    """A constant that broadcasts along the channel axis of ``anchor``'s op only (a bias or a scale),
    applied to ``out`` (the anchor's output or a tensor of its shape further down the chain).
    Shared by the fusion chains here and the folds of the execution bound (``analyze/folding.py``)."""
    rank = len(out.shape)
    if not other.constant or len(other.shape) > rank:
        return False
    axis = ANCHOR_CHANNEL_AXIS[anchor] % rank
    padded = (1,) * (rank - len(other.shape)) + tuple(other.shape)
    return all(d == 1 or (i == axis and d == out.shape[axis]) for i, d in enumerate(padded))


def _bias(layer: Layer, chain: _Chain) -> bool:
    other = _other_input(layer, chain)
    return layer.op == "Add" and other is not None and is_per_channel(other, chain.anchor, chain.out)


def _scale(layer: Layer, chain: _Chain) -> bool:
    other = _other_input(layer, chain)
    return layer.op == "Mul" and other is not None and is_per_channel(other, chain.anchor, chain.out)


def _bn(layer: Layer, chain: _Chain) -> bool:
    return layer.op == "BatchNormalization" and layer.inputs[0].name == chain.out.name and chain.anchor == "Conv"


def _residual(layer: Layer, chain: _Chain) -> bool:
    other = _other_input(layer, chain)
    return (layer.op in ("Add", "Sum") and chain.anchor == "Conv" and other is not None and not other.constant
            and other.shape == chain.out.shape and layer.outputs[0].shape == chain.out.shape)


def _act(layer: Layer, chain: _Chain) -> bool:
    return layer.op in FUSABLE_ACTIVATIONS and layer.inputs[0].name == chain.out.name


# Stages a chain may take after its anchor, in order, each at most once.  "scale" and
# "shift" are the per-channel Mul/Add that DenseNet and Inception-v2 put after a
# BatchNormalization; they fold into it, so they are only taken after "bn".
STAGES: list[tuple[str, Callable[[Layer, _Chain], bool]]] = [
    ("bias", _bias),
    ("bn", _bn),
    ("scale", _scale),
    ("shift", _bias),
    ("add", _residual),
    ("act", _act),
]
STAGE_NEEDS: dict[str, str] = {"scale": "bn", "shift": "bn"}

# (anchor family, roles that must be present) -> pattern; the first match wins.
PATTERNS: list[tuple[str, frozenset[str], Fusion]] = [
    ("conv", frozenset({"add", "act"}), Fusion.CONV_BIAS_ADD_ACT),
    ("conv", frozenset({"bn", "act"}), Fusion.CONV_BN_ACT),
    ("conv", frozenset({"bn"}), Fusion.CONV_BN),
    ("conv", frozenset({"act"}), Fusion.CONV_BIAS_ACT),
    ("conv", frozenset({"bias"}), Fusion.CONV_BIAS),
    ("gemm", frozenset({"act"}), Fusion.GEMM_BIAS_ACT),
    ("gemm", frozenset({"bias"}), Fusion.GEMM_BIAS),
]
FAMILY = {"Conv": "conv", "Gemm": "gemm", "MatMul": "gemm"}


def _single_consumer(layer: Layer, consumers: dict[str, list[int]], outputs: set[str]) -> int | None:
    """The one layer reading this layer's (first) output, if fusing past it is legal."""
    out = layer.outputs[0].name
    readers = consumers.get(out, [])
    others_used = any(consumers.get(t.name) or t.name in outputs for t in layer.outputs[1:])
    if len(readers) != 1 or out in outputs or others_used:
        return None
    return readers[0]


def find_fusions(layers: list[Layer], model_outputs: set[str]) -> list[FusionCandidate]:
    """Chains a fused cuDNN/cuBLAS call could replace; each layer joins at most one chain.

    A chain grows only through tensors with exactly one consumer that are not model
    outputs (otherwise the intermediate value is needed and cannot be fused away).
    Attention cores (``benanza.model.attention``) are found first: their MatMuls are
    the fused SDPA's, not anchors of GEMM epilogues.
    """
    consumers: dict[str, list[int]] = {}
    for layer in layers:
        for name in dict.fromkeys(t.name for t in layer.inputs):
            consumers.setdefault(name, []).append(layer.index)
    fusions = find_attention(layers, model_outputs)
    taken: set[int] = {i for f in fusions for i in f.layers}
    for anchor in layers:
        if anchor.op not in FAMILY or anchor.index in taken:
            continue
        chain, members, roles = _Chain(anchor.op, anchor.outputs[0]), [anchor.index], []
        current = anchor
        for role, accepts in STAGES:
            if role in STAGE_NEEDS and STAGE_NEEDS[role] not in roles:
                continue
            nxt = _single_consumer(current, consumers, model_outputs)
            if nxt is None or nxt in taken or not accepts(layers[nxt], chain):
                continue
            current = layers[nxt]
            members.append(nxt)
            roles.append(role)
            chain = _Chain(chain.anchor, current.outputs[0])
        if roles and roles[-1] == "add":  # a residual add fuses only with a following activation
            members.pop()
            roles.pop()
        pattern = next((p for fam, need, p in PATTERNS if fam == FAMILY[anchor.op] and need <= set(roles)), None)
        if pattern is None:
            continue
        act = ONNX_ACTIVATIONS[layers[members[-1]].op].value if roles[-1] == "act" else ""
        taken.update(members)
        fusions.append(FusionCandidate(pattern.value, tuple(members), tuple(layers[i].key for i in members), act))
    fusions += find_rmsnorms(layers, model_outputs, taken)
    taken.update(i for f in fusions for i in f.layers)
    return fusions + find_pointwise_chains(layers, model_outputs, taken)
