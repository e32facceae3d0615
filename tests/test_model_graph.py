"""The layer DAG: critical path, parallel branches and fusion candidates, on hand-made and zoo graphs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import networkx as nx
import onnx
import pytest

from benanza.library import Activation, Fusion
from benanza.model.graph import build_graph, critical_path, find_fusions, has_parallel_branches
from benanza.model.layer import FusionCandidate, Layer, Tensor, fusion_key
from benanza.model.onnx_import import load_model

ZOO_DIR = Path(onnx.__file__).resolve().parent / "backend" / "test" / "data" / "light"
DATA = Path(__file__).resolve().parent / "data" / "models"


def zoo(name: str, batch: int | None = None):
    return load_model(ZOO_DIR / f"light_{name}.onnx", batch)


def diamond() -> nx.DiGraph:
    """0 -> {1, 2} -> 3."""
    return nx.DiGraph([(0, 1), (0, 2), (1, 3), (2, 3)])


def test_critical_path_takes_the_heavier_branch():
    total, path = critical_path(diamond(), {0: 1.0, 1: 5.0, 2: 2.0, 3: 1.0})
    assert (total, path) == (7.0, [0, 1, 3])
    total, path = critical_path(diamond(), {0: 1.0, 1: 1.0, 2: 9.0})  # missing weight counts 0
    assert (total, path) == (10.0, [0, 2, 3])


def test_critical_path_of_an_empty_graph():
    assert critical_path(nx.DiGraph(), {}) == (0.0, [])


def test_critical_path_with_disconnected_pieces():
    g = nx.DiGraph([(0, 1)])
    g.add_node(2)
    assert critical_path(g, {0: 1.0, 1: 1.0, 2: 5.0}) == (5.0, [2])


def test_parallel_branches_on_hand_made_graphs():
    assert has_parallel_branches(diamond())
    assert not has_parallel_branches(nx.DiGraph([(0, 1), (1, 2), (0, 2)]))  # a skip edge orders, not branches
    two = nx.DiGraph()
    two.add_nodes_from([0, 1])
    assert has_parallel_branches(two)


@pytest.mark.parametrize(("name", "parallel"), [
    ("bvlc_alexnet", False), ("vgg19", False), ("zfnet512", False),
    ("inception_v1", True), ("inception_v2", True), ("resnet50", True), ("shufflenet", True),
    ("squeezenet", True),
    # DenseNet's concatenations join a block's input with its own output: a skip edge, so
    # every layer is ordered after the previous one and LBL_par == LBL_seq.
    ("densenet121", False),
])
def test_zoo_parallel_branches_and_critical_path(name, parallel):
    model = zoo(name)
    assert has_parallel_branches(model.graph) is parallel
    flops = {layer.index: float(layer.flops) for layer in model.layers}
    total, path = critical_path(model.graph, flops)
    assert nx.is_path(model.graph, path)
    if parallel:
        assert total < sum(flops.values())
    else:
        assert total == sum(flops.values()) and len(path) == len(model.layers)


def test_graph_edges_follow_tensors():
    model = load_model(DATA / "fusions.onnx")
    names = {layer.name: layer.index for layer in model.layers}
    assert model.graph.edges[names["relu1"], names["residual"]]["tensors"] == ["r1"]
    assert set(model.graph.predecessors(names["residual"])) == {names["bn2"], names["relu1"]}
    assert model.graph.number_of_nodes() == len(model.layers)
    assert build_graph(model.layers).edges == model.graph.edges


def _named(model, candidate: FusionCandidate) -> list[str]:
    return [model.layers[i].name for i in candidate.layers]


def test_fusion_patterns_on_the_generated_model():
    model = load_model(DATA / "fusions.onnx")
    found = {(c.pattern, tuple(_named(model, c)), c.activation) for c in model.fusions}
    assert found == {
        (Fusion.CONV_BIAS_ACT.value, ("c1", "bias1", "relu1"), Activation.RELU.value),
        (Fusion.CONV_BIAS_ADD_ACT.value, ("c2", "bn2", "residual", "relu2"), Activation.RELU.value),
        (Fusion.CONV_BN_ACT.value, ("c3", "bn3", "scale3", "shift3", "sig3"), Activation.SIGMOID.value),
        (Fusion.GEMM_BIAS_ACT.value, ("mm", "fc_bias", "fc_relu"), Activation.RELU.value),
    }  # c4 -> relu4 is not fused: c4's output is a model output


def test_fusion_stops_at_a_tensor_with_two_consumers():
    x = Tensor("x", (1, 4, 5, 5), "float32")
    w = Tensor("w", (4, 4, 3, 3), "float32", constant=True)
    c = Tensor("c", (1, 4, 5, 5), "float32")
    layers = [Layer("conv", "Conv", [x, w], [c], {"pads": [1, 1, 1, 1]}, index=0),
              Layer("relu", "Relu", [c], [Tensor("r", c.shape, "float32")], {}, index=1),
              Layer("tanh", "Tanh", [c], [Tensor("t", c.shape, "float32")], {}, index=2)]
    assert find_fusions(layers, {"r", "t"}) == []
    assert [f.layers for f in find_fusions(layers[:2], {"r"})] == [(0, 1)]


def test_fusion_keys_are_stable_and_dedupe():
    one, again = zoo("resnet50"), zoo("resnet50")
    assert [c.key for c in one.fusions] == [c.key for c in again.fusions]
    assert all(c.key == fusion_key(c.pattern, c.layer_keys, c.activation) for c in one.fusions)
    assert all(c.layer_keys == tuple(one.layers[i].key for i in c.layers) for c in one.fusions)
    assert len({c.key for c in one.fusions}) < len(one.fusions)  # repeated bottlenecks share keys
    assert {c.key for c in zoo("resnet50", 2).fusions}.isdisjoint({c.key for c in one.fusions})


@pytest.mark.parametrize(("name", "expected"), [
    ("resnet50", {"conv+bn+act": 33, "conv+bias+add+act": 16, "conv+bn": 4}),
    # + the BatchNormalization -> Mul -> Add -> Relu after each Concat: Mul, Add, Relu are one
    # elementwise pass over the BN's output (a pointwise chain, bounded at the copy roofline)
    ("densenet121", {"conv+bn+act": 59, "pointwise-chain": 62}),
    ("inception_v2", {"conv+bn+act": 69}),
    ("vgg19", {"conv+bias+act": 16, "gemm+bias+act": 2}),
    ("squeezenet", {"conv+bias+act": 26}),
])
def test_zoo_fusion_candidates(name, expected):
    model = zoo(name)
    assert Counter(c.pattern for c in model.fusions) == expected
    members = [i for c in model.fusions for i in c.layers]
    assert len(members) == len(set(members))  # a layer joins at most one chain
    if name == "densenet121":  # Conv -> BN -> Mul(scale) -> Add(shift) -> Relu
        assert {tuple(model.layers[i].op for i in c.layers) for c in model.fusions} == {
            ("Conv", "BatchNormalization", "Mul", "Add", "Relu"), ("Mul", "Add", "Relu")}
