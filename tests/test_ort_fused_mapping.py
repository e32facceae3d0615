"""ONNX Runtime's fused contrib nodes (SkipLayerNormalization, FastGelu, FusedMatMul, Gelu...) map to the
layer groups they replace: a materialized transformer export runs in ORT (CPU EP, the same graph
transformers as the CUDA EP's for these fusions) with profiling and its optimized graph written, and
every fused node covers the layers between its input and output tensors."""

from __future__ import annotations

from pathlib import Path

import pytest

from benanza.model.onnx_import import load_model
from benanza.profile.mapping import ort_node_layers
from benanza.profile.node_layers import covered_layers

ort = pytest.importorskip("onnxruntime")
from ort_cpu import EXPORTS, ort_nodes  # noqa: E402 (after the skip: it needs onnxruntime)


@pytest.mark.parametrize(("stem", "fused"), [("tinybert_dynamo20", {"SkipLayerNormalization": ["Add", "Dropout",
                                                                     "LayerNormalization"]}),
                                            ("tinygpt2_dynamo20", {"FastGelu": ["Add", "Add", "Mul", "Mul", "Mul",
                                                                                "Mul", "Pow", "Tanh"]})])
def test_fused_contrib_nodes_cover_their_layers(tmp_path: Path, stem: str, fused: dict[str, list[str]]) -> None:
    nodes, optimized = ort_nodes(tmp_path, stem, 2, 16)
    model = load_model(EXPORTS / f"{stem}.onnx", 2, 16)
    mapping = ort_node_layers(model, nodes, optimized)
    mapped = {i for node in mapping for i in node.layers}
    assert mapped | _folded_by_ort(model, optimized) == {layer.index for layer in model.layers}
    for op, group in fused.items():
        covers = [sorted(model.layers[i].op for i in node.layers) for node in mapping if node.op == op]
        assert covers and all(c == group for c in covers), (op, covers)


def _folded_by_ort(model, optimized: Path) -> set[int]:
    """Layers ORT computed once at load time: those behind a tensor that is an initializer of its optimized graph."""
    import onnx

    constants = {t.name for t in onnx.load(str(optimized), load_external_data=False).graph.initializer}
    return set(covered_layers(model, [], [t.name for layer in model.layers for t in layer.outputs
                                          if t.name in constants]))


def test_gemm_of_matmul_and_add_takes_their_layers_not_its_reshapes(tmp_path: Path) -> None:
    """ORT rewrites a 3-D MatMul + bias Add as Reshape -> Gemm -> Reshape over tensors of its own: the
    Gemm (which launches the kernels) covers the MatMul and the Add, the Reshapes nothing, and no node
    claims the embedding lookups ORT folded at load time (the last Reshape used to take them all)."""
    nodes, optimized = ort_nodes(tmp_path, "tinybert_dynamo20", 2, 16)
    model = load_model(EXPORTS / "tinybert_dynamo20.onnx", 2, 16)
    mapping = ort_node_layers(model, nodes, optimized)
    gemms = [sorted(model.layers[i].op for i in n.layers if model.layers[i].op != "Dropout")
             for n in mapping if n.op == "Gemm"]
    assert gemms and all(g == ["Add", "MatMul"] for g in gemms)
    assert not any(n.layers for n in mapping if n.op == "Reshape" and "gemm" in n.name)
    assert not {i for n in mapping for i in n.layers} & _folded_by_ort(model, optimized)
